"""Ray across workers (bitext_hf.encoding.ray, bitext_hf.mining.distributed): mining equal to one process (pairs and scores, bit for bit),
encoding to the same shard bytes, a worker killed mid-run (recovered by a retry, or one clean error with the folder
left for --resume), and an unreachable --ray-address as one line, exit 2.

One local Ray instance with 2 CPUs serves the whole module (starting one costs seconds); skipped without Ray."""

from __future__ import annotations

import functools
import itertools
import os
import time
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines
from ports import free_port

from bitext_hf.cli import EXIT_OK, EXIT_USAGE
from bitext_hf.encoding.shards import MANIFEST, PROGRESS, RowRange, open_shards, read_manifest, write_shards
from bitext_hf.errors import BitextError, EncoderLoadError
from bitext_hf.mining import bidirectional_knn, check_embeddings
from bitext_hf.mining.sharded import mine_shards

# The slow set (`python -m pytest -m slow`, which CI also runs): a Ray cluster started for the module.
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")

from bitext_hf.encoding import ray as encoding_ray  # noqa: E402
from bitext_hf.encoding.ray import encode_shards_ray  # noqa: E402
from bitext_hf.mining import distributed  # noqa: E402
from bitext_hf.mining.distributed import knn_ray, mine_ray  # noqa: E402

TEXTS = [f"sentence {i}" for i in range(23)]
HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    # Workers import cli_fakes and this module (the fake encoders and the dying encoder are pickled by reference).
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path, "OMP_NUM_THREADS": "1"}},
    )
    yield
    ray.shutdown()


@pytest.fixture
def fakes(monkeypatch):
    return install_fake_encoders(monkeypatch)


def _encode(texts):
    return np.stack([fake_embedding(text) for text in texts])


def _files(folder) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in sorted(os.listdir(folder))}


# ----------------------------------------------------------------------------------------------------- mine


@pytest.mark.parametrize(
    ("block_elements", "backend"), [(4096 * 16, "fused"), (4096 * 16, "torch"), (4096 * 3, "fused"), (None, "auto")]
)
def test_ray_search_equals_one_process_bit_for_bit(caplog, block_elements, backend):
    rng = np.random.default_rng(0)
    x = check_embeddings(rng.standard_normal((300, 16)).astype(np.float32))
    y = check_embeddings(rng.standard_normal((250, 16)).astype(np.float32))
    if backend == "fused":  # exact ties across the target runs: the merge keeps the lower index, as one pass does
        y[[100, 200, 249]] = y[7]
    options = dict(block_elements=block_elements or (1 << 25), backend=backend)
    one = bidirectional_knn(x, y, 4, **options)
    with caplog.at_level("INFO", logger="bitext_hf"):
        split = knn_ray(x, y, 4, workers=2, **options)
    # 3 columns a block: 84 blocks in 6 runs of at most 16, two in flight at a time, merged as they finish.
    runs = {4096 * 16: 2, 4096 * 3: 6, None: 1}[block_elements]
    assert f"in {runs} Ray task(s)" in caplog.text
    for field in ("forward_sims", "forward_indices", "backward_sims", "backward_indices"):
        np.testing.assert_array_equal(getattr(split, field), getattr(one, field), err_msg=field)
    if block_elements:  # 16 and 83 columns a block: more runs than one, merged
        pairs, expected = (
            mine_ray(x, y, workers=2, block_elements=block_elements),
            mine_shards(x, y, block_elements=block_elements),
        )
        np.testing.assert_array_equal(pairs.src_indices, expected.src_indices)
        np.testing.assert_array_equal(pairs.tgt_indices, expected.tgt_indices)
        np.testing.assert_array_equal(pairs.scores, expected.scores)


def test_target_runs_of_a_shard_folder_reach_their_tasks_by_name(tmp_path, monkeypatch):
    """Each task reads its run of a target shard folder itself: the driver passes the run's name, not its rows."""
    rng = np.random.default_rng(1)
    x = check_embeddings(rng.standard_normal((300, 16)).astype(np.float32))
    y = check_embeddings(rng.standard_normal((250, 16)).astype(np.float32))
    write_shards(
        tmp_path / "tgt",
        [str(i) for i in range(250)],
        lambda rows: y[[int(i) for i in rows]],
        encoder="t",
        shard_size=60,
    )
    passed = []
    rows_for_tasks = distributed.rows_for_tasks
    monkeypatch.setattr(
        distributed, "rows_for_tasks", lambda *args: passed.append(rows_for_tasks(*args)) or passed[-1]
    )
    split = knn_ray(x, open_shards(tmp_path / "tgt"), 4, workers=2, block_elements=4096 * 3, backend="fused")
    one = bidirectional_knn(x, y, 4, block_elements=4096 * 3, backend="fused")
    for field in ("forward_sims", "forward_indices", "backward_sims", "backward_indices"):
        np.testing.assert_array_equal(getattr(split, field), getattr(one, field), err_msg=field)
    # 84 blocks of 3 columns in 6 runs, each a name spanning one or more of the 5 files.
    assert len(passed) == 6 and all(isinstance(run, RowRange) for run in passed)
    assert sum(run.count for run in passed) == 250 and max(len(run.shards) for run in passed) >= 2


