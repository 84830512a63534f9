"""Sentence-alignment quality as a local `evaluate` metric: strict and lax P / R / F1 over beads (vecalign's score.py)."""

from __future__ import annotations

import datasets
import evaluate

from bitext_hf.evaluation.metrics.beads import alignment_f1

_DESCRIPTION = """
Strict and lax precision, recall and F1 of sentence alignments over beads, as vecalign's score.py computes them
(Sennrich & Volk 2011's Bleualign evaluation): counts are summed over the documents before the ratios. A strict hit
is a bead of the gold alignment; a lax hit shares a source sentence and one of its gold target sentences with a gold
bead. Recall leaves the 1-0 and 0-1 beads out. Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of documents): each document's beads, a bead being [source sentences, target sentences]
        (0-based lists, one of them possibly empty), as `bitext-hf align` writes them.
    references (list of documents): the gold beads of the same documents, in the same order.
Returns:
    precision_strict, recall_strict, f1_strict, precision_lax, recall_lax, f1_lax (floats in [0, 1]).
Examples:
    >>> metric = evaluate.load(str(bitext_hf.evaluation.metrics.metric_path("alignment_f1")))  # or its hub id
    >>> metric.compute(predictions=[[[[0], [0]], [[1, 2], [1]]]], references=[[[[0], [0]], [[1], [1]], [[2], []]]])
"""

_BEADS = datasets.Sequence(datasets.Sequence(datasets.Sequence(datasets.Value("int64"))))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AlignmentF1(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": _BEADS, "references": _BEADS}),
        )

    def _compute(self, predictions, references):
        for name, documents in (("predictions", predictions), ("references", references)):
            for number, document in enumerate(documents):
                if any(len(bead) != 2 for bead in document):
                    raise ValueError(f"{name}[{number}]: a bead is [source sentences, target sentences]")
        return alignment_f1(references, predictions)
