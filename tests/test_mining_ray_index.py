"""Approximate mining on Ray (bitext_hf.mining.distributed_index): the same neighbour lists, pairs and scores as the
single-process index path with the same index, nprobe and seed, with tiles and shards smaller than either side (no
task holds a whole side), from arrays and from shard folders; an index that cannot be split is one line.

One local Ray instance with 2 CPUs serves the whole module (starting one costs seconds); skipped without Ray."""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import ClassVar

import numpy as np
import pytest

from bitext_hf.encoding.shards import RowRange, open_shards, write_shards
from bitext_hf.errors import UsageError
from bitext_hf.mining import check_embeddings, mine
from bitext_hf.mining import index as index_module
from bitext_hf.mining.index import choose_index, resolve_index, search_neighbours

# The slow set (`python -m pytest -m slow`, which CI also runs): a Ray cluster started for the module.
pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")

from bitext_hf.mining import distributed, distributed_index  # noqa: E402
from bitext_hf.mining.distributed_index import knn_ray_index, mine_ray_index  # noqa: E402

FIELDS = ("forward_sims", "forward_indices", "backward_sims", "backward_indices")


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}},
    )
    yield
    ray.shutdown()


def _planted(n: int, m: int, dim: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``m`` targets of which the first ``min(n, m)`` are noisy copies of shuffled sources: pairs to find."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, dim)).astype(np.float32)
    tgt = rng.standard_normal((m, dim)).astype(np.float32)
    planted = min(n, m)
    tgt[:planted] = src[rng.permutation(n)[:planted]] + 0.3 * rng.standard_normal((planted, dim)).astype(np.float32)
    return check_embeddings(src), check_embeddings(tgt)


def _assert_same(one, split) -> None:
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(split, field), getattr(one, field), err_msg=field)


class _Rows:
    """The on_task hook of a test: the rows each task held, by what it did."""

    def __init__(self) -> None:
        self.tasks: list[tuple[str, int, int]] = []

    def __call__(self, kind: str, queries: int, database: int) -> None:
        self.tasks.append((kind, queries, database))

    def of(self, kind: str) -> list[tuple[int, int]]:
        return [(q, d) for what, q, d in self.tasks if what == kind]


@pytest.mark.parametrize(("factory", "nprobe"), [("IVF16,Flat", 3), ("IVF16,SQ8", 2)])
def test_ray_index_equals_one_process_and_no_task_holds_a_side(factory, nprobe):
    src, tgt = _planted(3000, 2600, 32)
    one = search_neighbours(src, tgt, 4, index=factory, nprobe=nprobe, seed=3, device="cpu")
    rows = _Rows()
    split = knn_ray_index(
        src, tgt, 4, index=factory, nprobe=nprobe, seed=3, workers=2, tile_rows=700, shard_rows=900, on_task=rows
    )
    _assert_same(one, split)
    searches = rows.of("search")
    # Forward: 5 tiles of 3000 sources x 3 shards of 2600 targets; backward: 4 tiles x 4 shards.
    assert len(searches) == 5 * 3 + 4 * 4 and len(rows.of("fill")) == 3 + 4 and not rows.of("exact")
    assert max(q for q, _ in searches) <= 700 and max(d for _, d in searches) <= 900
    # Each tile is assigned to its lists once, for all shards: 5 + 4 tiles.
    assert len(rows.of("assign")) == 5 + 4 and max(q for q, _ in rows.of("assign")) <= 700
    # The planted pairs are found: the search is not trivially empty.
    assert (split.forward_indices[:, 0] >= 0).all() and np.isfinite(split.forward_sims).all()


class _Ref:
    def __init__(self, value) -> None:
        self.value = value


class _Function:
    def __init__(self, function, returns: int = 1) -> None:
        self.function, self.returns = function, returns

    def options(self, num_returns: int = 1, **_) -> _Function:
        return _Function(self.function, num_returns)

    def remote(self, *args) -> _Ref | tuple[_Ref, ...]:
        value = self.function(*(arg.value if isinstance(arg, _Ref) else arg for arg in args))
        return _Ref(value) if self.returns == 1 else tuple(_Ref(part) for part in value)


class _InProcessRay:
    """The Ray calls the module makes, each task run at once in this process, where FAISS's calls can be counted."""

    exceptions = ray.exceptions
    fetched: ClassVar[list] = []  # what the driver fetched, in order (a test sets its own list)

    def put(self, value) -> _Ref:
        return _Ref(value)

    def remote(self, function) -> _Function:
        return _Function(function)

    def wait(self, refs: list, num_returns: int) -> tuple[list, list]:
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref: _Ref | list[_Ref]):
        if isinstance(ref, list):
            return [self.get(one) for one in ref]
        self.fetched.append(ref.value)
        return ref.value

    def nodes(self) -> list[dict]:
        return [{"NodeID": "a" * 56, "Alive": True}]


