"""Progressive distillation (the paper's curriculum): train on growing prefixes of each sentence pair.

At stage ratio r, each side keeps its first ceil(r * n) subwords (n = its subword count, specials excluded, at
least one), with the same cut fed to the teacher (as text) and to the student (as token ids). Subwords are counted
with the student tokenizer on both sides by default; the English side may be cut with the teacher's own tokenizer
instead (the paper counts each side's own subwords: ``DistillationBatches(teacher_tokenizer=...)``, the recipe's
``--curriculum_english_cut teacher``), any tokenizer called as a Hugging Face fast tokenizer with offsets.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from bitext_hf.errors import UsageError

__all__ = ["curriculum_ratios", "curriculum_stage", "prefix_cuts", "prefix_length", "prefix_texts_and_ids"]


def curriculum_ratios(increment: float = 0.1) -> list[float]:
    """The stage ratios: ``increment, 2 * increment, ..., 1.0`` (the last stage is always the full sentence)."""
    if not 0.0 < increment <= 1.0:
        raise UsageError(f"curriculum increment must be in (0, 1], got {increment}")
    stages = math.ceil(1.0 / increment - 1e-9)
    return [round(min(1.0, increment * (stage + 1)), 6) for stage in range(stages)]


def curriculum_stage(step: int, total_steps: int, num_stages: int, partial_fraction: float | None = None) -> int:
    """Stage index at ``step`` of a run of ``total_steps``.

    With ``partial_fraction=None`` the steps are split evenly over the ``num_stages`` stages (the last, whole-sentence
    stage gets 1/num_stages of the run). Otherwise the stages before the last share the first ``partial_fraction``
    of the steps evenly and the whole-sentence stage runs for the rest: the paper trains to convergence, so its
    early stages are a small part of the run, and a short run with an even split sees whole sentences only at the
    very end.
    """
    if total_steps < 1 or num_stages < 1:
        raise UsageError(f"total_steps and num_stages must be positive, got {total_steps} and {num_stages}")
    if partial_fraction is None:
        return min(num_stages - 1, step * num_stages // total_steps)
    if not 0.0 <= partial_fraction < 1.0:
        raise UsageError(f"curriculum partial_fraction must be in [0, 1), got {partial_fraction}")
    partial_steps = round(partial_fraction * total_steps)
    if num_stages == 1 or step >= partial_steps:
        return num_stages - 1
    return min(num_stages - 2, step * (num_stages - 1) // partial_steps)


def prefix_length(num_subwords: int, ratio: float) -> int:
    """Subwords kept at ``ratio``: ceil(ratio * n), at least 1 (when n > 0), at most n."""
    if not 0.0 < ratio <= 1.0:
        raise UsageError(f"prefix ratio must be in (0, 1], got {ratio}")
    if num_subwords <= 0:
        return 0
    # round() first: 0.3 * 10 is 3.0000000000000004 in floating point and must not become 4.
    return max(1, min(num_subwords, math.ceil(round(ratio * num_subwords, 6))))


def prefix_texts_and_ids(
    texts: Sequence[str], tokenizer: Any, ratio: float, max_length: int | None = None
) -> tuple[list[str], list[list[int]]]:
    """Cut every text to its ``ratio`` prefix of student subwords.

    Returns:
        (prefix_texts, prefix_ids): the text up to the end of the last kept subword (what the teacher sees), and
        the kept subword ids without special tokens (what the student sees, after adding its BOS/EOS).
    """
    return prefix_cuts(texts, tokenizer, [ratio], max_length)[ratio]


def prefix_cuts(
    texts: Sequence[str], tokenizer: Any, ratios: Sequence[float], max_length: int | None = None
) -> dict[float, tuple[list[str], list[list[int]]]]:
    """:func:`prefix_texts_and_ids` for several ratios from one tokenization of ``texts`` (the curriculum's ten
    stages would otherwise tokenize the same texts ten times)."""
    encoded = tokenizer(
        list(texts),
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=max_length is not None,
        max_length=max_length,
    )
    cuts = {}
    for ratio in ratios:
        prefix_texts, prefix_ids = [], []
        for text, ids, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"]):
            keep = prefix_length(len(ids), ratio)
            prefix_ids.append(list(ids[:keep]))
            if ratio >= 1.0 and max_length is None:
                prefix_texts.append(text)
            else:
                prefix_texts.append(text[: offsets[keep - 1][1]].strip() if keep else "")
        cuts[ratio] = (prefix_texts, prefix_ids)
    return cuts
