"""What one command writes, read back by another, one table: every output format of the package (``mine``'s and
``data gettext``'s, in TSV, CSV, JSON Lines and Parquet) read back by the commands that read pairs (``score --pairs``,
``eval --pairs``): the sentences, never a header or a number column taken for a sentence. Each case asserts what
tests/hostile_jobs.py asserts: the documented exit code, nothing on stderr but the command's words, every file that was
there before byte-identical, no output but the expected ones, no hang. Then the ``evaluate`` modules given
out-of-range inputs.

Each job's own hostile table is tests/test_hostile_<job>.py (mine, score, encode, eval, align, gettext, push); hostile
text, checkpoints, caches and input bounds, which every job reads alike, are in tests/test_hostile.py.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from gettext_catalogs import write_catalogs
from hostile_support import left_as_before, snapshot

from bitext_hf.cli import EXIT_OK, main

pytestmark = pytest.mark.timeout(300)  # a regression that blocks fails instead of hanging the suite

FORMATS = ("tsv", "csv", "jsonl", "parquet")


@dataclass
class Case:
    """One round trip: ``setup`` writes the first command's output in a folder and returns the second command."""

    setup: Callable[[Path], list[str]]
    creates: tuple[str, ...] = ()  # what the second command writes
    then: Callable[[Path], None] | None = None  # more checks on what it wrote


def _corpus(tmp: Path) -> tuple[str, str]:
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _setup_run(*argv: str) -> None:
    """A command of the case's setup (its outputs are then inputs of the command under test)."""
    assert main([*argv, "--quiet"]) == EXIT_OK


def _mined(tmp: Path, fmt: str) -> str:
    """The pairs ``mine`` writes in ``fmt`` (its sidecar too, which the reader must not need)."""
    out = tmp / f"mined.{fmt}"
    _setup_run(*_mine(tmp, "--out", str(out)))
    return str(out)


def _gettext_output(tmp: Path, fmt: str) -> str:
    """English-French pairs as ``data gettext`` writes them in ``fmt`` (TSV without a header; columns en and fr)."""
    root = write_catalogs(tmp / "locale")
    out = tmp / f"gettext.{fmt}"
    _setup_run("data", "gettext", "--lang", "fr", "--out", str(out), "--no-system-catalogs", "--catalogs", str(root))
    return str(out)


def _expected_pairs(path: Path) -> list[tuple[str, str]]:
    """The sentence pairs of a pairs file, read independently of the readers under test (pyarrow; the columns by
    name, or the only two there are)."""
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    fmt = path.suffix[1:]
    if fmt == "parquet":
        table = pq.read_table(path)
    elif fmt == "jsonl":
        table = pa_json.read_json(path)
    elif fmt == "csv":
        table = pa_csv.read_csv(path)
    else:
        header = path.read_text(encoding="utf-8").split("\n", 1)[0].split("\t")
        names = header if "src" in header else ["c0", "c1"]
        options = pa_csv.ReadOptions(column_names=None if "src" in header else names)
        table = pa_csv.read_csv(path, read_options=options, parse_options=pa_csv.ParseOptions(delimiter="\t"))
    columns = ("src", "tgt") if "src" in table.column_names else tuple(table.column_names[:2])
    return list(zip(table.column(columns[0]).to_pylist(), table.column(columns[1]).to_pylist()))


def _scored(out: str) -> list[tuple[str, str]]:
    with open(out, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [(row["src"], row["tgt"]) for row in rows]


def _scores_the_pairs_of(input_name: str) -> Callable[[Path], None]:
    """The scored rows are the input's sentence pairs, in order: no header, no number column scored as a sentence."""

    def check(tmp: Path) -> None:
        expected = _expected_pairs(tmp / input_name)
        assert len(expected) >= 5
        assert _scored(str(tmp / "scored.tsv")) == expected

    return check


def _score_round_trip(make: Callable[[Path, str], str], fmt: str) -> Case:
    name = f"{'mined' if make is _mined else 'gettext'}.{fmt}"

    def setup(tmp: Path) -> list[str]:
        return ["score", "--pairs", make(tmp, fmt), "--out", str(tmp / "scored.tsv"), "--k", "2"]

    return Case(setup, creates=("scored.tsv",), then=_scores_the_pairs_of(name))


def _eval_of_mined_parquet(tmp: Path) -> list[str]:
    return ["eval", "--pairs", _mined(tmp, "parquet"), "--out", str(tmp / "results.json"), "--k", "2"]


CASES: dict[str, Case] = {
    # --- every output format read back by `score --pairs` (and eval): the sentences, never the header or numbers
    **{f"score reads mine's {fmt}": _score_round_trip(_mined, fmt) for fmt in FORMATS},
    **{f"score reads data gettext's {fmt}": _score_round_trip(_gettext_output, fmt) for fmt in FORMATS},
    "eval reads mine's parquet": Case(_eval_of_mined_parquet, creates=("results.json",)),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_case(name, capsys, tmp_path, monkeypatch):
    case = CASES[name]
    install_fake_encoders(monkeypatch)
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    argv = case.setup(tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)
    code, _, err = run(capsys, *argv)

    assert code == EXIT_OK, err
    assert "Traceback" not in err
    left_as_before(tmp_path, before, case.creates)
    if case.then is not None:
        case.then(tmp_path)


# --- the `evaluate` modules, loaded from the package's folder, given values outside their domain: a ValueError
# naming the values, never a number computed from them.

_SCORES = [1.0, 0.5, 0.2, 0.1]


def _unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, 8))
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@dataclass
class MetricCase:
    metric: str
    inputs: Callable[[], dict]
    message: str


METRIC_CASES: dict[str, MetricCase] = {
    "bucc_f1 labels 2 and -1": MetricCase(
        "bucc_f1", lambda: dict(scores=_SCORES, labels=[2, -1, 0, 1], splits=["test"] * 4), "got 2, -1"
    ),
    "bucc_f1 label 0.5": MetricCase(
        "bucc_f1", lambda: dict(scores=_SCORES, labels=[0.5, 1, 0, 0], splits=["test"] * 4), "got 0.5"
    ),
    "bucc_f1 a bad train label with a given threshold": MetricCase(
        "bucc_f1",
        lambda: dict(scores=_SCORES, labels=[1, 0, 0, 7], splits=["test"] * 3 + ["train"], threshold=0.3),
        "got 7",
    ),
    "xsim k 0": MetricCase(
        "xsim", lambda: dict(source_embeddings=_unit_rows(4, 0), target_embeddings=_unit_rows(4, 1), k=0), "k must be"
    ),
    "mteb_bitext_mining gold outside the targets": MetricCase(
        "mteb_bitext_mining",
        lambda: dict(source_embeddings=_unit_rows(4, 0), target_embeddings=_unit_rows(4, 1), gold=[(0, 9)]),
        "target index 9",
    ),
    "bitext_accuracy texts of another length": MetricCase(
        "bitext_accuracy",
        lambda: dict(source_embeddings=_unit_rows(4, 0), target_embeddings=_unit_rows(4, 1), source_texts=["a"]),
        "one text per row",
    ),
}


@pytest.mark.parametrize("name", METRIC_CASES)
def test_hostile_metric_inputs(name):
    from bitext_hf.evaluation.metrics import load

    case = METRIC_CASES[name]
    metric = load(case.metric)
    with pytest.raises(ValueError) as raised:
        metric.compute(**case.inputs())
    assert case.message in str(raised.value) and "\n" not in str(raised.value), raised.value
