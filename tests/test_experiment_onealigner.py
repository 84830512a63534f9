"""experiments/onealigner_transfer.py end to end on the tiny corpus (a few steps, two seeds, pair files written here):
the tables over seeds with every seed's numbers, the card, the data kept apart, and the one-line usage errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

# The slow set (`python -m pytest -m slow`, which CI also runs): the OneAligner experiment run end to end.
pytestmark = pytest.mark.slow

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"


@pytest.fixture
def experiment(monkeypatch):
    """The script imported as it runs (its own folder first on sys.path)."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import onealigner_transfer

    return onealigner_transfer


@pytest.fixture
def pair_specs(tiny_pair_specs):
    return list(tiny_pair_specs.values())


def test_tables_card_and_per_seed_numbers(experiment, pair_specs, tmp_path):
    output_dir = tmp_path / "onealigner"
    argv = [
        "--output_dir",
        str(output_dir),
        "--train_languages",
        "fr,de",
        "--unseen_languages",
        "es",
        "--pairs",
        *pair_specs,
        "--eval_size",
        "6",
        "--example_budget",
        "10",
        "--steps",
        "2",
        "--batch",
        "8",
        "--mlm_steps",
        "2",
        "--vocab_size",
        "200",
        "--seeds",
        "2",
    ]
    summary = experiment.main(experiment.build_parser().parse_args(argv))
    report = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    assert report["report"] == json.loads(json.dumps(summary["report"]))
    runs = report["report"]["runs"]
    assert report["report"]["seeds"] == [13, 42] and len(runs) == 2
    columns = ("es", "unseen average", "fr held-out")
    for run in runs:
        for name in ("table1/mean_pool_no_norm", "table1/bertscore_norm", "single", "all"):
            assert all(0.0 <= run[f"{name}/{column}"] <= 1.0 for column in columns)
        assert run["difference/es"] == pytest.approx(run["all/es"] - run["single/es"])
    # The same budget for both runs, the single pair trained on fr only, all pairs on fr and de.
    data = report["data per run"]
    trained = {name: sorted(Path(spec).name for spec in data[name]["selected_pairs"]) for name in data}
    assert trained["single-seed13"] == ["train-fr.tsv"] and trained["all-seed42"] == ["train-de.tsv", "train-fr.tsv"]
    assert data["single-seed13"]["sampled"] == data["all-seed13"]["sampled"] == 10
    # No evaluation sentence is in any training file.
    work = output_dir / "work"
    evaluation = {
        text
        for name in ("eval-fr.tsv", "eval-es.tsv")
        for line in (work / name).open()
        for text in line.strip("\n").split("\t")
    }
    training = {
        text
        for name in ("train-fr.tsv", "train-de.tsv")
        for line in (work / name).open()
        for text in line.strip("\n").split("\t")
    }
    assert evaluation and training and not evaluation & training

    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "BERTScore + normalization" in table and "paper XLM-R-base" in table and "70.2" in table
    assert "en-fr only" in table and "en-fr+en-de" in table and "94.4" in table and "+-" in table
    for seed, run in zip((13, 42), runs):  # every seed's own numbers, not only the summary
        assert f"| {seed} | {100 * run['table1/mean_pool_no_norm/unseen average']:.1f} |" in table
    card = (output_dir / "model_card.md").read_text(encoding="utf-8")
    assert "# OneAligner" in card and "paper XLM-R-base" in card and "| 42 |" in card


def test_bad_argument_is_one_line_and_exit_code_2(experiment, tmp_path, monkeypatch, capsys):
    import common

    argv = ["onealigner_transfer.py", "--output_dir", str(tmp_path / "run"), "--single_language", "it"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_info:
        common.run_script(experiment.main, experiment.build_parser())
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--single_language" in error and error.count("\n") == 1
    assert not (tmp_path / "run").exists()  # refused before any work
