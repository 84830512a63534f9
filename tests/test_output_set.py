"""bitext_hf.io.OutputSet: the files of one run, every path checked before the work, written to temporaries, committed
together (the ``last`` ones after the others) with SIGINT and SIGTERM held, or none of them; the earlier files stay
exactly as they were on any failure before or during the commit."""

from __future__ import annotations

import errno
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_support import snapshot

from bitext_hf.errors import OutputWriteError, UsageError
from bitext_hf.io import OutputSet, atomic_output, protect_inputs

pytestmark = pytest.mark.timeout(60)  # a FIFO opened by mistake would hang: fail instead


@pytest.fixture(autouse=True)
def _signals_unblocked_after():
    """A test that leaves SIGINT or SIGTERM blocked fails itself, not the later tests whose children inherit the mask."""
    yield
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()


def leftovers(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*") if ".bitext-hf-" in path.name)


@pytest.fixture
def earlier(tmp_path):
    """An output folder holding an earlier run's files and one file of someone else's."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.txt").write_text("old a")
    (out / "b.txt").write_text("old b")
    (out / "meta.json").write_text("old meta")
    (out / "notes.txt").write_text("not a run's")
    os.chmod(out / "a.txt", 0o640)
    return out


def _plan(out: Path, *names: str, inputs=(), input_folders=()) -> OutputSet:
    outputs = OutputSet(inputs=inputs, input_folders=input_folders)
    outputs.add_folder(out)
    for name in names:
        outputs.add(out / name, last=name == "meta.json")
    return outputs


def test_a_commit_writes_every_file_the_last_ones_last_and_leaves_the_rest(tmp_path, earlier, monkeypatch):
    outputs = _plan(earlier, "meta.json", "a.txt", "b.txt", "c.bin")
    assert outputs.targets == [str(earlier / n) for n in ("a.txt", "b.txt", "c.bin", "meta.json")]
    renamed, real_replace = [], os.replace
    monkeypatch.setattr(
        os, "replace", lambda src, dst: renamed.append(os.path.basename(dst)) or real_replace(src, dst)
    )
    with outputs:
        for name in ("meta.json", "a.txt", "b.txt"):
            with outputs.open(earlier / name) as handle:
                handle.write(f"new {name}")
        with outputs.staged(earlier / "c.bin") as path, atomic_output(path, "wb") as handle:
            handle.write(b"\x00new")  # a writer that takes a path, atomic itself
        assert leftovers(earlier) and (earlier / "a.txt").read_text() == "old a"  # nothing committed yet
        written = outputs.commit()
    assert [Path(path).name for path in written] == ["a.txt", "b.txt", "c.bin", "meta.json"]
    assert [name for name in renamed if not name.endswith(".tmp")] == ["a.txt", "b.txt", "c.bin", "meta.json"]
    assert (earlier / "a.txt").read_text() == "new a.txt" and (earlier / "c.bin").read_bytes() == b"\x00new"
    assert (earlier / "notes.txt").read_text() == "not a run's"  # not declared: left as it is
    assert stat.S_IMODE(os.stat(earlier / "a.txt").st_mode) == 0o640  # a replaced file keeps its mode
    assert leftovers(earlier) == []


def test_an_error_before_the_commit_leaves_the_earlier_files_exactly(tmp_path, earlier):
    before = snapshot(tmp_path)
    with pytest.raises(RuntimeError), _plan(earlier, "a.txt", "b.txt", "meta.json") as outputs:
        with outputs.open(earlier / "a.txt") as handle:
            handle.write("new")
        raise RuntimeError("the work failed")
    assert snapshot(tmp_path) == before


def test_a_folder_made_for_the_outputs_goes_when_nothing_is_committed(tmp_path):
    out = tmp_path / "new"
    outputs = _plan(out, "a.txt")
    assert not out.exists()  # made when the first file is written, not when planned
    with pytest.raises(KeyboardInterrupt), outputs:
        with outputs.open(out / "a.txt") as handle:
            handle.write("x")
        assert out.is_dir()
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []
    outputs = _plan(out, "a.txt")
    with outputs:
        with outputs.open(out / "a.txt") as handle:
            handle.write("x")
        (out / "someone-else's").write_text("y")  # put there meanwhile: the folder stays with it
    assert os.listdir(out) == ["someone-else's"]


@pytest.mark.parametrize("link_works", [True, False])
def test_a_failed_rename_during_the_commit_puts_every_file_back(tmp_path, earlier, monkeypatch, link_works):
    before = snapshot(tmp_path)
    outputs = _plan(earlier, "a.txt", "new.txt", "b.txt", "meta.json")
    real_replace, failed = os.replace, []

    def replace(src, dst):
        if os.path.basename(dst) == "b.txt" and not failed:  # the new b.txt's rename; putting back the old works
            failed.append(src)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    if not link_works:  # a file system without hard links: the old files are renamed aside instead
        monkeypatch.setattr(os, "link", lambda *args: (_ for _ in ()).throw(OSError(errno.EPERM, "no links")))
    with pytest.raises(OutputWriteError, match=r"b\.txt: input/output error; nothing was written"), outputs:
        for name in ("a.txt", "new.txt", "b.txt", "meta.json"):
            with outputs.open(earlier / name) as handle:
                handle.write("new")
        outputs.commit()
    assert snapshot(tmp_path) == before


def test_a_full_disk_names_the_target_not_its_temporary(tmp_path, earlier):
    before = snapshot(tmp_path)
    full = r"^\S*out/{}\.txt: no space left on device; nothing was written$"
    with _plan(earlier, "a.txt", "b.txt") as outputs:
        with pytest.raises(OutputWriteError, match=full.format("a")), outputs.open(earlier / "a.txt"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        with (
            pytest.raises(OutputWriteError, match=full.format("b")),
            outputs.staged(earlier / "b.txt") as path,
            atomic_output(path),
        ):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert snapshot(tmp_path) == before


def _special(kind: str, path: Path, tmp_path: Path) -> None:
    if kind == "symbolic link":
        (tmp_path / "victim").write_text("precious")
        os.symlink(tmp_path / "victim", path)
    elif kind == "FIFO":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "folder":
        path.mkdir()
    elif kind == "device":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError:
            pytest.skip("cannot create a device node here")


@pytest.mark.parametrize("kind", ["symbolic link", "FIFO", "socket", "folder", "device"])
def test_nothing_but_a_regular_file_is_replaced_and_nothing_is_opened(tmp_path, earlier, kind):
    _special(kind, earlier / "b.txt.new", tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(UsageError, match=rf"b\.txt\.new: is a {kind}; bitext-hf writes only regular files there"):
        _plan(earlier, "a.txt", "b.txt.new")
    assert snapshot(tmp_path) == before


def test_something_put_at_a_name_after_the_plan_is_not_replaced(tmp_path, earlier):
    (tmp_path / "victim").write_text("precious")
    outputs = _plan(earlier, "a.txt", "c.txt")
    with pytest.raises(UsageError, match=r"c\.txt: is a symbolic link"), outputs:
        for name in ("a.txt", "c.txt"):
            with outputs.open(earlier / name) as handle:
                handle.write("new")
        os.symlink(tmp_path / "victim", earlier / "c.txt")
        outputs.commit()
    assert (earlier / "a.txt").read_text() == "old a" and (tmp_path / "victim").read_text() == "precious"
    assert leftovers(earlier) == []


def test_inputs_input_folders_and_duplicates_are_refused(tmp_path, earlier):
    source = tmp_path / "src"
    source.mkdir()
    (source / "doc.txt").write_text("input")
    os.link(source / "doc.txt", earlier / "hard-link.txt")
    with pytest.raises(UsageError, match="is the input"):
        _plan(earlier, "hard-link.txt", inputs=[source / "doc.txt"])
    protect_inputs([source])  # the command's registry: every write consults it
    try:
        with pytest.raises(UsageError, match="is the input"):
            _plan(earlier, "hard-link.txt")
    finally:
        protect_inputs(())
    with pytest.raises(UsageError, match=r"--out .*src: is the input folder"):
        _plan(source, input_folders=[source])
    with pytest.raises(UsageError, match=r"--out .*src/sub: is inside the input folder"):
        _plan(source / "sub", input_folders=[source])
    os.symlink(source, tmp_path / "alias")
    with pytest.raises(UsageError, match="is the input folder"):
        _plan(tmp_path / "alias", input_folders=[source])
    outputs = _plan(earlier, "a.txt")
    with pytest.raises(UsageError, match="two outputs of this run have this name"):
        outputs.add(earlier / ".." / "out" / "a.txt")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: t / "missing" / "out", "folder .*missing does not exist"),
        (lambda t: t / "file" / "out", "file is not a folder"),
        (lambda t: t / "file", "file: is a file; a folder is needed here"),
        (lambda t: "/dev/null", "/dev/null: is a device; a folder is needed here"),
        (lambda t: t / ("x" * 300), "the name is 300 bytes"),
        (lambda t: "", "empty output path"),
    ],
)
def test_a_folder_that_cannot_hold_the_outputs_is_refused(tmp_path, make, message):
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match=message):
        OutputSet().add_folder(make(tmp_path))


def test_a_file_name_too_long_for_an_existing_folder_is_refused_as_such(tmp_path, earlier):
    # lstat of such a name fails (ENAMETOOLONG): nothing can be there, and the refusal says why.
    with pytest.raises(UsageError, match="the name is 300 bytes"):
        OutputSet().add(earlier / ("x" * 300))


def test_an_undeclared_or_twice_written_output_is_a_programming_error(tmp_path, earlier):
    with _plan(earlier, "a.txt") as outputs:
        with pytest.raises(ValueError, match="not declared"), outputs.open(earlier / "z.txt"):
            pass
        with outputs.open(earlier / "a.txt") as handle:
            handle.write("x")
        with pytest.raises(ValueError, match="written twice"), outputs.open(earlier / "a.txt"):
            pass


def test_a_leftover_of_a_killed_run_is_removed_when_the_target_is_written_again(tmp_path, earlier):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = earlier / f".a.txt.bitext-hf-{dead.pid}-0123abcd.tmp"
    stale.write_text("half of a killed run's file")
    inner = earlier / f"..b.txt.bitext-hf-{dead.pid}-0123abcd.tmp.bitext-hf-{dead.pid}-4567abcd.tmp"
    inner.write_text("half of a file a writer wrote to a temporary's path")
    alive = earlier / f".a.txt.bitext-hf-{os.getppid()}-0123abcd.tmp"  # a live process's write: kept
    alive.write_text("in progress")
    other = earlier / f".notes.txt.bitext-hf-{dead.pid}-0123abcd.tmp"  # not this run's output: not ours to judge
    other.write_text("x")
    with _plan(earlier, "a.txt", "b.txt") as outputs:
        with outputs.open(earlier / "a.txt") as handle:
            handle.write("new")
        outputs.commit()
    assert not stale.exists() and not inner.exists() and alive.exists() and other.exists()
    assert leftovers(earlier) == sorted([alive.name, other.name])


def test_a_signal_during_the_commit_is_held_until_every_file_is_renamed(tmp_path, earlier, monkeypatch):
    """SIGINT raised in the middle of the renames: they all happen, then Ctrl-C arrives, noted as coming after."""
    outputs = _plan(earlier, "a.txt", "b.txt", "meta.json")
    real_replace, sent = os.replace, []

    def replace(src, dst):
        if not sent:
            sent.append(dst)
            os.kill(os.getpid(), signal.SIGINT)  # blocked in this thread: pending until the commit ends
            time.sleep(0.05)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt) as interrupt, outputs:
        for name in ("a.txt", "b.txt", "meta.json"):
            with outputs.open(earlier / name) as handle:
                handle.write("new")
        outputs.commit()
    assert "they were all written" in " ".join(interrupt.value.__notes__)
    assert [(earlier / name).read_text() for name in ("a.txt", "b.txt", "meta.json")] == ["new"] * 3
    assert leftovers(earlier) == []
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # unblocked again


class Terminated(Exception):
    pass


def test_a_handler_of_the_application_runs_after_the_commit(tmp_path, earlier, monkeypatch):
    """SIGTERM handled by the application (here: an exception): delivered once the renames are done."""

    def handler(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        outputs = _plan(earlier, "a.txt", "b.txt")
        real_replace = os.replace

        def replace(src, dst):
            os.kill(os.getpid(), signal.SIGTERM)
            real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
        with pytest.raises(Terminated), outputs:
            for name in ("a.txt", "b.txt"):
                with outputs.open(earlier / name) as handle:
                    handle.write("new")
            outputs.commit()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (earlier / "a.txt").read_text() == (earlier / "b.txt").read_text() == "new"
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_handler_run_at_any_point_of_a_commit_leaves_no_signal_blocked(tmp_path, signum):
    """CPython runs a signal's current handler between any two bytecodes of the main thread, whatever its mask (another
    thread may have received the signal). Run at each bytecode of bitext_hf.io (traced) that a commit executes with the
    signal blocked, with SIGINT's Ctrl-C handler or an application's SIGTERM handler that raises: the mask ends as it
    was, the handler runs once, after the renames, and no temporary file stays."""
    from bitext_hf.io import temporary_files

    def application(number, frame):
        raise Terminated

    raised = KeyboardInterrupt if signum == signal.SIGINT else Terminated
    previous = signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else application)
    io_folder = os.path.dirname(temporary_files.__file__)

    def commit_with_the_handler_at(position: int, out: Path) -> tuple[int, int]:
        """A commit of two files, the current handler run at opcode ``position``: (exceptions raised, opcodes)."""
        seen = [0]

        def each_opcode(frame, event, arg):
            if event == "opcode" and signum in signal.pthread_sigmask(signal.SIG_BLOCK, []):
                seen[0] += 1
                if seen[0] == position:
                    signal.getsignal(signum)(signum, frame)
            return each_opcode

        def each_call(frame, event, arg):
            if not frame.f_code.co_filename.startswith(io_folder):
                return None
            frame.f_trace_opcodes = True
            return each_opcode

        out.mkdir()
        outputs = _plan(out, "a.txt", "b.txt")
        exceptions = 0
        try:
            with outputs:
                for name in ("a.txt", "b.txt"):
                    with outputs.open(out / name) as handle:
                        handle.write("new")
                sys.settrace(each_call)
                try:
                    outputs.commit()
                finally:
                    sys.settrace(None)
        except raised:
            exceptions += 1
        return exceptions, seen[0]

    try:
        _, opcodes = commit_with_the_handler_at(0, tmp_path / "count")
        assert opcodes > 50
        for position in range(1, opcodes + 1):
            out = tmp_path / str(position)
            exceptions, _ = commit_with_the_handler_at(position, out)
            assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set(), position
            assert exceptions == 1, position
            assert [(out / name).read_text() for name in ("a.txt", "b.txt")] == ["new", "new"], position
            assert leftovers(out) == [], position
            assert not temporary_files._COMMITTING and not temporary_files._RECEIVED, position
    finally:
        signal.signal(signum, previous)


_WRITER = """
import sys, time
from pathlib import Path
from bitext_hf.io import OutputSet
out = Path(sys.argv[1])
outputs = OutputSet()
outputs.add_folder(out)
for name in ("a.txt", "b.txt", "meta.json"):
    outputs.add(out / name, last=name == "meta.json")
