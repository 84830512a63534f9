"""Words and their first subwords: the units the aligner links and the positions the objectives compare.

The paper tokenizes with Moses and represents a word by its first subword. Moses' tokenizer (sacremoses) is not a
dependency here; :func:`split_words` is a Unicode-aware regular expression that, like Moses, separates punctuation
from words and keeps intra-word hyphens and apostrophes. Scripts written without spaces (Chinese, Japanese, Thai)
stay one "word" per run of letters: segment them before alignment when they matter.

:func:`first_subword_positions` maps words to token positions with a fast tokenizer's ``word_ids`` (the library's
own word-to-token map), so special tokens, truncation and the tokenizer's word-boundary rules are handled by it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from bitext_hf.errors import DataValidationError, UsageError

__all__ = ["WORD_PATTERN", "first_subword_positions", "first_subword_vectors", "split_words", "tokenize_words"]

WORD_PATTERN = re.compile(r"\w+(?:[-'\u2019]\w+)*|[^\w\s]", re.UNICODE)


def split_words(text: str) -> list[str]:
    """The words and punctuation marks of ``text`` (``"Don't stop-now!"`` -> ``["Don't", "stop-now", "!"]``)."""
    return WORD_PATTERN.findall(text)


def tokenize_words(sources: Sequence[str], targets: Sequence[str], name: str = "pairs") -> tuple[list, list]:
    """Split every pair into words, refusing unaligned inputs (different counts) and empty sentences.

    Raises:
        DataValidationError: naming ``name`` and the pair's number (1-based).
    """
    if len(sources) != len(targets):
        raise DataValidationError(f"{name}: {len(sources)} source but {len(targets)} target sentences (unaligned)")
    source_words, target_words = [], []
    for number, (source, target) in enumerate(zip(sources, targets), start=1):
        src, tgt = split_words(source), split_words(target)
        if not src or not tgt:
            side = "source" if not src else "target"
            raise DataValidationError(f"{name}: pair {number} has an empty {side} sentence (no word to align)")
        source_words.append(src)
        target_words.append(tgt)
    return source_words, target_words


def first_subword_positions(
    tokenizer: Any, words: Sequence[str], max_length: int
) -> tuple[list[int], list[int | None]]:
    """Token ids of ``words`` and, per word, the position of its first subword (None: cut off by ``max_length``).

    Raises:
        UsageError: the tokenizer is not a fast tokenizer (no ``word_ids``).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise UsageError(
            f"{type(tokenizer).__name__} is not a fast tokenizer: first-subword mapping needs word_ids() "
            "(load it with AutoTokenizer.from_pretrained(..., use_fast=True))"
        )
    encoding = tokenizer(list(words), is_split_into_words=True, truncation=True, max_length=max_length)
    positions: list[int | None] = [None] * len(words)
    for position, word in enumerate(encoding.word_ids()):
        if word is not None and positions[word] is None:
            positions[word] = position
    return list(encoding["input_ids"]), positions


@torch.no_grad()
def first_subword_vectors(
    encoder: torch.nn.Module,
    tokenizer: Any,
    sentences: Sequence[Sequence[str]],
    *,
    layer: int | None = None,
    max_length: int = 96,
    batch_size: int = 64,
) -> list[torch.Tensor]:
    """Per sentence (a list of words), `(words, d)` L2-normalized vectors of each word's first subword from hidden
    state ``layer`` (default the last) of a transformers encoder; words cut off by ``max_length`` get zero rows."""
    from bitext_hf.data.collators import pad_sequences

    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    vectors: list[torch.Tensor] = []
    try:
        for start in range(0, len(sentences), batch_size):
            encoded = [
                first_subword_positions(tokenizer, words, max_length)
                for words in sentences[start : start + batch_size]
            ]
            ids, mask = pad_sequences([token_ids for token_ids, _ in encoded], tokenizer.pad_token_id)
            outputs = encoder(
                input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True, return_dict=True
            )
            states = outputs.hidden_states[-1 if layer is None else layer].float().cpu()
            for row, (_, positions) in enumerate(encoded):
                matrix = torch.zeros(len(positions), states.shape[-1])
                for word, position in enumerate(positions):
                    if position is not None:
                        matrix[word] = states[row, position]
                vectors.append(torch.nn.functional.normalize(matrix, dim=-1))
    finally:
        encoder.train(was_training)
    return vectors
