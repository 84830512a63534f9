"""Bitext retrieval accuracy as a local `evaluate` metric: top-1 cosine in both directions (TranslationEvaluator)."""

from __future__ import annotations

import evaluate
import numpy as np

from bitext_hf.evaluation.metrics.functional import bitext_accuracy
from bitext_hf.evaluation.metrics.module_info import embedding_pair_info

_DESCRIPTION = """
Top-1 retrieval accuracy by cosine similarity, source -> target and target -> source, and their mean, as
sentence-transformers' TranslationEvaluator computes them (row i of each side is a translation pair; given the texts,
retrieving a sentence with the gold sentence's text is a hit, so with both texts the numbers equal the evaluator's
exactly, duplicate sentences and ties included). Higher is better.
"""

_KWARGS_DESCRIPTION = """
Args:
    source_embeddings (list of float lists or np.ndarray (n, d)): source sentence embeddings.
    target_embeddings (list of float lists or np.ndarray (n, d)): aligned target sentence embeddings.
    source_texts, target_texts (list of str, optional): the sentences; a retrieved duplicate of the gold text is a hit.
Returns:
    src2tgt_accuracy (float), tgt2src_accuracy (float), accuracy (float): fractions in [0, 1].
Examples:
    >>> metric = evaluate.load(str(bitext_hf.evaluation.metrics.metric_path("bitext_accuracy")))  # or its hub id
    >>> metric.compute(source_embeddings=src, target_embeddings=tgt)
    {'src2tgt_accuracy': 0.97, 'tgt2src_accuracy': 0.96, 'accuracy': 0.965}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class BitextAccuracy(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return embedding_pair_info(_DESCRIPTION, _KWARGS_DESCRIPTION)

    def _compute(self, source_embeddings, target_embeddings, source_texts=None, target_texts=None):
        return bitext_accuracy(
            np.asarray(source_embeddings, dtype=np.float32),
            np.asarray(target_embeddings, dtype=np.float32),
            source_texts=source_texts,
            target_texts=target_texts,
        )
