"""Exact k-nearest-neighbour search by inner product, in both directions from one pass over the similarity matrix.

Margin mining needs, for every source, its k nearest targets and, for every target, its k nearest sources. Both
come from the same N x M cosine matrix. LASER and sentence-transformers run two independent searches and so compute
that matrix twice; :func:`bidirectional_knn` computes it once, block by block, and keeps the row top-k and the column
top-k of every block. Memory is bounded by one block plus the (N + M) x k results, never N x M.

Every entry validates first: :func:`check_embeddings` L2-normalizes the rows (cosine = inner product) and refuses rows
that cannot be used, naming the row; :func:`check_k` bounds k, whose cost grows faster than k.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from bitext_hf.data.embeddings import check_embeddings
from bitext_hf.errors import DataValidationError, UsageError

__all__ = [
    "MAX_K",
    "BidirectionalKNN",
    "bidirectional_knn",
    "bidirectional_knn_unchecked",
    "check_k",
    "check_pair",
    "ivf_index",
    "knn_search",
]

logger = logging.getLogger(__name__)

# Elements of one similarity block (float32): 2^25 elements = 128 MiB. Large enough that the matrix product runs at
# full BLAS speed, small enough for a laptop. The top-k bookkeeping is a small share of the product with the fused
# CPU sweep (`fused_topk.py`), a large one with each topk pass of the torch path (benchmarks/README.md, "Mining").
DEFAULT_BLOCK_ELEMENTS = 1 << 25
# On CUDA, blocks 8 times larger: fewer blocks mean fewer kernel launches and fewer merges into the running lists,
# and a GPU holds a 1 GiB block easily (faster on an H200: benchmarks/README.md, "On a GPU").
# Used when the caller leaves block_elements at its default.
CUDA_BLOCK_ELEMENTS = 1 << 28

# The largest neighbourhood accepted. A similarity enters a sorted top-k list at a cost of up to k shifts, and the
# larger k is the more of them enter, so time grows faster than k (measured in benchmarks/README.md, "what k
# costs"); margin mining uses k = 4 to 16.
MAX_K = 256

# The arithmetic of the similarity products on the torch path: float32, or half precision on a GPU, whose matrix
# units run fp16 and bf16 products many times faster than float32 (benchmarks/README.md, "On a GPU").
PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class BidirectionalKNN:
    """Exact neighbourhoods in both directions.

    Attributes:
        forward_sims (np.ndarray, (N, kf)): inner products of each source with its kf nearest targets, descending.
        forward_indices (np.ndarray, (N, kf)): the target indices of those neighbours.
        backward_sims (np.ndarray, (M, kb)): inner products of each target with its kb nearest sources, descending.
        backward_indices (np.ndarray, (M, kb)): the source indices of those neighbours.
    """

    forward_sims: np.ndarray
    forward_indices: np.ndarray
    backward_sims: np.ndarray
    backward_indices: np.ndarray


def _check_positive_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise UsageError(f"k must be an integer >= 1, got {k!r}")


def check_k(k: int, n_src: int, n_tgt: int) -> None:
    """Refuse a neighbourhood size that is not an integer >= 1 or, once capped at the corpus sizes, above MAX_K.

    Raises:
        UsageError: with the bound and the memory the neighbour lists alone would take.
    """
    _check_positive_k(k)
    k_fwd, k_bwd = min(int(k), n_tgt), min(int(k), n_src)
    if max(k_fwd, k_bwd) > MAX_K:
        # Per neighbour: a float32 similarity and an int64 index, for every source and every target.
        list_bytes = 12 * (n_src * k_fwd + n_tgt * k_bwd)
        raise UsageError(
            f"k={k} is above the maximum of {MAX_K} neighbours: exact neighbour lists get slower faster than k grows "
            f"(one thread, 5k x 5k: 0.2 s at k=4, 30 s at k=1024; benchmarks/README.md) and for {n_src} x {n_tgt} "
            f"sentences they alone would take about {list_bytes / 2**20:,.0f} MiB; margin mining uses k = 4 to 16"
        )


def check_pair(
    x: np.ndarray, y: np.ndarray, x_name: str, y_name: str, normalize: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides through :func:`check_embeddings` (named ``x_name`` and ``y_name`` in messages), and the same
    dimension on both (a ``DataValidationError`` otherwise): what the searches of checked inputs
    (:func:`bidirectional_knn_unchecked`, :func:`~bitext_hf.mining.index.search_neighbours_unchecked`) need first."""
    x = check_embeddings(x, x_name, normalize=normalize)
    y = check_embeddings(y, y_name, normalize=normalize)
    if x.shape[1] != y.shape[1]:
        raise DataValidationError(
            f"dimension mismatch: {x_name} has dimension {x.shape[1]} but {y_name} has {y.shape[1]}; "
            "both sides must come from the same encoder"
        )
    return x, y


