"""What the hostile table of each job (tests/test_hostile_<job>.py: mine, score, encode, eval; the Python calls of
align, gettext, push, run_over_seeds and the MuSR recipe's run_stage too) shares: the row (:class:`Case`), the run of
one row and its checks (:func:`check_case`), a row's Python call (:func:`python_call`), what a row puts at an output's
name (:func:`special`), the setups every table builds from its command (:func:`at_output`, :func:`over_earlier`,
:func:`hardlink`, :func:`text_file`, :func:`earlier_run`), the failures a row simulates (a rename of the commit that
fails, a full disk) and the run in a subprocess that a signal interrupts while the job writes
(:func:`signal_while_writing`).

Every row runs in a fresh folder (the working directory), with the fake encoder of tests/cli_fakes.py, and asserts the
contract of every job: the documented exit code; on failure one stderr line without a traceback naming the problem;
a refusal of the command line or of a path before any encoder is loaded (the work never starts); every file that was
there before byte-identical (an earlier run's outputs included), but those the row lets the run write anew; nothing
created but the expected outputs (no temporary file); no marker of executed code; no hang (each table has a timeout:
a FIFO opened by mistake blocks).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from hostile_support import MARKER, refusal_line, snapshot

from bitext_hf.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, BitextError, describe_error

TESTS = os.path.dirname(os.path.abspath(__file__))
VICTIM = "victim.txt"  # a file outside every output: what a link at an output's name points to
TIMEOUT = pytest.mark.timeout(300)  # each table's ``pytestmark``: a FIFO opened by mistake blocks; fail, never hang

# A table's command: ``command(tmp, *arguments)`` builds the case's inputs in ``tmp`` (the working directory) and
# returns the command line after ``bitext-hf`` with ``arguments`` (``--out NAME`` and options) added.
Command = Callable[..., list[str]]


@dataclass
class Case:
    """One row: ``setup`` builds the case in its folder (the working directory) and returns the command line after
    ``bitext-hf`` (a list), or a Python call (a callable: the job run from Python, its exception the refusal)."""

    setup: Callable[[Path], list[str] | Callable[[], object]]
    code: int
    message: str = ""  # in the one stderr line of a refusal (or the message of a Python call's exception)
    absent: str = ""  # what that line must not say
    creates: tuple[str, ...] = ()  # what may appear, relative to the folder
    replaces: tuple[str, ...] = ()  # files there before that the run writes anew (the target of the user's link)
    patch: Callable[[pytest.MonkeyPatch], None] | None = None  # a failure simulated (a rename, a full disk)
    env: dict[str, str] = field(default_factory=dict)
    then: Callable[[Path], None] | None = None  # more checks on what the run left (successes)
    encodes: bool = False  # a failure that comes after the encoding (an output that cannot be written)
    stdout_encoding: str | None = None  # the run's stdout has this encoding (PYTHONIOENCODING=ascii, in-process)
    fifo: str | None = None  # a FIFO the case made: read by a thread while the command runs
    fifo_gets: bytes | None = None  # what the FIFO's reader must get first (b"": nothing at all)
    subprocess: bool = False  # run as its own process (what a fresh interpreter prints on stderr: nothing with -q)
    slow: bool = False  # in the slow set (`pytest -m slow`)


def params(cases: dict[str, Case]) -> list:
    """The table's rows for ``pytest.mark.parametrize("name", ...)``: the slow ones marked."""
    return [pytest.param(name, marks=pytest.mark.slow) if case.slow else name for name, case in cases.items()]


def corpus(tmp: Path) -> tuple[str, str]:
    """``src.txt`` and ``tgt.txt`` (translations of each other, in another order) and the victim."""
    (tmp / VICTIM).write_text("a file outside the outputs\n", encoding="utf-8")
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def special(kind: str, path: Path) -> None:
    """A link to the victim (in the working directory), a FIFO, a socket, a device (a private /dev/null) or a folder
    at ``path``."""
    if kind == "link":
        os.symlink(os.path.abspath(VICTIM), path)
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError:
            pytest.skip("cannot create a device node here")
    elif kind == "folder":
        path.mkdir()
    else:
        raise ValueError(kind)


KINDS = {  # what is at an output's name -> the words of its refusal
    "link": "is a symbolic link",
    "FIFO": "is a FIFO",
    "socket": "is a socket",
    "device": "is a device",
    "folder": "is a folder",
}


def earlier(tmp: Path, *names: str) -> tuple[str, ...]:
    """An earlier run's outputs at ``names``, each with content no run writes (a file replaced shows); returns the
    names."""
    for name in names:
        (tmp / name).write_bytes(f"an earlier run's {name}\n".encode())
    return names


