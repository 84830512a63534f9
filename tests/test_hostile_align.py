"""Hostile and careless uses of ``bitext-hf align``, one table: folders and lists of documents with links, FIFOs,
sockets, devices and folders at output names, an ``--out`` that is an input folder or no folder, a second run that
fails over the first one's outputs, documents in subfolders, options the search cannot honour; then signals during the
encoding and the writes (subprocesses), a FIFO that must not block, and a full disk. The job from Python too
(``run_alignment``): paths of another type, values of the wrong type or absurd, a config that is none, a field changed
after the config was made, a ``load_encoder`` that cannot be called: refused as the command line's options are, with
the package's own errors, before anything is read.

Each case builds its files in a fresh folder (two input folders ``de/`` and ``fr/`` of two documents each, their
lists, and a file outside everything, ``victim.txt``), runs the command with the fake encoder of tests/cli_fakes.py,
and asserts the house contract: the documented exit code, one stderr line without a traceback naming the problem (or
the one warning of a run that succeeds), every file that was there before byte-identical (an earlier run's outputs
included), nothing created but the expected outputs (no temporary file, no half-written folder), the encoder not
even loaded for a refusal, no hang.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from hostile_jobs import python_call
from hostile_support import MARKER, refusal_line, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from bitext_hf.errors import OutputWriteError

pytestmark = pytest.mark.timeout(120)  # a FIFO opened by mistake hangs: fail instead

FOLDERS = ["--src", "de", "--tgt", "fr"]
LISTS = ["--src-docs", "de.list", "--tgt-docs", "fr.list"]
OUTPUTS = ("one.txt.align", "two.txt.align", "alignment.meta.json")


def _corpus(tmp: Path) -> None:
    for side, sentences in (("de", SOURCES), ("fr", TARGETS)):
        (tmp / side).mkdir()
        write_lines(tmp / side / "one.txt", sentences)
        write_lines(tmp / side / "two.txt", sentences[:3])
        write_lines(tmp / f"{side}.list", [f"{side}/one.txt", f"{side}/two.txt"])
    (tmp / "victim.txt").write_text("a file outside the output folder\n")


def _aligned(tmp: Path) -> Path:
    (tmp / "aligned").mkdir(exist_ok=True)
    return tmp / "aligned"


def _special(kind: str, path: Path) -> None:
    """A link to the victim, a FIFO, a socket, a device (a private /dev/null) or a folder at ``path``."""
    if kind == "link":
        os.symlink(path.parent.parent / "victim.txt" if path.parent.name == "aligned" else "victim.txt", path)
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


def _earlier_run(tmp: Path, capsys) -> None:
    """A first, successful run into aligned/: its outputs are what a later run must not lose. Their beads are made
    unlike what the later run writes, so that a file it replaced shows."""
    code, _, err = run(capsys, "align", "--no-cache", *FOLDERS, "--out", "aligned")
    assert code == EXIT_OK and sorted(os.listdir(tmp / "aligned")) == sorted(OUTPUTS), err
    for name in OUTPUTS[:2]:
        (tmp / "aligned" / name).write_text("[0]:[0]:0.123456\n")


@dataclass
class Case:
    # builds the case in the folder (the working directory); returns the options, or a Python call (its exception
    # the refusal)
    setup: Callable[[Path], list[str] | Callable[[], object]]
    code: int
    message: str = ""  # in the one stderr line of a refusal, or in the one warning of a run that succeeds
    creates: tuple[str, ...] = ()  # what may appear (paths relative to the folder)
    replaces: tuple[str, ...] = ()  # an earlier run's outputs that this run writes anew
    earlier: bool = False  # a first run wrote aligned/ before the case is built
    patch: Callable[[pytest.MonkeyPatch], None] | None = None


def _out_special(kind: str, name: str, argv: list[str] = FOLDERS) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        _special(kind, _aligned(tmp) / name)
        return [*argv, "--out", "aligned"]

    return setup


def _one_pair_sidecar(kind: str) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        _special(kind, tmp / "book.align.meta.json")
        return ["--src", "de/one.txt", "--tgt", "fr/one.txt", "--out", "book.align"]

    return setup


def _out_is(kind: str, argv: list[str] = FOLDERS) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        _special(kind, tmp / "target")
        return [*argv, "--out", "target"]

    return setup


def _subfolders(tmp: Path) -> list[str]:
    for side in ("de", "fr"):
        (tmp / side / "chapter").mkdir()
        write_lines(tmp / side / "chapter" / "three.txt", SOURCES)
    return [*FOLDERS, "--out", "aligned"]


def _same_name_in_lists(tmp: Path) -> list[str]:
    for side in ("de", "fr"):
        (tmp / side / "b").mkdir()
        write_lines(tmp / side / "b" / "one.txt", SOURCES)
        write_lines(tmp / f"{side}.list", [f"{side}/one.txt", f"{side}/b/one.txt"])
    return [*LISTS, "--out", "aligned"]


def _hard_link_to_an_input(tmp: Path) -> list[str]:
    os.link(tmp / "de" / "two.txt", _aligned(tmp) / "two.txt.align")
    return [*FOLDERS, "--out", "aligned"]


def _long_name(tmp: Path) -> list[str]:
    for side in ("de", "fr"):
        write_lines(tmp / side / ("x" * 250), SOURCES)  # fits; its output's name, with .align, does not
    return [*FOLDERS, "--out", "aligned"]


def _other_files(tmp: Path) -> list[str]:
    (_aligned(tmp) / "notes.txt").write_text("someone's notes\n")
    (tmp / "aligned" / "old.align").write_text("[0]:[0]:0.5\n")
    return [*FOLDERS, "--out", "aligned"]


def _bad_document_next_time(tmp: Path) -> list[str]:
    for side in ("de", "fr"):
        (tmp / side / "three.txt").write_text("a|x\n\nb|x\n")  # an empty line: bad data
    return [*FOLDERS, "--out", "aligned"]


def _failing_second_write(monkeypatch: pytest.MonkeyPatch) -> None:
    from bitext_hf.data import alignment_files as output

    real, calls = output.write_alignment, []

    def failing(alignment, path, *args):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(alignment, path, *args)

    monkeypatch.setattr(output, "write_alignment", failing)


def _failing_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rename of the second output fails (the first is already in place): the commit puts the first back."""
    real, renamed = os.replace, []

    def replace(src, dst):
        if os.path.basename(dst).endswith(".align") and ".bitext-hf-" not in os.path.basename(dst):
            renamed.append(dst)
            if len(renamed) == 2:
                raise OSError(5, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def _read_only_folder(tmp: Path) -> list[str]:
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    _aligned(tmp).chmod(0o555)
    return [*FOLDERS, "--out", "aligned"]


def _python(load_encoder=None, *, change: dict | None = None, config=None, **fields):
    """A setup: ``run_alignment`` from Python, on the config of ``fields`` (de/one.txt and fr/one.txt unless given; no
    cache), with ``change`` set on it after it was made; or on ``config`` itself, whatever it is."""

    def setup(tmp: Path):
        from bitext_hf.jobs import AlignConfig, run_alignment

        def call():
            made = AlignConfig(**{"src": "de/one.txt", "tgt": "fr/one.txt", "no_cache": True, **fields})
            for name, value in (change or {}).items():
                setattr(made, name, value)
            return run_alignment(made if config is None else config(), load_encoder=load_encoder)

        return call

    return setup


def _linked_document(tmp: Path):
    os.symlink("de/one.txt", tmp / "link.txt")
    return _python(src="link.txt", out="book.align")(tmp)


NEW = tuple(f"aligned/{name}" for name in OUTPUTS)
BOOK = ("book.align", "book.align.meta.json")

CASES = {
    # Links, FIFOs, sockets, devices and folders where an output goes: refused before any reading, nothing opened.
    "a link named like a document's output in --out": Case(_out_special("link", "one.txt.align"), EXIT_USAGE,
                                                           "one.txt.align: is a symbolic link"),
    "a link at the folder's sidecar name": Case(_out_special("link", "alignment.meta.json"), EXIT_USAGE,
                                                "alignment.meta.json: is a symbolic link"),
    "a link at a listed document's output": Case(_out_special("link", "two.txt.align", LISTS), EXIT_USAGE,
                                                 "two.txt.align: is a symbolic link"),
    "a link at <out>.meta.json of one pair": Case(_one_pair_sidecar("link"), EXIT_USAGE,
                                                  "book.align.meta.json: is a symbolic link"),
    "a FIFO at a document's output name": Case(_out_special("FIFO", "one.txt.align"), EXIT_USAGE,
                                               "one.txt.align: is a FIFO"),
    "a FIFO at the folder's sidecar name": Case(_out_special("FIFO", "alignment.meta.json"), EXIT_USAGE,
                                                "alignment.meta.json: is a FIFO"),
    "a FIFO at <out>.meta.json of one pair": Case(_one_pair_sidecar("FIFO"), EXIT_USAGE,
                                                  "book.align.meta.json: is a FIFO"),
    "a socket at a document's output name": Case(_out_special("socket", "two.txt.align"), EXIT_USAGE,
                                                 "two.txt.align: is a socket"),
    "a device at a document's output name": Case(_out_special("device", "two.txt.align"), EXIT_USAGE,
                                                 "two.txt.align: is a device"),
    "a folder at a document's output name": Case(_out_special("folder", "two.txt.align"), EXIT_USAGE,
                                                 "two.txt.align: is a folder"),
    "a hard link to an input at a document's output name": Case(_hard_link_to_an_input, EXIT_USAGE,
                                                                "is the input"),
    # An --out that is an input folder, in one, or no folder.
    "--out is the --src folder": Case(lambda t: [*FOLDERS, "--out", "de"], EXIT_USAGE, "--out de: is the input folder"),
    "--out is the --tgt folder, with a slash": Case(lambda t: [*FOLDERS, "--out", "fr/"], EXIT_USAGE,
                                                    "is the input folder fr"),
    "--out inside an input folder": Case(lambda t: [*FOLDERS, "--out", "fr/aligned"], EXIT_USAGE,
                                         "--out fr/aligned: is inside the input folder fr"),
    "--out a link to an input folder": Case(lambda t: os.symlink("de", t / "alias") or [*FOLDERS, "--out", "alias"],
                                            EXIT_USAGE, "--out alias: is the input folder de"),
    "--out the folder of listed documents": Case(lambda t: [*LISTS, "--out", "fr"], EXIT_USAGE,
                                                 "--out fr: holds the listed document fr/one.txt"),
    "--out /dev/null for folders of documents": Case(lambda t: [*FOLDERS, "--out", "/dev/null"], EXIT_USAGE,
                                                     "--out /dev/null: is a device; a folder is needed"),
    "--out a FIFO for folders of documents": Case(_out_is("FIFO"), EXIT_USAGE, "--out target: is a FIFO"),
    "--out a socket for lists of documents": Case(_out_is("socket", LISTS), EXIT_USAGE, "--out target: is a socket"),
    "--out a link to a file for folders": Case(_out_is("link"), EXIT_USAGE, "--out target: many documents align into"),
    "--out a broken link for folders": Case(lambda t: os.symlink("nowhere", "target") or [*FOLDERS, "--out", "target"],
                                            EXIT_USAGE, "--out target: is a link to no folder"),
    "--out a file for folders of documents": Case(lambda t: [*FOLDERS, "--out", "victim.txt"], EXIT_USAGE,
                                                  "name a folder"),
    "--out - for lists of documents": Case(lambda t: [*LISTS, "--out", "-"], EXIT_USAGE, "name a folder"),
    "--out in a folder that does not exist": Case(lambda t: [*FOLDERS, "--out", "no/such"], EXIT_USAGE,
                                                  "--out no/such: folder no does not exist"),
    "--out a read-only folder": Case(_read_only_folder, EXIT_USAGE, "not writable"),
    "an output name longer than the file system allows": Case(_long_name, EXIT_USAGE, "the name is 256 bytes"),
    # What a run writes, and what it leaves.
    "--out a new folder": Case(lambda t: [*FOLDERS, "--out", "aligned"], EXIT_OK, creates=("aligned", *NEW)),
    "--out a folder holding other files": Case(_other_files, EXIT_OK, creates=NEW),
    "a second run over the first one's outputs": Case(lambda t: [*FOLDERS, "--out", "aligned"], EXIT_OK,
                                                      earlier=True, replaces=NEW[:2]),
    "a failed second run (a write fails)": Case(lambda t: [*FOLDERS, "--out", "aligned"], EXIT_ERROR,
                                                "two.txt.align: no space left on device", earlier=True,
                                                patch=_failing_second_write),
    "a failed second run (a rename of the commit fails)": Case(lambda t: [*FOLDERS, "--out", "aligned"], EXIT_ERROR,
                                                               "two.txt.align: input/output error", earlier=True,
                                                               patch=_failing_commit),
    "a failed first run (a write fails)": Case(lambda t: [*FOLDERS, "--out", "aligned"], EXIT_ERROR,
                                               "no space left on device", patch=_failing_second_write),
    "a second run refused for a bad document": Case(_bad_document_next_time, EXIT_DATA, "three.txt:2: empty line",
                                                    earlier=True),
    "documents in subfolders": Case(_subfolders, EXIT_OK, "left out of the alignment: 1 file(s) in subfolders of de",
                                    creates=("aligned", *NEW)),
    "two listed documents with the same output name": Case(_same_name_in_lists, EXIT_DATA,
                                                           "de.list:2: a second document named one.txt"),
    # Options the search cannot honour: refused before anything is read, or capped with a word.
    "a huge negative --skip": Case(lambda t: [*FOLDERS, "--skip=-1e308"], EXIT_USAGE, "skip=-1e+308 (--skip)"),
    "a huge positive --skip": Case(lambda t: [*FOLDERS, "--skip", "1e300"], EXIT_USAGE, "must be between -1000"),
    "a huge --top-k": Case(lambda t: [*FOLDERS, "--top-k", str(10**12)], EXIT_USAGE,
                           "top_k=1000000000000 (--top-k): must be at most 1000"),
    "--top-k above the target sentences": Case(lambda t: [*FOLDERS, "--top-k", "50", "--out", "aligned"], EXIT_OK,
                                               "top-k 50 is more than the 5 sentences", creates=("aligned", *NEW)),
    "--window far wider than the documents": Case(lambda t: [*FOLDERS, "--window", str(10**30), "--out", "aligned"],
                                                  EXIT_OK, creates=("aligned", *NEW)),
    "--max-align past the bead types": Case(lambda t: [*FOLDERS, "--max-align", "65"], EXIT_USAGE, "max_align"),
    # A pair classifier (--classifier) that cannot add its column: refused before anything is encoded.
    "--classifier with the vecalign format": Case(lambda t: [*FOLDERS, "--out", "aligned", "--classifier", "default"],
                                                  EXIT_USAGE, "--format vecalign is one bead a line"),
    "--classifier a missing folder": Case(lambda t: [*FOLDERS, "--out", "aligned", "--format", "tsv", "--classifier",
                                                     "missing"], EXIT_ENCODER, "cannot load a pair classifier"),
    "--classifier default with another --model": Case(lambda t: [*FOLDERS, "--out", "aligned", "--format", "jsonl",
                                                                 "--model", "other", "--classifier", "default"],
                                                      EXIT_USAGE, "'use-multilingual-v3', not 'other'"),
    # The job from Python: paths of another type work; a value of the wrong type, absurd, or set after the config was
    # made, a config that is none, a load_encoder that cannot be called: the package's own error, nothing read.
    "from Python: documents as pathlib.Path": Case(_python(src=Path("de/one.txt"), tgt=Path("fr/one.txt"),
                                                           out=Path("book.align")), EXIT_OK, creates=BOOK),
    "from Python: folders as pathlib.Path": Case(_python(src=Path("de"), tgt=Path("fr"), out=Path("aligned")),
                                                 EXIT_OK, creates=("aligned", *NEW)),
    "from Python: a link to a document": Case(_linked_document, EXIT_OK, creates=BOOK),
    "from Python: out as bytes": Case(_python(out=b"book.align"), EXIT_USAGE,
                                      "out=b'book.align' (--out): must be a string"),
    "from Python: src as a number": Case(_python(src=3), EXIT_USAGE, "src=3 (--src): must be a string"),
    "from Python: src None": Case(_python(src=None), EXIT_USAGE, "give --src and --tgt"),
    "from Python: src empty": Case(_python(src=""), EXIT_USAGE, "give --src and --tgt"),
    "from Python: a folder and a file": Case(_python(src="de"), EXIT_USAGE,
                                             "--src and --tgt must both be files or both be folders"),
    "from Python: src missing": Case(_python(src="nope.txt"), EXIT_DATA, "nope.txt: no such file"),
    "from Python: src the device /dev/null": Case(_python(src=os.devnull), EXIT_DATA, "/dev/null: file is empty"),
    "from Python: max_align as a string": Case(_python(max_align="5"), EXIT_USAGE,
                                               "max_align='5' (--max-align): must be an integer from 2 to 64"),
    "from Python: max_align True": Case(_python(max_align=True), EXIT_USAGE, "max_align=True (--max-align)"),
    "from Python: top_k negative": Case(_python(top_k=-1), EXIT_USAGE, "top_k=-1 (--top-k): must be an integer >= 1"),
    "from Python: skip NaN": Case(_python(skip=float("nan")), EXIT_USAGE,
                                  "skip=nan (--skip): must be a finite number"),
    "from Python: window infinite": Case(_python(window=float("inf")), EXIT_USAGE,
                                         "window=inf (--window): must be an integer >= 1"),
    "from Python: batch_size 10**30 as a float": Case(_python(batch_size=1e30), EXIT_USAGE,
                                                      "batch_size=1e+30 (--batch-size): must be an integer"),
    "from Python: threads 0": Case(_python(threads=0), EXIT_USAGE, "threads=0 (--threads): must be an integer >= 1"),
    "from Python: quiet a string": Case(_python(quiet="yes"), EXIT_USAGE, "quiet='yes' (-q): must be True or False"),
    "from Python: a dict for the config": Case(_python(config=lambda: {"src": "de/one.txt"}), EXIT_USAGE,
                                               "run_alignment takes an AlignConfig, not dict"),
    "from Python: None for the config": Case(_python(config=lambda: None), EXIT_USAGE,
                                             "run_alignment takes an AlignConfig, not NoneType"),
    "from Python: load_encoder not callable": Case(_python(load_encoder=5, out="book.align"), EXIT_USAGE,
                                                   "load_encoder=5: must be a callable"),
    "from Python: top_k set to a string after": Case(_python(change={"top_k": "3"}), EXIT_USAGE,
                                                     "top_k='3' (--top-k): must be an integer >= 1"),
    "from Python: out set to a number after": Case(_python(out="book.align", change={"out": 5}), EXIT_USAGE,
                                                   "out=5 (--out): must be a string"),
    "from Python: src set to None after": Case(_python(change={"src": None}), EXIT_USAGE, "give --src and --tgt"),
}  # fmt: skip


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_hostile_align(case, tmp_path, monkeypatch, capsys, caplog, fakes):
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path)
    if case.earlier:
        _earlier_run(tmp_path, capsys)
        fakes.loaded.clear()
    argv = case.setup(tmp_path)
    before = snapshot(tmp_path)
    if case.patch:
        case.patch(monkeypatch)
    with caplog.at_level("WARNING", logger="bitext_hf"):
        if callable(argv):
            code, err = python_call(argv)
        else:
            code, _, err = run(capsys, "align", "--no-cache", *argv)
    assert code == case.code, err
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    if case.code != EXIT_OK:
        assert case.message in refusal_line(err), err
    else:  # a success says its word in one warning (on stderr from the command line), or nothing
        assert err.strip() == "" and len(warnings) == bool(case.message), (err, warnings)
        assert case.message in "".join(warnings)
    if case.code == EXIT_USAGE:
        assert fakes.loaded == []  # refused before the encoder is even loaded
    after = snapshot(tmp_path)
    kept = {path: entry for path, entry in before.items() if path not in case.replaces}
    assert {path: after.get(path) for path in kept} == kept  # every input, the earlier outputs, the victim
    assert all(after[path] != before[path] and after[path][0] == "file" for path in case.replaces)
    assert sorted(set(after) - set(before)) == sorted(case.creates)
    assert not (tmp_path / MARKER).exists()
    if case.code == EXIT_OK and "aligned/alignment.meta.json" in after:  # the sidecar lists what this run wrote
        assert json.loads((tmp_path / "aligned" / "alignment.meta.json").read_text())["documents"] == [
            "one.txt",
            "two.txt",
        ]


