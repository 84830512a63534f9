"""Hostile and careless use of the mining, scoring and evaluation commands, one table.

Every output format of the package read back by the commands that read pairs (a round trip, or one refusal naming
the file and the columns it expects), a column scored against itself, options given where they cannot act, a
reported setting that is not the one used, messages that name the wrong dimension, warnings of libraries beside the
package's own, and the ``evaluate`` modules given out-of-range inputs. Each case asserts what tests/test_hostile.py
asserts: the documented exit code, one stderr line without a traceback on failure, every file that was there before
byte-identical, no output but the expected ones, no marker of executed code, no hang.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines
from gettext_catalogs import write_catalogs
from hostile_support import left_as_before, refusal_line, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE, main

pytestmark = pytest.mark.timeout(300)  # a regression that blocks fails instead of hanging the suite

FORMATS = ("tsv", "csv", "jsonl", "parquet")


@dataclass
class Case:
    """One hostile situation: ``setup`` builds it in a folder and returns the command line."""

    setup: Callable[[Path], list[str]]
    code: int
    message: str = ""  # part of the one stderr line (failures)
    absent: str = ""  # what that line must not say (a wrong dimension)
    creates: tuple[str, ...] = ()  # outputs allowed to appear (successes)
    env: dict[str, str] = field(default_factory=dict)
    subprocess: bool = False  # run as its own process: what a fresh interpreter prints on stderr (successes: nothing)
    then: Callable[[Path], None] | None = None  # more checks on what the run left (successes)
    slow: bool = False  # in the slow set (`pytest -m slow`): a fresh process that builds caches from nothing
    stdout_encoding: str | None = None  # run with a stdout of this encoding (PYTHONIOENCODING=ascii, in-process)
    encodes: bool = False  # a failure that comes after the encoding (an output that cannot be written)


def _corpus(tmp: Path) -> tuple[str, str]:
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _score(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["score", "--src", src, "--tgt", tgt, "--out", str(tmp / "s.tsv"), *extra]


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

    return Case(setup, EXIT_OK, creates=("scored.tsv",), then=_scores_the_pairs_of(name))


def _score_of_score(tmp: Path) -> list[str]:
    src, tgt = _corpus(tmp)
    _setup_run("score", "--src", src, "--tgt", tgt, "--out", str(tmp / "first.jsonl"), "--k", "2")
    return ["score", "--pairs", str(tmp / "first.jsonl"), "--out", str(tmp / "scored.tsv"), "--k", "2"]


def _eval_of_mined_parquet(tmp: Path) -> list[str]:
    return ["eval", "--pairs", _mined(tmp, "parquet"), "--out", str(tmp / "results.json"), "--k", "2"]


def _pairs_file(tmp: Path, name: str, text: str) -> str:
    (tmp / name).write_text(text, encoding="utf-8")
    return str(tmp / name)


def _score_unknown_columns(tmp: Path) -> list[str]:
    pairs = _pairs_file(tmp, "p.csv", "id,left,right\n1,cat|en,cat|de\n2,dog|en,dog|de\n")
    return ["score", "--pairs", pairs, "--out", str(tmp / "scored.tsv")]


def _score_tab_in_jsonl_to_tsv(tmp: Path) -> list[str]:
    rows = [{"src": "cat|en", "tgt": "cat|de"}, {"src": "a\ttab|en", "tgt": "tab|de"}]
    pairs = _pairs_file(tmp, "p.jsonl", "".join(json.dumps(row) + "\n" for row in rows))
    return ["score", "--pairs", pairs, "--out", str(tmp / "scored.tsv"), "--k", "1"]


def _extra_columns(command: str, name: str, text: str) -> Callable[[Path], list[str]]:
    """``command --pairs`` of a pairs file holding ``text``: no text of a line may be dropped without a word."""

    def setup(tmp: Path) -> list[str]:
        pairs = _pairs_file(tmp, name, text)
        out = ["--out", str(tmp / "scored.tsv")] if command == "score" else []
        return [command, "--pairs", pairs, *out, "--k", "1"]

    return setup


def _latin1_pairs(tmp: Path) -> list[str]:
    (tmp / "p.tsv").write_bytes("cat|en\tcat|dé\n".encode("latin-1"))
    return ["score", "--pairs", str(tmp / "p.tsv"), "--out", str(tmp / "scored.tsv")]


def _score_to_stdout(tmp: Path) -> list[str]:
    pairs = _pairs_file(tmp, "p.tsv", "cat|en\tcat|dé\ndog|en\tdog|dé\n")
    return ["score", "--pairs", pairs, "--out", "-", "--k", "1"]


def _mined_as_gold(tmp: Path) -> list[str]:
    gold = _mined(tmp, "tsv")
    return _mine(tmp, "--gold", gold)


def _mteb_file(tmp: Path) -> str:
    rows = [{"sentence1": s, "sentence2": t} for s, t in zip(SOURCES, TARGETS)]
    return _pairs_file(tmp, "x.jsonl", "".join(json.dumps(row) + "\n" for row in rows))


def _eval_k_capped(tmp: Path) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["eval", "--src", src, "--tgt", tgt, "--k", "100000", "--out", str(tmp / "results.json")]


def _reports_k(k: int) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        results = json.loads((tmp / "results.json").read_text())
        assert results["k"] == k, results

    return check


def _sidecar_reports_k(k: int) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        assert json.loads((tmp / "p.tsv.meta.json").read_text())["k"] == k

    return check


def _npy_sides(tmp: Path) -> list[str]:
    """Both sides as .npy embeddings (dimension 16) with their texts: mining them loads no encoder."""
    src, tgt = _corpus(tmp)
    for name, texts in (("src.npy", SOURCES), ("tgt.npy", TARGETS)):
        np.save(tmp / name, np.stack([fake_embedding(text) for text in texts]))
    return ["mine", "--src", str(tmp / "src.npy"), "--tgt", str(tmp / "tgt.npy"), "--src-text", src, "--tgt-text", tgt]


def _model_folder(tmp: Path) -> str:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    return str(folder)


def _push_model(*extra: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["push", "--model", _model_folder(tmp), "--repo", "me/model", "--dry-run", *extra]


CASES: dict[str, Case] = {
    # --- every output format read back by `score --pairs` (and eval): the sentences, never the header or numbers
    **{f"score reads mine's {fmt}": _score_round_trip(_mined, fmt) for fmt in FORMATS},
    **{f"score reads data gettext's {fmt}": _score_round_trip(_gettext_output, fmt) for fmt in FORMATS},
    "score reads score's own jsonl": Case(
        _score_of_score, EXIT_OK, creates=("scored.tsv",), then=_scores_the_pairs_of("first.jsonl")
    ),
    "eval reads mine's parquet": Case(_eval_of_mined_parquet, EXIT_OK, creates=("results.json",)),
    "a csv without source and target columns": Case(
        _score_unknown_columns, EXIT_DATA, "p.csv: cannot tell the source and target columns among id, left, right"
    ),
    "a jsonl sentence with a tab, scored to tsv": Case(_score_tab_in_jsonl_to_tsv, EXIT_DATA, "p.jsonl:2"),
    "mine's pairs given as --gold": Case(_mined_as_gold, EXIT_DATA, "mined.tsv:2: expected `src_line<TAB>tgt_line`"),
    # --- a line with more columns than declared: refused naming file and line, never read with its rest dropped
    "score --pairs tsv, a third column": Case(
        _extra_columns("score", "p.tsv", "cat|en\tcat|de\ndog|en\tdog|de\tand the rest|de\n"),
        EXIT_DATA,
        "p.tsv:2: 3 tab-separated columns, expected 2 (source<TAB>target)",
    ),
    "score --pairs tsv with mine's header, a tab more": Case(
        _extra_columns(
            "score",
            "p.tsv",
            "score\tsrc_index\ttgt_index\tsrc\ttgt\n1\t0\t0\tcat|en\tcat|de\n1\t1\t1\tdog|en\tdog|de\tx\n",
        ),
        EXIT_DATA,
        "p.tsv:3: 6 tab-separated columns, but the header names 5",
    ),
    "score --pairs csv, an unquoted comma": Case(
        _extra_columns("score", "p.csv", 'src,tgt\ncat|en,cat|de\n"dog, big|en",dog, big|de\n'),
        EXIT_DATA,
        "p.csv:3: 3 comma-separated cells, but the header names 2",
    ),
    "eval --pairs tsv, a third column": Case(
        _extra_columns("eval", "p.tsv", "cat|en\tcat|de\tcat again|de\ndog|en\tdog|de\n"),
        EXIT_DATA,
        "p.tsv:1: 3 tab-separated columns, expected 2",
    ),
    # --- text that cannot be decoded or encoded: an input is bad data (3), an output that cannot take it fails (1)
    "score --pairs in latin-1": Case(_latin1_pairs, EXIT_DATA, "p.tsv:1: invalid UTF-8 (byte 0xe9)"),
    "score --out - to an ascii stdout": Case(
        _score_to_stdout,
        EXIT_ERROR,
        "writing to stdout failed: its encoding (ascii) cannot represent the text ('é' (U+00E9))",
        stdout_encoding="ascii",
        encodes=True,
    ),
    # --- wrong results with exit 0
    "eval --columns names one column twice": Case(
        lambda t: ["eval", "--mteb", _mteb_file(t), "--columns", "sentence1,sentence1"], EXIT_USAGE, "two different"
    ),
    "eval --k above the corpus reports the k used": Case(
        _eval_k_capped, EXIT_OK, creates=("results.json",), then=_reports_k(len(SOURCES))
    ),
    "mine --k above the corpus records the k used": Case(
        lambda t: [*_mine(t), "--k", "50", "--out", str(t / "p.tsv")],
        EXIT_OK,
        creates=("p.tsv", "p.tsv.meta.json"),
        then=_sidecar_reports_k(len(SOURCES)),
    ),
    # --- options that cannot act: one line, exit 2, before anything is read
    "mine --lid-min-prob without --lid": Case(
        lambda t: [*_mine(t), "--lid-min-prob", "0.7", "--out", str(t / "p.tsv")], EXIT_USAGE, "--lid-min-prob 0.7"
    ),
    "mine --src-lang without --lid or a sidecar": Case(
        lambda t: _mine(t, "--src-lang", "en"), EXIT_USAGE, "--src-lang acts only with --lid or --out FILE"
    ),
    "mine --tgt-lang without --lid, pairs to stdout": Case(
        lambda t: _mine(t, "--tgt-lang", "de", "--out", "-"), EXIT_USAGE, "--tgt-lang acts only with --lid"
    ),
    "mine --format without --out": Case(lambda t: _mine(t, "--format", "csv"), EXIT_USAGE, "there is no --out"),
    "mine --cache-dir with --no-cache": Case(
        lambda t: _mine(t, "--cache-dir", str(t / "c"), "--no-cache"), EXIT_USAGE, "--no-cache turns off"
    ),
    "score --lid-min-prob without --lid": Case(
        lambda t: _score(t, "--lid-min-prob", "0.9"),
        EXIT_USAGE,
        "--lid-min-prob 0.9 applies to --lid",
    ),
    "score --src-lang and --tgt-lang without --lid": Case(
        lambda t: _score(t, "--src-lang", "en", "--tgt-lang", "de"),
        EXIT_USAGE,
        "--src-lang and --tgt-lang act only with --lid",
    ),
    "push --model with --languages": Case(_push_model("--languages", "en", "de"), EXIT_USAGE, "--languages describes"),
    "push --model with --license": Case(_push_model("--license", "mit"), EXIT_USAGE, "--license describes"),
    "push --model with --meta": Case(_push_model("--meta", "x.json"), EXIT_USAGE, "--meta describes"),
    "eval --mode without --bucc": Case(
        lambda t: ["eval", "--src", _corpus(t)[0], "--tgt", _corpus(t)[1], "--mode", "union"], EXIT_USAGE, "--mode"
    ),
    "eval --bucc with --metrics": Case(
        lambda t: ["eval", "--bucc", "a", "b", "c", "--metrics", "xsim"], EXIT_USAGE, "--bucc computes BUCC F1 only"
    ),
    "eval --k with metrics that have no k": Case(
        lambda t: ["eval", "--src", _corpus(t)[0], "--tgt", _corpus(t)[1], "--metrics", "accuracy", "--k", "8"],
        EXIT_USAGE,
        "--k and --margin are xsim's",
    ),
    "encode --cache-dir with --no-cache": Case(
        lambda t: ["encode", "--input", _corpus(t)[0], "--out", str(t / "e.npy"), "--cache-dir", "c", "--no-cache"],
        EXIT_USAGE,
        "--no-cache turns off",
    ),
    # --- messages that name what is true
    "mine --index garbage on text names no made-up dimension": Case(
        lambda t: _mine(t, "--index", "garbage"), EXIT_USAGE, "'garbage' is not a FAISS factory string:", "3840"
    ),
    "mine --index garbage on embeddings names their dimension": Case(
        lambda t: [*_npy_sides(t), "--index", "garbage"], EXIT_USAGE, "for dimension 16: could not parse", "3840"
    ),
    # --- a HOME that cannot be written: a fresh process, only the package's own words on stderr (none with -q)
    "HOME unwritable, threshold report drawn": Case(
        lambda t: [*_npy_sides(t), "--threshold-report", "--out", str(t / "p.tsv"), "--quiet"],
        EXIT_OK,
        creates=("p.tsv", "p.tsv.meta.json", "p.tsv.threshold.png", "p.tsv.threshold.md"),
        env={"HOME": os.devnull, "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "", "MPLCONFIGDIR": ""},
        subprocess=True,
        slow=True,
    ),
}


def _run_process(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    environment = {**os.environ, **env}
    for variable in [name for name, value in env.items() if not value]:
        environment.pop(variable)
    done = subprocess.run(
        [sys.executable, "-m", "bitext_hf.cli", *argv], env=environment, capture_output=True, text=True, timeout=240
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if case.slow else name for name, case in CASES.items()]
)
def test_hostile_case(name, capsys, tmp_path, monkeypatch):
    case = CASES[name]
    fakes = install_fake_encoders(monkeypatch)
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    argv = case.setup(tmp_path)
    encoded_by_setup = fakes.n_encoded
    capsys.readouterr()
    before = snapshot(tmp_path)
    if case.subprocess:
        code, err = _run_process(argv, case.env)
    else:
        for variable, value in case.env.items():
            monkeypatch.setenv(variable, value)
        if case.stdout_encoding:
            monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding=case.stdout_encoding))
        try:
            code, _, err = run(capsys, *argv)
        except SystemExit as exit:  # argparse's own refusals
            code, err = exit.code, capsys.readouterr().err

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        assert ": error: " in line and case.message in line, line
        assert not case.absent or case.absent not in line, line
        assert case.encodes or fakes.n_encoded == encoded_by_setup  # refused before any encoding
    elif case.subprocess:
        assert err == "", err  # -q: not a word from the package, none from the libraries underneath
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
