"""The `evaluate.MetricInfo` shared by the local metric modules whose inputs are two embedding matrices."""

from __future__ import annotations

import datasets
import evaluate

__all__ = ["embedding_pair_info"]


def embedding_pair_info(description: str, inputs_description: str, citation: str = "") -> evaluate.MetricInfo:
    """MetricInfo with inputs ``source_embeddings`` and ``target_embeddings`` (one float32 vector a row)."""
    return evaluate.MetricInfo(
        description=description,
        citation=citation,
        inputs_description=inputs_description,
        features=datasets.Features(
            {
                "source_embeddings": datasets.Sequence(datasets.Value("float32")),
                "target_embeddings": datasets.Sequence(datasets.Value("float32")),
            }
        ),
    )