def _threads_after_a_search_task():
    import torch

    from bitext_hf.mining.distributed import search_run

    x = check_embeddings(np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32))
    search_run(x, x[:30], 0, 4, 4, 40, 30, "fused")
    return torch.get_num_threads()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one core: no second thread to take")
def test_a_search_task_keeps_its_one_thread():
    pytest.importorskip("numba")
    # A one-CPU task gets one torch thread (OMP_NUM_THREADS=1). Starting numba's OpenMP layer used to raise it to
    # every core, so one worker searched on all of them and --workers 2 could not be faster than 1.
    assert ray.get(ray.remote(_threads_after_a_search_task).options(num_cpus=1).remote()) == 1


@pytest.fixture
def encoded_in_ray(monkeypatch):
    """The number of texts (or runs) of each call of encode_ray and encode_runs_ray (which then run as they do)."""
    calls = []
    real_encode_ray, real_encode_runs_ray = encoding_ray.encode_ray, encoding_ray.encode_runs_ray
    monkeypatch.setattr(
        encoding_ray,
        "encode_ray",
        lambda texts, *a, **kw: calls.append(len(texts)) or real_encode_ray(texts, *a, **kw),
    )
    monkeypatch.setattr(
        encoding_ray,
        "encode_runs_ray",
        lambda sentences, runs, *a, **kw: calls.append(len(runs)) or real_encode_runs_ray(sentences, runs, *a, **kw),
    )
    return calls


