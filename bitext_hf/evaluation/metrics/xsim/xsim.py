"""xsim as a local `evaluate` metric: LASER's margin-based similarity-search error rate (source -> target)."""

from __future__ import annotations

import evaluate
import numpy as np

from bitext_hf.evaluation.metrics.functional import xsim
from bitext_hf.evaluation.metrics.module_info import embedding_pair_info

_DESCRIPTION = """
xsim: the percentage of source sentences whose best-margin target among their k nearest neighbours is not their gold
translation (row i of the source embeddings is aligned with row i of the target embeddings). Lower is better.
In text mode (``target_texts`` given), a predicted target with the same text as the gold target is no error.
"""

_KWARGS_DESCRIPTION = """
Args:
    source_embeddings (list of float lists or np.ndarray (n, d)): L2-normalized source sentence embeddings.
    target_embeddings (list of float lists or np.ndarray (n, d)): aligned target sentence embeddings.
    k (int, defaults to 4): neighbourhood size of the margin.
    margin (str, defaults to "ratio"): "ratio", "distance" or "absolute".
    target_texts (list of str, optional): enables text mode.
Returns:
    xsim (float): error rate in percent; errors (int); n (int).
Examples:
    >>> metric = evaluate.load(str(bitext_hf.evaluation.metrics.metric_path("xsim")))  # or its hub id
    >>> metric.compute(source_embeddings=src, target_embeddings=tgt, k=4, margin="ratio")
    {'xsim': 3.2, 'errors': 32, 'n': 1000}
"""

_CITATION = """@inproceedings{artetxe-schwenk-2019-margin,
  title = {Margin-based Parallel Corpus Mining with Multilingual Sentence Embeddings},
  author = {Artetxe, Mikel and Schwenk, Holger},
  booktitle = {ACL},
  year = {2019}
}"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Xsim(evaluate.Metric):
    def _info(self) -> evaluate.MetricInfo:
        return embedding_pair_info(_DESCRIPTION, _KWARGS_DESCRIPTION, _CITATION)

    def _compute(self, source_embeddings, target_embeddings, k: int = 4, margin: str = "ratio", target_texts=None):
        return xsim(
            np.asarray(source_embeddings, dtype=np.float32),
            np.asarray(target_embeddings, dtype=np.float32),
            k=k,
            margin=margin,
            target_texts=target_texts,
        )
