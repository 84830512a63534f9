"""Approximate mining on Ray: a FAISS index (``auto`` or a factory string) searched in parallel tasks, no task holding
a whole side; the same neighbour lists as :func:`bitext_hf.mining.index.search_neighbours` on the CPU with the same
index, nprobe and seed, so the same pairs and scores.

How (each direction in turn: sources among the targets, then targets among the sources):

1. The index is trained ONCE, in the driver, exactly as the single-process path trains it (``index.train_index``: the
   same seeded sample from both sides, the same k-means seed and iterations), serialized with
   ``faiss.serialize_index`` and put in Ray's object store.
2. The database side is cut into shards of rows; one task per shard fills a copy of the trained index with that
   shard (the shard's own rows only) and returns it serialized.
3. The query side is cut into tiles. For an index with inverted lists, one task per tile assigns it to its
   ``nprobe`` lists (the coarse quantizer's search, after the pre-transform if any: OPQ, PCA), once for all shards,
   since every shard's index holds the same trained centroids; the lists (and, for codes of residuals, the
   centroid similarities) go to the object store. Then one task per (tile, shard) searches the tile in that
   shard's filled index with those lists (FAISS's ``search_preassigned``, or the single-process list-by-list scan
   given them) for as many candidates as the single-process search asks for, and scores them exactly against the
   shard's rows (``index.candidate_sims``, the single-process re-scoring). Flat, PQ and SQ indexes without lists
   have nothing to assign: their search task scans its whole shard.
4. Each search task merges its shard's candidates into the tile's candidates over the earlier shards (the previous
   search task's output, an argument Ray waits for) by decreasing approximate similarity, then increasing index
   (the order :func:`bitext_hf.mining.distributed.knn_ray` merges by), keeping as many as the single-process
   search keeps. The driver fetches each tile's candidates once, after its last shard, and takes the k best by
   exact similarity (``index.best_candidates``).
5. Queries left with fewer than k candidates (their probed cells were nearly empty) are searched exactly, tile by
   shard, and merged the same way: the single-process fallback.

Why this design, and not merging the filled partial indexes (``merge_from``) into one: a merged index is the whole
side in one process, the ceiling this module removes. Why it equals one process: every search this module supports
is a scan of the vectors the query reaches (all of them for Flat/PQ/SQ; those of the ``nprobe`` cells the shared
trained centroids pick for IVF), and which cells a query probes depends only on the centroids; so the candidates of
the whole side are the union of the candidates of its shards, and the best ones of the union are the best ones of
the per-shard bests. A tile's lists are found by the same quantizer call on the same (padded) rows as each shard's
search would have made, so assigning it once changes no list. Graph indexes (HNSW, NSG) and refinement stages are
refused: a graph built over a shard is not part of the graph over the side. The equality holds to the bit as long as
FAISS computes one query vector product the same way in a smaller block; it can differ in the last bit between its
BLAS and its one-query-at-a-time kernels, which matters only where two candidates tie to that bit at the k-th place.
Exact ties of approximate similarities (repeated vectors) are ordered by index here and by FAISS's heap there.

What it costs: a filled shard is deserialized again by each of its tile tasks (one copy of the shard per task, plus
the rows for exact re-scoring); each query tile is put in the object store once and read by every shard's tasks
(of a shard folder that every node sees at the same path, only its name: each task reads its rows from the folder,
so that they never pass through the driver or its node's object store), and so are its lists (``nprobe`` int32 ids
a query, plus as many float32 similarities for codes of residuals), which stay there with the tile until the
direction ends (Ray spills the object store to disk beyond its memory). A tile is assigned once (tile rows x nlist products), not once per shard; each search task still applies the
pre-transform to its tile (a smaller product) and scans only its shard's probed lists. The candidates pass from
task to task in the object store, so the driver handles none per search task: it puts the rows of arrays (names of
shard folders' rows), submits the tasks, and fetches each tile's candidates once at the end (n x candidates in all,
as one process holds them). It holds the training sample, one tile's candidates at a time and the result. A search
task holds one tile, one shard and the tile's candidates: ``tile_rows`` + ``shard_rows`` rows; an assignment task
one tile and the trained index. FAISS runs on the CPU in the tasks (one thread each, as Ray's one-CPU tasks set
it).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator

import numpy as np

from bitext_hf.encoding.ray import DEFAULT_RETRIES, import_ray, ray_failure, ray_session
from bitext_hf.errors import UsageError
from bitext_hf.mining.distributed import (
    checked_sides,
    knn_ray,
    merge_forward,
    read_rows,
    rows_for_tasks,
    tasks_read_folders,
)
from bitext_hf.mining.index import list_by_list, pretransformed, scanned_list_by_list

__all__ = ["DEFAULT_SHARD_ROWS", "DEFAULT_TILE_ROWS", "knn_ray_index", "mine_ray_index"]

logger = logging.getLogger("bitext_hf")

# Query rows a search task takes: 65,536 rows are 200 MB of float32 at d = 768.
DEFAULT_TILE_ROWS = 65536
# Database rows a shard's index holds: 131,072 rows are 400 MB at d = 768 (twice that with the rows kept for exact
# re-scoring next to an IVF-Flat index).
DEFAULT_SHARD_ROWS = 131072

# A hook told of each task: (what it does, query rows, database rows).
TaskHook = Callable[[str, int, int], None]


def _ranges(total: int, rows: int, at_least: int) -> list[tuple[int, int]]:
    """Contiguous (start, stop) runs of at most ``rows`` rows, as even as can be, and at least ``at_least`` of them
    when there are enough rows (work for every worker)."""
    parts = max(math.ceil(total / rows), min(at_least, total), 1)
    bounds = np.linspace(0, total, parts + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def _check_rows(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"{name} must be an integer >= 1, got {value!r}")


def _check_shardable(factory: str, dim: int) -> None:
    """Refuse an index whose search over a whole side is not the union of its searches over shards."""
    import faiss

    from bitext_hf.mining.index import build_factory_index

    built = build_factory_index(dim, factory)
    index = faiss.downcast_index(built)  # a view: `built` owns it (and the index inside a pre-transform)
    if isinstance(index, faiss.IndexPreTransform):
        index = faiss.downcast_index(index.index)
    kinds = ("IndexHNSW", "IndexNSG", "IndexNNDescent", "IndexRefine")
    if isinstance(index, tuple(getattr(faiss, kind) for kind in kinds if hasattr(faiss, kind))):
        raise UsageError(
            f"index {factory!r} cannot be filled shard by shard on Ray (a graph or a refinement stage spans the whole "
            "side); use an IVF, Flat, PQ or SQ factory such as 'IVF1024,Flat', or index 'auto'"
        )


# ----------------------------------------------------------------------------------------------------- tasks


def _fill_shard(trained: np.ndarray, shard, nprobe: int | None) -> np.ndarray:
    """Ray task: the serialized trained index filled with one shard's rows (local ids 0..len(shard))."""
    import faiss

    from bitext_hf.mining.index import fill_index

    filled, _ = fill_index(faiss.deserialize_index(trained), read_rows(shard), nprobe, use_gpu=False)
    return faiss.serialize_index(filled)


