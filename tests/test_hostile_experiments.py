"""Hostile input to ``experiments/laser3_ablation.py --merge``, one table: the files a merge reads of earlier runs
(each run's results.json, the first run's model_card.md) given as a FIFO, ``/dev/zero``, a folder, a link to a huge
(sparse) file, a link to nothing or a file that goes away while it is read; results that are not JSON, not UTF-8,
of another experiment or setting, or that hold a NaN or lack what the merge reads.

Each row runs the script's entry point in this process (``common.run_script``: the one stderr line and the exit code
the script gives) and asserts: the documented exit code (2 what was given is not a run's file, 3 its content is bad,
naming the file), one stderr line without a traceback, every file that was there before byte-identical, and nothing
new: a refused merge creates no output folder. The module's timeout fails a row that would block on a FIFO.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hostile_support import left_as_before, refusal_line, snapshot

from bitext_hf.errors import EXIT_DATA, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.timeout(60)  # a FIFO opened for reading would block: fail, never hang

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
HUGE = 3 << 30  # past every bound; sparse: no disk used


def _report(seed: int, xsim: float) -> dict:
    """The results.json of a one-seed run of the fixed-step protocol, as small as a merge accepts."""
    return {
        "experiment": "laser3_ablation",
        "regime": {"languages": ["fr"], "MLM blocks per batch": 1},
        "sizes": {"fr": {"train": 10, "monolingual": 10, "eval": 5}},
        "steps": 3,
        "seeds": [seed],
        "teacher zero-shot": {"fr": 60.0},
        "runs": {str(seed): {"distillation": {"fr": xsim, "train minutes": 0.1}}},
        "task losses": {"distillation": {str(seed): [{"step": 3, "loss_distil": 0.4}]}},
    }


def _runs(tmp: Path, second: dict | str | bytes | None = None, *more: Path) -> list[str]:
    """Two run folders, ``a`` (seed 13) and ``b`` (seed 42, or ``second`` as its results.json), and ``more``, merged
    into ``merged``."""
    for name, content in (("a", _report(13, 40.0)), ("b", _report(42, 44.0) if second is None else second)):
        (tmp / name).mkdir()
        path = tmp / name / "results.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    (tmp / "a" / "model_card.md").write_text("# laser3 student\n\n![curve](curve.png)\n", encoding="utf-8")
    return ["--merge", str(tmp / "a"), str(tmp / "b"), *map(str, more), "--output_dir", str(tmp / "merged")]


def _changed(change: Callable[[dict], None]) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        report = _report(42, 44.0)
        change(report)
        return _runs(tmp, report)

    return setup


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")
    return tmp / "fifo"


def _folder(tmp: Path) -> Path:
    (tmp / "folder").mkdir()
    return tmp / "folder"


def _huge(tmp: Path) -> Path:
    with open(tmp / "huge.bin", "wb") as handle:
        handle.truncate(HUGE)
    return tmp / "huge.bin"


KINDS: dict[str, tuple[Callable[[Path], Path], int, str]] = {
    "a FIFO": (_fifo, EXIT_USAGE, "not a regular file (a FIFO)"),
    "/dev/zero": (lambda tmp: Path("/dev/zero"), EXIT_USAGE, "not a regular file (a character device)"),
    "a folder": (_folder, EXIT_USAGE, "not a regular file (a folder)"),
    "a link to a huge file": (_huge, EXIT_DATA, "3,072 MiB, more than the"),
    "a link to nothing": (lambda tmp: tmp / "gone", EXIT_USAGE, "a symbolic link to nothing"),
}


def _replaced(run: str, name: str, kind: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    """``run``'s ``name`` (results.json, model_card.md) replaced by a link to ``kind``."""

    def setup(tmp: Path) -> list[str]:
        argv = _runs(tmp)
        (tmp / run / name).unlink()
        (tmp / run / name).symlink_to(kind(tmp))
        return argv

    return setup


def _merge_a_file(tmp: Path) -> list[str]:
    (tmp / "c").write_text("not a folder\n")
    return _runs(tmp, None, tmp / "c")


def _without_results(tmp: Path) -> list[str]:
    (tmp / "c").mkdir()
    return _runs(tmp, None, tmp / "c")


def _nan(report: dict) -> None:
    report["runs"]["42"]["distillation"]["fr"] = float("nan")


def _no_task_losses(report: dict) -> None:
    del report["task losses"]


def _no_languages(report: dict) -> None:
    del report["regime"]["languages"]


def _other_variants(report: dict) -> None:
    report["runs"]["42"] = {"+ MLM": report["runs"]["42"]["distillation"]}
    report["task losses"] = {"+ MLM": report["task losses"]["distillation"]}


def _other_setting(report: dict) -> None:
    report["steps"] = 30


