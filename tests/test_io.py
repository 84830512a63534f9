"""bitext_hf.io: outputs never destroy what sits at the path or leave temp files; inputs are read as users have them."""

from __future__ import annotations

import bz2
import errno
import gzip
import lzma
import os
import signal
import stat
import subprocess
import sys
import threading

import pytest

from bitext_hf.errors import DataValidationError, OutputWriteError, UsageError
from bitext_hf.io import atomic_output, check_output_path, open_input, read_input_bytes

DATA = "Hallo Welt\nZweite Zeile\n" * 50


def leftovers(folder) -> list[str]:
    return sorted(name for name in os.listdir(folder) if ".bitext-hf-" in name)


# ------------------------------------------------------------------------------------------------ atomic_output


def test_regular_file_is_replaced_atomically_and_temp_removed_on_error(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_output(out) as handle:
        handle.write("partial")
        raise RuntimeError("boom")
    assert out.read_text() == "old" and leftovers(tmp_path) == []
    with atomic_output(out) as handle:
        handle.write("new")
    assert out.read_text() == "new" and leftovers(tmp_path) == []


def test_signal_handlers_only_while_writing(tmp_path):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with atomic_output(tmp_path / "out.txt") as handle:
        handle.write("x")
        assert signal.getsignal(signal.SIGTERM) is not before[0]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_fifo_is_written_directly_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    with atomic_output(fifo) as handle:
        handle.write(DATA)
    reader.join(timeout=10)
    assert received == [DATA]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and leftovers(tmp_path) == []


def char_device(folder, name: str, minor: int) -> str:
    """A private copy of /dev/null (minor 3) or /dev/full (minor 7) in ``folder``: these tests are also run against
    old code to see them fail, and as root the old code replaced the system's /dev/null and /dev/full."""
    path = os.path.join(folder, name)
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
        with open(path, "wb"):
            pass  # a folder mounted nodev refuses to open device nodes
    except OSError:
        if os.geteuid() == 0:
            pytest.skip("cannot create a device node here, and the real one must not be put at risk as root")
        return f"/dev/{name}"  # a user who cannot create device nodes cannot replace the real ones either
    return path


def test_char_device_stays_a_character_device(tmp_path):
    null = char_device(tmp_path, "null", 3)
    before = os.stat(null)
    with atomic_output(null, "wb") as handle:
        handle.write(b"x" * 1000)
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_dash_writes_to_stdout(capsys):
    with atomic_output("-") as handle:
        handle.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


def test_symlink_is_kept_and_its_target_written(tmp_path):
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with atomic_output(link) as handle:
        handle.write("new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new" and leftovers(tmp_path) == []


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_new_file_honours_umask(tmp_path, umask, expected):
    previous = os.umask(umask)
    try:
        with atomic_output(tmp_path / "out.bin", "wb") as handle:
            handle.write(b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(tmp_path / "out.bin").st_mode) == expected


def test_existing_file_keeps_its_mode(tmp_path):
    out = tmp_path / "out.txt"
    out.write_text("old")
    out.chmod(0o640)
    with atomic_output(out) as handle:
        handle.write("new")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640


_WRITER = """
import sys, time
from bitext_hf.io import atomic_output
with atomic_output(sys.argv[1]) as handle:
    handle.write("partial")
    handle.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_mid_write_removes_temp_file(tmp_path, signum, status):
    out = tmp_path / "big.txt"
    # A shell runs the writer so that its exit status is the conventional 128 + signal number. The signal's default
    # disposition is restored first: a test run started in the background (`cmd &` in a script) inherits SIGINT as
    # ignored, and atomic_output rightly leaves an ignored signal ignored.
    process = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" -c "$0" "$1"', _WRITER, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    assert process.stdout.readline() == "writing\n"
    assert len(leftovers(tmp_path)) == 1
    python = _children(process.pid)  # the shell may have exec'd python itself
    os.kill(python[0] if python else process.pid, signum)
    process.wait(timeout=20)
    assert process.returncode in (status, -signum)
    assert leftovers(tmp_path) == [] and not out.exists()


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def test_leftover_of_a_killed_run_is_removed_by_the_next_write(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".out.txt.bitext-hf-{dead.pid}-0123abcd.tmp"
    stale.write_text("half of a killed write")
    alive = tmp_path / f".out.txt.bitext-hf-{os.getppid()}-0123abcd.tmp"  # a live process's write: kept
    alive.write_text("in progress")
    other = tmp_path / f".other.txt.bitext-hf-{dead.pid}-0123abcd.tmp"  # another output's: not ours to judge
    other.write_text("x")
    with atomic_output(tmp_path / "out.txt") as handle:
        handle.write("new")
    assert not stale.exists() and alive.exists() and other.exists()


def test_full_disk_raises_output_write_error(tmp_path):
    path = char_device(tmp_path, "full", 7)
    full = pytest.raises(OutputWriteError, match=r"^\S*full: no space left on device")
    with full, atomic_output(path) as handle:
        handle.write("x" * 100_000)
    assert stat.S_ISCHR(os.stat(path).st_mode)


def test_full_disk_on_regular_file_leaves_nothing(tmp_path):
    full = pytest.raises(OutputWriteError, match=r"out\.txt: no space left on device; nothing was written$")
    with full, atomic_output(tmp_path / "out.txt") as handle:
        handle.write("x")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # what a write on a full disk raises
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------------------------------- check_output_path


def test_check_output_path_refuses_an_input(tmp_path):
    (tmp_path / "a").mkdir()
    src = tmp_path / "a" / "a.txt"
    src.write_text("x\n")
    (tmp_path / "alias.txt").symlink_to(src)
    for same in (src, tmp_path / "a" / ".." / "a" / "a.txt", tmp_path / "alias.txt"):
        with pytest.raises(UsageError, match="is the input"):
            check_output_path(same, inputs=[None, "-", tmp_path / "b.txt", src])
    os.link(src, tmp_path / "hard.txt")
    with pytest.raises(UsageError, match=r"^--pairs .*hard\.txt: is the input"):
        check_output_path(tmp_path / "hard.txt", inputs=[src], option="--pairs")
    check_output_path(tmp_path / "new.txt", inputs=[src, None, "-"])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda tmp: "", "empty output path"),
        (lambda tmp: "   ", "empty output path"),
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: tmp / "missing" / "out.txt", "does not exist"),
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "out.txt", "is not a folder"),
    ],
)
def test_check_output_path_refuses_unusable_paths(tmp_path, make, message):
    with pytest.raises(UsageError, match=message):
        check_output_path(make(tmp_path))


def test_check_output_path_refuses_an_unwritable_folder(tmp_path):
    # As root a chmod-555 folder is still writable; an immutable one (chattr +i) is not, and the probe (create and
    # remove a file) notices where a look at the mode bits would not.
    folder = tmp_path / "locked"
    folder.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not available here")
    else:
        folder.chmod(0o555)
    try:
        with pytest.raises(UsageError, match=r"locked/out\.txt: folder .*locked is not writable"):
            check_output_path(folder / "out.txt")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def test_check_output_path_accepts_stdout_and_devices(tmp_path):
    check_output_path("-", inputs=["-"])
    check_output_path("/dev/null", inputs=["/dev/null"])  # no write: the real device is safe here
    check_output_path(tmp_path / "out.txt")
    assert os.listdir(tmp_path) == []  # the probe leaves nothing


# -------------------------------------------------------------------------------------------------- inputs


def _zstd(data: bytes) -> bytes:
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


COMPRESSORS = {".gz": gzip.compress, ".xz": lzma.compress, ".bz2": bz2.compress, ".zst": _zstd}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_compressed_files_are_read_transparently(tmp_path, suffix):
    path = tmp_path / f"corpus.txt{suffix}"
    packed = COMPRESSORS[suffix](DATA.encode())
    path.write_bytes(packed)
    assert read_input_bytes(path) == DATA.encode()
    with open_input(path, "r") as handle:
        assert handle.readline() == "Hallo Welt\n"
    (tmp_path / f"cut{suffix}").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(DataValidationError, match=rf"cut\{suffix}: corrupt or truncated"):
        read_input_bytes(tmp_path / f"cut{suffix}")
    (tmp_path / f"junk{suffix}").write_bytes(b"not compressed at all, " * 4)
    with pytest.raises(DataValidationError, match=rf"junk\{suffix}: corrupt or truncated"):
        read_input_bytes(tmp_path / f"junk{suffix}")


_CAT = "import sys; from bitext_hf.io import read_input_bytes; sys.stdout.buffer.write(read_input_bytes(sys.argv[1]))"


@pytest.mark.parametrize("suffix", ["", *sorted(COMPRESSORS)])
def test_stdin_and_process_substitution_are_sniffed(tmp_path, suffix):
    packed = COMPRESSORS[suffix](DATA.encode()) if suffix else DATA.encode()
    path = tmp_path / "corpus.bin"  # no telling extension: the magic bytes decide
    path.write_bytes(packed)
    with path.open("rb") as stdin:
        result = subprocess.run([sys.executable, "-c", _CAT, "-"], stdin=stdin, capture_output=True, timeout=60)
    assert result.stdout == DATA.encode(), result.stderr
    # bash's <(cat file) hands the program /dev/fd/N, a pipe that can be read once and never seeked
    script = f'"{sys.executable}" -c "$0" <(cat "$1")'
    result = subprocess.run(["bash", "-c", script, _CAT, str(path)], capture_output=True, timeout=60)
    assert result.stdout == DATA.encode(), result.stderr


def test_text_that_starts_like_bzip2_is_text():
    text = b"BZh9 is how a bzip2 file starts\n"
    result = subprocess.run([sys.executable, "-c", _CAT, "-"], input=text, capture_output=True, timeout=60)
    assert result.stdout == text, result.stderr


def test_unreadable_inputs_name_the_file(tmp_path):
    with pytest.raises(DataValidationError, match=r"missing\.txt: no such file"):
        read_input_bytes(tmp_path / "missing.txt")
    with pytest.raises(DataValidationError, match="is a directory"):
        read_input_bytes(tmp_path)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.txt"
        locked.write_text("x")
        locked.chmod(0)
        with pytest.raises(DataValidationError, match="permission denied"):
            read_input_bytes(locked)


def test_open_input_leaves_callers_errors_alone(tmp_path):
    path = tmp_path / "a.txt.gz"
    path.write_bytes(gzip.compress(b"x\n"))
    with pytest.raises(OutputWriteError), open_input(path) as handle:
        handle.read()
        raise OutputWriteError("out.txt: no space left on device; nothing was written")


def test_dev_stdout_redirected_to_a_file_keeps_what_was_printed_around_it(tmp_path):
    """``--out /dev/stdout > file`` used to reopen the file at offset 0, so the pairs and the report overlapped."""
    code = (
        "from bitext_hf.io import atomic_output\n"
        "print('before', flush=True)\n"
        "with atomic_output('/dev/stdout') as handle:\n"
        "    handle.write('pair 1\\npair 2\\n')\n"
        "print('after')\n"
    )
    target = tmp_path / "out.tsv"
    with open(target, "w") as handle:
        subprocess.run(
            [sys.executable, "-c", code],
            stdout=handle,
            check=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
    assert target.read_text() == "before\npair 1\npair 2\nafter\n"


def test_write_table_gives_each_format_its_own_cells(tmp_path):
    import json

    import pyarrow.parquet as pq

    from bitext_hf.io.tables import write_table

    columns = {"score": [0.5, 0.25], "lines": [[0, 1], [2]], "text": ["a,b", "c"]}
    options = {
        "cells": {"score": ["0.500000", "0.250000"], "lines": ["0,1", "2"]},
        "records": {"score": [0.5, 0.25]},
        "types": {"score": "float32", "lines": "list<int64>", "text": "string"},
    }
    for fmt in ("tsv", "csv", "jsonl", "parquet"):
        write_table(tmp_path / f"t.{fmt}", fmt, columns, **options)
    assert (tmp_path / "t.tsv").read_text() == "score\tlines\ttext\n0.500000\t0,1\ta,b\n0.250000\t2\tc\n"
    assert (tmp_path / "t.csv").read_bytes().decode().replace(
        "\r\n", "\n"
    ) == 'score,lines,text\n0.500000,"0,1","a,b"\n0.250000,2,c\n'
    assert [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()] == [
        {"score": 0.5, "lines": [0, 1], "text": "a,b"},
        {"score": 0.25, "lines": [2], "text": "c"},
    ]
    table = pq.read_table(tmp_path / "t.parquet")
    assert str(table.schema.field("score").type) == "float" and table.column("lines").to_pylist() == [[0, 1], [2]]
    write_table(tmp_path / "bare.tsv", "tsv", {"en": ["x"], "fr": ["y"]}, tsv_header=False)
    assert (tmp_path / "bare.tsv").read_text() == "x\ty\n"
    with pytest.raises(ValueError, match="unknown table format"):
        write_table(tmp_path / "t.xml", "xml", columns)