def _padded_for_ivf(index, tile: np.ndarray) -> np.ndarray:
    """``tile``, its rows repeated when it is too small for FAISS's list-by-list search, which sorts the (query,
    probed cell) pairs into nlist + 1 buckets and needs more pairs than buckets. Each query's result depends on
    that query alone, so the repeats change nothing and are dropped."""
    from bitext_hf.mining.index import ivf_of

    ivf = ivf_of(index)
    if ivf is None:
        return tile
    needed = (ivf.nlist + 1) // max(1, ivf.nprobe) + 1
    return tile if tile.shape[0] >= needed else np.resize(tile, (needed, tile.shape[1]))


def _assign_tile(trained: np.ndarray, tile, nprobe: int | None):
    """Ray task: the ``nprobe`` lists each query of ``tile`` probes (int32 list ids) and their centroid similarities
    (None where the list-by-list scan does not use them): the coarse quantizer's search that FAISS would otherwise
    run again in every shard's search task. The tile is padded as the search pads it, so the quantizer computes
    each row in a batch of the same size (FAISS switches kernels with the batch size)."""
    import faiss

    tile = read_rows(tile)
    index = faiss.deserialize_index(trained)  # owns the IVF part and its quantizer: alive while they are used
    if nprobe is not None:
        faiss.ParameterSpace().set_index_parameter(index, "nprobe", int(nprobe))
    ivf, queries = pretransformed(index, _padded_for_ivf(index, tile))
    sims, lists = ivf.quantizer.search(queries, ivf.nprobe)
    rows = tile.shape[0]
    return (None if scanned_list_by_list(ivf) else sims[:rows]), lists[:rows].astype(np.int32)


