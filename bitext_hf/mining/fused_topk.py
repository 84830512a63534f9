"""A fused CPU kernel: row and column top-k of one similarity block in a single sweep (numba).

Why by hand: on CPU, every full pass over a similarity block costs a large share of the matrix product that made it
(``torch.topk`` along rows, and more along columns, or FAISS's heaps), so two top-k passes eat most of what
computing the matrix once saves. This sweep reads each similarity once and compares it with the current k-th best of
its row and of its column; both comparisons are almost always false, so the sweep costs a small share of the product
(benchmarks/README.md, "Mining").

Semantics: running lists sorted by decreasing value; a value replaces the k-th best only when strictly greater, so
ties keep the lower index (as a stable sort would). Rows are split between threads; each thread keeps its own copy
of the column lists, merged after the sweep.
"""

from __future__ import annotations

import numpy as np
from numba import config, njit, prange, set_num_threads

__all__ = ["MAX_THREADS", "fused_block_topk", "set_num_threads"]

MAX_THREADS = config.NUMBA_NUM_THREADS  # numba's pool (every core by default); set_num_threads takes at most this


@njit(cache=True, nogil=True, boundscheck=False)
def _insert(values, indices, row, value, index, k):
    """Insert ``value`` (> values[row, k-1]) into the sorted list of ``row``."""
    position = k - 1
    while position > 0 and values[row, position - 1] < value:
        values[row, position] = values[row, position - 1]
        indices[row, position] = indices[row, position - 1]
        position -= 1
    values[row, position] = value
    indices[row, position] = index


@njit(cache=True, nogil=True, parallel=True, boundscheck=False)
def fused_block_topk(sims, r0, c0, row_values, row_indices, col_values, col_indices, n_threads):
    """Update the row lists ``row_*[r0 + i]`` and column lists ``col_*[c0 + j]`` with block ``sims`` (rows, cols).

    ``row_values`` (N, kr) / ``col_values`` (M, kc) are float32 and sorted descending (start at -inf); the index
    arrays are int64 (start at -1). Indices written are global (r0 + i, c0 + j).
    """
    n_rows, n_cols = sims.shape
    k_row = row_values.shape[1]
    k_col = col_values.shape[1]
    chunk = (n_rows + n_threads - 1) // n_threads
    local_values = np.empty((n_threads, n_cols, k_col), dtype=np.float32)
    local_indices = np.empty((n_threads, n_cols, k_col), dtype=np.int64)
    for thread in prange(n_threads):
        values = local_values[thread]
        indices = local_indices[thread]
        column_floor = np.empty(n_cols, dtype=np.float32)
        for j in range(n_cols):
            for q in range(k_col):
                values[j, q] = col_values[c0 + j, q]
                indices[j, q] = col_indices[c0 + j, q]
            column_floor[j] = values[j, k_col - 1]
        for i in range(thread * chunk, min(n_rows, (thread + 1) * chunk)):
            row = r0 + i
            row_floor = row_values[row, k_row - 1]
            for j in range(n_cols):
                value = sims[i, j]
                if value > row_floor:
                    _insert(row_values, row_indices, row, value, c0 + j, k_row)
                    row_floor = row_values[row, k_row - 1]
                if value > column_floor[j]:
                    _insert(values, indices, j, value, row, k_col)
                    column_floor[j] = values[j, k_col - 1]
    # Merge the threads' column lists in thread order (lower rows first, so ties keep the lower index). Each thread
    # started from the global list, so entries already there are skipped.
    for j in prange(n_cols):
        column = c0 + j
        for thread in range(n_threads):
            for q in range(k_col):
                value = local_values[thread, j, q]
                if value <= col_values[column, k_col - 1]:
                    break
                index = local_indices[thread, j, q]
                present = False
                for p in range(k_col):
                    if col_indices[column, p] == index:
                        present = True
                if not present:
                    _insert(col_values, col_indices, column, value, index, k_col)