def test_a_fifo_named_as_the_output_of_one_pair_is_written_directly(tmp_path, monkeypatch, capsys, fakes):
    """The user's own FIFO as --out (a stream, as today): written straight through, no sidecar, no replacement."""
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path)
    os.mkfifo("pipe")
    received = []
    import threading

    reader = threading.Thread(target=lambda: received.append(Path("pipe").read_text()))
    reader.start()
    code, _, err = run(capsys, "align", "--no-cache", "--src", "de/one.txt", "--tgt", "fr/one.txt", "--out", "pipe")
    reader.join(timeout=30)
    assert code == EXIT_OK, err
    assert received and received[0].startswith("[0]:[") and stat.S_ISFIFO(os.lstat("pipe").st_mode)
    assert not Path("pipe.meta.json").exists()


# ------------------------------------------------------------------------------------- signals, in subprocesses

# The CLI with a fake encoder in a fresh interpreter: it marks the folder when it starts encoding and when it has
# written its first output's temporary file, and sleeps at whichever of the two the test sends its signal.
_SLOW_CLI = """
import os, sys, time
sys.path.insert(0, sys.argv.pop(1))
wait_at = sys.argv.pop(1)
import numpy as np
import bitext_hf.encoders
from bitext_hf.data import alignment_files as output
from cli_fakes import fake_embedding
from bitext_hf.cli import main

class Slow:
    def encode(self, sentences, batch_size=64, show_progress=False):
        open("encoding", "w").close()
        if wait_at == "encoding":
            time.sleep(60)
        return np.stack([fake_embedding(s) for s in sentences])

real = output.write_alignment

def slow_write(*args, **kwargs):
    real(*args, **kwargs)
    open("../writing", "w").close()
    if wait_at == "writing":
        time.sleep(60)

output.write_alignment = slow_write
bitext_hf.encoders.load_encoder = lambda spec=None, **kwargs: Slow()
sys.exit(main(sys.argv[1:]))
"""
_TESTS = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("wait_at", "signum", "status", "fresh"),
    [
        ("encoding", signal.SIGINT, EXIT_INTERRUPTED, False),
        ("encoding", signal.SIGTERM, -signal.SIGTERM, False),
        ("writing", signal.SIGINT, EXIT_INTERRUPTED, True),
        ("writing", signal.SIGINT, EXIT_INTERRUPTED, False),
        ("writing", signal.SIGTERM, -signal.SIGTERM, True),
        ("writing", signal.SIGTERM, -signal.SIGTERM, False),
    ],
    ids=[
        "SIGINT while encoding",
        "SIGTERM while encoding",
        "SIGINT while writing a new folder",
        "SIGINT while writing over an earlier run",
        "SIGTERM while writing a new folder",
        "SIGTERM while writing over an earlier run",
    ],
)
def test_a_signal_leaves_the_inputs_and_the_earlier_outputs(
    tmp_path, monkeypatch, capsys, fakes, wait_at, signum, status, fresh
):
    work = tmp_path / "work"  # the markers go beside it, outside the snapshot
    work.mkdir()
    monkeypatch.chdir(work)
    _corpus(work)
    if not fresh:
        _earlier_run(work, capsys)
    before = snapshot(work)
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_CLI, _TESTS, wait_at, "align", "--no-cache", *FOLDERS, "--out", "aligned", "-q"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    marker = work / "encoding" if wait_at == "encoding" else tmp_path / "writing"
    try:
        deadline = time.monotonic() + 90
        while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, process.communicate()
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert "Traceback" not in err
    if status == EXIT_INTERRUPTED:
        assert "align: interrupted" in refusal_line(err)
    after = snapshot(work)
    after.pop("encoding", None)
    assert after == before  # no temporary file, no folder made, no output replaced


