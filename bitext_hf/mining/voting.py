"""Voting over mining runs with pre-translation (the margin-mining-with-voting paper, section 4.2.3).

Mine three times: the original pair (src, tgt); the source translated into the target language against the target;
the source against the target translated into the source language. ``strict`` keeps the pairs found in all three
runs, ``pairwise`` those found in at least two. A pair's score is taken from the first run that holds it, in that
order. Voting acts as an implicit threshold: no score threshold has to be tuned. Each run retrieves by
intersection (mutual best candidates), as the paper does in every run, unless another ``mode`` is asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from bitext_hf.mining.retrieval import MinedPairs

__all__ = ["mine_with_voting", "vote"]

Strategy = Literal["strict", "pairwise"]
Translations = Sequence[str] | Callable[[list[str]], list[str]]


def vote(runs: Sequence[MinedPairs], strategy: str = "pairwise") -> MinedPairs:
    """Combine mining runs over the same sentence indices by votes.

    Args:
        runs: the mining runs, in priority order for the scores.
        strategy (str, defaults to "pairwise"): "strict" (in every run) or "pairwise" (in at least two runs).
    """
    if strategy not in ("strict", "pairwise"):
        raise ValueError(f"unknown voting strategy {strategy!r}; choose 'strict' or 'pairwise'")
    if len(runs) < 2:
        raise ValueError(f"voting needs at least two mining runs, got {len(runs)}")
    needed = len(runs) if strategy == "strict" else 2
    votes: dict[tuple[int, int], int] = {}
    for run in runs:
        for pair in run.as_set():
            votes[pair] = votes.get(pair, 0) + 1
    kept_parts, taken = [], set()
    for run in runs:  # the first run holding a pair gives its score
        keys = list(zip(run.src_indices.tolist(), run.tgt_indices.tolist()))
        mask = np.array([votes[key] >= needed and key not in taken for key in keys], dtype=bool)
        taken.update(key for key, keep in zip(keys, mask) if keep)
        kept_parts.append(run.select(mask))
    return MinedPairs.concatenate(kept_parts).sorted()


def _translate(texts: list[str], translations: Translations, name: str) -> list[str]:
    translated = translations(texts) if callable(translations) else list(translations)
    if len(translated) != len(texts):
        raise ValueError(f"{name}: {len(translated)} translations for {len(texts)} sentences; they must align 1:1")
    return list(translated)


def mine_with_voting(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    encode: Callable[[list[str]], np.ndarray],
    *,
    src_translated: Translations,
    tgt_translated: Translations,
    strategy: str = "pairwise",
    mode: str = "intersect",
    **mine_kwargs,
) -> MinedPairs:
    """Mine (src, tgt), (src translated, tgt) and (src, tgt translated), then vote.

    Args:
        encode: texts -> L2-normalized embeddings (e.g. ``encoder.encode``).
        src_translated: the source sentences translated into the target language, as a list aligned with
            ``src_texts`` (e.g. read from a file) or a callable that translates a list.
        tgt_translated: the target sentences translated into the source language, likewise.
        mode (str, defaults to "intersect"): each run's retrieval mode (the paper's intersection; ``mine``'s own
            default is "max").
        **mine_kwargs (Any): passed to :func:`bitext_hf.mining.mine` (k, margin, threshold, index...).
    """
    from bitext_hf.mining import mine

    src_texts, tgt_texts = list(src_texts), list(tgt_texts)
    src_emb, tgt_emb = encode(src_texts), encode(tgt_texts)
    src_trans_emb = encode(_translate(src_texts, src_translated, "source translations"))
    tgt_trans_emb = encode(_translate(tgt_texts, tgt_translated, "target translations"))
    runs = [
        mine(src_emb, tgt_emb, mode=mode, **mine_kwargs),
        mine(src_trans_emb, tgt_emb, mode=mode, **mine_kwargs),
        mine(src_emb, tgt_trans_emb, mode=mode, **mine_kwargs),
    ]
    return vote(runs, strategy)
