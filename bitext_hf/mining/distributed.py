"""Exact mining across workers and machines with Ray (the ``distributed`` extra: ``pip install ray``), in the Ray
session of :func:`bitext_hf.encoding.ray.ray_session` (which also holds the Ray encoding).

:func:`knn_ray` splits the targets into contiguous runs of the single-process engine's column blocks; one task per
run computes, with the engine's own block geometry, the forward top-k of every source among those targets and the
backward top-k of those targets among all sources (complete, since every source is seen). The backward lists are
therefore the single-process ones; the forward lists are merged exactly, by decreasing similarity and then
increasing target index, the order the fused CPU engine keeps. Every similarity is computed from the same block
shapes as in one process, so :func:`mine_ray` returns the same pairs and the same scores, bit for bit, on CPU (the
torch/GPU engine orders exact ties as ``torch.topk`` does, which is not specified).

The sources travel through Ray's object store once (shared by every task on a machine); the targets one run per
task, with only as many runs in flight as tasks run at a time. Of a shard folder that every node sees at the same
path (one machine, or a shared file system; a probe task on each node checks), a task gets only its run's name
(``RowRange``) and reads the rows itself; otherwise the driver reads each run and passes the rows.
A task whose worker dies is retried by Ray (``retries``); past that, or when a task raises, the error is one line
and nothing is presented as complete (pairs: written only after mining).
"""

from __future__ import annotations

import itertools
import logging
import math
import os
from collections import deque

import numpy as np

from bitext_hf.encoding.ray import DEFAULT_RETRIES, gpus_per_task, import_ray, ray_failure, ray_session

__all__ = ["MAX_RUN_BLOCKS", "checked_sides", "knn_ray", "merge_forward", "mine_ray"]

logger = logging.getLogger("bitext_hf")

# Column blocks in one mining task at most (8,192 targets each by default: about 400 MB of float32 at d=768), so
# that a large target side travels through the object store a few runs at a time.
MAX_RUN_BLOCKS = 16