# ----------------------------------------------------------------------------------------------- a full disk


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (root only: skipped elsewhere)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_during_the_writes_leaves_the_earlier_outputs(tmp_path, monkeypatch, capsys, fakes, full_disk):
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path)
    out = full_disk / "aligned"
    code, _, err = run(capsys, "align", "--no-cache", *FOLDERS, "--out", str(out), "--format", "tsv")
    assert code == EXIT_OK, err
    before = snapshot(full_disk)
    # The second run's first document is new and small (it fits), its second too large for the disk.
    many = [f"{word} number {i} with some words to fill the disk|en" for i in range(400) for word in ("cat", "dog")]
    for side in ("de", "fr"):
        write_lines(tmp_path / side / "one.txt", ["owl|en", "fox|en"])
        write_lines(tmp_path / side / "two.txt", many)
    code, _, err = run(capsys, "align", "--no-cache", *FOLDERS, "--out", str(out), "--format", "tsv")
    assert code == EXIT_ERROR and "no space left on device" in refusal_line(err), err
    assert snapshot(full_disk) == before


def test_a_write_error_is_one_line(tmp_path, monkeypatch, capsys, fakes):
    """An OutputWriteError from a writer that takes a path names the output, not its temporary file."""
    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path)
    from bitext_hf.data import alignment_files as output

    def failing(alignment, path, *args):
        raise OutputWriteError(f"{path}: no space left on device; nothing was written")

    monkeypatch.setattr(output, "write_alignment", failing)
    code, _, err = run(capsys, "align", "--no-cache", *FOLDERS, "--out", "aligned")
    line = refusal_line(err)
    assert code == EXIT_ERROR and "aligned/one.txt.align: no space left" in line and ".bitext-hf-" not in line
    assert not Path("aligned").exists()
