"""Hostile input to ``bitext-hf push --pairs``, one table: every file push reads (the pairs, the sidecar
``OUT.meta.json`` beside them, ``--meta``, the threshold report ``OUT.threshold.md`` / ``.png``) given as a FIFO,
``/dev/zero``, a folder, a link to a huge (sparse) file, a link to nothing or a file that goes away while push reads;
a NaN, an infinity or an empty cell in a column the card summarizes (score, src_index, tgt_index) or in the
sidecar's numbers; control characters in the data a dry run previews, and a stdout that cannot encode it; options
that describe a dataset given with ``--model``; the job from Python (``run_push``): paths of another type, values of
the wrong type or empty, a FIFO, a device or a file where a folder goes, a config that is none, a field changed after
the config was made (a repository id that would have been uploaded to).

Each row asserts the contract: the documented exit code, one stderr line (no traceback) holding the expected words,
no call to the Hub (nothing uploaded: the rows run without ``--dry-run``, with a token, so a check that let the data
through would upload), every file that was there before byte-identical, nothing new; a FIFO is never opened (a row
would block, and the module's timeout fails it instead of hanging the suite).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hostile_jobs import python_call
from hostile_support import left_as_before, refusal_line, snapshot

from bitext_hf.cli import main
from bitext_hf.errors import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.timeout(60)  # a FIFO opened for reading would block: fail, never hang

HEADER = "score\tsrc_index\ttgt_index\tsrc\ttgt\n"
ROWS = [("1.31", "0", "0", "The cat sleeps.", "Die Katze schläft."), ("1.12", "1", "1", "It rains.", "Es regnet.")]
HUGE = 3 << 30  # past the 2 GiB input bound and every small-file bound; sparse: no disk used


class Hub:
    """The Hub's methods that push calls, recorded; a row that gets past the checks would call them."""

    def __init__(self, monkeypatch) -> None:
        import huggingface_hub

        self.calls: list[str] = []
        for name in ("create_repo", "create_branch", "repo_info", "upload_folder"):
            monkeypatch.setattr(huggingface_hub.HfApi, name, self._record(name))

    def _record(self, name: str):
        def method(api, *args, **kwargs):
            self.calls.append(name)
            if name == "upload_folder":
                return type("CommitInfo", (), {"commit_url": "https://hub.example/commit/abc"})()
            if name == "repo_info":
                return type("RepoInfo", (), {"private": False})()
            return "https://hub.example/repo"

        return method