def at_output(
    command: Command, out: str, kind: str, *extra: str, at: str | None = None
) -> Callable[[Path], list[str]]:
    """A setup: ``command(tmp, "--out", out, *extra)`` with ``kind`` (see :func:`special`) at the name ``at`` the job
    writes (``out`` itself unless given: the sidecar, a threshold report beside it)."""

    def setup(tmp: Path) -> list[str]:
        argv = command(tmp, "--out", out, *extra)
        special(kind, tmp / (at or out))
        return argv

    return setup


def over_earlier(
    command: Command, out: str, *extra: str, names: tuple[str, ...] | None = None
) -> Callable[[Path], list[str]]:
    """A setup: an earlier run's outputs at ``names`` (``out`` alone unless given; see :func:`earlier`), and the run
    ``command(tmp, "--out", out, *extra)`` again over them."""

    def setup(tmp: Path) -> list[str]:
        argv = command(tmp, "--out", out, *extra)
        earlier(tmp, *(names or (out,)))
        return argv

    return setup


def earlier_run(*names: str) -> Callable[[Path], None]:
    """The setup of :func:`signal_while_writing` over an earlier run: the corpus and that run's outputs at
    ``names``."""

    def setup(work: Path) -> None:
        corpus(work)
        earlier(work, *names)

    return setup


def hardlink(tmp: Path, name: str, target: str | Path) -> Path:
    """A hard link ``tmp/name`` of ``target`` (an input, relative to the working directory or absolute); returns the
    link's path."""
    os.link(target, tmp / name)
    return tmp / name


def text_file(tmp: Path, name: str, text: str) -> str:
    """``tmp/name`` holding ``text`` (UTF-8; a pairs file, an MTEB file); returns its path."""
    (tmp / name).write_text(text, encoding="utf-8")
    return str(tmp / name)


def _in_case_folder(path) -> bool:
    """Whether ``path`` is in the case's folder (the working directory), not the encoding cache beside it."""
    return os.path.abspath(path).startswith(os.getcwd() + os.sep)


def _is_commit_rename(source, target) -> bool:
    """A rename of the commit (a temporary file onto an output of the case's folder), not a writer's rename onto its
    own temporary, nor the encoding cache's."""
    source, target = os.path.basename(os.fspath(source)), os.fspath(target)
    return ".bitext-hf-" in source and ".bitext-hf-" not in os.path.basename(target) and _in_case_folder(target)


def fail_rename(number: int) -> Callable[[pytest.MonkeyPatch], None]:
    """The ``number``-th rename of a temporary file onto an output fails (EIO); the others, and the commit's putting
    back of the earlier files, go through."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        real, seen = os.replace, []

        def replace(source, target, *args, **kwargs):
            if _is_commit_rename(source, target) and len(seen) < number:
                seen.append(target)
                if len(seen) == number:
                    raise OSError(errno.EIO, "Input/output error")
            return real(source, target, *args, **kwargs)

        monkeypatch.setattr(os, "replace", replace)

    return patch


def full_disk_at(number: int) -> Callable[[pytest.MonkeyPatch], None]:
    """The disk fills up as the ``number``-th output file of the case's folder is flushed to it (``fsync``: ENOSPC;
    the encoding cache's files are not counted)."""

    def patch(monkeypatch: pytest.MonkeyPatch) -> None:
        real, calls = os.fsync, []

        def fsync(descriptor):
            if not _in_case_folder(os.readlink(f"/proc/self/fd/{descriptor}")):
                return real(descriptor)
            calls.append(descriptor)
            if len(calls) == number:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(descriptor)

        monkeypatch.setattr(os, "fsync", fsync)

    return patch


def _run_process(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    environment = {**os.environ, **env}
    for variable in [name for name, value in env.items() if not value]:
        environment.pop(variable)
    done = subprocess.run(
        [sys.executable, "-m", "bitext_hf.cli", *argv], env=environment, capture_output=True, text=True, timeout=240
    )
    return done.returncode, done.stderr


@contextlib.contextmanager
def _fifo_reader(path: Path | None) -> Iterator[list[bytes]]:
    """Read the FIFO at ``path`` in a thread while the block runs; its content is in the list after the block (a
    writer that never came: the reader is let go with an end of file)."""
    received: list[bytes] = []
    if path is None:
        yield received
        return
    reader = threading.Thread(target=lambda: received.append(path.read_bytes()), daemon=True)
    reader.start()
    try:
        yield received
    finally:
        with contextlib.suppress(OSError):  # ENXIO: the reader is not waiting any more (the command wrote)
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=30)