with outputs:
    for name in ("a.txt", "b.txt"):
        with outputs.open(out / name) as handle:
            handle.write("new")
    print("writing", flush=True)
    time.sleep(60)
    outputs.commit()
"""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)])
@pytest.mark.parametrize("fresh", [True, False])
def test_a_signal_before_the_commit_leaves_the_earlier_state(tmp_path, earlier, signum, status, fresh):
    out = tmp_path / "fresh" if fresh else earlier
    before = snapshot(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    try:
        assert process.stdout.readline() == "writing\n"
        assert leftovers(out)
        process.send_signal(signum)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert snapshot(tmp_path) == before  # no temporary file, no folder made, the earlier files as they were


def test_the_output_a_user_names_is_checked_once(tmp_path, monkeypatch):
    """``--out`` and the files beside it: one look at whether it is a stream, one probe of the folder they share
    (the set's folder cache serves the --out too), and one identity check against the inputs for each, naming the
    option for --out (a hard link of an input given under another name is that input)."""
    import bitext_hf.io.outputs as outputs_module
    import bitext_hf.jobs.base as base

    source = tmp_path / "doc.txt"
    source.write_text("input")
    probes, streams = [], []
    real_probe, real_stream = outputs_module.folder_is_writable, base.writes_in_place
    monkeypatch.setattr(
        outputs_module, "folder_is_writable", lambda folder: probes.append(folder) or real_probe(folder)
    )
    monkeypatch.setattr(base, "writes_in_place", lambda path: streams.append(path) or real_stream(path))
    outputs = base.JobOutputs(inputs=[str(source)])
    assert outputs.add_out(str(tmp_path / "pairs.tsv")) is True
    outputs.add(tmp_path / "pairs.tsv.meta.json", last=True)
    assert probes == [str(tmp_path)] and streams == [str(tmp_path / "pairs.tsv")]
    os.link(source, tmp_path / "hard.tsv")
    with pytest.raises(UsageError, match=r"^--out .*hard\.tsv: is the input .*doc\.txt; writing it would destroy"):
        outputs.add_out(str(tmp_path / "hard.tsv"))
    with pytest.raises(UsageError, match=r"^\S*hard\.tsv: is the input .*doc\.txt; writing it would destroy"):
        outputs.add(tmp_path / "hard.tsv")
    assert probes == [str(tmp_path)]
