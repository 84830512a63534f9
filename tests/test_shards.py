"""Embedding shards (bitext_hf.encoding.shards), the encoding cache, and the command line over both: the manifest, resume
to identical bytes, sharded mining equal to in-memory mining, cache hits that skip the encoder, and every bad input
as one line with its exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from cli_fakes import DIM, SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_DATA, EXIT_OK, EXIT_USAGE
from bitext_hf.encoders.spec import EncoderSpec
from bitext_hf.encoding.cache import EmbeddingCache
from bitext_hf.encoding.shards import (
    MANIFEST,
    PROGRESS,
    ShardedEmbeddings,
    open_shards,
    read_manifest,
    text_sha256,
    write_shards,
)
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.mining import bidirectional_knn, mine
from bitext_hf.mining.knn import bidirectional_knn_unchecked
from bitext_hf.mining.sharded import mine_shards

TEXTS = [f"sentence {i}" for i in range(23)]


def _encode(texts):
    return np.stack([fake_embedding(text) for text in texts])


def _files(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


# ----------------------------------------------------------------------------------------------------- manifest


def test_manifest_round_trip_and_rows(tmp_path):
    manifest, encoded = write_shards(tmp_path / "emb", TEXTS, _encode, encoder="fake", shard_size=5)
    assert encoded == 23 and read_manifest(tmp_path / "emb" / MANIFEST) == manifest
    assert (manifest.count, manifest.dimension, manifest.dtype, manifest.encoder) == (23, DIM, "float32", "fake")
    assert manifest.text_sha256 == text_sha256(TEXTS) and [s.rows for s in manifest.shards] == [5, 5, 5, 5, 3]
    assert sorted(os.listdir(tmp_path / "emb")) == [MANIFEST] + [f"shard-0000{i}.npy" for i in range(5)]
    shards = open_shards(tmp_path / "emb")
    assert shards.shape == (23, DIM)
    np.testing.assert_array_equal(np.asarray(shards), _encode(TEXTS))
    np.testing.assert_array_equal(shards[3:12], _encode(TEXTS)[3:12])  # a block across two shard boundaries
    view = shards[np.array([0, 7, 22])]
    assert isinstance(view, ShardedEmbeddings) and view.shape == (3, DIM)
    np.testing.assert_array_equal(view[0:3], _encode(TEXTS)[[0, 7, 22]])
    assert shards[np.arange(23)] is shards  # all rows in order: still read by slices


@pytest.mark.parametrize("unit", [False, True])
def test_a_row_range_reads_what_a_slice_reads(tmp_path, unit):
    """What a distributed task reads by itself: the same rows, normalized the same way, across shard boundaries."""
    encode = _encode if unit else (lambda texts: 3 * _encode(texts))
    write_shards(tmp_path / "emb", TEXTS, encode, encoder="fake", shard_size=5)
    shards = open_shards(tmp_path / "emb")
    for start, stop in ((0, 23), (3, 12), (5, 10), (9, 10), (20, 23), (4, 21)):
        named = shards.row_range(start, stop)
        assert named.count == stop - start and len(named.shards) == (stop - 1) // 5 - start // 5 + 1
        assert named.normalize is not unit  # rows of 3 x unit length are divided by their norms, as a slice's
        np.testing.assert_array_equal(named.read(), shards[start:stop])
    assert shards[np.array([0, 7, 22])].row_range(0, 3) is None  # a selection is read by the driver
    named = shards.row_range(3, 12)
    path = tmp_path / "emb" / "shard-00001.npy"
    path.write_bytes(path.read_bytes()[:-8])  # changed since it was opened
    with pytest.raises(DataValidationError, match=r"shard-00001\.npy: missing or of another size where this task"):
        named.read()


# ----------------------------------------------------------------------------------------------------- resume


class _Failing:
    """Encodes, then raises at call number ``fail_at`` (a run killed mid-way); counts the sentences it encoded."""

    def __init__(self, fail_at: int | None = None, error: BaseException | None = None):
        self.calls, self.sentences, self.fail_at, self.error = 0, 0, fail_at, error or KeyboardInterrupt()

    def __call__(self, texts):
        self.calls += 1
        if self.calls == self.fail_at:
            raise self.error
        self.sentences += len(texts)
        return _encode(texts)


def test_resume_after_a_killed_run_gives_identical_bytes(tmp_path):
    write_shards(tmp_path / "whole", TEXTS, _encode, encoder="fake", shard_size=5, dtype="float16")
    with pytest.raises(KeyboardInterrupt):
        write_shards(tmp_path / "part", TEXTS, _Failing(fail_at=4), encoder="fake", shard_size=5, dtype="float16")
    assert MANIFEST not in os.listdir(tmp_path / "part") and PROGRESS in os.listdir(tmp_path / "part")
    with pytest.raises(DataValidationError, match="unfinished encoding"):
        open_shards(tmp_path / "part")  # never taken as complete
    with pytest.raises(UsageError, match="--resume"):
        write_shards(tmp_path / "part", TEXTS, _encode, encoder="fake", shard_size=5, dtype="float16")
    again = _Failing()
    _, encoded = write_shards(
        tmp_path / "part", TEXTS, again, encoder="fake", shard_size=5, dtype="float16", resume=True
    )
    assert encoded == again.sentences == 8  # shards 3 and 4 only
    assert _files(tmp_path / "part") == _files(tmp_path / "whole")


def test_resume_encodes_again_from_a_damaged_shard_and_refuses_other_settings(tmp_path):
    folder = tmp_path / "emb"
    with pytest.raises(KeyboardInterrupt):
        write_shards(folder, TEXTS, _Failing(fail_at=5), encoder="fake", shard_size=5)
    (folder / "shard-00001.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(UsageError, match="dtype 'float32' there, 'float16' now"):
        write_shards(folder, TEXTS, _encode, encoder="fake", shard_size=5, dtype="float16", resume=True)
    again = _Failing()
    write_shards(folder, TEXTS, again, encoder="fake", shard_size=5, resume=True)
    assert again.sentences == 18  # from shard 1 on
    np.testing.assert_array_equal(np.asarray(open_shards(folder)), _encode(TEXTS))


def test_a_run_that_fails_before_its_first_shard_leaves_no_folder(tmp_path):
    with pytest.raises(RuntimeError):
        write_shards(tmp_path / "emb", TEXTS, _Failing(fail_at=1, error=RuntimeError("boom")), encoder="x")
    assert not (tmp_path / "emb").exists()


def test_cli_encode_killed_then_resumed_equals_an_uninterrupted_run(capsys, caplog, tmp_path, fakes, monkeypatch):
    text = write_lines(tmp_path / "in.txt", TEXTS)
    assert run(capsys, "encode", "--input", text, "--out", str(tmp_path / "whole/"), "--shard-size", "4")[0] == 0
    calls = []

    def interrupted(self, sentences, batch_size=64, show_progress=False):
        calls.append(len(sentences))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return _encode(sentences)

    with monkeypatch.context() as patch:
        patch.setattr("cli_fakes.FakeEncoder.encode", interrupted)
        code, _, err = run(capsys, "encode", "--input", text, "--out", str(tmp_path / "part/"), "--shard-size", "4")
    assert code == 130 and len(err.strip().splitlines()) == 1
    assert "interrupted; 2 of 6 shards in" in err and "are complete: run the same command with --resume" in err
    before = fakes.n_encoded
    code, out, _ = run(
        capsys, "encode", "--input", text, "--out", str(tmp_path / "part"), "--shard-size", "4", "--resume"
    )
    assert code == EXIT_OK and "15 sentences encoded" in out and fakes.n_encoded - before == 15
    assert _files(tmp_path / "part") == _files(tmp_path / "whole")


# A process that encodes slowly (0.3 s a call) with the fake encoder, to be killed with SIGKILL mid-run.
_SLOW_ENCODE = """
import sys, time
sys.path.insert(0, sys.argv.pop(1))
import numpy as np
import bitext_hf.encoders
from cli_fakes import fake_embedding
from bitext_hf.cli import main

