"""OneAligner's training pieces: the Trainer loss, the retrieval evaluator, the model card of a trained model and its
figures.

The model computes its own contrastive loss (``forward(..., return_loss=True)``); :func:`compute_loss` maps the
``PairCollator`` batch onto that forward and adds the batch's top-1 accuracy as a logged part. Retrieval evaluation
scores every evaluation set with ``bitext_hf.families.onealigner`` (one implementation of the evaluation-time
similarity, its per-block normalization and top-1 accuracy) and LASER's xsim from ``bitext_hf.evaluation.metrics``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.evaluation.metrics.functional import xsim_from_similarity
from bitext_hf.families.onealigner.scoring import encode, normalize_blocks, retrieval_accuracy, similarity_matrix

__all__ = [
    "OneAlignerRetrievalEvaluator",
    "card_figures",
    "compute_loss",
    "evaluate_sets",
    "model_card",
    "results_table",
    "unwrap_peft",
]

_ABLATION = (("bertscore", False), ("bertscore", True), ("mean_pool", False), ("mean_pool", True))


def compute_loss(model: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
    """The paper's contrastive loss on a ``PairCollator`` batch (row i of each side aligned), and the batch's
    source-to-target top-1 accuracy on the normalized training scores (a cheap sign of learning)."""
    output = model(
        input_ids=inputs["src_input_ids"],
        attention_mask=inputs["src_attention_mask"],
        target_input_ids=inputs["tgt_input_ids"],
        target_attention_mask=inputs["tgt_attention_mask"],
        return_loss=True,
    )
    labels = torch.arange(output.scores.shape[0], device=output.scores.device)
    # A detached tensor, not .item(): the Trainer converts logged parts once per logging window, not every step.
    accuracy = (output.scores.argmax(dim=1) == labels).float().mean().detach()
    return output.loss, {"train_batch_accuracy": accuracy}


def unwrap_peft(model: torch.nn.Module) -> torch.nn.Module:
    """The OneAligner model inside a ``PeftModel`` (the adapters stay active), or ``model`` itself."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


@torch.no_grad()
def evaluate_sets(
    model: torch.nn.Module,
    tokenizer: Any,
    eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    *,
    ablation: bool = False,
) -> dict[str, float]:
    """Retrieval on every evaluation set: keys ``<set>/<metric>`` and, for the macro average over sets, ``<metric>``.

    ``accuracy`` (and both directions) uses the configured similarity and normalization, per evaluation block of
    ``config.eval_batch_size``; ``xsim`` is LASER's margin error in percent (ratio margin, k=4) on the
    un-normalized similarity; with ``ablation``, ``ablation_<similarity>_<norm|no_norm>_accuracy`` for mean pooling
    and BERTScore, each without and with normalization (the paper's Table 1), from the same encodings.
    """
    model = unwrap_peft(model)
    config = model.config
    configured = config.similarity
    results: dict[str, float] = {}
    for name, (sources, targets) in eval_sets.items():
        matrices: dict[tuple[str, bool], torch.Tensor] = {}
        for similarity in ("bertscore", "mean_pool") if ablation else (configured,):
            config.similarity = similarity  # switched for scoring only: the model is restored below
            try:
                raw = similarity_matrix(model, tokenizer, list(sources), list(targets), normalize=False)
            finally:
                config.similarity = configured
            matrices[(similarity, False)] = raw
            matrices[(similarity, True)] = normalize_blocks(raw, config.alpha, config.eval_batch_size)
        scores = matrices[(configured, bool(config.normalization))]
        results.update({f"{name}/{key}": value for key, value in retrieval_accuracy(scores).items()})
        raw = matrices[(configured, False)].numpy()
        results[f"{name}/xsim"] = float(xsim_from_similarity(raw, k=4, margin="ratio")["xsim"])
        if ablation:
            for similarity, normalize in _ABLATION:
                label = f"ablation_{similarity}_{'norm' if normalize else 'no_norm'}_accuracy"
                results[f"{name}/{label}"] = retrieval_accuracy(matrices[(similarity, normalize)])["accuracy"]
    if eval_sets:
        for metric in sorted({key.rsplit("/", 1)[1] for key in results}):
            results[metric] = float(np.mean([results[f"{name}/{metric}"] for name in eval_sets]))
    return results


