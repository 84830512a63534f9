"""What every encoder shares: the ``Encoder`` protocol, L2 normalization, length-sorted batches, token counts, the
progress bar and the check of what ``encode`` is given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = [
    "Encoder",
    "budget_spans",
    "check_runs",
    "check_sentences",
    "encoding_progress",
    "l2_normalize",
    "length_sorted_batches",
    "token_counts",
]

# Sentences tokenized at a time to count their tokens (for length-sorted batches): bounded memory, and each call
# still long enough for the tokenizer's own parallelism.
COUNT_CHUNK = 16384


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns sentences into L2-normalized float32 embeddings of dimension ``dim``."""

    dim: int

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray: ...


def l2_normalize(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero); NaN / inf rows raise ``ValueError``."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if not np.isfinite(embeddings).all():
        bad = int(np.flatnonzero(~np.isfinite(embeddings).all(axis=1))[0])
        raise ValueError(f"the encoder produced NaN or inf (first in row {bad})")
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings / np.where(norms == 0, 1, norms)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    """Row indices in batches of ``batch_size``, longest first (stable), so that a batch pads little."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def token_counts(tokenizer, sentences: Sequence[str], limit: int) -> list[int]:
    """Tokens per sentence, special tokens included, at most ``limit``; counted a chunk at a time, so that a long
    input never holds every sentence's token ids at once."""
    counts: list[int] = []
    for start in range(0, len(sentences), COUNT_CHUNK):
        chunk = list(sentences[start : start + COUNT_CHUNK])
        counts += map(len, tokenizer(chunk, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"])
    return counts


def encoding_progress(iterable, show: bool, total: int, desc: str):
    """``iterable`` under a tqdm bar of batches when ``show``."""
    if not show:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="batch")


def check_sentences(sentences: Sequence[str]) -> list[str]:
    """``sentences`` as a list of strings; a single string or a non-string item is a ``TypeError``."""
    if isinstance(sentences, str):
        raise TypeError("encode() takes a list of sentences, not a single string")
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentence {i} is {type(sentence).__name__}, expected str")
    return sentences


def check_runs(runs, sentences: int) -> list[tuple[int, int]]:
    """``runs`` as ``(start, end)`` pairs of Python ints, each inside ``sentences`` sentences and not empty (the runs
    of consecutive sentences whose joined texts an overlap encoder makes); anything else refused: ``ValueError``
    for a run that is not a pair or lies outside, ``TypeError`` for bounds that are not integers (bools neither)."""
    checked = []
    for run in runs:
        if not isinstance(run, Sequence | np.ndarray) or isinstance(run, str) or len(run) != 2:
            raise ValueError(f"a run is (start, end), not {run!r}")
        if not all(isinstance(bound, int | np.integer) and not isinstance(bound, bool) for bound in run):
            raise TypeError(f"a run's start and end are integers, not {run!r}")
        start, end = int(run[0]), int(run[1])
        if not 0 <= start < end <= sentences:
            raise ValueError(f"a run outside the {sentences} sentences: {(start, end)}")
        checked.append((start, end))
    return checked


def budget_spans(lengths: Sequence[int], budget: int) -> list[slice]:
    """Consecutive runs of items whose ``lengths`` sum to at most ``budget`` (an item longer than it: a run of its
    own), as slices."""
    spans, start, total = [], 0, 0
    for i, length in enumerate(lengths):
        if i > start and total + length > budget:
            spans.append(slice(start, i))
            start, total = i, 0
        total += length
    if len(lengths) > start:
        spans.append(slice(start, len(lengths)))
    return spans