def _other_experiment(report: dict) -> None:
    report["experiment"] = "musr_crossconst"


def _without_sizes(tmp: Path) -> list[str]:
    first, second = _report(13, 40.0), _report(42, 44.0)
    del first["sizes"], second["sizes"]
    argv = _runs(tmp, second)
    (tmp / "a" / "results.json").write_text(json.dumps(first), encoding="utf-8")
    return argv


def _vanishing_results(tmp: Path, monkeypatch) -> list[str]:
    """b's results.json goes away between its check and its read (another process moved it)."""
    import bitext_hf.io.small_files as small_files

    argv = _runs(tmp)
    checked = small_files.regular_file_status

    def then_gone(path):
        status = checked(path)
        if str(path).endswith("b/results.json"):
            os.unlink(path)
        return status

    monkeypatch.setattr(small_files, "regular_file_status", then_gone)
    return argv


@dataclass
class Case:
    setup: Callable[..., list[str]]  # (tmp) or, with ``patches``, (tmp, monkeypatch) -> the script's arguments
    code: int
    message: str = ""
    creates: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()  # inputs the row itself removes (a file that disappears)
    patches: bool = False


MERGED = ("merged", "merged/.bitext-hf-outputs.json", "merged/model_card.md", "merged/results.json")

CASES: dict[str, Case] = {
    "two seeds merge": Case(_runs, EXIT_OK, creates=(*MERGED, "merged/results.md", "merged/work")),
    **{
        f"results.json is {kind}": Case(_replaced("b", "results.json", make), code, f"b/results.json: {words}")
        for kind, (make, code, words) in KINDS.items()
    },
    **{
        f"the first run's card is {kind}": Case(_replaced("a", "model_card.md", make), code, f"model_card.md: {words}")
        for kind, (make, code, words) in KINDS.items()
    },
    "a run folder without results.json": Case(_without_results, EXIT_USAGE, "c/results.json: no such file"),
    "--merge names no folder": Case(
        lambda t: _runs(t, None, t / "missing"), EXIT_USAGE, "--merge {tmp}/missing: no such folder"
    ),
    "--merge names a file": Case(_merge_a_file, EXIT_USAGE, "c: not a folder"),
    "results.json not JSON": Case(lambda t: _runs(t, '{"runs":\n  {'), EXIT_DATA, "b/results.json:2: not JSON"),
    "results.json not UTF-8": Case(lambda t: _runs(t, b'{"\xff": 1}'), EXIT_DATA, "b/results.json:1: invalid UTF-8"),
    "a NaN metric": Case(_changed(_nan), EXIT_DATA, "b/results.json: seed 42, 'distillation', 'fr' is nan"),
    "no task losses": Case(_changed(_no_task_losses), EXIT_DATA, "no 'task losses' of 'distillation'"),
    "no languages": Case(_changed(_no_languages), EXIT_DATA, "no 'regime' with its 'languages'"),
    "other variants": Case(_changed(_other_variants), EXIT_USAGE, "its variants differ"),
    "another setting": Case(_changed(_other_setting), EXIT_USAGE, "its 'steps' differs"),
    "another experiment": Case(_changed(_other_experiment), EXIT_USAGE, "not a results file of this script"),
    "results.json disappears while read": Case(
        _vanishing_results,
        EXIT_DATA,
        "b/results.json: cannot be read (No such file or directory)",
        gone=("b/results.json",),
        patches=True,
    ),
    "results without sizes": Case(_without_sizes, EXIT_DATA, "the results cannot be merged (KeyError: 'sizes'"),
}


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import common
    import laser3_ablation

    return common, laser3_ablation


@pytest.mark.parametrize("name", CASES)
def test_hostile_merge(name, script, tmp_path, capsys, monkeypatch):
    common, laser3_ablation = script
    case = CASES[name]
    folder = tmp_path / "case"
    folder.mkdir()
    argv = case.setup(folder, monkeypatch) if case.patches else case.setup(folder)
    before = snapshot(folder)
    for name_gone in case.gone:
        before.pop(name_gone)
    monkeypatch.delenv("BITEXT_HF_DEBUG", raising=False)
    monkeypatch.setattr(sys, "argv", ["laser3_ablation.py", *argv])
    capsys.readouterr()
    try:
        common.run_script(laser3_ablation.main, laser3_ablation.build_parser())
        code = EXIT_OK
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err

    assert code == case.code, err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        expected = case.message.replace("{tmp}", str(folder))
        assert line.startswith("laser3_ablation: error: ") and expected in line, line
    else:
        assert "Traceback" not in err
        merged = json.loads((folder / "merged" / "results.json").read_text(encoding="utf-8"))
        assert merged["seeds"] == [13, 42] and merged["mean"]["distillation"]["fr"] == pytest.approx(42.0)
    left_as_before(folder, before, case.creates)