def test_cli_mine_distributed_encodes_in_ray_and_equals_single_process(capsys, tmp_path, fakes, encoded_in_ray):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    common = ["mine", "--src", src, "--tgt", tgt, "--k", "2", "--mode", "union", "--no-cache"]
    assert run(capsys, *common, "--out", str(tmp_path / "one.tsv"))[0] == EXIT_OK
    assert encoded_in_ray == []
    code, _, err = run(capsys, *common, "--out", str(tmp_path / "ray.tsv"), "--distributed", "ray", "--workers", "2")
    assert code == EXIT_OK, err
    assert encoded_in_ray == [len(SOURCES), len(TARGETS)]  # both text sides were encoded by Ray tasks
    assert (tmp_path / "ray.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()


def test_cli_align_distributed_encodes_in_ray_and_equals_single_process(
    capsys, tmp_path, fakes, monkeypatch, encoded_in_ray
):
    """``align --distributed ray`` over a folder of documents: the overlaps are encoded by Ray tasks, part by part
    (two parts here), and every output is byte for byte the single process's."""
    monkeypatch.setattr("bitext_hf.jobs.align.CHUNK_SENTENCES", 12)
    for side, sentences in (("en", SOURCES), ("de", TARGETS)):
        (tmp_path / side).mkdir()
        for number in range(3):
            write_lines(tmp_path / side / f"doc{number}.txt", [f"{text} {number}" for text in sentences])
    common = ["align", "--src", str(tmp_path / "en"), "--tgt", str(tmp_path / "de"), "--no-cache", "--format", "tsv"]
    assert run(capsys, *common, "--out", str(tmp_path / "one"))[0] == EXIT_OK
    assert encoded_in_ray == []
    code, _, err = run(capsys, *common, "--out", str(tmp_path / "ray"), "--distributed", "ray", "--workers", "2")
    assert code == EXIT_OK, err
    assert len(encoded_in_ray) == 6  # three parts (one document pair each), two sides
    for number in range(3):
        name = f"doc{number}.txt.tsv"
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()


def test_ray_tasks_compose_runs_from_whole_documents(monkeypatch):
    """``encode_runs_ray`` with the default encoder: each task composes its documents' runs from one pass (the
    vectors of one process's ``encode_runs`` and of the joined texts, to float32 rounding), in several tasks; an
    encoder without ``encode_runs`` gets the joined texts, its vectors bit for bit."""
    from bitext_hf.encoders import USEEncoder
    from bitext_hf.encoding.ray import encode_runs_ray, encoder_loader

    monkeypatch.setattr(encoding_ray, "RUNS_TASK_SENTENCES", 10)
    documents = [[f"{text} ({number})" for text in SOURCES] for number in range(3)]
    sentences = [sentence for document in documents for sentence in document]
    runs, offset = [], 0
    for document in documents:
        runs += [(offset + s, offset + s + n) for n in (1, 2, 3) for s in range(len(document) - n + 1)]
        offset += len(document)
    runs = runs[::-1]  # any order
    assert len(encoding_ray.run_tasks(runs, len(sentences), 10)) >= 2
    vectors = encode_runs_ray(sentences, runs, encoder_loader(None), workers=2)
    encoder = USEEncoder(threads=1)
    joined = [" ".join(sentences[start:end]) for start, end in runs]
    assert np.abs(vectors - encoder.encode_runs(sentences, runs)).max() < 1e-5
    assert np.abs(vectors - encoder.encode(joined)).max() < 1e-5
    texts = encode_runs_ray(sentences, runs, _load_fake, workers=2)
    assert np.array_equal(texts, _encode(joined))


def _loaded_and_logged(log: str):
    with open(log, "a") as handle:
        handle.write("loaded\n")
    return _encode


def test_one_run_token_loads_the_encoder_once_a_worker(tmp_path):
    """The calls of one run (``Embedder``: one token a run and encoder) share each worker's encoder: three calls on a
    2-CPU instance load it at most twice (once a worker process); without the token each call loads it again."""
    from bitext_hf.encoding.ray import encode_ray, encode_runs_ray

    log = tmp_path / "loads.log"
    load = functools.partial(_loaded_and_logged, str(log))
    sentences = [f"sentence {i}" for i in range(9)]
    for _ in range(2):
        encode_ray(TEXTS, load, workers=2, run_token="one run")
    encode_runs_ray(sentences, [(0, 2), (3, 9)], load, workers=2, run_token="one run")
    assert 1 <= len(log.read_text().splitlines()) <= 2
    log.write_text("")
    for _ in range(3):
        encode_ray(TEXTS, load, workers=1)
    assert len(log.read_text().splitlines()) >= 3


# ----------------------------------------------------------------------------------------------------- encode


def test_cli_encode_distributed_writes_the_same_shards(capsys, tmp_path, fakes):
    text = write_lines(tmp_path / "in.txt", TEXTS)
    options = ["encode", "--input", text, "--shard-size", "4"]
    assert run(capsys, *options, "--out", str(tmp_path / "one/"))[0] == EXIT_OK
    code, out, err = run(capsys, *options, "--out", str(tmp_path / "ray/"), "--distributed", "ray", "--workers", "2")
    assert code == EXIT_OK, err
    assert "23 sentences encoded" in out
    assert _files(tmp_path / "ray") == _files(tmp_path / "one")
    # Mining over the shard folders: the same pairs file with and without Ray.
    mine = ["mine", "--src", str(tmp_path / "ray"), "--tgt", str(tmp_path / "one"), "--src-text", text]
    mine += ["--tgt-text", text, "--mode", "union"]
    assert run(capsys, *mine, "--out", str(tmp_path / "one.tsv"))[0] == EXIT_OK
    assert run(capsys, *mine, "--out", str(tmp_path / "ray.tsv"), "--distributed", "ray")[0] == EXIT_OK
    assert (tmp_path / "ray.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _timed_encoder(log: str):
    """An encoder that records when each batch starts and ends (a line per batch appended to ``log``)."""

    def encode(texts):
        start = time.time()
        time.sleep(0.5)
        with open(log, "a") as handle:
            handle.write(f"{start} {time.time()}\n")
        return _encode(texts)

    return encode


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_caps_the_batches_encoded_at_once(tmp_path, workers):
    # Two worker processes up before the run (starting one takes longer than a batch here).
    ray.get([ray.remote(_sleep).options(num_cpus=1).remote(1.0) for _ in range(2)])
    log = str(tmp_path / "batches.log")
    load = functools.partial(_timed_encoder, log)
    encode_shards_ray(tmp_path / "ray", TEXTS, load, encoder="fake", shard_size=4, workers=workers)
    spans = sorted(tuple(map(float, line.split())) for line in Path(log).read_text().splitlines())
    overlapping = sum(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    # The instance has 2 CPUs: with --workers 1 no two batches may run at once (they did: 2 were kept in flight);
    # with 2 they do (the check can see an overlap).
    assert len(spans) == 6 and (overlapping == 0 if workers == 1 else overlapping >= 2)


def _load_fake():
    return _encode


def _dying_encoder(marker: str, always: bool):
    """An encoder whose worker process dies (os._exit, no cleanup) at the batch holding "sentence 9": once, when
    the marker file is absent (it creates it), or every time."""

    def encode(texts):
        if "sentence 9" in texts and (always or not os.path.exists(marker)):
            open(marker, "w").close()
            os._exit(1)
        return _encode(texts)

    return encode


def test_a_worker_killed_once_is_retried_and_the_shards_are_identical(tmp_path):
    write_shards(tmp_path / "one", TEXTS, _encode, encoder="fake", shard_size=4)
    marker = str(tmp_path / "died")
    load = functools.partial(_dying_encoder, marker, False)
    _, encoded = encode_shards_ray(tmp_path / "ray", TEXTS, load, encoder="fake", shard_size=4, workers=2)
    assert os.path.exists(marker) and encoded == 23  # a worker did die, and its batch was encoded again
    assert _files(tmp_path / "ray") == _files(tmp_path / "one")


@pytest.fixture
def cancels(monkeypatch):
    """Every ray.cancel the code makes (none should be: a cancellation that meets a task's reply aborts the driver,
    ray-project/ray#54846; bitext_hf.encoding.ray's docstring)."""
    calls: list = []
    monkeypatch.setattr(ray, "cancel", lambda *args, **kwargs: calls.append((args, kwargs)))
    return calls


def test_a_worker_that_keeps_dying_fails_cleanly_and_resume_completes(tmp_path, cancels):
    load = functools.partial(_dying_encoder, str(tmp_path / "died"), True)
    with pytest.raises(BitextError) as caught:
        encode_shards_ray(tmp_path / "ray", TEXTS, load, encoder="fake", shard_size=4, workers=2, retries=0)
    message = str(caught.value)
    assert caught.value.exit_code == 1 and "\n" not in message and "Ray worker died" in message
    folder = tmp_path / "ray"
    assert MANIFEST not in os.listdir(folder)  # never presented as complete
    assert len(read_manifest(folder / PROGRESS).shards) == 2  # the shards before "sentence 9" were kept
    # --resume through Ray: the batches left are located in the plan (shards 2 to 5), 15 sentences encoded.
    _, encoded = encode_shards_ray(folder, TEXTS, _load_fake, encoder="fake", shard_size=4, resume=True, workers=2)
    assert encoded == 15
    write_shards(tmp_path / "one", TEXTS, _encode, encoder="fake", shard_size=4)
    assert _files(folder) == _files(tmp_path / "one")
    np.testing.assert_array_equal(np.asarray(open_shards(folder)), _encode(TEXTS))
    assert cancels == []


def _unloadable():
    raise EncoderLoadError("./no-such-model: no config.json")


def test_an_encoder_that_cannot_load_in_a_worker_is_its_own_error(tmp_path, cancels):
    with pytest.raises(EncoderLoadError, match="no-such-model") as caught:
        encode_shards_ray(tmp_path / "ray", TEXTS, _unloadable, encoder="x", shard_size=4, workers=2)
    assert caught.value.exit_code == 4 and not (tmp_path / "ray").exists()  # nothing was written: no folder
    # Two batches were in flight, the second failing as the first did: it is left to finish, not cancelled.
    assert cancels == []


# ----------------------------------------------------------------------------------------------------- bad input


def test_unreachable_address_and_stray_options_are_one_line_exit_2(capsys, tmp_path, fakes):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / "pairs.tsv"
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    code, _, err = run(
        capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out), "--distributed", "ray", "--ray-address", address
    )
    assert code == EXIT_USAGE and time.monotonic() - start < 10
    assert f"--ray-address {address}: no Ray cluster reachable" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and fakes.loaded == []  # refused before any encoder was loaded
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--workers", "2")
    assert code == EXIT_USAGE and "go with --distributed ray" in err
    code, _, err = run(capsys, "encode", "--input", src, "--out", str(tmp_path / "x.npy"), "--distributed", "ray")
    assert code == EXIT_USAGE and "writes a folder of shards" in err and not (tmp_path / "x.npy").exists()


def test_a_ray_head_passes_the_address_check_at_once():
    """The check that refuses servers that are not Ray (tests/test_hostile_runtime.py) lets a real head through: the
    GCS of this module's Ray instance, in well under the 10 s it allows."""
    address = ray.get_runtime_context().gcs_address
    start = time.monotonic()
    encoding_ray.check_ray_address(address)
    assert time.monotonic() - start < 2
