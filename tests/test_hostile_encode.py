"""Hostile and careless uses of ``bitext-hf encode``, one table: the one ``.npy`` it writes (a link the user names,
followed as always; a FIFO or a device, written directly; a socket or a folder; the input itself by name, link or hard
link), a rename of the commit or a disk that fails over an earlier ``.npy``, the shard folders (their own resumable
protocol: links, hard links, FIFOs and folders named like a shard or the manifest, a folder holding other files),
options that cannot act, the job called from Python with values of the wrong type, absurd values; then signals while
the job writes the ``.npy`` (subprocesses, in the slow set; those while it writes shards are in
tests/test_hostile_processes.py).

The contract each row asserts is tests/hostile_jobs.py's.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, write_lines
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
    special,
)

from bitext_hf.cli import EXIT_ERROR, EXIT_OK, EXIT_USAGE

pytestmark = TIMEOUT

OUT = "x.npy"


def _encode(tmp: Path, *extra: str) -> list[str]:
    corpus(tmp)
    return ["encode", "--input", "src.txt", *extra]


def _holds_the_embeddings(name: str):
    def check(tmp: Path) -> None:
        assert np.load(tmp / name).shape == (len(SOURCES), 16)

    return check


def _victim_holds_the_embeddings(tmp: Path) -> None:
    assert os.path.islink(tmp / OUT)
    _holds_the_embeddings(VICTIM)(tmp)


def _out_link_to_input(tmp: Path) -> list[str]:
    argv = _encode(tmp, "--out", OUT)
    os.symlink("src.txt", tmp / OUT)
    return argv


def _out_hard_link_of_input(tmp: Path) -> list[str]:
    argv = _encode(tmp, "--out", OUT)
    hardlink(tmp, OUT, "src.txt")
    return argv


def _shard_linked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.symlink("../corpus.txt", tmp / "emb" / "shard-00000.npy")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/"]


def _manifest_linked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.symlink("../corpus.txt", tmp / "emb" / "progress.json")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _shard_hardlinked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    hardlink(tmp, "emb/shard-00000.npy", src)
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _fifo_in_shard_folder(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.mkfifo(tmp / "emb" / "shard-00000.npy")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _in_shard_folder(kind: str, name: str):
    def setup(tmp: Path) -> list[str]:
        argv = _encode(tmp, "--out", "emb/", "--shard-size", "2")
        (tmp / "emb").mkdir()
        special(kind, tmp / "emb" / name)
        return argv

    return setup


def _foreign_file_in(folder: str):
    def setup(tmp: Path) -> list[str]:
        argv = _encode(tmp, "--out", folder)
        (tmp / folder).mkdir()
        (tmp / folder / "notes.txt").write_text("mine")
        return argv

    return setup


def _python(**options):
    def setup(tmp: Path):
        from bitext_hf.jobs import EncodeConfig, run_encoding

        src, _ = corpus(tmp)
        return lambda: run_encoding(EncodeConfig(input=src, **options))

    return setup


CASES: dict[str, Case] = {
    # --- the one .npy: the user's own link followed, a stream written directly, anything else refused first
    "--out a link to a file elsewhere": Case(
        at_output(_encode, OUT, "link"), EXIT_OK, replaces=(VICTIM,), then=_victim_holds_the_embeddings
    ),
    "--out a FIFO: the .npy written directly": Case(
        at_output(_encode, OUT, "FIFO"), EXIT_OK, fifo=OUT, fifo_gets=b"\x93NUMPY"
    ),
    "--out a device: written directly": Case(at_output(_encode, OUT, "device"), EXIT_OK),
    "--out /dev/null": Case(lambda t: _encode(t, "--out", os.devnull), EXIT_OK),
    "--out a socket": Case(at_output(_encode, OUT, "socket"), EXIT_USAGE, f"--out {OUT}: is a socket"),
    "--out a folder named x.npy holding a file": Case(
        _foreign_file_in(OUT), EXIT_USAGE, f"--out {OUT}: holds 'notes.txt', which is not a shard"
    ),
    "encode --out names its input": Case(
        lambda t: ["encode", "--input", corpus(t)[0], "--out", str(t / "src.txt")], EXIT_USAGE, "input"
    ),
    "--out a link to the input": Case(_out_link_to_input, EXIT_USAGE, "is the input"),
    "--out a hard link of the input": Case(_out_hard_link_of_input, EXIT_USAGE, "is the input"),
    "--out in a missing folder": Case(lambda t: _encode(t, "--out", "no/x.npy"), EXIT_USAGE, "does not exist"),
    # --- over an earlier .npy: the new one or the earlier one, whole
    "a second run replaces the .npy": Case(
        over_earlier(_encode, OUT), EXIT_OK, replaces=(OUT,), then=_holds_the_embeddings(OUT)
    ),
    "the commit's rename fails": Case(
        over_earlier(_encode, OUT), EXIT_ERROR, f"{OUT}: input/output error", patch=fail_rename(1), encodes=True
    ),
    "a full disk as the .npy is written": Case(
        over_earlier(_encode, OUT),
        EXIT_ERROR,
        f"{OUT}: no space left on device",
        patch=full_disk_at(1),
        encodes=True,
    ),
    # --- shard folders: their own protocol, every file checked before the text is read
    "a shard named link to the input": Case(_shard_linked_to_input, EXIT_USAGE, "symbolic link"),
    "a progress file linked to the input": Case(_manifest_linked_to_input, EXIT_USAGE, "symbolic link"),
    "a shard hard-linked to the input": Case(_shard_hardlinked_to_input, EXIT_USAGE, "is the input"),
    "a FIFO named like a shard": Case(_fifo_in_shard_folder, EXIT_USAGE, "not a regular file"),
    "a link at the manifest's name": Case(
        _in_shard_folder("link", "manifest.json"), EXIT_USAGE, "manifest.json is a symbolic link"
    ),
    "a folder named like a shard": Case(
        _in_shard_folder("folder", "shard-00000.npy"), EXIT_USAGE, "shard-00000.npy is a folder"
    ),
    "shard folder holds a foreign file": Case(
        lambda t: (
            ["encode", "--input", corpus(t)[0], "--out", str(t / "emb") + "/"]
            if (t / "emb").mkdir() is None and (t / "emb" / "notes.txt").write_text("mine")
            else []
        ),
        EXIT_USAGE,
        "not a shard",
    ),
    # --- options that cannot act
    "encode --cache-dir with --no-cache": Case(
        lambda t: ["encode", "--input", corpus(t)[0], "--out", str(t / "e.npy"), "--cache-dir", "c", "--no-cache"],
        EXIT_USAGE,
        "--no-cache turns off",
    ),
    "--shard-size with one .npy": Case(
        lambda t: _encode(t, "--out", OUT, "--shard-size", "2"), EXIT_USAGE, "--shard-size and --resume are for a"
    ),
    "--resume with one .npy": Case(
        lambda t: _encode(t, "--out", OUT, "--resume"), EXIT_USAGE, "--shard-size and --resume are for a folder"
    ),
    "--workers without --distributed": Case(
        lambda t: _encode(t, "--out", OUT, "--workers", "2"), EXIT_USAGE, "--workers go with --distributed ray"
    ),
    # --- absurd values
    "--shard-size 10**18": Case(lambda t: _encode(t, "--out", "emb/", "--shard-size", str(10**18)), EXIT_OK,
                                creates=("emb", "emb/manifest.json", "emb/shard-00000.npy")),
    "--batch-size 10**12": Case(lambda t: _encode(t, "--out", OUT, "--batch-size", str(10**12)), EXIT_OK,
                                creates=(OUT,)),
    "--max-line-chars 0": Case(lambda t: _encode(t, "--out", OUT, "--max-line-chars", "0"), EXIT_USAGE,
                               "must be an integer >= 1"),
    "--dtype int8": Case(lambda t: _encode(t, "--out", OUT, "--dtype", "int8"), EXIT_USAGE,
                         "must be one of float32, float16"),
    # --- the job from Python
    "out as a pathlib.Path": Case(_python(out=Path(OUT)), EXIT_OK, creates=(OUT,), then=_holds_the_embeddings(OUT)),
    "out as a number": Case(_python(out=7), EXIT_USAGE, "out=7 (--out): must be a string"),
    "dtype as a numpy type": Case(_python(out=OUT, dtype=np.float16), EXIT_USAGE, "(--dtype): must be"),
}  # fmt: skip


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_encode(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_writing_leaves_the_earlier_npy(tmp_path, signum):
    argv = ["encode", "--input", "src.txt", "--out", OUT, "--no-cache"]
    signal_while_writing(tmp_path, "numpy:save", argv, signum, earlier_run(OUT))
