"""What the jobs report when they end (each job's ``*_report``) and where the command line prints it
(``print_report``): the summary beside the results unless they go to stdout, timings on stderr and never under
``-q``, the pairs' preview only when stdout is free."""

from __future__ import annotations

import pytest
from cli_fakes import SOURCES, TARGETS, FakeEncoders, write_lines

from bitext_hf.cli.commands import print_report
from bitext_hf.jobs import MiningConfig, ScoreConfig, run_mining, run_scoring
from bitext_hf.jobs.base import ReportLine
from bitext_hf.jobs.mine import mining_report
from bitext_hf.jobs.score import scoring_report


def test_a_report_line_names_a_place_that_exists():
    assert ReportLine("x").place == "report"
    with pytest.raises(ValueError, match="place='stdin'"):
        ReportLine("x", "stdin")


@pytest.mark.parametrize(
    ("out", "quiet", "stdout", "stderr"),
    [
        ("pairs.tsv", False, "summary\nresults\n", "timing\n"),
        ("pairs.tsv", True, "summary\nresults\n", ""),
        ("-", False, "results\n", "summary\ntiming\n"),
        ("/dev/stdout", True, "results\n", "summary\n"),
    ],
)
def test_print_report_puts_each_line_in_its_place(capsys, out, quiet, stdout, stderr):
    lines = [ReportLine("summary"), ReportLine("results", "stdout"), ReportLine("timing", "timing")]
    print_report(lines, out, quiet=quiet)
    assert capsys.readouterr() == (stdout, stderr)


def _mined(tmp_path, out):
    src, tgt = write_lines(tmp_path / "s.txt", SOURCES), write_lines(tmp_path / "t.txt", TARGETS)
    config = MiningConfig(src, tgt, out=out, no_cache=True, quiet=True)
    return config, run_mining(config, load_encoder=FakeEncoders())


def test_the_mining_report_previews_pairs_only_when_stdout_is_free(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config, result = _mined(tmp_path, "pairs.tsv")
    lines = mining_report(config, result, 1.0, show=2)
    texts = [line.text for line in lines]
    assert texts[0] == f"wrote {len(result.pairs)} pairs to pairs.tsv"
    preview = [line for line in lines if line.place == "stdout"]
    assert preview[0].text.split() == ["score", "src", "tgt", "sentences"] and len(preview) == 4  # header, 2, "more"
    assert any(text.startswith(f"mined {len(result.pairs)} pairs from {len(SOURCES)} source") for text in texts)
    assert lines[-1].place == "timing" and lines[-1].text.startswith("mine: ")
    # The pairs themselves on stdout: no preview mixed into them.
    config, result = _mined(tmp_path, "-")
    assert not [line for line in mining_report(config, result, 1.0, show=-1) if line.place == "stdout"]


def test_the_scoring_report_gives_the_quantiles_last(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src, tgt = write_lines(tmp_path / "s.txt", SOURCES), write_lines(tmp_path / "t.txt", SOURCES)
    config = ScoreConfig(src=src, tgt=tgt, out="scored.tsv", no_cache=True, quiet=True)
    lines = scoring_report(config, run_scoring(config, load_encoder=FakeEncoders()))
    assert lines[0].text.startswith(f"scored {len(SOURCES)} pairs (k=") and "wrote" in lines[0].text
    assert lines[-1].text.startswith("score quantiles: 5% ")
    assert {line.place for line in lines} == {"report"}