class OneAlignerRetrievalEvaluator(RetrievalEvaluator):
    """``evaluator(model) -> metrics`` for ``BitextTrainer(retrieval_evaluator=...)``: :func:`evaluate_sets`
    without the ablation (it triples the cost of an evaluation during training). Primary metric: ``accuracy`` (top-1
    retrieval, both directions, macro-averaged over the sets, as the paper reports), higher is better."""

    def __init__(
        self, tokenizer: Any, eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]], *, name: str = ""
    ) -> None:
        super().__init__(primary_metric="accuracy", greater_is_better=True, name=name)
        self.tokenizer = tokenizer
        self.eval_sets = dict(eval_sets)

    def compute_metrics(self, model: torch.nn.Module) -> dict[str, float]:
        return evaluate_sets(model, self.tokenizer, self.eval_sets, ablation=False)


def results_table(results: Mapping[str, float], set_names: Sequence[str]) -> list[dict[str, str]]:
    """Rows of the model card's table: accuracy and xsim in percent per evaluation set, then their average."""
    rows = []
    for name, prefix in [*((name, f"{name}/") for name in set_names), ("average", "")]:
        if f"{prefix}accuracy" in results:
            rows.append(
                {
                    "evaluation set": name,
                    "accuracy (%)": f"{100 * results[f'{prefix}accuracy']:.1f}",
                    "xsim (%)": f"{results[f'{prefix}xsim']:.1f}",
                }
            )
    return rows


def _direction(name: str, taken: set[tuple[str, str]]) -> tuple[str, str]:
    """The heatmap cell of an evaluation set named ``src-tgt:source``; a second set of the same languages (an
    evaluation file and a held-out split) gets its own column, labelled with its source."""
    head, _, tail = name.partition(":")
    source, _, target = head.partition("-")
    cell = (source, target) if target else (name, "?")
    if cell in taken:
        cell = (cell[0], f"{cell[1]} ({tail or name})")
    taken.add(cell)
    return cell


def card_figures(
    model: torch.nn.Module,
    tokenizer: Any,
    eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]],
    final: Mapping[str, float],
    log_history: Sequence[Mapping[str, Any]],
    folder: str | os.PathLike,
) -> list[Any]:
    """The model card's figures, written into ``folder``: xsim by evaluation direction (from ``final``), the ratio
    margins (k=4) of the held-out gold pairs against random pairs, and the training curve.

    The margins are those of the mean-pooled sentence vectors (what the sentence-transformers export and mining
    with this checkpoint use), from one more encoding of the evaluation sentences: cheap beside an evaluation.
    """
    from bitext_hf.evaluation.margins import held_out_margins
    from bitext_hf.hub.figures import card_figures as make_figures

    taken: set[tuple[str, str]] = set()
    xsim = {_direction(name, taken): final[f"{name}/xsim"] for name in eval_sets if f"{name}/xsim" in final}
    model = unwrap_peft(model)

    def vectors(texts: Sequence[str]) -> np.ndarray:
        return encode(model, tokenizer, list(texts)).cpu().numpy()

    gold, random = held_out_margins((vectors(src), vectors(tgt)) for src, tgt in eval_sets.values() if len(src) >= 2)
    return make_figures(folder, xsim=xsim, gold_scores=gold, random_scores=random, log_history=log_history)


def model_card(
    model: torch.nn.Module,
    encoder: str,
    data_stats: Mapping[str, Any],
    final: Mapping[str, float],
    figures: Sequence[Any] = (),
) -> str:
    """The README.md of a trained model: its settings, training data, the final results table and ``figures``
    (from :func:`card_figures`)."""
    from bitext_hf.hub import render_model_card

    config = model.config
    return render_model_card(
        "onealigner",
        layer=config.layer,
        similarity=config.similarity,
        alpha=config.alpha,
        softmax_temperature=config.softmax_temperature,
        loss_type=config.loss_type,
        encoder=encoder,
        train_pairs=", ".join(data_stats["selected_pairs"]),
        train_examples=data_stats["train_examples"],
        results_table=results_table(final, list(data_stats["eval_sets"])),
        figures=figures,
    )