class Slow:
    def encode(self, sentences, batch_size=64, show_progress=False):
        time.sleep(0.3)
        return np.stack([fake_embedding(s) for s in sentences])

bitext_hf.encoders.load_encoder = lambda spec=None, **kwargs: Slow()
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_cli_encode_killed_with_sigkill_resumes_to_identical_bytes(capsys, tmp_path, fakes):
    text = write_lines(tmp_path / "in.txt", TEXTS)
    options = ["--input", text, "--shard-size", "4", "--quiet"]
    assert run(capsys, "encode", *options, "--out", str(tmp_path / "whole/"))[0] == EXIT_OK
    part = tmp_path / "part"
    command = [sys.executable, "-c", _SLOW_ENCODE, os.path.dirname(__file__), "encode", *options, "--out", f"{part}/"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            if (part / PROGRESS).exists() and len(read_manifest(part / PROGRESS).shards) >= 2:
                break
            time.sleep(0.02)
        assert process.poll() is None, "the run ended before it could be killed"
    finally:
        process.kill()
        process.wait()
    assert MANIFEST not in os.listdir(part)
    code, out, _ = run(capsys, "encode", *options, "--out", str(part), "--resume")
    encoded = int(re.search(r"\((\d+) sentences encoded by this run\)", out).group(1))
    assert code == EXIT_OK and encoded <= len(TEXTS) - 8  # the two shards recorded before the kill were kept
    assert _files(part) == _files(tmp_path / "whole")


# ----------------------------------------------------------------------------------------------------- mining


@pytest.mark.parametrize("dtype", ["float32", "float16"])
# Blocks of 20 x 1 and 4096 x 5 straddle the shards (of 7 and 4 rows). The fused kernel costs ~30 ms a launch here,
# so the smallest blocks (52 of them) run on the torch backend only.
@pytest.mark.parametrize(
    ("block_elements", "backend"), [(20, "torch"), (4096 * 5, "torch"), (4096 * 5, "fused"), (1 << 25, "auto")]
)
def test_sharded_mining_equals_mining_the_concatenation(tmp_path, dtype, block_elements, backend):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((31, 8)).astype(np.float32), rng.standard_normal((26, 8)).astype(np.float32)
    rows = {f"x{i}": row for i, row in enumerate(x)} | {f"y{i}": row for i, row in enumerate(y)}

    def encode(texts):
        return np.stack([rows[text] for text in texts])

    for name, n, size in (("x", 31, 7), ("y", 26, 4)):
        write_shards(
            tmp_path / name, [f"{name}{i}" for i in range(n)], encode, encoder="e", shard_size=size, dtype=dtype
        )
    sx, sy = open_shards(tmp_path / "x"), open_shards(tmp_path / "y")
    x, y = x.astype(dtype), y.astype(dtype)  # what the shards hold
    expected = bidirectional_knn(x, y, 4, block_elements=block_elements, backend=backend)
    got = bidirectional_knn_unchecked(sx, sy, 4, block_elements=block_elements, backend=backend)
    for field in ("forward_sims", "forward_indices", "backward_sims", "backward_indices"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))
    for mode in ("max", "intersect"):
        a, b = mine(x, y, mode=mode, threshold=1.0), mine_shards(sx, y, mode=mode, threshold=1.0)
        assert len(a) > 0
        for field in ("src_indices", "tgt_indices", "scores"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_cli_mine_over_shard_folders_equals_mine_over_npy_files(capsys, tmp_path, fakes, monkeypatch):
    import bitext_hf.encoding.shards as shards

    manifests_read = []
    real_read_manifest = shards.read_manifest
    monkeypatch.setattr(shards, "read_manifest", lambda path: manifests_read.append(path) or real_read_manifest(path))
    src = write_lines(tmp_path / "src.txt", [*SOURCES, SOURCES[1]])  # a duplicate: mined once, a view of the rows
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    for side, text in (("src", src), ("tgt", tgt)):
        assert run(capsys, "encode", "--input", text, "--out", str(tmp_path / f"{side}.npy"))[0] == EXIT_OK
        code, _, _ = run(capsys, "encode", "--input", text, "--out", str(tmp_path / side), "--shard-size", "2")
        assert code == EXIT_OK and len(os.listdir(tmp_path / side)) == 4
    outputs, manifests_read[:] = [], []
    for src_in, tgt_in in (("src.npy", "tgt.npy"), ("src", "tgt")):
        out = tmp_path / f"pairs-{src_in}.tsv"
        code, _, _ = run(
            capsys,
            "mine",
            "--src",
            str(tmp_path / src_in),
            "--tgt",
            str(tmp_path / tgt_in),
            "--src-text",
            src,
            "--tgt-text",
            tgt,
            "--out",
            str(out),
        )
        assert code == EXIT_OK
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].count(b"\n") == 6  # header + 5 pairs
    meta = json.loads((tmp_path / "pairs-src.tsv.meta.json").read_text())
    assert meta["encoder"] == EncoderSpec(None).identity  # from the manifests: "use-multilingual-v3 (torch ...)"
    # Each manifest read once by the mining runs, when its side was opened: the sidecar's encoder comes from there.
    assert sorted(map(str, manifests_read)) == [str(tmp_path / side / MANIFEST) for side in ("src", "tgt")]