def python_call(action: Callable[[], object]) -> tuple[int, str]:
    """Run a row's Python call: ``(EXIT_OK, "")`` when it returns; else the exit code the command line gives its
    exception and the line it would print, ``python: error: MESSAGE``. An exception that is not one of the package's
    own (bitext_hf.errors: a TypeError from deep inside, an AttributeError) is exit 1 and says so, whatever
    ``describe_error`` makes of it: a row that expects a refusal fails on it."""
    try:
        action()
    except Exception as error:
        code, message = describe_error(error)
        if not isinstance(error, BitextError):
            code, message = EXIT_ERROR, f"{type(error).__name__} is not one of the package's errors: {message}"
        return code, f"python: error: {message}\n"
    return EXIT_OK, ""


def check_case(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Run one row (see the module docstring)."""
    fakes = install_fake_encoders(monkeypatch)
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    monkeypatch.chdir(tmp_path)
    action = case.setup(tmp_path)
    encoded, loaded = fakes.n_encoded, len(fakes.loaded)
    capsys.readouterr()
    before = snapshot(tmp_path)
    if case.subprocess:
        code, err = _run_process(action, case.env)
    else:
        for variable, value in case.env.items():
            monkeypatch.setenv(variable, value)
        if case.stdout_encoding:
            monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding=case.stdout_encoding))
        with pytest.MonkeyPatch.context() as patched, _fifo_reader(case.fifo and tmp_path / case.fifo) as received:
            if case.patch is not None:
                case.patch(patched)  # os.replace, os.fsync...: back as they were before the checks
            if callable(action):
                code, err = python_call(action)
            else:
                try:
                    code, _, err = run(capsys, *action)
                except SystemExit as exit:  # argparse's own refusals
                    code, err = exit.code, capsys.readouterr().err
        if case.fifo_gets is not None:
            assert received and received[0].startswith(case.fifo_gets), received
            assert case.fifo_gets or received[0] == b"", received

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        assert ": error: " in line and case.message in line, line
        assert not case.absent or case.absent not in line, line
        if not case.encodes:  # refused before any work: no encoder loaded, nothing encoded
            assert (len(fakes.loaded), fakes.n_encoded) == (loaded, encoded), err
    elif case.subprocess:
        assert err == "", err  # -q: not a word from the package, none from the libraries underneath
    after = snapshot(tmp_path)
    kept = {path: entry for path, entry in before.items() if path not in case.replaces}
    assert {path: after.get(path) for path in kept} == kept  # every input, the earlier outputs, the victim
    for path in case.replaces:
        assert after[path] != before[path] and after[path][0] == "file", path
    assert sorted(set(after) - set(before)) == sorted(case.creates)
    assert not (tmp_path / MARKER).exists(), "hostile code ran"
    if case.then is not None:
        case.then(tmp_path)


# ------------------------------------------------------------------------------ a signal while the job writes

# The CLI with the fake encoder in a fresh interpreter; the function TARGET ("module:name" or "module:Class.name") is
# wrapped so that, after its first call returns, the process marks the folder above and sleeps: the signal lands
# while the job writes its outputs (some written to their temporary files, none committed).
_WRITING_CLI = """
import importlib, sys, time
sys.path.insert(0, sys.argv.pop(1))
target = sys.argv.pop(1)
import bitext_hf.encoders
from cli_fakes import FakeEncoders
bitext_hf.encoders.load_encoder = FakeEncoders()
module, name = target.split(":")
owner = importlib.import_module(module)
*path, name = name.split(".")
for part in path:
    owner = getattr(owner, part)
real, calls = getattr(owner, name), []

def slow(*args, **kwargs):
    result = real(*args, **kwargs)
    calls.append(1)
    if len(calls) == 1:
        open("../writing", "w").close()
        time.sleep(60)
    return result

setattr(owner, name, slow)
from bitext_hf.cli import main
sys.exit(main(sys.argv[1:]))
"""


def signal_while_writing(tmp_path: Path, target: str, argv: list[str], signum: int, setup: Callable[[Path], None]):
    """Run ``bitext-hf ARGV -q`` in ``tmp_path/work`` (made by ``setup``), send ``signum`` once the job is inside
    ``target``, and check: the conventional status (130 with one line for SIGINT, death by SIGTERM), no traceback, and
    the folder exactly as before (no output replaced, no temporary file, no folder made)."""
    work = tmp_path / "work"  # the marker goes beside it, outside the snapshot
    work.mkdir()
    setup(work)
    before = snapshot(work)
    env = {**os.environ, "BITEXT_HF_EMBEDDING_CACHE": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITING_CLI, TESTS, target, *argv, "-q"],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / "writing").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    status = EXIT_INTERRUPTED if signum == signal.SIGINT else -signal.SIGTERM
    assert process.returncode == status, err
    assert "Traceback" not in err
    if signum == signal.SIGINT:
        assert "interrupted" in refusal_line(err)
    assert snapshot(work) == before