@pytest.mark.parametrize(("factory", "nprobe"), [("IVF16,Flat", 3), ("IVF16,SQ8", 2), ("OPQ8,IVF16,PQ8", 3)])
def test_each_tile_is_assigned_to_its_lists_once_for_all_shards(monkeypatch, factory, nprobe):
    """Every search of a FAISS index from Python is counted (FAISS's own C++ search assigns the queries to their
    lists first, and the list-by-list scan assigns them through the quantizer's Python search): one per tile, the
    assignment, and none in the search tasks of its shards."""
    import faiss

    src, tgt = _planted(3000, 2600, 32)
    one = search_neighbours(src, tgt, 4, index=factory, nprobe=nprobe, seed=3, device="cpu")
    searched: Counter = Counter()

    def counted(search, name):
        def wrapper(self, *args, **kwargs):
            searched[name] += 1
            return search(self, *args, **kwargs)

        return wrapper

    for name in dir(faiss):
        kind = getattr(faiss, name)
        if isinstance(kind, type) and issubclass(kind, faiss.Index) and "search" in vars(kind):
            monkeypatch.setattr(kind, "search", counted(vars(kind)["search"], name))
    monkeypatch.setattr(distributed_index, "import_ray", _InProcessRay)
    monkeypatch.setattr(distributed_index, "ray_session", lambda address, workers: contextlib.nullcontext(2))
    rows = _Rows()
    split = knn_ray_index(
        src, tgt, 4, index=factory, nprobe=nprobe, seed=3, tile_rows=700, shard_rows=900, on_task=rows
    )
    _assert_same(one, split)
    # Forward: 5 tiles x 3 shards; backward: 4 tiles x 4 shards.
    assert len(rows.of("search")) == 5 * 3 + 4 * 4 and len(rows.of("assign")) == 5 + 4 and not rows.of("exact")
    assert sum(searched.values()) == 5 + 4, searched


def test_candidates_stay_in_the_object_store_until_their_tile_is_done(monkeypatch):
    """Each search task merges its shard's candidates into the tile's (the previous task's output): the driver
    fetches a tile's candidates once, not once a (tile, shard) task, and gets only row counts from search tasks."""
    src, tgt = _planted(3000, 2600, 32)
    one = search_neighbours(src, tgt, 4, index="IVF16,Flat", nprobe=3, seed=3, device="cpu")
    fetched: list = []
    monkeypatch.setattr(_InProcessRay, "fetched", fetched)
    monkeypatch.setattr(distributed_index, "import_ray", _InProcessRay)
    monkeypatch.setattr(distributed_index, "ray_session", lambda address, workers: contextlib.nullcontext(2))
    split = knn_ray_index(src, tgt, 4, index="IVF16,Flat", nprobe=3, seed=3, tile_rows=700, shard_rows=900)
    _assert_same(one, split)
    candidates = [value for value in fetched if isinstance(value, tuple) and len(value) == 3]
    counts = [value for value in fetched if isinstance(value, tuple) and len(value) == 2]
    # Forward: 5 tiles x 3 shards; backward: 4 tiles x 4 shards.
    assert len(candidates) == 5 + 4
    assert len(counts) == 5 * 3 + 4 * 4 and sum(rows for rows, _ in counts) == 3000 * 3 + 2600 * 4
    assert sum(block[0].shape[0] for block in candidates) == 3000 + 2600


def test_ray_mining_gives_the_same_pairs_and_scores():
    src, tgt = _planted(3000, 3000, 32, seed=1)
    one = mine(src, tgt, index="IVF16,Flat", nprobe=4, device="cpu", threshold=1.05)
    split = mine_ray_index(
        src, tgt, index="IVF16,Flat", nprobe=4, threshold=1.05, workers=2, tile_rows=1000, shard_rows=1000
    )
    assert len(one) > 2000  # most planted pairs pass the threshold
    for field in ("src_indices", "tgt_indices", "scores", "cosines"):
        np.testing.assert_array_equal(getattr(split, field), getattr(one, field), err_msg=field)


def _shard_folders(tmp_path, *sides) -> list:
    folders = []
    for name, side in zip(("src", "tgt"), sides, strict=True):
        texts = [str(row) for row in range(side.shape[0])]
        write_shards(
            tmp_path / name,
            texts,
            lambda batch, side=side: side[[int(text) for text in batch]],
            encoder="planted",
            shard_size=300,
        )
        folders.append(open_shards(tmp_path / name))
    return folders


def test_shard_folders_are_searched_as_arrays(tmp_path):
    src, tgt = _planted(1200, 1000, 32, seed=2)
    folders = _shard_folders(tmp_path, src, tgt)
    one = search_neighbours(src, tgt, 4, index="IVF8,Flat", nprobe=2, device="cpu")
    split = knn_ray_index(*folders, 4, index="IVF8,Flat", nprobe=2, workers=2, tile_rows=500, shard_rows=400)
    _assert_same(one, split)


class _NodeWithoutTheFolders(_InProcessRay):
    """A cluster with a node that does not see the shard folders (no shared file system)."""

    def remote(self, function) -> _Function:
        if function is distributed._folder_digests:
            return _Function(lambda folders: dict.fromkeys(folders))
        return _Function(function)