# ----------------------------------------------------------------------------------------------------- cache


def test_cache_hit_skips_the_encoder(capsys, tmp_path, fakes):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    results = []
    for _ in range(2):
        out = tmp_path / f"pairs{len(results)}.tsv"
        assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out))[0] == EXIT_OK
        results.append(out.read_bytes())
    assert results[0] == results[1] and fakes.n_encoded == 10 and len(fakes.loaded) == 1  # only the first run
    assert run(capsys, "score", "--src", src, "--tgt", src, "--out", str(tmp_path / "s.tsv"))[0] == EXIT_OK
    assert run(capsys, "eval", "--src", src, "--tgt", tgt, "--metrics", "xsim", "accuracy")[0] == EXIT_OK
    assert fakes.n_encoded == 10  # the same sentences, the same encoder: from the cache
    assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--no-cache")[0] == EXIT_OK
    assert fakes.n_encoded == 20
    assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--pooling", "max")[0] == EXIT_OK
    assert fakes.n_encoded == 30  # another encoder setting is another key


def test_encode_to_one_file_uses_the_cache_and_the_dtype(capsys, tmp_path, fakes):
    text = write_lines(tmp_path / "in.txt", TEXTS)
    for dtype in ("float32", "float16"):
        out = tmp_path / f"{dtype}.npy"
        assert run(capsys, "encode", "--input", text, "--out", str(out), "--dtype", dtype)[0] == EXIT_OK
        assert np.load(out).dtype == dtype
    assert fakes.n_encoded == len(TEXTS)
    np.testing.assert_array_equal(np.load(tmp_path / "float32.npy"), _encode(TEXTS))


