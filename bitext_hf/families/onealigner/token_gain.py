"""The aggregation step of the token-level first stage (numba): per source sentence, sum each target sentence's
gains over the source's tokens and keep the best ``top_k`` targets.

Why by hand: with numpy the same step needs a per-token sort to find each target's first hit, a global sort of
(source, target) keys to sum the gains, and another to rank them, which cost close to the FAISS token search itself;
one pass over the hits with a dense per-target accumulator is linear in the number of hits (benchmarks/README.md,
"OneAligner", has the profile).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["gain_topk"]


@njit(cache=True, nogil=True, boundscheck=False)
def gain_topk(sims, hits, target_owner, query_sentence, query_weight, n_target, out):
    """Fill ``out`` (n_sentences, top_k), pre-filled with -1, with each source sentence's best targets by gain.

    Args:
        sims, hits: (m, kn) float32 similarities (descending per row) and int64 target-token ids (-1: no hit) of
            the m source tokens' nearest target tokens.
        target_owner: (n_target_tokens,) int64 sentence of each target token.
        query_sentence: (m,) int64 row of ``out`` of each source token, non-decreasing (tokens grouped by sentence).
        query_weight: (m,) float32 weight of each source token.

    A token's gain for target sentence j is ``weight * (its best similarity to a token of j - its k-th
    similarity)``; only the first (best) hit of each j counts. Ties in the summed gain go to the lower target index.
    """
    m, neighbours = hits.shape
    top_k = out.shape[1]
    score = np.zeros(n_target, np.float64)
    stamp = np.full(n_target, -1, np.int64)  # the last source token that scored target j
    touched = np.empty(n_target, np.int64)
    start = 0
    while start < m:
        sentence = query_sentence[start]
        stop = start
        while stop < m and query_sentence[stop] == sentence:
            stop += 1
        n_touched = 0
        for token in range(start, stop):
            last = neighbours - 1
            while last >= 0 and hits[token, last] < 0:
                last -= 1
            if last < 0:
                continue
            kth = sims[token, last]
            weight = query_weight[token]
            for position in range(last + 1):
                target = target_owner[hits[token, position]]
                if stamp[target] == token:
                    continue  # a later (weaker) hit of a target this token already scored
                if stamp[target] < start:
                    touched[n_touched] = target  # first time in this sentence
                    n_touched += 1
                stamp[target] = token
                score[target] += (sims[token, position] - kth) * weight
        candidates = np.sort(touched[:n_touched])
        values = np.empty(n_touched, np.float64)
        kept = 0
        for index in range(n_touched):
            values[index] = -score[candidates[index]]
            score[candidates[index]] = 0.0
        order = np.argsort(values, kind="mergesort")
        for index in range(n_touched):
            if kept == top_k:
                break
            if values[order[index]] < 0.0:  # a target that gained something
                out[sentence, kept] = candidates[order[index]]
                kept += 1
        start = stop
