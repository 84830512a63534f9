"""What the jobs report when they end (each job's ``*_report``) and where the command line prints it
(``print_report``): the summary beside the results unless they go to stdout, timings on stderr and never under
``-q``, the pairs' preview only when stdout is free."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_fakes import GOLD, SOURCES, TARGETS, FakeEncoders, write_lines

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
        ("/dev/fd/1", False, "results\n", "summary\ntiming\n"),
        ("/proc/self/fd/1", True, "results\n", "summary\n"),
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


# The CLI in a fresh interpreter with the fake encoder: its stdout a pipe, as in `bitext-hf mine ... | sort`.
_CLI = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import bitext_hf.encoders
from cli_fakes import FakeEncoders
bitext_hf.encoders.load_encoder = FakeEncoders()
from bitext_hf.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("out", ["-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"])
def test_pairs_written_to_stdout_by_any_name_are_all_that_stdout_holds(tmp_path, out):
    """Every name of stdout that the writer writes to descriptor 1 puts the report on stderr: no summary line, no
    preview of the pairs appended to the TSV a pipe reads."""
    src, tgt = write_lines(tmp_path / "s.txt", SOURCES), write_lines(tmp_path / "t.txt", TARGETS)
    tests = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run(
        [sys.executable, "-c", _CLI, tests, "mine", "--src", src, "--tgt", tgt, "--out", out, "--show", "3"],
        cwd=tmp_path,
        env={**os.environ, "BITEXT_HF_EMBEDDING_CACHE": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    header, *rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert header[0] == "score" and "src" in header and "tgt" in header, result.stdout
    assert all(len(row) == len(header) for row in rows), result.stdout
    pairs = {(row[header.index("src")], row[header.index("tgt")]) for row in rows}
    assert pairs == {(SOURCES[i], TARGETS[j]) for i, j in GOLD}, result.stdout
    assert "wrote 5 pairs to stdout" in result.stderr and "mined 5 pairs" in result.stderr