def _tsv(tmp: Path, rows=ROWS, name: str = "pairs.tsv") -> Path:
    path = tmp / name
    path.write_text(HEADER + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _with_score(score: str, name: str = "pairs.tsv") -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        return ["--pairs", str(_tsv(tmp, [ROWS[0], (score, *ROWS[1][1:])], name))]

    return setup


def _csv(text: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        (tmp / "pairs.csv").write_text(text, encoding="utf-8")
        return ["--pairs", str(tmp / "pairs.csv")]

    return setup


def _parquet_with_inf(tmp: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"score": [1.3, 1.2, float("inf")], "src": ["a", "b", "c"], "tgt": ["x", "y", "z"]})
    pq.write_table(table, tmp / "pairs.parquet")
    return ["--pairs", str(tmp / "pairs.parquet")]


def _jsonl_with_nan(tmp: Path) -> list[str]:
    rows = [{"score": 1.3, "src": "a", "tgt": "x"}, {"score": float("nan"), "src": "b", "tgt": "y"}]
    (tmp / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return ["--pairs", str(tmp / "pairs.jsonl")]


def _sidecar(content: str | dict) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        pairs = _tsv(tmp)
        text = content if isinstance(content, str) else json.dumps(content)
        (tmp / "pairs.tsv.meta.json").write_text(text, encoding="utf-8")
        return ["--pairs", str(pairs)]

    return setup


def _huge(tmp: Path) -> Path:
    path = tmp / "huge.bin"
    with open(path, "wb") as handle:
        handle.truncate(HUGE)
    return path


def _fifo(tmp: Path) -> Path:
    path = tmp / "fifo"
    os.mkfifo(path)
    return path


def _folder(tmp: Path) -> Path:
    path = tmp / "folder"
    path.mkdir()
    return path


def _nothing(tmp: Path) -> Path:
    return tmp / "gone"  # a link to it points at nothing


KINDS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a FIFO": (_fifo, "not a regular file (a FIFO)"),
    "/dev/zero": (lambda tmp: Path("/dev/zero"), "not a regular file (a character device)"),
    "a folder": (_folder, "not a regular file (a folder)"),
    "a link to a huge file": (_huge, "more than the"),
    "a link to nothing": (_nothing, "a symbolic link to nothing"),
}


def _linked(name: str, kind: Callable[[Path], Path], *, pairs: bool = True) -> Callable[[Path], Path]:
    """``name`` in the case's folder as a link to ``kind`` (a FIFO, /dev/zero...); with ``pairs``, the pairs too."""

    def make(tmp: Path) -> Path:
        if pairs:
            _tsv(tmp)
        (tmp / name).symlink_to(kind(tmp))
        return tmp / name

    return make


def _as_pairs(kind: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["--pairs", str(_linked("given.tsv", kind, pairs=False)(tmp))]


def _as_meta(kind: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["--pairs", str(_tsv(tmp)), "--meta", str(_linked("meta.json", kind, pairs=False)(tmp))]


def _as_sidecar(kind: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    return lambda tmp: ["--pairs", str(_linked("pairs.tsv.meta.json", kind)(tmp))[: -len(".meta.json")]]


def _as_report(part: str, kind: Callable[[Path], Path]) -> Callable[[Path], list[str]]:
    """The threshold report beside the pairs, its ``part`` (``md`` or ``png``) replaced by ``kind``."""

    def setup(tmp: Path) -> list[str]:
        pairs = _tsv(tmp)
        other = "png" if part == "md" else "md"
        (tmp / f"pairs.tsv.threshold.{other}").write_bytes(b"\x89PNG" if other == "png" else b"| score |\n")
        (tmp / f"pairs.tsv.threshold.{part}").symlink_to(kind(tmp))
        return ["--pairs", str(pairs)]

    return setup


def _given_directly(kind: Callable[[Path], Path], option: str) -> Callable[[Path], list[str]]:
    """The FIFO, device or folder itself (not a link to it) given as ``option``."""

    def setup(tmp: Path) -> list[str]:
        target = str(kind(tmp))
        return ["--pairs", target] if option == "--pairs" else ["--pairs", str(_tsv(tmp)), "--meta", target]

    return setup


def _vanishing_sidecar(tmp: Path, monkeypatch) -> list[str]:
    """The sidecar goes away between its check and its read (another process moved it)."""
    import bitext_hf.io.small_files as small_files

    argv = _sidecar({"margin": "ratio"})(tmp)
    checked = small_files.regular_file_status

    def then_gone(path):
        status = checked(path)
        if str(path).endswith(".meta.json"):
            os.unlink(path)
        return status

    monkeypatch.setattr(small_files, "regular_file_status", then_gone)
    return argv


def _escapes_in_data(tmp: Path) -> list[str]:
    """Sentences and a column name holding a screen clear, a clipboard write (OSC 52), a bell, a C1 CSI, a
    backspace, a bidirectional override (a TSV cell cannot hold a line break: pyarrow ends the row there)."""
    rows = [
        ("1.3", "0", "0", "clear\x1b[2Jscreen", "bell\x07 and C1 \x9b31m", "n"),
        ("1.2", "1", "1", "back space\x08", "bidi \u202egnp.exe", "n"),
    ]
    header = "score\tsrc_index\ttgt_index\tsrc\ttgt\tnote\x1b]52;c;aGk=\x07\n"
    (tmp / "pairs.tsv").write_text(header + "".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    return ["--pairs", str(tmp / "pairs.tsv"), "--dry-run"]


def _no_raw_controls(out: str) -> None:
    assert not [char for char in out if char in "\x1b\x07\x08\x9b\u202e"], repr(out)
    for shown in ("clear\\x1b[2Jscreen", "bell\\x07", "\\x9b31m", "back space\\x08", "bidi \\u202egnp.exe"):
        assert shown in out, out
    assert "note\\x1b]52;c;aGk=\\x07" in out  # the column name too


def _model_folder(tmp: Path) -> str:
    folder = tmp / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    return str(folder)


def _push_model(*extra: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["--model", _model_folder(tmp), "--dry-run", *extra]


def _python(*, change: dict | None = None, config: Callable[[], object] | None = None, **fields):
    """A setup: pairs.tsv, a model folder, a link to it, a FIFO, a folder and a plain file; ``run_push`` from Python
    on the config of ``fields`` (a dry run of pairs.tsv to me/mined unless given), with ``change`` set on it after it
    was made; or on ``config()`` itself, whatever it is."""

    def setup(tmp: Path):
        from bitext_hf.jobs.push import PushConfig, run_push

        _tsv(tmp)
        _model_folder(tmp)
        _fifo(tmp)
        _folder(tmp)
        (tmp / "notes.txt").write_text("not a model\n", encoding="utf-8")
        os.symlink("model", tmp / "alias")

        def call():
            made = PushConfig(**{"pairs": "pairs.tsv", "repo": "me/mined", "dry_run": True, **fields})
            for name, value in (change or {}).items():
                setattr(made, name, value)
            return run_push(made if config is None else config())

        return call

    return setup


@dataclass
class Case:
    # (tmp) or (tmp, monkeypatch) -> the options after `push`, or a Python call (its exception the refusal)
    setup: Callable[..., list[str] | Callable[[], object]]
    code: int
    message: str = ""  # in the one stderr line (failures)
    env: dict[str, str] = field(default_factory=dict)
    gone: tuple[str, ...] = ()  # inputs the row itself removes (a file that disappears)
    then: Callable[[str], None] | None = None  # checks on stdout (successes)
    patches: bool = False  # setup takes monkeypatch


CASES: dict[str, Case] = {
    # --- numbers the card summarizes: NaN, infinity, an empty cell, text; the file and line (row) named
    "tsv score nan": Case(_with_score("nan"), EXIT_DATA, "pairs.tsv:3: score is nan;"),
    "tsv score inf": Case(_with_score("inf"), EXIT_DATA, "pairs.tsv:3: score is inf;"),
    "tsv score -inf": Case(_with_score("-inf"), EXIT_DATA, "pairs.tsv:3: score is -inf;"),
    "tsv score empty": Case(_with_score(""), EXIT_DATA, "pairs.tsv:3: score is empty;"),
    "tsv score text": Case(_with_score("high"), EXIT_DATA, "pairs.tsv: the score column holds string values"),
    "csv score nan after a blank line": Case(
        _csv("score,src,tgt\n1.3,a,x\n\nNaN,b,y\n"), EXIT_DATA, "pairs.csv:4: score is nan;"
    ),
    "csv src_index nan": Case(
        _csv("score,src_index,tgt_index,src,tgt\n1.3,0,0,a,x\n1.2,nan,1,b,y\n"),
        EXIT_DATA,
        "pairs.csv:3: src_index is nan",
    ),
    "csv tgt_index empty": Case(
        _csv("score,src_index,tgt_index,src,tgt\n1.3,0,,a,x\n"), EXIT_DATA, "pairs.csv:2: tgt_index is empty"
    ),
    "jsonl score NaN": Case(_jsonl_with_nan, EXIT_DATA, "pairs.jsonl:2: score is nan;"),
    "parquet score inf": Case(_parquet_with_inf, EXIT_DATA, "pairs.parquet: row 3: score is inf;"),
    "sidecar threshold NaN": Case(_sidecar('{"threshold": NaN, "k": 4}'), EXIT_DATA, "threshold is nan"),
    "sidecar k Infinity": Case(_sidecar('{"k": Infinity}'), EXIT_DATA, "pairs.tsv.meta.json: k is inf"),
    "sidecar filter count 1e999": Case(
        _sidecar('{"filters": {"removed": {"length ratio": 1e999}}}'), EXIT_DATA, "filters.removed.length ratio is inf"
    ),
    "--meta threshold -Infinity": Case(
        lambda t: ["--pairs", str(_tsv(t)), "--meta", str(_sidecar_file(t, '{"threshold": -Infinity}'))],
        EXIT_DATA,
        "meta.json: threshold is -inf",
    ),
    "sidecar not JSON": Case(_sidecar("{"), EXIT_DATA, "pairs.tsv.meta.json: not a readable mining metadata file"),
    "sidecar not UTF-8": Case(
        lambda t: _sidecar_bytes(t, b'{"src": "\xff"}'), EXIT_DATA, "pairs.tsv.meta.json: not a readable mining"
    ),
    # --- every file push reads, given as what is not a regular file: named as such, never opened
    **{
        f"--pairs is {kind}": Case(
            _as_pairs(make), EXIT_DATA if kind in ("a link to a huge file", "a link to nothing") else EXIT_USAGE, words
        )
        for kind, (make, words) in KINDS.items()
    },
    **{
        f"--meta is {kind}": Case(
            _as_meta(make), EXIT_DATA if kind in ("a link to a huge file", "a link to nothing") else EXIT_USAGE, words
        )
        for kind, (make, words) in KINDS.items()
    },
    **{f"sidecar is {kind}": Case(_as_sidecar(make), EXIT_DATA, words) for kind, (make, words) in KINDS.items()},
    **{
        f"threshold {part} is {kind}": Case(_as_report(part, make), EXIT_DATA, words)
        for part in ("md", "png")
        for kind, (make, words) in KINDS.items()
    },
    "--pairs is a FIFO itself": Case(
        _given_directly(_fifo, "--pairs"), EXIT_USAGE, "fifo: not a regular file (a FIFO)"
    ),
    "--meta is a FIFO itself": Case(_given_directly(_fifo, "--meta"), EXIT_USAGE, "--meta "),
    "--meta is a folder itself": Case(_given_directly(_folder, "--meta"), EXIT_USAGE, "not a regular file (a folder)"),
    "--meta missing": Case(
        lambda t: ["--pairs", str(_tsv(t)), "--meta", str(t / "none.json")], EXIT_DATA, "none.json: no such file"
    ),
    "--pairs missing, its name with an escape": Case(
        lambda t: ["--pairs", str(t / "pa\x1b[31mirs.tsv")], EXIT_DATA, "pa\\x1b[31mirs.tsv: no such file"
    ),
    "pairs past the input bound": Case(
        lambda t: ["--pairs", str(_tsv(t))],
        EXIT_DATA,
        "more than the input bound of 64 bytes; raise it with BITEXT_HF_MAX_INPUT_BYTES",
        env={"BITEXT_HF_MAX_INPUT_BYTES": "64"},
    ),
    "threshold md not UTF-8": Case(
        lambda t: _report_bytes(t, b"| score |\n| \xff |\n"), EXIT_DATA, "pairs.tsv.threshold.md:2: invalid UTF-8"
    ),
    "sidecar disappears while push reads": Case(
        _vanishing_sidecar, EXIT_DATA, "pairs.tsv.meta.json: no such file", gone=("pairs.tsv.meta.json",), patches=True
    ),
    # --- what a dry run shows of the data: escaped, never raw
    "dry run of data with terminal escapes": Case(_escapes_in_data, EXIT_OK, then=_no_raw_controls),
    # --- options that describe a dataset, given with --model: one line, exit 2, before anything is read
    "push --model with --languages": Case(_push_model("--languages", "en", "de"), EXIT_USAGE, "--languages describes"),
    "push --model with --license": Case(_push_model("--license", "mit"), EXIT_USAGE, "--license describes"),
    "push --model with --meta": Case(_push_model("--meta", "x.json"), EXIT_USAGE, "--meta describes"),
    # --- the job from Python: paths of another type work (dry runs); a value of the wrong type or empty, something
    # else where a file or a folder goes, a config that is none, a field set after the config was made: the
    # package's own error, before anything is read or uploaded
    "from Python: pairs as a pathlib.Path": Case(_python(pairs=Path("pairs.tsv")), EXIT_OK),
    "from Python: model as a pathlib.Path": Case(_python(pairs=None, model=Path("model")), EXIT_OK),
    "from Python: model a link to the folder": Case(_python(pairs=None, model="alias"), EXIT_OK),
    "from Python: pairs as bytes": Case(_python(pairs=b"pairs.tsv"), EXIT_USAGE, "pairs=b'pairs.tsv' (--pairs)"),
    "from Python: pairs empty": Case(_python(pairs=""), EXIT_USAGE, "--pairs '': an empty path"),
    "from Python: pairs a FIFO": Case(_python(pairs="fifo"), EXIT_USAGE, "--pairs fifo: not a regular file (a FIFO)"),
    "from Python: pairs /dev/zero": Case(
        _python(pairs="/dev/zero"), EXIT_USAGE, "--pairs /dev/zero: not a regular file (a character device)"
    ),
    "from Python: pairs a folder": Case(_python(pairs="folder"), EXIT_USAGE, "not a regular file (a folder)"),
    "from Python: pairs missing": Case(_python(pairs="nope.tsv"), EXIT_DATA, "nope.tsv: no such file"),
    "from Python: neither pairs nor model": Case(
        _python(pairs=None), EXIT_USAGE, "give one of --model FOLDER, --pairs FILE and --space DATASET"
    ),
    "from Python: model empty": Case(_python(pairs=None, model=" "), EXIT_USAGE, "--model ' ': an empty path"),
    "from Python: model a file": Case(_python(pairs=None, model="notes.txt"), EXIT_USAGE, "--model notes.txt: not a"),
    "from Python: model a FIFO": Case(_python(pairs=None, model="fifo"), EXIT_USAGE, "--model fifo: not a folder"),
    "from Python: meta a number": Case(_python(meta=3), EXIT_USAGE, "meta=3 (--meta): must be a string"),
    "from Python: repo None": Case(_python(repo=None), EXIT_USAGE, "repo=None (--repo): must be a string"),
    "from Python: repo a path": Case(_python(repo="../../etc"), EXIT_USAGE, "--repo must look like 'owner/name'"),
    "from Python: dry_run a string": Case(
        _python(dry_run="no"), EXIT_USAGE, "dry_run='no' (--dry-run): must be True or False"
    ),
    "from Python: dry_run 0": Case(_python(dry_run=0), EXIT_USAGE, "dry_run=0 (--dry-run): must be True or False"),
    "from Python: token a number": Case(_python(token=123), EXIT_USAGE, "token=123 (--token): must be a string"),
    "from Python: languages one code": Case(
        _python(languages=["en"]), EXIT_USAGE, "languages=['en'] (--languages): must be a list of 2 strings"
    ),
    "from Python: languages one string": Case(
        _python(languages="en de"), EXIT_USAGE, "give a list of 2 strings, not one string"
    ),
    "from Python: include one string": Case(
        _python(pairs=None, model="model", include="*.bin"), EXIT_USAGE, "include='*.bin' (--include): give a list"
    ),
    "from Python: None for the config": Case(
        _python(config=lambda: None), EXIT_USAGE, "run_push takes a PushConfig, not NoneType"
    ),
    "from Python: the pairs' path for the config": Case(
        _python(config=lambda: "pairs.tsv"), EXIT_USAGE, "run_push takes a PushConfig, not str"
    ),
    "from Python: repo set to a bad id after, an upload": Case(
        _python(dry_run=False, change={"repo": "bad id!"}), EXIT_USAGE, "--repo must look like 'owner/name'"
    ),
    "from Python: dry_run set to a string after": Case(
        _python(change={"dry_run": "false"}), EXIT_USAGE, "dry_run='false' (--dry-run): must be True or False"
    ),
    "from Python: pairs set to None after": Case(
        _python(change={"pairs": None}), EXIT_USAGE, "give one of --model FOLDER, --pairs FILE and --space DATASET"
    ),
    "from Python: languages set to one string after": Case(
        _python(change={"languages": "en"}), EXIT_USAGE, "languages='en' (--languages): give a list of 2 strings"
    ),
    "from Python: include set on a pairs push after": Case(
        _python(change={"include": ["*"]}), EXIT_USAGE, "--include and --exclude choose files of a --model folder"
    ),
}


def _sidecar_file(tmp: Path, text: str) -> Path:
    (tmp / "meta.json").write_text(text, encoding="utf-8")
    return tmp / "meta.json"


def _sidecar_bytes(tmp: Path, data: bytes) -> list[str]:
    pairs = _tsv(tmp)
    (tmp / "pairs.tsv.meta.json").write_bytes(data)
    return ["--pairs", str(pairs)]


def _report_bytes(tmp: Path, data: bytes) -> list[str]:
    pairs = _tsv(tmp)
    (tmp / "pairs.tsv.threshold.png").write_bytes(b"\x89PNG")
    (tmp / "pairs.tsv.threshold.md").write_bytes(data)
    return ["--pairs", str(pairs)]


@pytest.fixture
def hub(monkeypatch, tmp_path) -> Hub:
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    monkeypatch.delenv("BITEXT_HF_MAX_INPUT_BYTES", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
    return Hub(monkeypatch)


@pytest.mark.parametrize("name", CASES)
def test_hostile_push(name, hub, tmp_path, capsys, monkeypatch):
    case = CASES[name]
    folder = tmp_path / "case"
    folder.mkdir()
    argv = case.setup(folder, monkeypatch) if case.patches else case.setup(folder)
    for variable, value in case.env.items():
        monkeypatch.setenv(variable, value)
    before = snapshot(folder)
    for name_gone in case.gone:
        before.pop(name_gone)
    capsys.readouterr()
    if callable(argv):
        monkeypatch.chdir(folder)  # the relative paths of a Python call
        code, err = python_call(argv)
        out, _ = capsys.readouterr()
    else:
        code = main(["push", *argv, "--repo", "me/mined", "--quiet"])
        out, err = capsys.readouterr()

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        assert line.startswith(("bitext-hf push: error: ", "python: error: ")) and case.message in line, line
        assert out == ""
    if case.then is not None:
        case.then(out)
    assert hub.calls == []  # nothing uploaded, not even a repository created
    left_as_before(folder, before)


# --- a stdout that cannot encode the text: a failed write (exit 1) that says how to fix it, never bad input (3)


def test_a_stdout_that_cannot_encode_the_preview_is_exit_1(hub, tmp_path, capsys, monkeypatch):
    import io

    pairs = _tsv(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    code = main(["push", "--pairs", str(pairs), "--repo", "me/mined", "--dry-run", "--quiet"])
    line = refusal_line(capsys.readouterr().err)
    assert code == EXIT_ERROR, line
    assert "writing to stdout failed: its encoding (ascii) cannot represent the text ('ä' (U+00E4))" in line
    assert "PYTHONIOENCODING=utf-8" in line
    assert hub.calls == []
    left_as_before(tmp_path, before)


@pytest.mark.slow
def test_pythonioencoding_ascii_in_a_fresh_process_is_exit_1(tmp_path):
    pairs = _tsv(tmp_path)
    (tmp_path / "pairs.tsv.meta.json").write_text('{"margin": "ratio"}', encoding="utf-8")  # no warning on stderr
    before = snapshot(tmp_path)
    environment = {**os.environ, "PYTHONIOENCODING": "ascii", "HF_HUB_OFFLINE": "1"}
    environment.pop("BITEXT_HF_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-m", "bitext_hf.cli", "push", "--pairs", str(pairs), "--repo", "me/m", "--dry-run", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert done.returncode == EXIT_ERROR, done.stderr
    line = refusal_line(done.stderr)
    # stderr is ascii too: Python writes what it cannot encode there as an escape (backslashreplace)
    assert "its encoding (ascii) cannot represent the text ('\\xe4' (U+00E4))" in line, line
    assert "PYTHONIOENCODING=utf-8" in line
    left_as_before(tmp_path, before)
