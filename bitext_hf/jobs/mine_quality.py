"""Which mined pairs to keep by their quality: the run's pair classifier, loaded and checked before any encoding
(:func:`mining_classifier`), each pair's probability of being a translation (:func:`add_quality`), and the threshold
that ``--min-precision`` chooses (:func:`pairs_at_precision`). :func:`bitext_hf.jobs.mine.run_mining` calls these;
the estimates themselves are :mod:`bitext_hf.mining.quality`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.jobs.sides import Side, is_embeddings

if TYPE_CHECKING:
    from bitext_hf.jobs.mine import MiningConfig
    from bitext_hf.mining.retrieval import MinedPairs

__all__ = ["add_quality", "mining_classifier", "pairs_at_precision"]


def mining_classifier(config: MiningConfig, src: Side, tgt: Side) -> Any:
    """The run's pair classifier (None without ``classifier``), checked against what it reads: both sides' texts,
    and for the light classifier the ratio margin with k=4 of its encoder (a .npy side's encoder is not known: the
    user vouches for it)."""
    if config.classifier is None:
        return None
    from bitext_hf.encoders.spec import EncoderSpec
    from bitext_hf.mining.quality import classifier_for_run

    for name, side in (("src", src), ("tgt", tgt)):
        if side.texts is None:
            raise UsageError(f"--classifier reads the sentences: give --{name}-text with the embeddings {side.path}")
    encoders = [
        EncoderSpec(model or config.model).name
        for side, model in (("src", config.src_model), ("tgt", config.tgt_model))
        if not is_embeddings(getattr(config, side))
    ]
    classifier, _ = classifier_for_run(config.classifier, encoders, backend=config.classifier_backend)
    if getattr(classifier.config, "reads_scores", True):  # the light classifier; a cross-encoder reads the texts
        if config.margin != "ratio":
            raise UsageError(f"--classifier reads the ratio margin: --margin {config.margin} gives it another score")
        if config.k != 4:
            raise UsageError(f"--classifier reads the ratio margin with k=4 (how it was trained): --k {config.k}")
    return classifier


def add_quality(classifier: Any, pairs: MinedPairs, src: Side, tgt: Side) -> None:
    """Set ``pairs.quality``: the classifier's probability of each pair, from its texts (rows are input lines), its
    cosine and its margin."""
    from bitext_hf.mining.quality import pair_quality

    pairs.quality = pair_quality(
        classifier,
        [src.texts[row] for row in pairs.src_indices.tolist()],
        [tgt.texts[row] for row in pairs.tgt_indices.tolist()],
        pairs.cosines,
        pairs.scores,
    )


def pairs_at_precision(pairs: MinedPairs, precision: float) -> tuple[MinedPairs, float]:
    """The pairs at or above the lowest threshold whose pairs reach an estimated ``precision``, and that threshold."""
    from bitext_hf.mining.quality import precision_curve, threshold_for_precision

    chosen = threshold_for_precision(pairs.scores, pairs.quality, precision)
    if chosen is None:
        means = precision_curve(pairs.scores, pairs.quality)[1]
        reached = f"{float(means.max()):.3f}" if len(means) else "nothing (no pair was mined)"
        raise DataValidationError(
            f"--min-precision {precision}: no threshold reaches it; the most any threshold reaches is {reached} "
            "(lower it, or mine corpora that hold more translations)"
        )
    threshold = chosen[0]
    return pairs.select(pairs.scores >= threshold), threshold