def _as_tensor(array: np.ndarray, device: torch.device) -> torch.Tensor:
    """A tensor view of ``array``; read-only inputs (memory-mapped .npy files) are fine since nothing writes to it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array).to(device)


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


# torch.topk reads a long row at a small fraction of a GPU's memory bandwidth, while a maximum over groups of
# consecutive entries reads it at full speed (benchmarks/README.md, "On a GPU"). The k groups with the largest maxima
# hold the k largest entries (a group holding none of them has a maximum no larger than the k-th), so the exact top-k
# is the top-k of those k groups' entries: one full-speed pass over the block and top-k passes over 1/TOPK_GROUP of it.
TOPK_GROUP = 32


def row_topk(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``sims.topk(k, dim=1)`` (values and column indices, best first) by group maxima; the same values exactly, and
    among tied entries any may be chosen, as with ``torch.topk``."""
    rows, cols = sims.shape
    groups = cols // TOPK_GROUP
    if groups <= k:
        return sims.topk(k, dim=1)
    body = sims[:, : groups * TOPK_GROUP].view(rows, groups, TOPK_GROUP)
    top_groups = body.amax(dim=2).topk(k, dim=1).indices  # (rows, k)
    candidates = body.gather(1, top_groups.unsqueeze(2).expand(rows, k, TOPK_GROUP)).reshape(rows, k * TOPK_GROUP)
    values, position = candidates.topk(k, dim=1)
    indices = top_groups.gather(1, position // TOPK_GROUP) * TOPK_GROUP + position % TOPK_GROUP
    if cols > groups * TOPK_GROUP:  # the columns after the last whole group
        tail_values, tail_indices = sims[:, groups * TOPK_GROUP :].topk(min(k, cols - groups * TOPK_GROUP), dim=1)
        return _merge_topk(values, indices, tail_values, tail_indices + groups * TOPK_GROUP, k)
    return values, indices


def column_topk(sims: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``sims.T.topk(k, dim=1)`` (for each column, its k largest entries and their row indices) by group maxima over
    consecutive rows, without transposing the block."""
    rows, cols = sims.shape
    groups = rows // TOPK_GROUP
    if groups <= k:
        return sims.T.topk(k, dim=1)
    body = sims[: groups * TOPK_GROUP].view(groups, TOPK_GROUP, cols)
    top_groups = body.amax(dim=1).topk(k, dim=0).indices  # (k, cols)
    candidates = body.gather(0, top_groups.unsqueeze(1).expand(k, TOPK_GROUP, cols)).reshape(k * TOPK_GROUP, cols)
    values, position = candidates.topk(k, dim=0)
    indices = top_groups.gather(0, position // TOPK_GROUP) * TOPK_GROUP + position % TOPK_GROUP
    values, indices = values.T, indices.T
    if rows > groups * TOPK_GROUP:  # the rows after the last whole group
        tail_values, tail_indices = sims[groups * TOPK_GROUP :].T.topk(min(k, rows - groups * TOPK_GROUP), dim=1)
        return _merge_topk(values, indices, tail_values, tail_indices + groups * TOPK_GROUP, k)
    return values, indices


def _merge_topk(
    values: torch.Tensor, indices: torch.Tensor, new_values: torch.Tensor, new_indices: torch.Tensor, k: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k along dim 1 of the union of two candidate lists (both (rows, *))."""
    all_values = torch.cat([values, new_values], dim=1)
    all_indices = torch.cat([indices, new_indices], dim=1)
    top_values, position = all_values.topk(min(k, all_values.shape[1]), dim=1)
    return top_values, all_indices.gather(1, position)


def bidirectional_knn(
    x: np.ndarray,
    y: np.ndarray,
    k: int = 4,
    *,
    k_backward: int | None = None,
    block_elements: int = DEFAULT_BLOCK_ELEMENTS,
    device: str | torch.device | None = None,
    show_progress: bool = False,
    backend: str = "auto",
    normalize: bool = True,
    precision: str = "fp32",
) -> BidirectionalKNN:
    """Exact top-k by inner product of every row of ``x`` among ``y`` and of every row of ``y`` among ``x``: both
    sides validated (:func:`check_pair`, L2-normalized unless ``normalize=False``: raw inner products), then
    searched by :func:`bidirectional_knn_unchecked`, whose arguments the others are.

    Raises:
        UsageError: k below 1 or above :data:`MAX_K` (see :func:`check_k`).
        DataValidationError: unusable embeddings (see :func:`check_embeddings`).
    """
    x, y = check_pair(x, y, "source embeddings", "target embeddings", normalize)
    return bidirectional_knn_unchecked(
        x,
        y,
        k,
        k_backward=k_backward,
        block_elements=block_elements,
        device=device,
        show_progress=show_progress,
        backend=backend,
        precision=precision,
    )


def bidirectional_knn_unchecked(
    x: Any,
    y: Any,
    k: int = 4,
    *,
    k_backward: int | None = None,
    block_elements: int = DEFAULT_BLOCK_ELEMENTS,
    device: str | torch.device | None = None,
    show_progress: bool = False,
    backend: str = "auto",
    precision: str = "fp32",
) -> BidirectionalKNN:
    """Exact top-k by inner product of every row of ``x`` among ``y`` and of every row of ``y`` among ``x``, for
    inputs validated already: arrays from :func:`check_pair`, or row sources not in memory whose ``[a:b]`` gives rows
    ``a`` to ``b`` as C-contiguous float32 (``bitext_hf.encoding.shards.ShardedEmbeddings``). A row source is read one
    block at a time; the blocks are those of the concatenated arrays, so the results are the same, bit for bit.

    Each block of the similarity matrix is computed once; its row-wise and column-wise top-k are merged into the
    running results. ``k`` is capped at the size of the other side.

    Args:
        x (np.ndarray, (N, d)): source embeddings (L2-normalized for cosine).
        y (np.ndarray, (M, d)): target embeddings.
        k (int, defaults to 4): neighbours per source; also per target unless ``k_backward`` is given.
        k_backward (int, optional): neighbours per target.
        block_elements (int): size of one similarity block in elements (memory = 4 bytes each); the default is
            :data:`CUDA_BLOCK_ELEMENTS` on CUDA.
        device: torch device for the products; defaults to CUDA when available, else CPU (the fused backend: CPU).
        show_progress (bool): a tqdm bar over row blocks.
        backend (str, defaults to "auto"): "fused" (CPU: one numba sweep per block updates both top-k lists),
            "torch" (top-k by group maxima per block and direction, :func:`row_topk`; the GPU path), or "auto"
            (fused on CPU when numba is installed, else torch).
        precision (str, defaults to "fp32"): the products' arithmetic, "fp32", "fp16" or "bf16" (half precision
            runs on the torch backend, which "auto" then chooses). Half precision is for GPUs: similarities are
            rounded to about 3 (fp16) or 2 (bf16) significant digits, so near-ties may swap; the similarities
            returned are float32 copies of the rounded ones.

    Raises:
        UsageError: k below 1 or above :data:`MAX_K` (see :func:`check_k`), or an unknown precision.
    """
    if precision not in PRECISIONS:
        raise UsageError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
    n, m = x.shape[0], y.shape[0]
    check_k(k, n, m)
    if k_backward is not None:
        check_k(k_backward, n, m)
    k_fwd = min(k, m)
    k_bwd = min(k if k_backward is None else k_backward, n)
    # The fused sweep runs on the CPU: asking for it without a device asks for the CPU, also where CUDA is.
    dev = torch.device("cpu") if backend == "fused" and device is None else resolve_device(device)

    if dev.type == "cuda" and block_elements == DEFAULT_BLOCK_ELEMENTS:
        block_elements = CUDA_BLOCK_ELEMENTS
    # Blocks of about 4096 rows x 8192 columns: tall enough that the per-block work on the column lists (copy and
    # merge, ~cols k) stays small next to the sweep (~rows cols), and full-speed matrix products (less CPU time than
    # full-width blocks of few rows: benchmarks/README.md, "Mining").
    block_cols = min(m, max(1, block_elements // 4096))
    block_rows = max(1, min(n, block_elements // block_cols))
    if backend == "auto":
        fused = dev.type == "cpu" and precision == "fp32" and fused_kernel() is not None
        backend = "fused" if fused else "torch"
    if backend not in ("fused", "torch"):
        raise ValueError(f"unknown backend {backend!r}; choose 'auto', 'fused' (CPU, numba) or 'torch'")
    if backend == "fused" and (dev.type != "cpu" or fused_kernel() is None):
        raise ValueError("the fused backend needs numba and a CPU device")
    if backend == "fused" and precision != "fp32":
        raise ValueError(f"the fused backend computes in float32; precision={precision!r} needs backend 'torch'")
    start = time.perf_counter()
    row_starts = range(0, n, block_rows)
    if show_progress:
        from tqdm.auto import tqdm

        row_starts = tqdm(row_starts, desc="kNN (both directions)", unit="block")
    if backend == "fused":
        result = fused_blocks(x, y, k_fwd, k_bwd, row_starts, block_rows, block_cols, dev)
    else:
        result = torch_blocks(x, y, k_fwd, k_bwd, row_starts, block_rows, block_cols, dev, PRECISIONS[precision])
    logger.debug(
        "bidirectional kNN (%s, %s): %d x %d, d=%d, k=%d/%d, blocks %d x %d on %s in %.2fs",
        backend,
        precision,
        n,
        m,
        x.shape[1],
        k_fwd,
        k_bwd,
        block_rows,
        block_cols,
        dev,
        time.perf_counter() - start,
    )
    return result


def fused_kernel():
    """The numba kernel, or None when numba is not installed."""
    try:
        from bitext_hf.mining import fused_topk
    except ImportError:
        return None
    return fused_topk


def _column_block(
    y: Any, y_all: torch.Tensor | None, c0: int, c1: int, dev: torch.device, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Rows ``c0:c1`` of the targets: a view of the whole tensor when ``y`` is in memory (on a GPU it is copied
    there once), else read from ``y`` for this block only (shards: memory holds one block, not the side)."""
    return y_all[c0:c1] if y_all is not None else _as_tensor(y[c0:c1], dev).to(dtype)


def fused_blocks(x, y, k_fwd, k_bwd, row_starts, block_rows, block_cols, dev) -> BidirectionalKNN:
    """CPU: matrix products by torch (BLAS), both top-k lists updated by one fused sweep per block."""
    kernel = fused_kernel()
    n, m = x.shape[0], y.shape[0]
    fwd_vals = np.full((n, k_fwd), -np.inf, dtype=np.float32)
    fwd_idx = np.full((n, k_fwd), -1, dtype=np.int64)
    bwd_vals = np.full((m, k_bwd), -np.inf, dtype=np.float32)
    bwd_idx = np.full((m, k_bwd), -1, dtype=np.int64)
    y_all = _as_tensor(y, dev) if isinstance(y, np.ndarray) else None
    # numba's OpenMP threading layer sets the process-wide OpenMP thread count, which torch reads too: a caller
    # that limited torch to one thread (a training run evaluating retrieval) would otherwise train on all cores'
    # worth of threads afterwards, oversubscribed. Restore torch's setting after every kernel launch. Read before
    # numba's first call: starting its threading layer (set_num_threads included) already raises the count.
    torch_threads = torch.get_num_threads()
    # The sweep runs on the threads the caller gave torch (one in a one-CPU Ray task), not on numba's whole pool.
    threads = max(1, min(torch_threads, kernel.MAX_THREADS))
    kernel.set_num_threads(threads)
    torch.set_num_threads(torch_threads)
    with torch.inference_mode():
        for r0 in row_starts:
            x_block = _as_tensor(x[r0 : r0 + block_rows], dev)
            for c0 in range(0, m, block_cols):
                sims = (x_block @ _column_block(y, y_all, c0, c0 + block_cols, dev).T).numpy()
                try:
                    kernel.fused_block_topk(sims, r0, c0, fwd_vals, fwd_idx, bwd_vals, bwd_idx, threads)
                finally:
                    torch.set_num_threads(torch_threads)
                del sims  # free the block before the next product allocates one: peak memory is one block
    return BidirectionalKNN(fwd_vals, fwd_idx, bwd_vals, bwd_idx)


def torch_blocks(
    x, y, k_fwd, k_bwd, row_starts, block_rows, block_cols, dev, dtype: torch.dtype = torch.float32
) -> BidirectionalKNN:
    """Any torch device (the GPU path): row top-k and column top-k of each block by ``torch.topk``, merged. The
    products run in ``dtype``; the running lists keep float32 copies of the similarities."""
    n, m = x.shape[0], y.shape[0]
    y_all = _as_tensor(y, dev).to(dtype) if isinstance(y, np.ndarray) else None
    fwd_vals = torch.empty((n, k_fwd), dtype=torch.float32, device=dev)
    fwd_idx = torch.empty((n, k_fwd), dtype=torch.int64, device=dev)
    bwd_vals = torch.full((m, k_bwd), -math.inf, dtype=torch.float32, device=dev)
    bwd_idx = torch.full((m, k_bwd), -1, dtype=torch.int64, device=dev)
    with torch.inference_mode():
        for r0 in row_starts:
            r1 = min(n, r0 + block_rows)
            x_block = _as_tensor(x[r0:r1], dev).to(dtype)
            row_vals = row_idx = None
            for c0 in range(0, m, block_cols):
                c1 = min(m, c0 + block_cols)
                sims = x_block @ _column_block(y, y_all, c0, c1, dev, dtype).T  # (rows, cols): the O(N M d) work

                vals, idx = row_topk(sims, min(k_fwd, c1 - c0))
                vals = vals.float()
                idx += c0
                if row_vals is None:
                    row_vals, row_idx = vals, idx
                else:
                    row_vals, row_idx = _merge_topk(row_vals, row_idx, vals, idx, k_fwd)

                # Column top-k of this block, merged into each target's running list.
                col_vals, col_idx = column_topk(sims, min(k_bwd, r1 - r0))
                col_vals = col_vals.float()
                col_idx += r0
                bwd_vals[c0:c1], bwd_idx[c0:c1] = _merge_topk(
                    bwd_vals[c0:c1], bwd_idx[c0:c1], col_vals, col_idx, k_bwd
                )
            fwd_vals[r0:r1], fwd_idx[r0:r1] = row_vals, row_idx
    return BidirectionalKNN(
        fwd_vals.cpu().numpy(), fwd_idx.cpu().numpy(), bwd_vals.cpu().numpy(), bwd_idx.cpu().numpy()
    )


def knn_search(
    queries: np.ndarray,
    database: np.ndarray,
    k: int,
    *,
    backend: str = "faiss",
    device: str | torch.device | None = None,
    normalize: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k inner-product search of ``queries`` in ``database`` (one direction).

    Args:
        backend (str, defaults to "faiss"): "faiss" (``faiss.knn``, or ``faiss.knn_gpu`` with the ``gpu`` extra and a
            GPU) or "torch" (blocked products, the engine of :func:`bidirectional_knn`).
        normalize (bool, defaults to True): rows are L2-normalized first, so the search is by cosine (see
            :func:`check_embeddings`); False searches raw inner products.

    Returns:
        (sims, indices): float32 (n, k') and int64 (n, k') with k' = min(k, len(database)), best first.
    """
    _check_positive_k(k)
    # No MAX_K here: FAISS keeps its top-k in heaps, whose cost grows only with log k; the torch backend goes
    # through bidirectional_knn, which applies check_k.
    queries, database = check_pair(queries, database, "queries", "database", normalize)
    k = min(k, database.shape[0])
    if backend == "torch":
        result = bidirectional_knn(queries, database, k, k_backward=1, device=device, normalize=False)
        return result.forward_sims, result.forward_indices
    if backend != "faiss":
        raise ValueError(f"unknown kNN backend {backend!r}; choose 'faiss' or 'torch'")
    import faiss

    if hasattr(faiss, "knn_gpu") and faiss.get_num_gpus() > 0 and torch.cuda.is_available():
        res = faiss.StandardGpuResources()
        sims, indices = faiss.knn_gpu(res, queries, database, k, metric=faiss.METRIC_INNER_PRODUCT)
    else:
        sims, indices = faiss.knn(queries, database, k, metric=faiss.METRIC_INNER_PRODUCT)
    return sims.astype(np.float32, copy=False), indices.astype(np.int64, copy=False)


def ivf_index(
    database: np.ndarray, *, nlist: int | None = None, nprobe: int = 16, seed: int = 0, normalize: bool = True
) -> Any:
    """An approximate inner-product index over ``database``: FAISS inverted lists of exact vectors (IVF-Flat).

    For searches too large for exact products (e.g. every token of every sentence against every token): k-means
    cuts the database into ``nlist`` cells, and a query scans only the ``nprobe`` cells whose centroids are
    nearest. Results can miss true neighbours (never invent them); a query whose probed cells hold fewer than k
    vectors gets index -1 in the missing slots.

    Args:
        nlist: number of cells (default ``2 * sqrt(n)``, at most ``n / 40``: FAISS wants 39 training points a
            cell). A query costs nlist centroid products plus about nprobe * n / nlist vector products; the
            default balances the two at nprobe 1-4 (measured on 481k 128-d token vectors, one thread: centroid
            products ran at ~19 GMAC/s, list scans at ~4).
        nprobe: cells scanned per query (more: slower and closer to exact).
        seed: seed of the training sample and of k-means, so that the index is reproducible.
        normalize (bool, defaults to True): index L2-normalized rows (cosine; normalize the queries too, e.g. with
            :func:`check_embeddings`); False indexes the rows as they are.

    Returns:
        A trained, filled ``faiss.IndexIVFFlat``; search it with ``index.search(queries, k)``.
    """
    import faiss

    database = check_embeddings(database, "database", normalize=normalize)
    n, dim = database.shape
    if nlist is None:
        nlist = int(2 * math.sqrt(n))
    nlist = max(1, min(int(nlist), n // 40 or 1))
    if nprobe < 1:
        raise ValueError(f"nprobe must be >= 1, got {nprobe}")
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    index.cp.seed = seed
    # k-means on 40 points a cell (FAISS asks for 39) and 10 iterations: cells only route queries (the vectors in
    # them are exact), so rough centroids cost a little recall at a given nprobe, while training time grows with
    # sample x iterations.
    index.cp.niter = 10
    sample = np.random.default_rng(seed).choice(n, size=min(n, 40 * nlist), replace=False)
    index.train(database[np.sort(sample)])
    index.add(database)
    index.nprobe = min(nprobe, nlist)
    return index
