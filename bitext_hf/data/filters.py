"""Filters on PairSets: a deterministic held-out split, removal of pairs that overlap evaluation text, and length
filters (whitespace words, tokenizer tokens) as the training recipes apply them.

Every filter returns a new PairSet in the original order; the input is never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from bitext_hf.data.specs import PairSet
from bitext_hf.errors import DataValidationError, UsageError

__all__ = ["drop_overlap", "keep_pairs", "min_tokens", "min_words", "split_held_out", "tokenize_pairs"]

# Texts are tokenized in chunks of this many, so a 1M-example budget never holds all encodings at once.
_TOKENIZE_CHUNK = 10_000


def _check_count(value: int, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def keep_pairs(pairs: PairSet, keep: Callable[[str, str], bool]) -> PairSet:
    """The pairs for which ``keep(src, tgt)`` is true."""
    return pairs.select([index for index, (src, tgt) in enumerate(pairs) if keep(src, tgt)])


def split_held_out(
    pairs: PairSet,
    n: int,
    seed: int = 0,
    *,
    eligible: Callable[[str, str], bool] | None = None,
    drop_leaked: bool = True,
) -> tuple[PairSet, PairSet]:
    """Split off ``n`` random pairs for evaluation: returns (train, held_out), both in the original order.

    The draw depends only on ``seed`` and the pairs, so it is the same on every run and every process. Held-out pairs
    are drawn among the ``eligible`` ones when given (e.g. long enough to evaluate on). With ``drop_leaked``, a
    training pair whose source or target also appears in a held-out pair is removed as well: a sentence repeated in
    the data would otherwise put the test answer into training.

    Raises:
        DataValidationError: fewer than ``n + 1`` pairs, or fewer than ``n`` eligible ones.
    """
    n = _check_count(n, "n (pairs to hold out)", minimum=1)
    if len(pairs) <= n:
        raise DataValidationError(
            f"{pairs.name}: {len(pairs)} pairs, not enough to hold out {n} and train on the rest"
        )
    order = np.random.default_rng(seed).permutation(len(pairs))
    if eligible is not None:
        order = np.asarray([index for index in order if eligible(pairs.src[index], pairs.tgt[index])], dtype=np.int64)
        if len(order) < n:
            raise DataValidationError(
                f"{pairs.name}: only {len(order)} pairs pass the evaluation filter, not enough to hold out {n}"
            )
    held = sorted(order[:n].tolist())
    held_set = set(held)
    train = [index for index in range(len(pairs)) if index not in held_set]
    held_out = pairs.select(held)
    if drop_leaked:
        return drop_overlap(pairs.select(train), [*held_out.src, *held_out.tgt]), held_out
    return pairs.select(train), held_out


def drop_overlap(pairs: PairSet, texts: Iterable[str]) -> PairSet:
    """The pairs whose source and target both differ from every text in ``texts`` (held-out or test sentences;
    OneAligner section 3.1 removes training pairs that overlap the evaluation sets). Texts compare after stripping,
    as the specs strip every sentence."""
    excluded = {text.strip() for text in texts}
    return keep_pairs(pairs, lambda src, tgt: src not in excluded and tgt not in excluded)


def min_words(pairs: PairSet, minimum: int) -> PairSet:
    """The pairs with at least ``minimum`` whitespace-separated words on both sides."""
    minimum = _check_count(minimum, "minimum (words)", minimum=0)
    return keep_pairs(pairs, lambda src, tgt: min(len(src.split()), len(tgt.split())) >= minimum)


def _token_counts(texts: Sequence[str], tokenizer: Any) -> list[int]:
    counts: list[int] = []
    for start in range(0, len(texts), _TOKENIZE_CHUNK):
        chunk = list(texts[start : start + _TOKENIZE_CHUNK])
        if hasattr(tokenizer, "batch_decode"):  # a transformers tokenizer: count without <s> ... </s>
            encoded = tokenizer(chunk, add_special_tokens=False)["input_ids"]
        else:
            encoded = tokenizer(chunk)
            if isinstance(encoded, Mapping):
                encoded = encoded["input_ids"]
        counts.extend(len(tokens) for tokens in encoded)
    return counts


def min_tokens(pairs: PairSet, minimum: int, tokenizer: Any) -> PairSet:
    """The pairs with at least ``minimum`` tokens on both sides (OneAligner drops examples under 5 tokens after
    sampling, so apply this to the sampled pairs, not the whole corpus).

    Args:
        tokenizer: a transformers tokenizer (tokens counted without special tokens), or any callable that maps a
            list of texts to one token sequence per text (or to a mapping with ``input_ids``).
    """
    minimum = _check_count(minimum, "minimum (tokens)", minimum=0)
    if not minimum or not len(pairs):
        return pairs.select(range(len(pairs)))
    source_counts, target_counts = _token_counts(pairs.src, tokenizer), _token_counts(pairs.tgt, tokenizer)
    return pairs.select(
        [index for index, counts in enumerate(zip(source_counts, target_counts)) if min(counts) >= minimum]
    )


def tokenize_pairs(
    pairs: PairSet, tokenizer: Any, *, max_length: int | None = None, min_tokens: int = 0
) -> list[dict[str, list[int]]]:
    """Training examples ``{"src_input_ids", "tgt_input_ids"}`` (with the tokenizer's special tokens, truncated to
    ``max_length``), keeping only pairs with at least ``min_tokens`` tokens besides the special ones on both sides.

    One tokenization serves both the filter and the examples (``min_tokens`` on a PairSet would tokenize twice);
    the result is what ``bitext_hf.data.collators.PairCollator`` pads.
    """
    min_tokens = _check_count(min_tokens, "min_tokens", minimum=0)
    specials = tokenizer.num_special_tokens_to_add(pair=False)
    examples = []
    for start in range(0, len(pairs), _TOKENIZE_CHUNK):
        chunk = slice(start, start + _TOKENIZE_CHUNK)
        options = {"truncation": max_length is not None, "max_length": max_length}
        sources = tokenizer(pairs.src[chunk], **options)["input_ids"]
        targets = tokenizer(pairs.tgt[chunk], **options)["input_ids"]
        examples.extend(
            {"src_input_ids": list(src_ids), "tgt_input_ids": list(tgt_ids)}
            for src_ids, tgt_ids in zip(sources, targets)
            if min(len(src_ids), len(tgt_ids)) - specials >= min_tokens
        )
    return examples
