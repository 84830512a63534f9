"""MuSR evaluation after each stage (paper section 5): similarity search against English and against a non-English
pivot (the paper's en and zh columns), and BUCC-style mining F1, on the multi-way held-out set.

Per language l (``bitext_hf.evaluation.metrics.functional``):

* ``xsim_l-en``: LASER's margin-based error rate (%) of l -> English; ``accuracy_l-en``: top-1 cosine retrieval
  accuracy, the mean of both directions (the paper's "bidirectional similarity search accuracy");
* ``xsim_l-<pivot>`` / ``accuracy_l-<pivot>``: the same against the pivot language (zero-shot: never trained as a
  pair);
* ``bucc_f1_l-en``: BUCC-style mining: every source sentence against the English of only half of them (the other
  half has no translation in the pool, as most sentences of comparable corpora), ratio margin, ``max`` retrieval,
  F1 at the best threshold on this set (an oracle threshold: no separate train split here).

Averages over languages come without the language (``xsim_en``, ``accuracy_en``, ``xsim_pivot``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from torch import nn

from bitext_hf.data import PairSet
from bitext_hf.encoders import HFEncoder
from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.evaluation.metrics.functional import bitext_accuracy, bucc_f1, bucc_labels, xsim
from bitext_hf.mining import mine

__all__ = ["MuSREvaluator", "bucc_style_f1"]


def bucc_style_f1(source: np.ndarray, english: np.ndarray, k: int = 4) -> float:
    """F1 of margin mining when only the first half of the sources has its translation in the pool (see above)."""
    half = source.shape[0] // 2
    mined = mine(source, english[:half], k=min(k, half), margin="ratio", mode="max")
    candidates = list(zip(mined.src_indices.tolist(), mined.tgt_indices.tolist()))
    labels, n_gold = bucc_labels(candidates, [(row, row) for row in range(half)])
    return float(bucc_f1(mined.scores, labels, n_gold_test=n_gold)["f1"])


class MuSREvaluator(RetrievalEvaluator):
    """``evaluator(model) -> {metric: value}`` for ``BitextTrainer(retrieval_evaluator=...)`` (see the module
    docstring for the metrics). Primary metric: ``accuracy_en`` (the paper's measure, averaged over languages),
    higher is better.

    Args:
        tokenizer: the model's tokenizer.
        held_out: language -> PairSet (source language -> English), multi-way: row i of every set has the same
            English sentence.
        pivot: the non-English pivot language (one of ``held_out``), or None.
        k: margin neighbourhood size.
        name: see :class:`~bitext_hf.evaluation.evaluator.RetrievalEvaluator`.
    """

    def __init__(
        self,
        tokenizer: Any,
        held_out: Mapping[str, PairSet],
        pivot: str | None = None,
        *,
        k: int = 4,
        batch_size: int = 64,
        max_length: int | None = None,
        name: str = "",
    ) -> None:
        super().__init__(primary_metric="accuracy_en", greater_is_better=True, name=name)
        if not held_out:
            raise ValueError("MuSREvaluator needs at least one held-out language")
        if pivot is not None and pivot not in held_out:
            raise ValueError(f"pivot {pivot!r} is not a held-out language ({', '.join(held_out)})")
        if len({tuple(pairs.tgt) for pairs in held_out.values()}) != 1:
            raise ValueError("the held-out sets must be multi-way: the same English sentences in the same order")
        self.tokenizer, self.held_out, self.pivot = tokenizer, dict(held_out), pivot
        self.k, self.batch_size, self.max_length = k, batch_size, max_length

    def compute_metrics(self, model: nn.Module) -> dict[str, float]:
        encoder = HFEncoder(model, tokenizer=self.tokenizer, pooling="model", max_length=self.max_length or 10**9)
        return self.evaluate_encoder(encoder)

    def evaluate_encoder(self, encoder: Any) -> dict[str, float]:
        """The same metrics for any ``encoder.encode(texts, batch_size=...)`` (e.g. the offline USE, as a
        reference on the same held-out sets)."""
        english_texts = next(iter(self.held_out.values())).tgt
        english = encoder.encode(english_texts, batch_size=self.batch_size)
        embeddings = {
            lang: encoder.encode(pairs.src, batch_size=self.batch_size) for lang, pairs in self.held_out.items()
        }
        k = min(self.k, len(english_texts))
        metrics: dict[str, float] = {}
        for language, source in embeddings.items():
            metrics[f"xsim_{language}-en"] = float(xsim(source, english, k=k, target_texts=english_texts)["xsim"])
            metrics[f"accuracy_{language}-en"] = bitext_accuracy(source, english)["accuracy"]
            if len(english_texts) >= 4:
                metrics[f"bucc_f1_{language}-en"] = bucc_style_f1(source, english, self.k)
            if self.pivot is not None and language != self.pivot:
                pivot_texts = self.held_out[self.pivot].src
                pivot = embeddings[self.pivot]
                metrics[f"xsim_{language}-{self.pivot}"] = float(
                    xsim(source, pivot, k=k, target_texts=pivot_texts)["xsim"]
                )
                metrics[f"accuracy_{language}-{self.pivot}"] = bitext_accuracy(source, pivot)["accuracy"]
        suffixes = {"en": "-en", **({"pivot": f"-{self.pivot}"} if self.pivot else {})}
        for name in ("xsim", "accuracy", "bucc_f1"):
            for label, suffix in suffixes.items():
                values = [
                    value for key, value in metrics.items() if key.startswith(f"{name}_") and key.endswith(suffix)
                ]
                if values:
                    metrics[f"{name}_{label}"] = float(np.mean(values))
        return metrics
