"""``run_encoding(EncodeConfig)``, the job ``bitext-hf encode`` runs: the same files as the command, to one ``.npy``
file or a folder of shards, and what the result says it did."""

from __future__ import annotations

import numpy as np
import pytest
from cli_fakes import DIM, SOURCES, FakeEncoders, fake_embedding, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_OK
from bitext_hf.encoding.shards import open_shards
from bitext_hf.errors import UsageError
from bitext_hf.jobs.encode import EncodeConfig, run_encoding


def test_the_job_writes_the_commands_file_and_says_what_it_did(capsys, monkeypatch, tmp_path):
    install_fake_encoders(monkeypatch)
    text = write_lines(tmp_path / "in.txt", SOURCES)
    assert run(capsys, "encode", "--input", text, "--out", str(tmp_path / "cli.npy"), "--no-cache")[0] == EXIT_OK
    result = run_encoding(EncodeConfig(input=text, out=str(tmp_path / "job.npy"), no_cache=True))
    assert (tmp_path / "job.npy").read_bytes() == (tmp_path / "cli.npy").read_bytes()
    assert (result.count, result.dimension, result.dtype, result.shards) == (len(SOURCES), DIM, "float32", None)
    assert (result.encoded, result.from_cache) == (len(SOURCES), 0)
    expected = np.stack([fake_embedding(sentence) for sentence in SOURCES])
    np.testing.assert_allclose(np.load(tmp_path / "job.npy"), expected / np.linalg.norm(expected, axis=1)[:, None])


def test_a_folder_gets_shards_and_a_cached_run_encodes_nothing(monkeypatch, tmp_path):
    encoders = FakeEncoders()
    text = write_lines(tmp_path / "in.txt", SOURCES)
    cache = str(tmp_path / "cache")
    first = run_encoding(
        EncodeConfig(input=text, out=str(tmp_path / "once.npy"), cache_dir=cache), load_encoder=encoders
    )
    config = EncodeConfig(input=text, out=str(tmp_path / "shards") + "/", shard_size=2, cache_dir=cache)
    again = run_encoding(config, load_encoder=encoders)
    assert (first.encoded, again.encoded, again.from_cache, again.shards) == (len(SOURCES), 0, len(SOURCES), 3)
    assert encoders.n_encoded == len(SOURCES)  # the encoder ran once, for the first run
    np.testing.assert_array_equal(open_shards(tmp_path / "shards")[0 : len(SOURCES)], np.load(tmp_path / "once.npy"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"shard_size": 10}, "--shard-size and --resume are for a folder --out"),
        ({"ray_address": "127.0.0.1:1"}, "--ray-address and --workers go with --distributed ray"),
        ({"cache_dir": "c", "no_cache": True}, "which --no-cache turns off"),
    ],
)
def test_options_that_cannot_act_are_refused_before_anything_is_read(tmp_path, options, message):
    with pytest.raises(UsageError, match=message):
        run_encoding(EncodeConfig(input=str(tmp_path / "missing.txt"), out=str(tmp_path / "x.npy"), **options))
    assert not (tmp_path / "x.npy").exists()
