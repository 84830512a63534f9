"""Hostile and careless uses of ``bitext-hf score``, one table: links, FIFOs, sockets, devices and folders at every
name the job writes (the scored pairs ``OUT``, with ``--threshold-report`` ``OUT.threshold.png`` and
``OUT.threshold.md``), the user's own ``--out`` link and streams (followed and written directly, as always), an
output that is an input, a rename of the commit or a disk that fails over an earlier run's outputs, pairs files that
cannot be read as they are (a column more than declared, columns it cannot tell apart, latin-1), options that cannot
act, a stdout that cannot take the text, the job called from Python with values of the wrong type, absurd values;
then signals while the job writes (subprocesses, in the slow set).

The contract each row asserts is tests/hostile_jobs.py's. Every output format of the package read back by ``score``
(mine's, data gettext's) is in tests/test_hostile_commands.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from cli_fakes import TARGETS, write_lines
from hostile_jobs import (
    KINDS,
    TIMEOUT,
    VICTIM,
    Case,
    at_output,
    check_case,
    corpus,
    earlier_run,
    fail_rename,
    full_disk_at,
    hardlink,
    over_earlier,
    params,
    signal_while_writing,
    text_file,
)

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE, main

pytestmark = TIMEOUT

OUT, FIGURE, SAMPLE = "s.tsv", "s.tsv.threshold.png", "s.tsv.threshold.md"
REPORT = (OUT, FIGURE, SAMPLE)


def _score(tmp: Path, *extra: str) -> list[str]:
    src, tgt = corpus(tmp)
    return ["score", "--src", src, "--tgt", tgt, "--out", str(tmp / OUT), *extra]


def _parallel(tmp: Path, *extra: str) -> list[str]:
    """``score --src src.txt --tgt tgt.txt EXTRA`` (relative names; EXTRA holds --out)."""
    corpus(tmp)
    return ["score", "--src", "src.txt", "--tgt", "tgt.txt", *extra]


def _victim_holds_the_pairs(tmp: Path) -> None:
    assert os.path.islink(tmp / OUT) and (tmp / VICTIM).read_text().startswith("score\tsrc_index")


def _out_link_to_src(tmp: Path) -> list[str]:
    argv = _parallel(tmp, "--out", "alias.tsv")
    os.symlink("src.txt", tmp / "alias.tsv")
    return argv


def _sample_is_src(tmp: Path) -> list[str]:
    argv = _parallel(tmp, "--out", OUT, "--threshold-report")
    hardlink(tmp, SAMPLE, "src.txt")
    return argv


def _score_of_score(tmp: Path) -> list[str]:
    src, tgt = corpus(tmp)
    assert main(["score", "--src", src, "--tgt", tgt, "--out", str(tmp / "first.jsonl"), "--k", "2", "-q"]) == 0
    return ["score", "--pairs", str(tmp / "first.jsonl"), "--out", str(tmp / "scored.tsv"), "--k", "2"]


def _first_jsonl_pairs_scored(tmp: Path) -> None:
    import csv

    expected = [(row["src"], row["tgt"]) for row in map(json.loads, (tmp / "first.jsonl").read_text().splitlines())]
    with open(tmp / "scored.tsv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    assert len(expected) >= 5 and [(row["src"], row["tgt"]) for row in rows] == expected


def _score_unknown_columns(tmp: Path) -> list[str]:
    pairs = text_file(tmp, "p.csv", "id,left,right\n1,cat|en,cat|de\n2,dog|en,dog|de\n")
    return ["score", "--pairs", pairs, "--out", str(tmp / "scored.tsv")]


def _score_tab_in_jsonl_to_tsv(tmp: Path) -> list[str]:
    rows = [{"src": "cat|en", "tgt": "cat|de"}, {"src": "a\ttab|en", "tgt": "tab|de"}]
    pairs = text_file(tmp, "p.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    return ["score", "--pairs", pairs, "--out", str(tmp / "scored.tsv"), "--k", "1"]


def _extra_columns(name: str, text: str):
    """``score --pairs`` of a pairs file holding ``text``: no text of a line may be dropped without a word."""

    def setup(tmp: Path) -> list[str]:
        pairs = text_file(tmp, name, text)
        return ["score", "--pairs", pairs, "--out", str(tmp / "scored.tsv"), "--k", "1"]

    return setup


def _latin1_pairs(tmp: Path) -> list[str]:
    (tmp / "p.tsv").write_bytes("cat|en\tcat|dé\n".encode("latin-1"))
    return ["score", "--pairs", str(tmp / "p.tsv"), "--out", str(tmp / "scored.tsv")]


def _score_to_stdout(tmp: Path) -> list[str]:
    pairs = text_file(tmp, "p.tsv", "cat|en\tcat|dé\ndog|en\tdog|dé\n")
    return ["score", "--pairs", pairs, "--out", "-", "--k", "1"]


def _python(**options):
    def setup(tmp: Path):
        from bitext_hf.jobs.score import ScoreConfig, run_scoring

        src, tgt = corpus(tmp)
        return lambda: run_scoring(ScoreConfig(src=src, tgt=tgt, **options))

    return setup


CASES: dict[str, Case] = {
    # --- at every name the job writes beside --out, what is not a regular file: refused before any work
    **{
        f"a {kind} at the threshold figure's name": Case(
            at_output(_parallel, OUT, kind, "--threshold-report", at=FIGURE), EXIT_USAGE, f"{FIGURE}: {words}"
        )
        for kind, words in KINDS.items()
    },
    **{
        f"a {kind} at the threshold sample's name": Case(
            at_output(_parallel, OUT, kind, "--threshold-report", at=SAMPLE), EXIT_USAGE, f"{SAMPLE}: {words}"
        )
        for kind, words in KINDS.items()
    },
    # --- the user's own --out: a link followed, a stream written directly
    "--out a link to a file elsewhere": Case(
        at_output(_parallel, OUT, "link"), EXIT_OK, replaces=(VICTIM,), then=_victim_holds_the_pairs
    ),
    "--out a FIFO: written directly": Case(
        at_output(_parallel, "pipe", "FIFO", "--format", "tsv"), EXIT_OK, fifo="pipe", fifo_gets=b"score\t"
    ),
    "--out a FIFO with --threshold-report": Case(
        at_output(_parallel, "pipe", "FIFO", "--format", "tsv", "--threshold-report"),
        EXIT_USAGE,
        "give a file --out",
        fifo="pipe",
        fifo_gets=b"",
    ),
    "--out /dev/null": Case(lambda t: _parallel(t, "--out", os.devnull), EXIT_OK),
    "--out a socket": Case(at_output(_parallel, OUT, "socket"), EXIT_USAGE, f"--out {OUT}: is a socket"),
    "--out a folder": Case(lambda t: _parallel(t, "--out", str(t)), EXIT_USAGE, "is a directory"),
    # --- outputs that are inputs
    "score --out is a hard link of --tgt": Case(
        lambda t: [
            "score",
            "--src",
            corpus(t)[0],
            "--tgt",
            str(t / "tgt.txt"),
            "--out",
            str(hardlink(t, "o.tsv", str(t / "tgt.txt"))),
        ],
        EXIT_USAGE,
        "input",
    ),
    "--out is --pairs": Case(
        lambda t: ["score", "--pairs", text_file(t, "p.tsv", "cat|en\tcat|de\n"), "--out", "p.tsv"],
        EXIT_USAGE,
        "--out p.tsv: is the input",
    ),
    "--out a link to --src": Case(_out_link_to_src, EXIT_USAGE, "--out alias.tsv: is the input src.txt"),
    "the threshold sample is a hard link of --src": Case(_sample_is_src, EXIT_USAGE, f"{SAMPLE}: is the input"),
    # --- a run over an earlier one's outputs: all new or all as they were
    "a second run replaces every output": Case(
        over_earlier(_parallel, OUT, "--threshold-report", names=REPORT), EXIT_OK, replaces=REPORT
    ),
    "a run without the report leaves the earlier report": Case(
        over_earlier(_parallel, OUT, names=REPORT), EXIT_OK, replaces=(OUT,)
    ),
    "the commit's rename of the threshold figure fails": Case(
        over_earlier(_parallel, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{FIGURE}: input/output error",
        patch=fail_rename(2),
        encodes=True,
    ),
    "the commit's last rename fails": Case(
        over_earlier(_parallel, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{SAMPLE}: input/output error",
        patch=fail_rename(3),
        encodes=True,
    ),
    "a full disk as the pairs are written": Case(
        over_earlier(_parallel, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{OUT}: no space left on device",
        patch=full_disk_at(1),
        encodes=True,
    ),
    "a full disk as the threshold sample is written": Case(
        over_earlier(_parallel, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{SAMPLE}: no space left on device",
        patch=full_disk_at(3),
        encodes=True,
    ),
    # --- pairs files that cannot be read as they are: refused naming file and line, before any encoding
    "score sides of different lengths": Case(
        lambda t: [
            "score",
            "--src",
            corpus(t)[0],
            "--tgt",
            write_lines(t / "short.txt", TARGETS[:3]),
            "--out",
            str(t / "o.tsv"),
        ],
        EXIT_DATA,
        "short.txt",
    ),
    "score reads score's own jsonl": Case(
        _score_of_score, EXIT_OK, creates=("scored.tsv",), then=_first_jsonl_pairs_scored
    ),
    "a csv without source and target columns": Case(
        _score_unknown_columns, EXIT_DATA, "p.csv: cannot tell the source and target columns among id, left, right"
    ),
    "a jsonl sentence with a tab, scored to tsv": Case(_score_tab_in_jsonl_to_tsv, EXIT_DATA, "p.jsonl:2"),
    "score --pairs tsv, a third column": Case(
        _extra_columns("p.tsv", "cat|en\tcat|de\ndog|en\tdog|de\tand the rest|de\n"),
        EXIT_DATA,
        "p.tsv:2: 3 tab-separated columns, expected 2 (source<TAB>target)",
    ),
    "score --pairs tsv with mine's header, a tab more": Case(
        _extra_columns(
            "p.tsv", "score\tsrc_index\ttgt_index\tsrc\ttgt\n1\t0\t0\tcat|en\tcat|de\n1\t1\t1\tdog|en\tdog|de\tx\n"
        ),
        EXIT_DATA,
        "p.tsv:3: 6 tab-separated columns, but the header names 5",
    ),
    "score --pairs csv, an unquoted comma": Case(
        _extra_columns("p.csv", 'src,tgt\ncat|en,cat|de\n"dog, big|en",dog, big|de\n'),
        EXIT_DATA,
        "p.csv:3: 3 comma-separated cells, but the header names 2",
    ),
    "score --pairs in latin-1": Case(_latin1_pairs, EXIT_DATA, "p.tsv:1: invalid UTF-8 (byte 0xe9)"),
    # --- text an output cannot take: a failed write (1), never bad input (3)
    "score --out - to an ascii stdout": Case(
        _score_to_stdout,
        EXIT_ERROR,
        "writing to stdout failed: its encoding (ascii) cannot represent the text ('é' (U+00E9))",
        stdout_encoding="ascii",
        encodes=True,
    ),
    # --- options that cannot act: one line, exit 2, before anything is read
    "score --lid-min-prob without --lid": Case(
        lambda t: _score(t, "--lid-min-prob", "0.9"), EXIT_USAGE, "--lid-min-prob 0.9 applies to --lid"
    ),
    "score --src-lang and --tgt-lang without --lid": Case(
        lambda t: _score(t, "--src-lang", "en", "--tgt-lang", "de"),
        EXIT_USAGE,
        "--src-lang and --tgt-lang act only with --lid",
    ),
    # --- absurd values
    "--k 10**12 is capped at the corpus": Case(lambda t: _score(t, "--k", str(10**12)), EXIT_OK, creates=(OUT,)),
    "--threshold 1e30 keeps no pair": Case(lambda t: _score(t, "--threshold", "1e30"), EXIT_OK, creates=(OUT,)),
    "--batch-size 10**12": Case(lambda t: _score(t, "--batch-size", str(10**12)), EXIT_OK, creates=(OUT,)),
    "--max-length-ratio 0": Case(lambda t: _score(t, "--max-length-ratio", "0"), EXIT_USAGE, "max_length_ratio"),
    # --- the job from Python
    "out as a pathlib.Path": Case(_python(out=Path(OUT)), EXIT_OK, creates=(OUT,)),
    "out as bytes": Case(_python(out=b"s.tsv"), EXIT_USAGE, "out=b's.tsv' (--out): must be a string"),
    "threshold as a string": Case(
        _python(out=OUT, threshold="1.0"), EXIT_USAGE, "threshold='1.0' (--threshold): must be a"
    ),
}


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_score(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_writing_leaves_the_earlier_outputs(tmp_path, signum):
    argv = ["score", "--src", "src.txt", "--tgt", "tgt.txt", "--out", OUT, "--threshold-report"]
    signal_while_writing(tmp_path, "bitext_hf.data.pair_files:write_pairs", argv, signum, earlier_run(*REPORT))
