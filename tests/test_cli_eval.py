"""``eval``: each MTEB subset evaluated on its own and averaged, MTEB's own metrics beside xsim, and the unit of every
key documented."""

from __future__ import annotations

import json

import pytest
from cli_fakes import install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_OK, EXIT_USAGE, main

MEANINGS = ["cat", "dog", "tree", "house"]


@pytest.fixture
def fake_encoders(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.fixture
def two_subsets(tmp_path):
    # The same English sentences in two subsets; pooled into one candidate set, every English sentence would have
    # two equally good targets (the German and the French one) and about half of them would count as errors.
    rows = [
        {"sentence1": f"{m}|en", "sentence2": f"{m}|{lang}", "lang": f"{lang}-en"}
        for lang in ("de", "fr")
        for m in MEANINGS
    ]
    return write_lines(tmp_path / "mteb.jsonl", [json.dumps(row) for row in rows])


def test_each_subset_is_evaluated_separately_then_averaged(capsys, fake_encoders, two_subsets):
    code, out, _ = run(capsys, "eval", "--mteb", two_subsets)
    assert code == EXIT_OK
    results = json.loads(out)
    assert set(results["subsets"]) == {"de-en", "fr-en"}
    for subset in results["subsets"].values():
        assert subset["n_pairs"] == 4 and subset["xsim"]["errors"] == 0 and subset["mteb"]["accuracy"] == 1.0
    assert results["n_pairs"] == 8 and results["xsim"] == {"xsim": 0.0, "errors": 0, "n": 8}
    assert results["mteb"]["main_score"] == 1.0


def test_one_subset_and_an_unknown_subset(capsys, fake_encoders, two_subsets):
    code, out, _ = run(capsys, "eval", "--mteb", two_subsets, "--subset", "fr-en")
    assert code == EXIT_OK and json.loads(out)["n_pairs"] == 4 and "subsets" not in json.loads(out)
    code, _, err = run(capsys, "eval", "--mteb", two_subsets, "--subset", "xx-en")
    assert code == EXIT_USAGE and "de-en" in err and "fr-en" in err and fake_encoders.n_encoded == 8


def test_columns_map_flores_style_names(capsys, fake_encoders, tmp_path):
    rows = [{"sentence_eng_Latn": f"{m}|en", "sentence_deu_Latn": f"{m}|de"} for m in MEANINGS]
    path = write_lines(tmp_path / "flores.jsonl", [json.dumps(row) for row in rows])
    code, out, _ = run(capsys, "eval", "--mteb", path, "--columns", "sentence_eng_Latn,sentence_deu_Latn")
    assert code == EXIT_OK and json.loads(out)["n_pairs"] == 4
    code, _, err = run(capsys, "eval", "--mteb", path, "--columns", "only_one")
    assert code == EXIT_USAGE and "columns=('only_one',) (--columns): must be two different column names" in err


def test_mteb_metrics_are_fractions_beside_xsim_in_percent(capsys, fake_encoders, tmp_path):
    # "house" has no translation among the targets (its gold is "sun"), so one source in four is wrong whatever it
    # retrieves: xsim 25 (percent), MTEB accuracy 0.75 (a fraction). Plain cosine, as MTEB.
    src = write_lines(tmp_path / "src.txt", [f"{m}|en" for m in MEANINGS])
    tgt = write_lines(tmp_path / "tgt.txt", ["cat|de", "dog|de", "tree|de", "sun|de"])
    code, out, _ = run(capsys, "eval", "--src", src, "--tgt", tgt, "--margin", "absolute")
    assert code == EXIT_OK
    results = json.loads(out)
    assert results["xsim"]["xsim"] == pytest.approx(25.0) and results["xsim"]["errors"] == 1
    mteb = results["mteb"]
    assert set(mteb) >= {"accuracy", "precision", "recall", "f1", "main_score"}
    assert mteb["accuracy"] == pytest.approx(0.75) and mteb["main_score"] == mteb["f1"]
    assert all(0.0 <= mteb[key] <= 1.0 for key in ("accuracy", "precision", "recall", "f1"))


def test_help_says_the_unit_of_every_key(capsys):
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = capsys.readouterr().out
    for key in ("xsim ", "xsim_text", "accuracy", "mteb", "main_score", "n_pairs", "subsets", "bucc_f1"):
        assert key in text, key
    assert "percent" in text and "fractions in [0, 1]" in text


def test_mteb_rows_that_are_not_objects_are_one_line_exit_3(capsys, fake_encoders, tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", [json.dumps({"sentence1": "a", "sentence2": "b"}), "[1, 2]"])
    code, _, err = run(capsys, "eval", "--mteb", path)
    assert code == 3 and f"{path}:2" in err and len(err.strip().splitlines()) == 1 and fake_encoders.loaded == []


@pytest.mark.parametrize(
    "argv",
    [
        ("--src", "a.txt", "--tgt", "b.txt", "--subset", "de-en"),
        ("--src", "a.txt", "--tgt", "b.txt", "--columns", "x,y"),
        ("--mteb", "m.jsonl", "--src", "a.txt"),
        (),
    ],
)
def test_options_that_do_not_fit_the_data_source_are_usage_errors(capsys, fake_encoders, argv):
    code, _, err = run(capsys, "eval", *argv)
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1 and fake_encoders.loaded == []
