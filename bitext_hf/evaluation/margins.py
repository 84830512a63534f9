"""Margin scores of held-out gold pairs against random pairs: how far a model separates translations from
non-translations in the score that mining thresholds. The card figures draw what this computes."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from bitext_hf.mining import score_pairs

__all__ = ["gold_and_random_margins", "held_out_margins"]


def gold_and_random_margins(
    src_embeddings: np.ndarray, tgt_embeddings: np.ndarray, *, k: int = 4, margin: str = "ratio", seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Margin scores of held-out gold pairs (row i with row i) and of random pairs (row i with another row).

    The random pairs pair each source with a shuffled target (no row with its own); the target set is the same, so
    both use the same k-nearest-neighbour averages as mining does.
    """
    count = len(src_embeddings)
    if count < 2 or len(tgt_embeddings) != count:
        raise ValueError(f"need at least 2 aligned pairs with as many targets as sources, got {count}")
    k = min(k, count)
    gold = score_pairs(src_embeddings, tgt_embeddings, k=k, margin=margin)
    # A random rotation of a permutation: every source gets a target that is not its own.
    order = np.random.default_rng(seed).permutation(count)
    shuffled = np.empty(count, dtype=np.int64)
    shuffled[order] = np.roll(order, 1)
    random = score_pairs(src_embeddings, tgt_embeddings[shuffled], k=k, margin=margin)
    return np.asarray(gold, dtype=np.float64), np.asarray(random, dtype=np.float64)


def held_out_margins(
    embedded_sets: Iterable[tuple[np.ndarray, np.ndarray]], *, k: int = 4, margin: str = "ratio"
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`gold_and_random_margins` of several held-out sets (each ``(src_embeddings, tgt_embeddings)``, row i
    aligned), each scored within its own set, concatenated; ``(None, None)`` when no set has 2 pairs.

    A recipe's card uses it with the sentence vectors of its evaluation sets."""
    scored = [gold_and_random_margins(src, tgt, k=k, margin=margin) for src, tgt in embedded_sets if len(src) >= 2]
    if not scored:
        return None, None
    return np.concatenate([gold for gold, _ in scored]), np.concatenate([random for _, random in scored])