def test_a_damaged_cache_entry_is_a_miss(tmp_path):
    cache = EmbeddingCache(tmp_path)
    key = cache.key(TEXTS, None)
    cache.store(key, _encode(TEXTS))
    np.testing.assert_array_equal(cache.load(key, len(TEXTS)), _encode(TEXTS))
    assert cache.key(TEXTS[:-1], None) != key and cache.key(TEXTS, "m") != key
    cache.path(key).write_bytes(cache.path(key).read_bytes()[:100])
    assert cache.load(key, len(TEXTS)) is None and not cache.path(key).exists()  # removed: the next run stores one


# ----------------------------------------------------------------------------------------------------- bad input


def _shard_folder(tmp_path, name="emb", texts=TEXTS, dim=None, **kwargs):
    encode = _encode if dim is None else (lambda texts: np.ones((len(texts), dim), np.float32))
    write_shards(tmp_path / name, texts, encode, encoder="fake", shard_size=5, **kwargs)
    return tmp_path / name


def _edit_manifest(folder, **changes):
    data = json.loads((folder / MANIFEST).read_text())
    data.update(changes)
    (folder / MANIFEST).write_text(json.dumps(data))


def _missing(folder):
    os.remove(folder / "shard-00002.npy")


def _truncated(folder):
    path = folder / "shard-00002.npy"
    path.write_bytes(path.read_bytes()[:-8])


