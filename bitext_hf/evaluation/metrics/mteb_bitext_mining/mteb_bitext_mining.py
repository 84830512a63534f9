"""MTEB's bitext-mining metrics as a local `evaluate` metric: nearest neighbour by cosine, sklearn weighted P/R/F1."""

from __future__ import annotations

import evaluate
import numpy as np

from bitext_hf.evaluation.metrics.functional import mteb_bitext_mining
from bitext_hf.evaluation.metrics.module_info import embedding_pair_info

_DESCRIPTION = """
The metrics of MTEB's BitextMining tasks, so that numbers compare with the MTEB leaderboard: for each gold pair
(i, j), the prediction is the target nearest to source i by cosine and the label is j; accuracy, and precision,
recall and F1 with scikit-learn's average="weighted" (zero_division=0); main_score is F1. The numbers equal those of
mteb's own evaluator exactly, duplicate sentences and ties included (cosines and ties computed as mteb computes them).
Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    source_embeddings (list of float lists or np.ndarray (n, d)): the sentence1 embeddings.
    target_embeddings (list of float lists or np.ndarray (n, d)): the sentence2 embeddings (the candidate pool).
        `evaluate` needs as many rows on both sides; for a larger pool (BUCC-style gold over a subset of sources),
        call bitext_hf.evaluation.metrics.functional.mteb_bitext_mining directly.
    gold (list of (int, int), optional): gold (source, target) index pairs; defaults to row i with row i.
Returns:
    accuracy, precision, recall, f1, main_score (floats): fractions in [0, 1]; main_score is f1.
Examples:
    >>> metric = evaluate.load(str(bitext_hf.evaluation.metrics.metric_path("mteb_bitext_mining")))  # or its hub id
    >>> metric.compute(source_embeddings=src, target_embeddings=tgt)
    {'precision': 0.95, 'recall': 0.96, 'f1': 0.955, 'accuracy': 0.96, 'main_score': 0.955}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MtebBitextMining(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return embedding_pair_info(_DESCRIPTION, _KWARGS_DESCRIPTION)

    def _compute(self, source_embeddings, target_embeddings, gold=None):
        return mteb_bitext_mining(
            np.asarray(source_embeddings, dtype=np.float32), np.asarray(target_embeddings, dtype=np.float32), gold
        )
