"""Hostile and careless uses of ``bitext-hf eval``, one table: the results file ``--out`` it writes (a link the user
names, followed as always; a FIFO or a device, written directly; ``-``, printed; a socket or a folder; an input by
name, link or hard link), a rename of the commit or a disk that fails over an earlier results file, inputs only
``eval`` reads (MTEB files), options that cannot act or are reported as used, the job called from Python with values
of the wrong type, absurd values; then signals while the job writes (subprocesses, in the slow set).

The contract each row asserts is tests/hostile_jobs.py's.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from cli_fakes import SOURCES, TARGETS
from hostile_jobs import (
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

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE

pytestmark = TIMEOUT

OUT = "results.json"


def _eval(tmp: Path, *extra: str) -> list[str]:
    corpus(tmp)
    return ["eval", "--src", "src.txt", "--tgt", "tgt.txt", *extra]


def _reports_k(k: int, name: str = OUT):
    def check(tmp: Path) -> None:
        results = json.loads((tmp / name).read_text())
        assert results["k"] == k, results

    return check


def _victim_holds_the_results(tmp: Path) -> None:
    assert os.path.islink(tmp / OUT)
    _reports_k(4, VICTIM)(tmp)


def _out_link_to(target: str):
    def setup(tmp: Path) -> list[str]:
        argv = _eval(tmp, "--out", "alias.json")
        os.symlink(target, tmp / "alias.json")
        return argv

    return setup


def _out_hard_link_of_tgt(tmp: Path) -> list[str]:
    argv = _eval(tmp, "--out", OUT)
    hardlink(tmp, OUT, "tgt.txt")
    return argv


def _mteb_file(tmp: Path) -> str:
    rows = [{"sentence1": s, "sentence2": t} for s, t in zip(SOURCES, TARGETS)]
    return text_file(tmp, "x.jsonl", "".join(json.dumps(row) + "\n" for row in rows))


def _mteb_deeply_nested(tmp: Path) -> list[str]:
    rows = [json.dumps({"sentence1": s, "sentence2": t}) for s, t in zip(SOURCES, TARGETS)]
    rows.insert(2, '{"sentence1": ' + "[" * 200_000 + "]" * 200_000 + ', "sentence2": "x"}')
    (tmp / "mteb.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return ["eval", "--mteb", str(tmp / "mteb.jsonl")]


def _mteb_not_objects(tmp: Path) -> list[str]:
    (tmp / "mteb.jsonl").write_text('{"sentence1": "a", "sentence2": "b"}\n[1, 2]\n', encoding="utf-8")
    return ["eval", "--mteb", str(tmp / "mteb.jsonl")]


def _python(**options):
    def setup(tmp: Path):
        from bitext_hf.jobs import EvalConfig, run_evaluation

        src, tgt = corpus(tmp)
        return lambda: run_evaluation(EvalConfig(src=src, tgt=tgt, **options))

    return setup


CASES: dict[str, Case] = {
    # --- the results file: the user's own link followed, a stream written directly, anything else refused first
    "--out a link to a file elsewhere": Case(
        at_output(_eval, OUT, "link"), EXIT_OK, replaces=(VICTIM,), then=_victim_holds_the_results
    ),
    "--out a FIFO: written directly": Case(at_output(_eval, OUT, "FIFO"), EXIT_OK, fifo=OUT, fifo_gets=b"{"),
    "--out a device: written directly": Case(at_output(_eval, OUT, "device"), EXIT_OK),
    "--out /dev/null": Case(lambda t: _eval(t, "--out", os.devnull), EXIT_OK),
    "--out - prints the results only": Case(lambda t: _eval(t, "--out", "-"), EXIT_OK),
    "--out a socket": Case(at_output(_eval, OUT, "socket"), EXIT_USAGE, f"--out {OUT}: is a socket"),
    "--out a folder": Case(at_output(_eval, OUT, "folder"), EXIT_USAGE, f"--out {OUT}: is a directory"),
    "--out in a missing folder": Case(lambda t: _eval(t, "--out", "no/r.json"), EXIT_USAGE, "does not exist"),
    "--out is --src": Case(lambda t: _eval(t, "--out", "src.txt"), EXIT_USAGE, "--out src.txt: is the input"),
    "--out a link to --src": Case(_out_link_to("src.txt"), EXIT_USAGE, "--out alias.json: is the input src.txt"),
    "--out a hard link of --tgt": Case(_out_hard_link_of_tgt, EXIT_USAGE, "is the input"),
    "--out is the --mteb file": Case(
        lambda t: ["eval", "--mteb", _mteb_file(t), "--out", "x.jsonl"], EXIT_USAGE, "--out x.jsonl: is the input"
    ),
    # --- over an earlier results file: the new one or the earlier one, whole
    "a second run replaces the results": Case(
        over_earlier(_eval, OUT), EXIT_OK, replaces=(OUT,), then=_reports_k(4)
    ),
    "the commit's rename fails": Case(
        over_earlier(_eval, OUT), EXIT_ERROR, f"{OUT}: input/output error", patch=fail_rename(1), encodes=True
    ),
    "a full disk as the results are written": Case(
        over_earlier(_eval, OUT),
        EXIT_ERROR,
        f"{OUT}: no space left on device",
        patch=full_disk_at(1),
        encodes=True,
    ),
    # --- inputs only eval reads, and results reported as used
    "MTEB rows that are not objects": Case(_mteb_not_objects, EXIT_DATA, "mteb.jsonl:2"),
    "MTEB JSON nested 200,000 deep": Case(_mteb_deeply_nested, EXIT_DATA, "mteb.jsonl:3"),
    "eval --pairs tsv, a third column": Case(
        lambda t: ["eval", "--pairs", text_file(t, "p.tsv", "cat|en\tcat|de\tcat again|de\ndog|en\tdog|de\n"),
                   "--k", "1"],
        EXIT_DATA,
        "p.tsv:1: 3 tab-separated columns, expected 2",
    ),
    "eval --columns names one column twice": Case(
        lambda t: ["eval", "--mteb", _mteb_file(t), "--columns", "sentence1,sentence1"], EXIT_USAGE, "two different"
    ),
    "eval --k above the corpus reports the k used": Case(
        lambda t: _eval(t, "--k", "100000", "--out", str(t / OUT)), EXIT_OK, creates=(OUT,),
        then=_reports_k(len(SOURCES)),
    ),
    # --- options that cannot act: one line, exit 2, before anything is read
    "eval --mode without --bucc": Case(lambda t: _eval(t, "--mode", "union"), EXIT_USAGE, "--mode"),
    "eval --bucc with --metrics": Case(
        lambda t: ["eval", "--bucc", "a", "b", "c", "--metrics", "xsim"], EXIT_USAGE, "--bucc computes BUCC F1 only"
    ),
    "eval --k with metrics that have no k": Case(
        lambda t: _eval(t, "--metrics", "accuracy", "--k", "8"), EXIT_USAGE, "--k and --margin are xsim's"
    ),
    # --- absurd values
    "--k 10**12 is capped at the corpus": Case(
        lambda t: _eval(t, "--k", str(10**12), "--out", OUT), EXIT_OK, creates=(OUT,), then=_reports_k(len(SOURCES))
    ),
    "--batch-size 10**12": Case(lambda t: _eval(t, "--batch-size", str(10**12), "--out", OUT), EXIT_OK,
                                creates=(OUT,)),
    "--max-line-chars 0": Case(lambda t: _eval(t, "--max-line-chars", "0"), EXIT_USAGE, "must be an integer >= 1"),
    # --- the job from Python
    "out as a pathlib.Path": Case(_python(out=Path(OUT)), EXIT_OK, creates=(OUT,), then=_reports_k(4)),
    "out as a list": Case(_python(out=[OUT]), EXIT_USAGE, "out=['results.json'] (--out): must be a string"),
}  # fmt: skip


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_eval(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_writing_leaves_the_earlier_results(tmp_path, signum):
    argv = ["eval", "--src", "src.txt", "--tgt", "tgt.txt", "--out", OUT]
    signal_while_writing(tmp_path, "bitext_hf.jobs.evaluate:EvaluationResult.to_json", argv, signum, earlier_run(OUT))