def _block_geometry(n: int, m: int, block_elements: int) -> tuple[int, int]:
    """(rows, columns) of a similarity block exactly as ``bidirectional_knn`` chooses them for n x m."""
    block_cols = min(m, max(1, block_elements // 4096))
    return max(1, min(n, block_elements // block_cols)), block_cols


def _folder_digests(folders: list[str]) -> dict[str, str | None]:
    """Ray task: the SHA-256 of each shard folder's manifest as this node sees it (None where it sees none)."""
    import hashlib

    from bitext_hf.encoding.shards import MANIFEST

    digests: dict[str, str | None] = {}
    for folder in folders:
        try:
            with open(os.path.join(folder, MANIFEST), "rb") as handle:
                digests[folder] = hashlib.file_digest(handle, "sha256").hexdigest()  # streamed, whatever its size
        except OSError:
            digests[folder] = None
    return digests


def tasks_read_folders(ray, *sides) -> bool:
    """Whether the tasks may read their rows from the sides' shard folders themselves: every node of the cluster
    sees each folder at the driver's path with the driver's manifest (one probe task pinned to each node). Else
    the driver reads the rows and passes them, as for arrays: a cluster without a shared file system still works."""
    from bitext_hf.encoding.shards import ShardedEmbeddings

    folders = sorted({side.folder for side in sides if isinstance(side, ShardedEmbeddings)})
    if not folders:
        return False
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    expected = _folder_digests(folders)
    probe = ray.remote(_folder_digests)
    nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive")]
    pinned = (NodeAffinitySchedulingStrategy(node, soft=False) for node in nodes)
    seen = ray.get([probe.options(num_cpus=0, scheduling_strategy=node).remote(folders) for node in pinned])
    shared = all(digests == expected for digests in seen)
    logger.info(
        "shard folders %s: %s",
        ", ".join(folders),
        "read by the tasks (every node sees them)" if shared else "read by the driver (not every node sees them)",
    )
    return shared


def rows_for_tasks(side, start: int, stop: int, by_name: bool):
    """What the tasks get for rows ``start`` to ``stop`` of a side: of a shard folder every node sees
    (``by_name``), a ``RowRange`` (each task reads the rows from the folder itself, so they never pass through the
    driver or the object store); else the rows."""
    from bitext_hf.encoding.shards import ShardedEmbeddings

    named = side.row_range(start, stop) if by_name and isinstance(side, ShardedEmbeddings) else None
    return named if named is not None else np.ascontiguousarray(side[start:stop], dtype=np.float32)


def read_rows(rows) -> np.ndarray:
    """In a task: the rows it was given, or read from a ``RowRange``."""
    from bitext_hf.encoding.shard_rows import RowRange

    return rows.read() if isinstance(rows, RowRange) else rows


def search_run(src, tgt_run, c0: int, k_fwd: int, k_bwd: int, block_rows: int, block_cols: int, backend: str):
    """Ray task: forward top-k of every source among one run of target columns and backward top-k of those targets
    among all sources, with the single-process block geometry (the engine's own block loops, so every block and
    every similarity is the one a single process computes). Target indices in the forward lists are global."""
    from bitext_hf.mining.knn import fused_blocks, fused_kernel, resolve_device, torch_blocks

    tgt_run = read_rows(tgt_run)
    device = resolve_device(None)
    fused = backend == "fused" or (backend == "auto" and device.type == "cpu" and fused_kernel() is not None)
    run = fused_blocks if fused else torch_blocks  # both on the task's one torch thread (Ray's one-CPU tasks)
    k_run = min(k_fwd, tgt_run.shape[0])  # a run narrower than k has fewer forward candidates; the merge adds up
    result = run(src, tgt_run, k_run, k_bwd, range(0, src.shape[0], block_rows), block_rows, block_cols, device)
    forward_indices = np.where(result.forward_indices >= 0, result.forward_indices + c0, -1)
    return result.forward_sims, forward_indices, result.backward_sims, result.backward_indices


def merge_forward(
    sims: list[np.ndarray], indices: list[np.ndarray], k: int, *carried: list[np.ndarray]
) -> tuple[np.ndarray, ...]:
    """Exact top-k of each row over the concatenated per-run lists: decreasing similarity, ties to the lower index
    (what one pass of the fused engine keeps). Empty slots (-inf, -1) sort last. Each list of ``carried`` (one
    array per run, shaped like ``sims``) is reordered alongside and returned after the similarities and indices."""
    all_sims, all_indices = np.concatenate(sims, axis=1), np.concatenate(indices, axis=1)
    order = np.lexsort((all_indices, -all_sims), axis=1)[:, :k]
    columns = (all_sims, all_indices, *(np.concatenate(column, axis=1) for column in carried))
    return tuple(np.take_along_axis(column, order, axis=1) for column in columns)


def _column_runs(n_blocks: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous runs of column blocks, as even as can be: (first block, end block)."""
    bounds = np.linspace(0, n_blocks, parts + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if b > a]


def knn_ray(
    src,
    tgt,
    k: int = 4,
    *,
    address: str | None = None,
    workers: int | None = None,
    block_elements: int | None = None,
    backend: str = "auto",
    retries: int = DEFAULT_RETRIES,
    max_run_blocks: int = MAX_RUN_BLOCKS,
):
    """:func:`bitext_hf.mining.knn.bidirectional_knn_unchecked` (checked inputs: arrays from ``check_pair`` or
    ``ShardedEmbeddings``) with the target column blocks searched in parallel Ray tasks; see the module docstring.

    The targets are cut into runs of at most ``max_run_blocks`` column blocks (8,192 targets each by default), at
    least one run per worker when there are enough blocks; as many runs are in flight as tasks run at a time, so the
    object store holds the sources and about ``workers`` runs of targets. A target side of one block is one task:
    splitting it at other places would change the blocks, hence the last bits of some similarities.
    """
    from bitext_hf.mining.knn import DEFAULT_BLOCK_ELEMENTS, BidirectionalKNN, check_k

    n, m = src.shape[0], tgt.shape[0]
    check_k(k, n, m)
    k_fwd, k_bwd = min(k, m), min(k, n)
    block_rows, block_cols = _block_geometry(n, m, block_elements or DEFAULT_BLOCK_ELEMENTS)
    n_blocks = math.ceil(m / block_cols)
    backward_sims = np.empty((m, k_bwd), dtype=np.float32)
    backward_indices = np.empty((m, k_bwd), dtype=np.int64)
    forward: tuple[np.ndarray, np.ndarray] | None = None
    with ray_session(address, workers) as slots:
        ray = import_ray()
        runs = _column_runs(n_blocks, max(slots, math.ceil(n_blocks / max(1, max_run_blocks))))
        task = ray.remote(search_run).options(num_cpus=1, num_gpus=gpus_per_task(ray), max_retries=retries)
        src_ref = ray.put(np.ascontiguousarray(src[0:n]))  # sources once, shared by every task on a machine
        by_name = tasks_read_folders(ray, tgt)
        pending: dict = {}  # ObjectRef -> first target of its run
        queue = deque((first * block_cols, min(m, end * block_cols)) for first, end in runs)
        try:
            while queue or pending:
                while queue and len(pending) < slots:
                    c0, c1 = queue.popleft()
                    run = rows_for_tasks(tgt, c0, c1, by_name)
                    ref = task.remote(src_ref, run, c0, k_fwd, k_bwd, block_rows, block_cols, backend)
                    pending[ref] = c0
                done, _ = ray.wait(list(pending), num_returns=1)
                c0 = pending.pop(done[0])
                fwd_sims, fwd_idx, bwd_sims, bwd_idx = ray.get(done[0])
                backward_sims[c0 : c0 + len(bwd_sims)], backward_indices[c0 : c0 + len(bwd_sims)] = bwd_sims, bwd_idx
                # The merge is by (similarity, index) alone, so runs may finish in any order.
                lists = ([fwd_sims], [fwd_idx]) if forward is None else ([forward[0], fwd_sims], [forward[1], fwd_idx])
                forward = merge_forward(*lists, k_fwd)
        except ray.exceptions.RayError as error:
            # The runs in flight are not cancelled: bitext_hf.encoding.ray's docstring says why.
            raise ray_failure(error, f"searching {n} x {m} in {len(runs)} Ray tasks") from None
    logger.info("kNN over %d x %d in %d Ray task(s) of %d-column blocks", n, m, len(runs), block_cols)
    return BidirectionalKNN(forward[0], forward[1], backward_sims, backward_indices)


def checked_sides(src_embeddings, tgt_embeddings):
    """Both sides to search: arrays validated and L2-normalized (``check_embeddings``), shard folders as they are
    (checked when opened); a ``DataValidationError`` when their dimensions differ."""
    from bitext_hf.data.embeddings import check_embeddings
    from bitext_hf.encoding.shards import ShardedEmbeddings
    from bitext_hf.errors import DataValidationError

    src, tgt = (
        side if isinstance(side, ShardedEmbeddings) else check_embeddings(side, name)
        for side, name in ((src_embeddings, "source embeddings"), (tgt_embeddings, "target embeddings"))
    )
    if src.shape[1] != tgt.shape[1]:
        raise DataValidationError(
            f"dimension mismatch: source embeddings have dimension {src.shape[1]} but target embeddings "
            f"{tgt.shape[1]}; both sides must come from the same encoder"
        )
    return src, tgt


def mine_ray(
    src_embeddings,
    tgt_embeddings,
    *,
    address: str | None = None,
    workers: int | None = None,
    retries: int = DEFAULT_RETRIES,
    block_elements: int | None = None,
    k: int = 4,
    margin: str = "ratio",
    mode: str | None = None,
    threshold: float | None = None,
):
    """:func:`bitext_hf.mining.mine` (exact index) with the search in parallel Ray tasks (:func:`knn_ray`): the same
    pairs and scores. Either side may be :class:`~bitext_hf.encoding.shards.ShardedEmbeddings`."""
    from bitext_hf.mining.retrieval import DEFAULT_MODE, check_settings, retrieve

    mode = mode or DEFAULT_MODE
    check_settings(margin, mode, threshold)
    src, tgt = checked_sides(src_embeddings, tgt_embeddings)
    knn = knn_ray(src, tgt, k, address=address, workers=workers, block_elements=block_elements, retries=retries)
    return retrieve(knn, margin=margin, mode=mode, threshold=threshold)