def _search_preassigned(index, queries: np.ndarray, k: int, assignment) -> tuple[np.ndarray, np.ndarray]:
    """``index.search_filled`` on the CPU with each query's lists given (``assignment``, of the first rows of
    ``queries``; the padding rows repeat them as ``np.resize`` repeats the rows)."""
    sims, lists = assignment
    lists = np.resize(lists, (queries.shape[0], lists.shape[1]))
    ivf, transformed = pretransformed(index, queries)
    if scanned_list_by_list(ivf):
        return list_by_list(ivf, transformed, k, lists)
    sims = np.resize(sims, lists.shape)
    return ivf.search_preassigned(transformed, k, lists.astype(np.int64), sims)


def _search_tile(filled: np.ndarray, shard, tile, assignment, first: int, width: int, previous):
    """Ray task (two returns): the ``width`` best candidates of each query of ``tile`` over the shards searched so
    far, with their approximate and exact similarities, global indices, -1 / -inf where the probed cells held
    fewer; and (tile rows, shard rows) for the driver's progress. This shard's candidates (it starts at row
    ``first``) are merged into ``previous``, the tile's candidates over the earlier shards (None for the first), so
    the candidates stay in the object store, tile by tile, instead of passing through the driver once a shard.
    ``assignment``: the tile's lists from :func:`_assign_tile` (an IVF index), or None."""
    import faiss

    from bitext_hf.mining.index import RERANK_ROWS, candidate_sims, search_filled

    shard, tile = read_rows(shard), read_rows(tile)
    index = faiss.deserialize_index(filled)
    queries = _padded_for_ivf(index, tile)
    if assignment is None:
        approx, local = search_filled(index, queries, width, use_gpu=False)
    else:
        approx, local = _search_preassigned(index, queries, width, assignment)
    approx, local = approx[: tile.shape[0]], local[: tile.shape[0]].astype(np.int64)
    exact = np.empty(local.shape, dtype=np.float32)
    for start in range(0, tile.shape[0], RERANK_ROWS):  # the single-process re-scoring's row blocks
        rows = slice(start, start + RERANK_ROWS)
        exact[rows] = candidate_sims(tile[rows], shard, local[rows])
    found = local >= 0
    candidates = (np.where(found, approx, -np.inf).astype(np.float32), np.where(found, local + first, -1), exact)
    if previous is None:
        return candidates, (tile.shape[0], shard.shape[0])
    approx_lists, index_lists, exact_lists = zip(previous, candidates)
    merged = merge_forward(list(approx_lists), list(index_lists), width, list(exact_lists))
    return merged, (tile.shape[0], shard.shape[0])


def _exact_tile(shard, queries: np.ndarray, first: int, k: int):
    """Ray task: exact top-k of ``queries`` among one shard (the single-process fallback's search), global indices."""
    from bitext_hf.mining.knn import knn_search

    shard = read_rows(shard)
    sims, local = knn_search(queries, shard, k, normalize=False)
    return sims, np.where(local >= 0, local + first, -1), queries.shape[0], shard.shape[0]


