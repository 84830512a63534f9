"""Numbers that claim a peer's definition equal that peer's own output, computed by the peer's installed code.

The peers are sentence-transformers' ``TranslationEvaluator`` (behind ``bitext_accuracy``) and mteb's bitext-mining
task (behind ``mteb_bitext_mining``). Each is fed a fake model that returns precomputed vectors, on data made of
repeated sentences in both columns: exact duplicates with identical rows (exact cosine ties), identical rows under
different texts, and rows that differ only in the last bits (near-ties that float32 rounding decides, as an encoder
makes them when it pads a sentence differently in two batches). Every reported number must be equal, not close.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import bitext_hf.evaluation.metrics as metrics
from bitext_hf.evaluation.metrics import functional as F
from bitext_hf.evaluation.metrics import peer_retrieval
from bitext_hf.evaluation.metrics.peer_retrieval import resolve_device

mteb = pytest.importorskip("mteb", reason="mteb is in the dev extra")
from datasets import Dataset, DatasetDict  # noqa: E402
from mteb.mocks.mock_tasks.bitext_mining import MockBitextMiningTask  # noqa: E402
from mteb.models.abs_encoder import AbsEncoder  # noqa: E402
from sentence_transformers.sentence_transformer.evaluation import TranslationEvaluator  # noqa: E402


class FixedVectors:
    """Precomputed rows by the exact list of texts encoded (each peer encodes one column at a time)."""

    def __init__(self, *columns: tuple[list[str], np.ndarray]):
        self.rows = {tuple(texts): vectors for texts, vectors in columns}

    def lookup(self, texts) -> np.ndarray:
        return self.rows[tuple(texts)]


class FakeSentenceTransformer(FixedVectors):
    """What TranslationEvaluator calls on a model: encode (tensors when convert_to_numpy=False) and its card data.
    The tensors lie where a SentenceTransformer puts its model by default, where the evaluator then scores them."""

    model_card_data = SimpleNamespace(set_evaluation_metrics=lambda *args, **kwargs: None)

    def encode(self, sentences, convert_to_numpy: bool = True, **kwargs):
        vectors = self.lookup(sentences)
        return vectors if convert_to_numpy else list(torch.from_numpy(vectors).to(resolve_device(None)))


class FakeMtebEncoder(FixedVectors, AbsEncoder):
    """An mteb encoder whose similarity is mteb's own (AbsEncoder's cosine, as for a model without metadata)."""

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        return self.lookup([text for batch in inputs for text in batch["text"]])


def duplicated_bitext(seed: int, n: int = 250, d: int = 16) -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Row-aligned pairs where many sentences repeat, in both columns, with exact ties and last-bit near-ties.

    A third of the rows are ordinary noisy pairs. The rest come in pairs of rows (``keep``, ``copy``) where one side
    of ``copy`` repeats that side of ``keep`` and ``keep`` is a close translation, so that the tie between the two
    decides whether ``keep`` is retrieved: an exact duplicate (same text, same row), the same row under another text
    (only the index breaks the tie), or a row a few ulps away under another text (an encoder padding a sentence
    differently in two batches; float32 rounding breaks the tie).
    """
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = x + 0.8 * rng.standard_normal((n, d)).astype(np.float32)
    source_texts, target_texts = [f"s{i}" for i in range(n)], [f"t{i}" for i in range(n)]
    tied = rng.permutation(n)[: 2 * (n // 3)].reshape(-1, 2)
    for number, (keep, copy) in enumerate(tied):
        y[keep] = x[keep] + 0.05 * rng.standard_normal(d).astype(np.float32)
        vectors, texts = (y, target_texts) if number % 2 else (x, source_texts)  # the side that repeats
        kind = number // 2 % 3
        if kind == 0:
            vectors[copy], texts[copy] = vectors[keep], texts[keep]
        elif kind == 1:
            vectors[copy] = vectors[keep]
        else:
            vectors[copy] = np.nextafter(vectors[keep], np.float32(np.inf))
    return x, y, source_texts, target_texts


class F1BitextMiningTask(MockBitextMiningTask):
    """mteb's mock bitext task with the main score of its real bitext tasks (every one of them reports F1)."""

    metadata = MockBitextMiningTask.metadata.model_copy(update={"main_score": "f1"})


def translation_evaluator(x, y, source_texts, target_texts) -> dict[str, float]:
    model = FakeSentenceTransformer((source_texts, x), (target_texts, y))
    return TranslationEvaluator(source_texts, target_texts, write_csv=False)(model)


def mteb_scores(x, y, sentence1, sentence2, gold=None) -> dict[str, float]:
    """mteb's own task evaluation, main score included; with ``gold``, the split is built as mteb's BUCC task builds
    it: a plain dict whose sentence1 holds the gold pairs' sources in gold order, beside the whole sentence2 pool."""
    task = F1BitextMiningTask()
    if gold is None:
        task.dataset = DatasetDict({"test": Dataset.from_dict({"sentence1": sentence1, "sentence2": sentence2})})
    else:
        task.dataset = {"test": {"sentence1": sentence1, "sentence2": sentence2, "gold": gold}}
    task.data_loaded = True
    model = FakeMtebEncoder((sentence1, x), (sentence2, y))
    scores = task.evaluate(model, split="test", encode_kwargs={"batch_size": 64})["default"]
    return {name: scores[name] for name in ("accuracy", "precision", "recall", "f1", "main_score")}


# Pools under 64 candidates, where torch.topk does not always break a tie towards the lowest index, and pools
# of several of mteb's 100-source chunks, the last one partial.
SIZES = [(0, 40), (1, 40), (2, 250), (3, 250)]


@pytest.mark.parametrize(("seed", "n"), SIZES)
def test_bitext_accuracy_is_translation_evaluators_numbers(seed, n):
    x, y, source_texts, target_texts = duplicated_bitext(seed, n)
    theirs = translation_evaluator(x, y, source_texts, target_texts)
    ours = F.bitext_accuracy(x, y, source_texts=source_texts, target_texts=target_texts)
    assert 0.2 < theirs["mean_accuracy"] < 0.95, "the data must make errors for the test to mean something"
    assert ours == {
        "src2tgt_accuracy": theirs["src2trg_accuracy"],
        "tgt2src_accuracy": theirs["trg2src_accuracy"],
        "accuracy": theirs["mean_accuracy"],
    }
    module = metrics.load("bitext_accuracy").compute(
        source_embeddings=x, target_embeddings=y, source_texts=source_texts, target_texts=target_texts
    )
    assert module == ours


@pytest.mark.parametrize(("seed", "n"), SIZES)
def test_bitext_accuracy_without_texts_is_the_evaluators_when_no_text_repeats(seed, n):
    x, y, _, _ = duplicated_bitext(seed, n)  # the same ties, every text distinct: the index and rounding decide
    theirs = translation_evaluator(x, y, [f"s{i}" for i in range(n)], [f"t{i}" for i in range(n)])
    assert F.bitext_accuracy(x, y) == {
        "src2tgt_accuracy": theirs["src2trg_accuracy"],
        "tgt2src_accuracy": theirs["trg2src_accuracy"],
        "accuracy": theirs["mean_accuracy"],
    }


@pytest.mark.parametrize(("seed", "n"), SIZES)
def test_mteb_bitext_mining_is_mtebs_numbers(seed, n):
    x, y, source_texts, target_texts = duplicated_bitext(seed, n)
    theirs = mteb_scores(x, y, source_texts, target_texts)
    assert 0.2 < theirs["accuracy"] < 0.95, "the data must make errors for the test to mean something"
    assert F.mteb_bitext_mining(x, y) == theirs
    assert metrics.load("mteb_bitext_mining").compute(source_embeddings=x, target_embeddings=y) == theirs


def test_mteb_bitext_mining_with_gold_over_a_larger_pool_is_mtebs_numbers():
    x, y, source_texts, target_texts = duplicated_bitext(4, n=330)
    chosen = np.random.default_rng(4).choice(len(x), 150, replace=False)
    gold = [(int(i), int(i)) for i in chosen]  # BUCC-style: a subset of the sources, in gold order
    sentence1 = [source_texts[i] for i in chosen]
    theirs = mteb_scores(x[chosen], y, sentence1, target_texts, gold=gold)
    assert F.mteb_bitext_mining(x, y, gold) == theirs


def test_accuracy_in_row_blocks_breaks_ties_across_blocks_towards_the_lowest_index(monkeypatch):
    # Basis vectors: every cosine is exactly 0 or 1 whatever the kernel, so the ties are exact in every block and
    # the blocks (of 75 rows here) must hand each tie to the lowest index, as one argmax over the whole matrix.
    rng = np.random.default_rng(5)
    basis = np.eye(16, dtype=np.float32)
    x, y = basis[rng.integers(0, 16, 300)], basis[rng.integers(0, 16, 300)]
    y[:150] = x[:150]  # half the pairs are right, the others only by chance
    source_texts, target_texts = [f"s{i}" for i in range(300)], [f"t{i}" for i in range(300)]
    theirs = translation_evaluator(x, y, source_texts, target_texts)
    whole = F.bitext_accuracy(x, y)
    monkeypatch.setattr(peer_retrieval, "_WHOLE_PRODUCT_ELEMENTS", 300 * 80)
    assert (
        F.bitext_accuracy(x, y)
        == whole
        == {
            "src2tgt_accuracy": theirs["src2trg_accuracy"],
            "tgt2src_accuracy": theirs["trg2src_accuracy"],
            "accuracy": theirs["mean_accuracy"],
        }
    )


@pytest.mark.slow
def test_real_gettext_pairs_with_duplicates_give_the_peers_numbers():
    """Real encoder output on real repeated sentences (German catalogs of this machine, duplicates kept)."""
    from bitext_hf.data.gettext import clean_message, find_catalogs, read_gettext
    from bitext_hf.encoders import load_encoder

    pairs = []
    for catalog in find_catalogs("de"):
        for english, german in read_gettext(catalog):
            english, german = clean_message(english), clean_message(german)
            if english != german and any(character.isalpha() for character in english):
                pairs.append((english, german))
    if len(pairs) < 2100:
        pytest.skip("needs 2,100 German gettext messages installed on this machine")
    source_texts, target_texts = (list(side) for side in zip(*pairs[:2100]))
    assert len(set(target_texts)) < 2100 and len(set(source_texts)) < 2100, "the data must repeat sentences"
    encoder = load_encoder()
    x, y = encoder.encode(source_texts), encoder.encode(target_texts)
    theirs = translation_evaluator(x, y, source_texts, target_texts)
    assert F.bitext_accuracy(x, y, source_texts=source_texts, target_texts=target_texts) == {
        "src2tgt_accuracy": theirs["src2trg_accuracy"],
        "tgt2src_accuracy": theirs["trg2src_accuracy"],
        "accuracy": theirs["mean_accuracy"],
    }
    assert F.mteb_bitext_mining(x, y) == mteb_scores(x, y, source_texts, target_texts)