def _other_dimension(folder):
    # A shard of another encoder (dimension 4) in place of shard 2, with the manifest's size made to fit.
    other = _shard_folder(folder.parent, "other", dim=4)
    os.replace(other / "shard-00002.npy", folder / "shard-00002.npy")
    data = json.loads((folder / MANIFEST).read_text())
    data["shards"][2]["bytes"] = os.path.getsize(folder / "shard-00002.npy")
    (folder / MANIFEST).write_text(json.dumps(data))


def _other_encoding(folder):
    # Same shape and size, other vectors: only the checksum tells.
    other = _shard_folder(folder.parent, "other", texts=[t + "!" for t in TEXTS])
    os.replace(other / "shard-00002.npy", folder / "shard-00002.npy")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_missing, "shard-00002.npy: missing"),
        (_truncated, "truncated or replaced"),
        (_other_dimension, "holds 5 x 4 float32 but manifest.json records 5 x 16"),
        (_other_encoding, "SHA-256 differs"),
        (lambda f: _edit_manifest(f, count=24), "count 24 but its shards hold 23 rows"),
        (lambda f: (f / MANIFEST).write_text("{"), "not valid JSON"),
        (
            lambda f: _edit_manifest(f, shards=[{"name": "../x.npy", "rows": 1, "bytes": 1, "sha256": ""}]),
            "not a shard",
        ),
        (lambda f: os.remove(f / MANIFEST), "no manifest.json"),
    ],
)
def test_bad_shard_folders_are_one_line_exit_3(capsys, tmp_path, fakes, damage, message):
    folder = _shard_folder(tmp_path)
    damage(folder)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, err = run(capsys, "mine", "--src", str(folder), "--tgt", tgt, "--out", str(tmp_path / "p.tsv"))
    assert code == EXIT_DATA and message in err and len(err.strip().splitlines()) == 1, err
    assert fakes.loaded == [] and not (tmp_path / "p.tsv").exists()


def test_mismatched_sides_and_texts_are_exit_3(capsys, tmp_path, fakes):
    folder = _shard_folder(tmp_path)
    narrow = _shard_folder(tmp_path, "narrow", dim=4)
    code, _, err = run(capsys, "mine", "--src", str(folder), "--tgt", str(narrow))
    assert code == EXIT_DATA and "dimension 16" in err and "has 4" in err
    other_text = write_lines(tmp_path / "other.txt", [t + "?" for t in TEXTS])
    code, _, err = run(capsys, "mine", "--src", str(folder), "--tgt", str(folder), "--src-text", other_text)
    assert code == EXIT_DATA and "is not the text" in err and len(err.strip().splitlines()) == 1


def test_unusable_encode_outputs_are_usage_errors_before_encoding(capsys, tmp_path, fakes):
    text = write_lines(tmp_path / "in.txt", TEXTS)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    cases = [
        (["--out", str(tmp_path / "busy")], "'notes.txt'"),
        (["--out", str(tmp_path / "x.npy"), "--shard-size", "3"], "for a folder --out"),
        (["--out", str(tmp_path / "missing" / "emb/")], "does not exist"),
    ]
    _shard_folder(tmp_path, "done")
    cases.append((["--out", str(tmp_path / "done")], "complete encoding already"))
    with pytest.raises(KeyboardInterrupt):
        write_shards(tmp_path / "half", TEXTS, _Failing(fail_at=2), encoder="fake", shard_size=5)
    cases.append((["--out", str(tmp_path / "half")], "unfinished encoding; add --resume"))
    for options, message in cases:
        code, _, err = run(capsys, "encode", "--input", text, *options)
        assert code == EXIT_USAGE and message in err and len(err.strip().splitlines()) == 1, (options, err)
    assert fakes.loaded == [] and os.listdir(tmp_path / "busy") == ["notes.txt"]
