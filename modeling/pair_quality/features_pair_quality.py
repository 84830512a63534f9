"""What the light pair-quality classifier reads of a pair: a few numbers that the package already computes (the
encoder's cosine and margin) and cheap surface checks that a translation keeps (numbers, placeholders, final
punctuation, length) or that a bad pair shows (an untranslated copy, a partial copy). Pure Python over the two texts,
so that millions of pairs cost no model: the classifier (``modeling_pair_quality.py``) is a small MLP over these.

This file imports only torch and the standard library, so that ``save_pretrained`` ships it as hub remote code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import torch

__all__ = ["FEATURE_NAMES", "pair_features", "text_features"]

# The order of the columns of pair_features. A trained classifier records the names it was trained on
# (config.features): a model trained on other features is refused, not fed the wrong columns.
FEATURE_NAMES = (
    "cosine",
    "margin",
    "weighted_length_ratio",
    "shorter_length",
    "token_ratio",
    "numbers_jaccard",
    "numbers_unmatched",
    "placeholders_jaccard",
    "end_punctuation_match",
    "brackets_difference",
    "identical",
    "trigram_overlap",
    "copied_words",
)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# printf (%s, %1$d, %(name)s), Python/.NET/ICU braces ({0}, {name}), shell variables, markup tags and entities.
_PLACEHOLDER = re.compile(
    r"%(?:\(\w+\))?(?:\d+\$)?[-+ #0]*\d*(?:\.\d+)?[sdifgxXuclp%]|\{\w*\}|\$\{?\w+\}?|</?\w+[^>]*>|&\w+;"
)
# A token: one CJK ideograph or kana (scripts written without spaces, where a character is about a word), else a run of
# word characters.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(f"[{_CJK}]|[^\\W{_CJK}]+")
# Latin-equivalent length: a CJK ideograph or kana carries about three Latin letters' meaning, a Hangul syllable two
# (the weights of bitext_hf's length filters, bitext_hf.mining.filters.SCRIPT_WEIGHTS).
_HEAVY = re.compile(f"[{_CJK}]")
_HANGUL = re.compile("[\uac00-\ud7af]")
# The sentence-final mark, by kind: CJK full-width and Arabic/Greek forms are the same kind as the Latin ones.
_END_KIND = {
    ".": ".", "。": ".", "．": ".", "।": ".", "…": ".",
    "?": "?", "？": "?", "؟": "?", ";": "?",
    "!": "!", "！": "!",
    ":": ":", "：": ":",
}  # fmt: skip
_BRACKETS = '()[]"«»“”„「」『』'


def _weighted_length(text: str) -> float:
    if text.isascii():
        return float(len(text))
    return len(text) + 2.0 * len(_HEAVY.findall(text)) + len(_HANGUL.findall(text))


def _end_kind(text: str) -> str:
    stripped = text.rstrip(" \"'”»」』)")
    return _END_KIND.get(stripped[-1:], "") if stripped else ""


def _jaccard(a: set, b: set) -> float:
    return 1.0 if not a and not b else len(a & b) / len(a | b)


def _numbers(text: str) -> set[str]:
    return {number.replace(",", ".") for number in _NUMBER.findall(text)}


def _trigrams(text: str) -> set[str]:
    folded = " ".join(text.casefold().split())
    return {folded[i : i + 3] for i in range(max(0, len(folded) - 2))}


def text_features(source: str, target: str) -> list[float]:
    """The surface features of one pair (every column of :data:`FEATURE_NAMES` but the first two), in that order."""
    source_length, target_length = _weighted_length(source), _weighted_length(target)
    source_words, target_words = _WORD.findall(source.casefold()), _WORD.findall(target.casefold())
    source_numbers, target_numbers = _numbers(source), _numbers(target)
    brackets = sum(abs(source.count(mark) - target.count(mark)) for mark in _BRACKETS)
    copied = sum(word in set(source_words) for word in target_words if not word.isdigit())
    letter_words = sum(not word.isdigit() for word in target_words)
    return [
        abs(math.log((1 + source_length) / (1 + target_length))),
        math.log1p(min(source_length, target_length)),
        abs(math.log((1 + len(source_words)) / (1 + len(target_words)))),
        _jaccard(source_numbers, target_numbers),
        math.log1p(len(source_numbers ^ target_numbers)),
        _jaccard(set(_PLACEHOLDER.findall(source)), set(_PLACEHOLDER.findall(target))),
        float(_end_kind(source) == _end_kind(target)),
        math.log1p(brackets),
        float(" ".join(source.casefold().split()) == " ".join(target.casefold().split())),
        _jaccard(_trigrams(source), _trigrams(target)),
        copied / letter_words if letter_words else 0.0,
    ]


def pair_features(
    sources: Sequence[str],
    targets: Sequence[str],
    cosines: Sequence[float] | torch.Tensor,
    margins: Sequence[float] | torch.Tensor,
) -> torch.Tensor:
    """The ``(n, len(FEATURE_NAMES))`` float32 features of ``n`` pairs: ``cosines`` and ``margins`` are the encoder's
    cosine and ratio margin of each pair (what ``bitext-hf score`` and ``mine`` compute), the rest is read from the
    texts."""
    if not len(sources) == len(targets) == len(cosines) == len(margins):
        raise ValueError(
            f"pair_features: {len(sources)} sources, {len(targets)} targets, {len(cosines)} cosines and "
            f"{len(margins)} margins; one of each per pair"
        )
    rows = [text_features(source, target) for source, target in zip(sources, targets)]
    surface = torch.tensor(rows, dtype=torch.float32).reshape(len(rows), len(FEATURE_NAMES) - 2)
    scores = torch.stack(
        [torch.as_tensor(cosines, dtype=torch.float32), torch.as_tensor(margins, dtype=torch.float32)], dim=1
    )
    return torch.cat([scores.reshape(len(rows), 2), surface], dim=1)