def _put_searching_folders(tmp_path, monkeypatch, cluster: type[_InProcessRay]):
    """(the sides, what the driver put in the object store, split by kind) of an in-process search of two shard
    folders, checked equal to one process on the arrays."""
    src, tgt = _planted(1200, 1000, 32, seed=2)
    folders = _shard_folders(tmp_path, src, tgt)
    one = search_neighbours(src, tgt, 4, index="IVF8,Flat", nprobe=2, device="cpu")
    put: list = []
    monkeypatch.setattr(_InProcessRay, "put", lambda self, value: put.append(value) or _Ref(value))
    monkeypatch.setattr(distributed_index, "import_ray", cluster)
    monkeypatch.setattr(distributed_index, "ray_session", lambda address, workers: contextlib.nullcontext(2))
    _assert_same(one, knn_ray_index(*folders, 4, index="IVF8,Flat", nprobe=2, tile_rows=500, shard_rows=400))
    named = [value for value in put if isinstance(value, RowRange)]
    rows = [value for value in put if isinstance(value, np.ndarray) and value.dtype == np.float32]
    return (src, tgt), named, rows


def test_tasks_read_shard_folders_themselves_and_the_driver_puts_no_rows(tmp_path, monkeypatch):
    """Of shard folders every node sees, the driver puts only rows' names (folder, shards, norms) in the object
    store, never the rows: each task reads its own, and the result is the same as from the arrays."""
    (src, tgt), named, rows = _put_searching_folders(tmp_path, monkeypatch, _InProcessRay)
    # Forward: 3 tiles of 1200 sources and 3 shards of 1000 targets (one spans two 300-row files); backward: 2 + 3.
    assert len(named) == 3 + 3 + 2 + 3 and not rows
    assert sum(value.count for value in named) == 2 * (1200 + 1000)
    # Each names the rows the arrays would have held.
    assert any(len(value.shards) == 2 for value in named)
    for value in named:
        side = src if value.folder == str(tmp_path / "src") else tgt
        first = 300 * int(value.shards[0][0].split("-")[1].split(".")[0]) + value.offset
        np.testing.assert_array_equal(value.read(), side[first : first + value.count])


def test_without_a_shared_file_system_the_driver_passes_the_rows(tmp_path, monkeypatch):
    _, named, rows = _put_searching_folders(tmp_path, monkeypatch, _NodeWithoutTheFolders)
    assert not named and len(rows) == 3 + 3 + 2 + 3


def test_auto_resolves_as_one_process(monkeypatch):
    src, tgt = _planted(3000, 3000, 32, seed=4)
    assert choose_index(3000, 3000, 32).exact  # small corpora: auto is the exact engine, on Ray too
    _assert_same(search_neighbours(src, tgt, 4, index="auto"), knn_ray_index(src, tgt, 4, index="auto", workers=2))
    # With the exact budget at zero, auto picks IVF-Flat at this size, in the driver of both paths alike.
    monkeypatch.setattr(index_module, "EXACT_MAX_PAIRS", 0)
    spec = resolve_index("auto", 3000, 3000, 32)
    assert spec.factory.startswith("IVF") and spec.factory.endswith(",Flat")
    one = search_neighbours(src, tgt, 4, index="auto", device="cpu")
    _assert_same(one, knn_ray_index(src, tgt, 4, index="auto", workers=2, tile_rows=1000, shard_rows=1000))


def test_queries_in_nearly_empty_cells_fall_back_to_exact_search_as_one_process():
    src, tgt = _planted(500, 400, 16, seed=5)
    one = search_neighbours(src, tgt, 4, index="IVF128,Flat", nprobe=1, device="cpu")
    rows = _Rows()
    split = knn_ray_index(
        src, tgt, 4, index="IVF128,Flat", nprobe=1, workers=2, tile_rows=150, shard_rows=150, on_task=rows
    )
    assert rows.of("exact")  # some queries probed cells with fewer than 4 vectors
    assert max(d for _, d in rows.of("exact")) <= 150
    _assert_same(one, split)


@pytest.mark.parametrize(
    ("factory", "words"),
    [("IVF16,Nonsense", "not a FAISS factory string"), ("HNSW32", "shard by shard"), ("IVF16,Flat,RFlat", "shard")],
)
def test_an_index_that_cannot_work_is_one_line(factory, words):
    src, tgt = _planted(300, 300, 32)
    with pytest.raises(UsageError) as error:
        knn_ray_index(src, tgt, 4, index=factory, workers=2)
    assert words in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(("option", "value"), [("tile_rows", 0), ("shard_rows", 1.5)])
def test_tile_and_shard_sizes_are_checked(option, value):
    src, tgt = _planted(300, 300, 32)
    with pytest.raises(UsageError, match=option):
        knn_ray_index(src, tgt, 4, index="IVF4,Flat", workers=2, **{option: value})