# ----------------------------------------------------------------------------------------------------- driver


class TaskSlots:
    """At most ``slots`` Ray tasks in flight; yields each finished one's key and result as they finish."""

    def __init__(self, ray, slots: int, what: str) -> None:
        self.ray, self.slots, self.what = ray, slots, what
        self.pending: dict = {}  # ObjectRef -> key

    def run(self, submissions: Iterator[tuple[object, Callable[[], object]]]) -> Iterator[tuple[object, object]]:
        submissions = iter(submissions)
        exhausted = False
        try:
            while True:
                while not exhausted and len(self.pending) < self.slots:
                    nxt = next(submissions, None)
                    if nxt is None:
                        exhausted = True
                        break
                    key, submit = nxt
                    self.pending[submit()] = key
                if not self.pending:
                    return
                done, _ = self.ray.wait(list(self.pending), num_returns=1)
                key = self.pending.pop(done[0])
                yield key, self.ray.get(done[0])
        except self.ray.exceptions.RayError as error:
            # The tasks in flight are not cancelled: bitext_hf.encoding.ray's docstring says why.
            raise ray_failure(error, self.what) from None


def _search_direction(
    ray, queries, database, k, spec, trained_ref, options, preassign: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Neighbour lists (n, min(k, m)) of ``queries`` among ``database`` through the trained index, tile by shard;
    ``preassign``: the index has inverted lists, and each tile is assigned to them once, for all shards."""
    from bitext_hf.mining.index import best_candidates, candidate_count

    slots, tile_rows, shard_rows, retries, on_task, by_name = options
    n, m = queries.shape[0], database.shape[0]
    width, k = candidate_count(spec, k, database), min(k, m)
    tiles, shards = _ranges(n, tile_rows, slots), _ranges(m, shard_rows, 1)
    what = f"searching {n} x {m} ({spec}) in {len(tiles)} tiles x {len(shards)} shards of Ray tasks"
    fill = ray.remote(_fill_shard).options(num_cpus=1, max_retries=retries)
    assign = ray.remote(_assign_tile).options(num_cpus=1, max_retries=retries)
    search = ray.remote(_search_tile).options(num_cpus=1, max_retries=retries, num_returns=2)
    shard_refs: dict[int, tuple] = {}  # shard -> (its rows, its filled index): while tiles still need it
    tile_refs: dict[int, tuple] = {}  # tile -> (its rows, its lists or None)
    merged_refs: dict[int, object] = {}  # tile -> its candidates over the shards submitted so far
    left = {s: len(tiles) for s in range(len(shards))}

    def prepare(s: int) -> None:
        a, b = shards[s]
        rows_ref = ray.put(rows_for_tasks(database, a, b, by_name))
        shard_refs[s] = (rows_ref, fill.remote(trained_ref, rows_ref, spec.nprobe))
        if on_task is not None:
            on_task("fill", 0, b - a)

    def put_tile(t: int) -> None:
        # The lists are found by a task of its own, not by the tile's first search task: that task would return
        # them as a second object every later shard's search waits on (and re-runs for, if it fails), and would
        # run longer than its fellows. One more task per tile, which reads only the trained index, not a shard.
        # Ray starts the tile's search tasks once its lists are stored; waiting, they hold no CPU.
        a, b = tiles[t]
        tile_ref = ray.put(rows_for_tasks(queries, a, b, by_name))
        tile_refs[t] = (tile_ref, assign.remote(trained_ref, tile_ref, spec.nprobe) if preassign else None)
        if preassign and on_task is not None:
            on_task("assign", b - a, 0)

    def submissions():
        # The next shard is filled while the tiles search the current one.
        prepare(0)
        for s in range(len(shards)):
            if s + 1 < len(shards):
                prepare(s + 1)
            for t in range(len(tiles)):
                if t not in tile_refs:
                    put_tile(t)
                yield (s, t), lambda s=s, t=t: submit_search(s, t)

    def submit_search(s: int, t: int):
        # Task (t, s) takes task (t, s - 1)'s candidates as an argument: Ray starts it once they are stored, and
        # they never leave the object store until the tile's last shard (the driver only counts rows).
        rows_ref, filled_ref = shard_refs[s]
        tile_ref, lists_ref = tile_refs[t]
        merged_ref, counts_ref = search.remote(
            filled_ref, rows_ref, tile_ref, lists_ref, shards[s][0], width, merged_refs.get(t)
        )
        merged_refs[t] = merged_ref
        return counts_ref

    for (s, _), (tile_n, shard_n) in TaskSlots(ray, slots, what).run(submissions()):
        if on_task is not None:
            on_task("search", tile_n, shard_n)
        left[s] -= 1
        if not left[s]:
            del shard_refs[s]  # the object store may free this shard's rows and index
    tile_refs.clear()
    sims = np.empty((n, k), dtype=np.float32)
    found = np.empty((n, k), dtype=np.int64)
    for t, (a, b) in enumerate(tiles):
        _, indices, exact = ray.get(merged_refs.pop(t))
        sims[a:b], found[a:b] = best_candidates(exact, indices, k)
    missing = np.flatnonzero((found < 0).any(axis=1))
    if missing.size:
        logger.debug("%d queries found fewer than %d neighbours in their cells: searched exactly", missing.size, k)
        sims[missing], found[missing] = _exact_fallback(ray, queries[missing], database, k, shards, options)
    return sims, found


def _exact_fallback(ray, queries: np.ndarray, database, k: int, shards, options):
    """Exact top-k of ``queries`` among the whole database, tile by shard, merged by similarity then index."""
    slots, tile_rows, _, retries, on_task, by_name = options
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    tiles = _ranges(queries.shape[0], tile_rows, 1)
    task = ray.remote(_exact_tile).options(num_cpus=1, max_retries=retries)
    what = f"searching {queries.shape[0]} queries exactly in {len(shards)} shards of Ray tasks"

    def submissions():
        for a, b in shards:
            shard_ref = ray.put(rows_for_tasks(database, a, b, by_name))
            for t, (q0, q1) in enumerate(tiles):
                yield t, lambda s=shard_ref, q0=q0, q1=q1, c0=a: task.remote(s, queries[q0:q1], c0, k)

    merged: dict[int, tuple] = {}
    for t, (sims, indices, tile_n, shard_n) in TaskSlots(ray, slots, what).run(submissions()):
        if on_task is not None:
            on_task("exact", tile_n, shard_n)
        lists = ([sims], [indices]) if t not in merged else ([merged[t][0], sims], [merged[t][1], indices])
        merged[t] = merge_forward(*lists, k)
    return np.concatenate([merged[t][0] for t in range(len(tiles))]), np.concatenate(
        [merged[t][1] for t in range(len(tiles))]
    )


def knn_ray_index(
    src,
    tgt,
    k: int = 4,
    *,
    index="auto",
    nprobe: int | None = None,
    seed: int = 0,
    address: str | None = None,
    workers: int | None = None,
    tile_rows: int = DEFAULT_TILE_ROWS,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    retries: int = DEFAULT_RETRIES,
    on_task: TaskHook | None = None,
):
    """:func:`bitext_hf.mining.index.search_neighbours_unchecked` (checked inputs: arrays from ``check_pair`` or
    :class:`~bitext_hf.encoding.shards.ShardedEmbeddings`) with the index filled shard by shard and searched tile by
    shard in parallel Ray tasks; see the module docstring. An index that resolves to exact search goes to
    :func:`bitext_hf.mining.distributed.knn_ray`.

    Args:
        index, nprobe, seed: as in ``search_neighbours`` (``device="cpu"``: FAISS runs on the tasks' CPUs).
        address, workers, retries: see :func:`bitext_hf.encoding.ray.ray_session` and ``knn_ray``.
        tile_rows: query rows a search task takes at most (at least one tile per worker when there are enough).
        shard_rows: database rows one shard's index holds at most.
        on_task: called in the driver with (``"fill"`` | ``"assign"`` | ``"search"`` | ``"exact"``, query rows,
            database rows) of each task (a search task reports the rows it received; fill and assign tasks are
            reported as they are submitted): progress, or a check of what each task held.

    Returns:
        A :class:`~bitext_hf.mining.knn.BidirectionalKNN`, as the single-process index path returns it.

    Raises:
        UsageError: an index that cannot work for this corpus or cannot be split into shards, k or sizes out of
            range (before Ray starts). BitextError: workers kept dying.
    """
    import faiss

    from bitext_hf.mining.index import IndexSpec, ivf_of, resolve_index, train_index
    from bitext_hf.mining.knn import BidirectionalKNN, check_k

    n, m, dim = src.shape[0], tgt.shape[0], src.shape[1]
    check_k(k, n, m)
    _check_rows("tile_rows", tile_rows)
    _check_rows("shard_rows", shard_rows)
    spec = index if isinstance(index, IndexSpec) else resolve_index(index, n, m, dim, nprobe=nprobe)
    if spec.exact:
        return knn_ray(src, tgt, k, address=address, workers=workers, retries=retries)
    _check_shardable(spec.factory, dim)
    start = time.perf_counter()
    trained = train_index(spec, src, tgt, seed, use_gpu=False)  # the single-process training: same sample and seeds
    preassign = ivf_of(trained) is not None  # Flat, PQ, SQ: no lists to assign, each task scans its whole shard
    train_s = time.perf_counter() - start
    with ray_session(address, workers) as slots:
        ray = import_ray()
        trained_ref = ray.put(faiss.serialize_index(trained))
        by_name = tasks_read_folders(ray, src, tgt)
        options = (slots, int(tile_rows), int(shard_rows), retries, on_task, by_name)
        forward = _search_direction(ray, src, tgt, k, spec, trained_ref, options, preassign)
        backward = _search_direction(ray, tgt, src, k, spec, trained_ref, options, preassign)
    logger.info(
        "index %s on Ray: %d x %d, d=%d, trained in %.1fs, both directions in %.1fs",
        spec,
        n,
        m,
        dim,
        train_s,
        time.perf_counter() - start,
    )
    return BidirectionalKNN(forward[0], forward[1], backward[0], backward[1])


def mine_ray_index(
    src_embeddings,
    tgt_embeddings,
    *,
    index="auto",
    nprobe: int | None = None,
    seed: int = 0,
    address: str | None = None,
    workers: int | None = None,
    retries: int = DEFAULT_RETRIES,
    tile_rows: int = DEFAULT_TILE_ROWS,
    shard_rows: int = DEFAULT_SHARD_ROWS,
    k: int = 4,
    margin: str = "ratio",
    mode: str | None = None,
    threshold: float | None = None,
):
    """:func:`bitext_hf.mining.mine` with an index, searched in parallel Ray tasks (:func:`knn_ray_index`): the
    same pairs and scores as one process with the same index, nprobe and seed. Either side may be
    :class:`~bitext_hf.encoding.shards.ShardedEmbeddings`."""
    from bitext_hf.mining.retrieval import DEFAULT_MODE, check_settings, retrieve

    mode = mode or DEFAULT_MODE
    check_settings(margin, mode, threshold)
    src, tgt = checked_sides(src_embeddings, tgt_embeddings)
    knn = knn_ray_index(
        src,
        tgt,
        k,
        index=index,
        nprobe=nprobe,
        seed=seed,
        address=address,
        workers=workers,
        tile_rows=tile_rows,
        shard_rows=shard_rows,
        retries=retries,
    )
    return retrieve(knn, margin=margin, mode=mode, threshold=threshold)
