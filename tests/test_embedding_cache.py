"""The encoding cache can only make a run faster: every hostile entry (damaged, swapped, non-finite, not a regular
file, a link to an input) and every cache that cannot be written gives the pairs of a run without the cache, one
warning, inputs untouched and no hang; ``encode --out FOLDER/`` writes its shards from the cache without loading
the encoder."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_OK
from bitext_hf.encoding import cache as embedding_cache
from bitext_hf.encoding.cache import EmbeddingCache

# A FIFO at an entry's path blocked the run forever: a regression must fail the test, not hang the suite.
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


def _key(texts) -> str:
    return EmbeddingCache().key(texts, None)  # the CLI's default --model and --pooling


def _entry(cache, texts=SOURCES):
    return EmbeddingCache(cache).path(_key(texts))


def _write_entry(path, key: str, array: np.ndarray) -> None:
    """An entry with a valid checksum for ``key``, whatever ``array`` holds (as a buggy or hostile writer would)."""
    buffer = io.BytesIO()
    embedding_cache._write_entry(buffer, key, np.ascontiguousarray(array))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(buffer.getvalue())


def _fake(texts) -> np.ndarray:
    return np.stack([fake_embedding(text) for text in texts])


@contextlib.contextmanager
def _read_only(folder):
    """``folder`` read-only, also for root (whom file modes do not stop): a read-only bind mount."""
    if os.geteuid() != 0:
        modes = {path: os.stat(path).st_mode for path in [folder, *(p.path for p in os.scandir(folder) if p.is_dir())]}
        for path in modes:
            os.chmod(path, 0o555)
        try:
            yield
        finally:
            for path, mode in modes.items():
                os.chmod(path, mode)
        return
    try:
        subprocess.run(["mount", "--bind", folder, folder], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("running as root without the right to mount: cannot make a folder read-only")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", folder], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", folder], check=True, capture_output=True)


# ------------------------------------------------------------------------------------------------ hostile entries
# Each takes (cache folder, src input path) after a run has stored good entries for both sides, and damages the
# source side's entry; returns a context manager (held during the run) or None.


def _rotated_rows(cache, src):
    path = _entry(cache)
    data = path.read_bytes()
    array = np.load(path)  # numpy reads the array and ignores the trailer
    buffer = io.BytesIO()
    np.save(buffer, np.roll(array, 1, axis=0))
    path.write_bytes(buffer.getvalue() + data[-embedding_cache._TRAILER_SIZE :])  # the old, now stale checksum


def _no_trailer(cache, src):
    np.save(_entry(cache), np.roll(_fake(SOURCES), 1, axis=0))  # a plain .npy put there by hand


def _other_text_entry(cache, src):
    shutil.copyfile(_entry(cache, TARGETS), _entry(cache))  # valid, same shape, another key's vectors


def _nan_row(cache, src):
    array = _fake(SOURCES)
    array[2] = np.nan
    _write_entry(_entry(cache), _key(SOURCES), array)


def _zero_row(cache, src):
    array = _fake(SOURCES)
    array[1] = 0
    _write_entry(_entry(cache), _key(SOURCES), array)


def _float64(cache, src):
    _write_entry(_entry(cache), _key(SOURCES), _fake(SOURCES).astype(np.float64))


def _fewer_rows(cache, src):
    _write_entry(_entry(cache), _key(SOURCES), _fake(SOURCES)[:-1])


def _truncated(cache, src):
    path = _entry(cache)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _empty(cache, src):
    _entry(cache).write_bytes(b"")


def _fifo(cache, src):
    os.unlink(_entry(cache))
    os.mkfifo(_entry(cache))


def _folder(cache, src):
    os.unlink(_entry(cache))
    os.mkdir(_entry(cache))


def _symlink_to_input(cache, src):
    os.unlink(_entry(cache))
    os.symlink(os.path.abspath(src), _entry(cache))


def _symlink_to_good_entry(cache, src):
    path = _entry(cache)
    os.replace(path, path.with_name("elsewhere.npy"))
    os.symlink("elsewhere.npy", path)  # its content would pass every check: a link is still never followed


def _hard_link_to_input(cache, src):
    os.unlink(_entry(cache))
    os.link(src, _entry(cache))


def _read_only_with_bad_entry(cache, src):
    _rotated_rows(cache, src)
    return _read_only(cache)


def _read_only_with_fifo(cache, src):  # it cannot be removed: the store that follows must not open it either
    _fifo(cache, src)
    return _read_only(cache)


def _read_only_with_symlink_to_input(cache, src):
    _symlink_to_input(cache, src)
    return _read_only(cache)


def _read_only_empty(cache, src):
    shutil.rmtree(cache)
    os.mkdir(cache)
    return _read_only(cache)


def _root_is_a_file(cache, src):
    shutil.rmtree(cache)
    cache.write_bytes(b"not a folder\n")


def _root_is_a_fifo(cache, src):
    shutil.rmtree(cache)
    os.mkfifo(cache)


HOSTILE = {
    "rotated rows, stale checksum": _rotated_rows,
    "plain .npy without checksum": _no_trailer,
    "another text's entry": _other_text_entry,
    "NaN row": _nan_row,
    "all-zero row": _zero_row,
    "float64": _float64,
    "fewer rows": _fewer_rows,
    "truncated": _truncated,
    "empty file": _empty,
    "FIFO": _fifo,
    "folder": _folder,
    "symlink to the input": _symlink_to_input,
    "symlink to a good entry": _symlink_to_good_entry,
    "hard link to the input": _hard_link_to_input,
    "read-only cache, bad entry": _read_only_with_bad_entry,
    "read-only cache, FIFO entry": _read_only_with_fifo,
    "read-only cache, symlink to the input": _read_only_with_symlink_to_input,
    "read-only empty cache": _read_only_empty,
    "cache root is a file": _root_is_a_file,
    "cache root is a FIFO": _root_is_a_fifo,
}


def _warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]


@pytest.mark.parametrize("damage", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_entry_or_cache_gives_the_uncached_pairs_and_one_warning(capsys, caplog, tmp_path, fakes, damage):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    cache = tmp_path / "cache"
    uncached = ["mine", "--src", src, "--tgt", tgt, "--format", "tsv"]
    mine = [*uncached, "--cache-dir", str(cache)]
    assert run(capsys, *uncached, "--no-cache", "--out", str(tmp_path / "expected.tsv"))[0] == EXIT_OK
    assert run(capsys, *mine, "--out", str(tmp_path / "first.tsv"))[0] == EXIT_OK
    assert _entry(cache).is_file() and _entry(cache, TARGETS).is_file()
    inputs = {path: Path(path).read_bytes() for path in (src, tgt)}
    held = damage(cache, src)
    caplog.clear()
    with held or contextlib.nullcontext():
        code, _, err = run(capsys, *mine, "--out", str(tmp_path / "pairs.tsv"))
    assert code == EXIT_OK, err
    assert (tmp_path / "pairs.tsv").read_bytes() == (tmp_path / "expected.tsv").read_bytes()
    assert len(_warnings(caplog)) == 1 and str(cache) in _warnings(caplog)[0], _warnings(caplog)
    assert "Traceback" not in err
    assert {path: Path(path).read_bytes() for path in inputs} == inputs
    assert os.path.isfile(src) and not os.path.islink(src)


@pytest.mark.parametrize(
    "damage", [_rotated_rows, _nan_row, _fifo, _symlink_to_input, _folder], ids=lambda damage: damage.__name__
)
def test_a_dropped_entry_is_replaced_by_a_good_one(capsys, caplog, tmp_path, fakes, damage):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    mine = ["mine", "--src", src, "--tgt", tgt, "--cache-dir", str(tmp_path / "cache")]
    assert run(capsys, *mine)[0] == EXIT_OK and fakes.n_encoded == 10
    damage(tmp_path / "cache", src)
    assert run(capsys, *mine)[0] == EXIT_OK and fakes.n_encoded == 15  # the source side encoded again
    caplog.clear()
    assert run(capsys, *mine)[0] == EXIT_OK
    if damage is _folder:  # a folder is never removed: it stays a miss (and a warning) until the user removes it
        assert fakes.n_encoded == 20 and len(_warnings(caplog)) == 1
    else:
        assert fakes.n_encoded == 15 and not _warnings(caplog) and _entry(tmp_path / "cache").is_file()


def test_a_read_only_cache_of_good_entries_serves_them_silently(capsys, caplog, tmp_path, fakes):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    mine = ["mine", "--src", src, "--tgt", tgt, "--cache-dir", str(tmp_path / "cache")]
    assert run(capsys, *mine)[0] == EXIT_OK and len(fakes.loaded) == 1
    caplog.clear()
    with _read_only(tmp_path / "cache"):
        assert run(capsys, *mine)[0] == EXIT_OK
    assert len(fakes.loaded) == 1 and not _warnings(caplog)


def test_an_entry_holds_its_checksum_and_stays_a_npy_file(tmp_path):
    cache = EmbeddingCache(tmp_path)
    key = cache.key(SOURCES, None)
    cache.store(key, _fake(SOURCES))
    np.testing.assert_array_equal(np.load(cache.path(key)), _fake(SOURCES))
    loaded = cache.load(key, len(SOURCES))
    np.testing.assert_array_equal(loaded, _fake(SOURCES))
    loaded[0] = 0  # callers get a writable array of their own
    np.testing.assert_array_equal(cache.load(key, len(SOURCES)), _fake(SOURCES))
    assert os.listdir(tmp_path) == [key[:2]] and os.listdir(tmp_path / key[:2]) == [f"{key}.npy"]
    data = bytearray(cache.path(key).read_bytes())
    data[200] ^= 1  # one bit of one value: still finite, still the right shape
    cache.path(key).write_bytes(bytes(data))
    assert cache.load(key, len(SOURCES)) is None and not cache.path(key).exists()


def test_embeddings_a_load_would_refuse_are_not_stored(tmp_path):
    cache = EmbeddingCache(tmp_path)
    array = _fake(SOURCES)
    array[0] = 0
    cache.store(cache.key(SOURCES, None), array)
    assert not os.listdir(tmp_path)


# ------------------------------------------------------------------------------------------------ encode to shards


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_encode_to_shards_after_encode_to_npy_loads_no_encoder(capsys, tmp_path, fakes, dtype):
    texts = [f"sentence {i}" for i in range(11)]
    text = write_lines(tmp_path / "in.txt", texts)
    shards = ["--shard-size", "4", "--dtype", dtype]
    fresh = ["encode", "--input", text, "--out", f"{tmp_path / 'fresh'}/", "--no-cache", *shards]
    assert run(capsys, *fresh)[0] == EXIT_OK
    assert run(capsys, "encode", "--input", text, "--out", str(tmp_path / "x.npy"))[0] == EXIT_OK
    assert len(fakes.loaded) == 2
    code, out, _ = run(capsys, "encode", "--input", text, "--out", f"{tmp_path / 'cached'}/", *shards)
    assert code == EXIT_OK and len(fakes.loaded) == 2 and "(0 sentences encoded by this run)" in out
    names = sorted(os.listdir(tmp_path / "fresh"))
    assert sorted(os.listdir(tmp_path / "cached")) == names and len(names) == 4  # 3 shards and the manifest
    for name in names:
        assert (tmp_path / "cached" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes(), name


def test_encode_to_shards_after_mine_and_with_a_damaged_entry(capsys, caplog, tmp_path, fakes):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    fresh = ["encode", "--input", src, "--out", f"{tmp_path / 'fresh'}/", "--no-cache", "--shard-size", "2"]
    assert run(capsys, *fresh)[0] == EXIT_OK
    assert run(capsys, "mine", "--src", src, "--tgt", tgt)[0] == EXIT_OK and len(fakes.loaded) == 2
    assert run(capsys, "encode", "--input", src, "--out", f"{tmp_path / 'a'}/", "--shard-size", "2")[0] == EXIT_OK
    assert len(fakes.loaded) == 2  # from the cache that mine filled
    path = EmbeddingCache().path(_key(SOURCES))  # the test's own cache ($BITEXT_HF_EMBEDDING_CACHE)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one bit of the checksum
    path.write_bytes(bytes(data))
    caplog.clear()
    assert run(capsys, "encode", "--input", src, "--out", f"{tmp_path / 'b'}/", "--shard-size", "2")[0] == EXIT_OK
    assert len(fakes.loaded) == 3 and len(_warnings(caplog)) == 1
    for folder in ("a", "b"):
        for name in os.listdir(tmp_path / "fresh"):
            assert (tmp_path / folder / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes()


@pytest.mark.parametrize("option", [["--backend", "onnx"], ["--backend", "openvino"], ["--quantize", "int8"]])
def test_a_warm_cache_never_serves_what_a_cold_one_refuses(capsys, tmp_path, fakes, option):
    """The default encoder runs neither an exported backend nor int8: refused with the loader's own line before the
    cache is read, so a run does not succeed or fail by what an earlier run left in the cache."""
    text = write_lines(tmp_path / "in.txt", SOURCES)
    assert run(capsys, "encode", "--input", text, "--out", str(tmp_path / "warm.npy"))[0] == EXIT_OK
    loaded = len(fakes.loaded)
    code, _, err = run(capsys, "encode", "--input", text, "--out", str(tmp_path / "x.npy"), *option)
    assert code == 4 and err.strip().splitlines() == [
        f"bitext-hf encode: error: use-multilingual-v3: the USE encoder runs in torch, float32 or bf16; drop "
        f"{option[0][2:]}={option[1]!r}"
    ]
    assert len(fakes.loaded) == loaded and not (tmp_path / "x.npy").exists()
