"""Alignment quality over beads: strict and lax precision, recall and F1, as vecalign's ``score.py`` defines them
(after Sennrich & Volk 2011, the Bleualign evaluation), summed over documents before the ratios are taken.

A bead is ``(source sentences, target sentences)``; a bead empty on both sides is ignored, and repeated beads count
once. Precision counts the test beads: a strict hit is a bead that is in the gold; a lax hit shares a source sentence
and one of its gold targets with a gold bead. Recall counts the same way with the two sides' roles swapped and the
1-0 and 0-1 beads of both left out. A ratio with nothing to count is 0.0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

__all__ = ["Beads", "alignment_f1"]

Beads = Sequence[tuple[Sequence[int], Sequence[int]]]


def _hits(gold: Beads, test: Beads) -> tuple[int, int, int]:
    """(test beads, strict hits, lax hits) of ``test`` against ``gold``."""
    gold_set = {(tuple(xs), tuple(ys)) for xs, ys in gold if len(xs) or len(ys)}
    test_set = {(tuple(xs), tuple(ys)) for xs, ys in test if len(xs) or len(ys)}
    gold_targets: dict[int, set[int]] = defaultdict(set)
    for xs, ys in gold_set:
        for x in xs:
            gold_targets[x].update(ys)
    strict = lax = 0
    for xs, ys in test_set:
        if (xs, ys) in gold_set:
            strict += 1
            lax += 1
        elif any(y in gold_targets.get(x, ()) for x in xs for y in ys):
            lax += 1
    return len(test_set), strict, lax


def _ratio(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def alignment_f1(gold: Sequence[Beads], test: Sequence[Beads]) -> dict[str, float]:
    """Strict and lax P / R / F1 of the ``test`` alignments of some documents against their ``gold`` alignments
    (one list of beads per document, in the same order).

    Returns:
        precision_strict, recall_strict, f1_strict, precision_lax, recall_lax, f1_lax: fractions in [0, 1].
    """
    if len(gold) != len(test):
        raise ValueError(f"got {len(gold)} gold and {len(test)} test documents; give one of each per document")
    precision = [0, 0, 0]
    recall = [0, 0, 0]
    for gold_beads, test_beads in zip(gold, test):
        for position, value in enumerate(_hits(gold_beads, test_beads)):
            precision[position] += value
        linked_gold = [(xs, ys) for xs, ys in gold_beads if len(xs) and len(ys)]
        linked_test = [(xs, ys) for xs, ys in test_beads if len(xs) and len(ys)]
        for position, value in enumerate(_hits(linked_test, linked_gold)):
            recall[position] += value
    result = {}
    for kind, position in (("strict", 1), ("lax", 2)):
        p, r = _ratio(precision[position], precision[0]), _ratio(recall[position], recall[0])
        result.update({f"precision_{kind}": p, f"recall_{kind}": r, f"f1_{kind}": _f1(p, r)})
    return result
