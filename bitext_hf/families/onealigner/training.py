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
from bitext_hf.modeling.onealigner.modeling_onealigner import OneAlignerFeatures
from bitext_hf.training.distributed import gather_with_grad, world_size

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


def compute_loss(
    model: torch.nn.Module, inputs: Mapping[str, torch.Tensor], *, gather_across_devices: bool = True
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The paper's contrastive loss on a ``PairCollator`` batch (row i of each side aligned), and the batch's
    source-to-target top-1 accuracy on the normalized training scores (a cheap sign of learning).

    In a distributed job (``gather_across_devices``, in training) the negatives and the in-batch normalization are
    those of the global batch, as in one process given the whole batch: each rank encodes its own batch through the
    (DDP-wrapped) model, gathers every rank's token features with their gradients, and scores the global batch.
    Every rank computes the same loss, so DDP's average of the ranks' gradients is that loss's gradient
    (``training.distributed.gather_with_grad``).
    """
    gather = gather_across_devices and model.training and world_size() > 1
    output = model(
        input_ids=inputs["src_input_ids"],
        attention_mask=inputs["src_attention_mask"],
        target_input_ids=inputs["tgt_input_ids"],
        target_attention_mask=inputs["tgt_attention_mask"],
        return_loss=not gather,
    )
    loss, scores = output.loss, output.scores
    if gather:
        from accelerate.utils import extract_model_from_parallel

        core = unwrap_peft(extract_model_from_parallel(model))
        source, target = (
            _gathered(core.features_from_states(states, inputs[f"{side}_input_ids"], inputs[f"{side}_attention_mask"]))
            for side, states in (("src", output.last_hidden_state), ("tgt", output.target_last_hidden_state))
        )
        _, scores, loss = core.score_batch(source, target, return_loss=True)
    labels = torch.arange(scores.shape[0], device=scores.device)
    # A detached tensor, not .item(): the Trainer converts logged parts once per logging window, not every step.
    accuracy = (scores.argmax(dim=1) == labels).float().mean().detach()
    return loss, {"train_batch_accuracy": accuracy}


def _gathered(features: OneAlignerFeatures) -> OneAlignerFeatures:
    """Every rank's features in rank order; padded tokens get zero vectors and zero weights, which BERTScore leaves
    out as it does a batch's own padding."""
    return OneAlignerFeatures(*(gather_with_grad(part) for part in features))


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


def _data_words(specs: Sequence[str], names: Sequence[str], counts: Mapping[str, Any]) -> Any:
    """The data of ``specs`` whose display name is in ``names`` (the pairs selected for training or evaluated), in
    words; without specs, the names themselves with their counts."""
    from bitext_hf.data.specs import parse_spec
    from bitext_hf.hub.card_facts import DataDescription, describe_data

    def name(spec: str) -> str | None:
        try:
            return parse_spec(spec).name
        except ValueError:
            return None

    chosen = [spec for spec in specs if name(spec) in set(names)]
    if chosen:
        return describe_data(chosen, counts)
    lines = [f"- `{item}`" + (f": {counts[item]:,} pairs" if item in counts else "") for item in names]
    languages = [part for item in names for part in item.partition(":")[0].split("-")]
    return DataDescription("\n".join(lines) or "- (not recorded)", languages, [])


def model_card(
    model: torch.nn.Module,
    encoder: str,
    data_stats: Mapping[str, Any],
    final: Mapping[str, float],
    figures: Sequence[Any] = (),
    *,
    training_data: Sequence[str] = (),
    evaluation_data: Sequence[str] = (),
    initial: Mapping[str, float] | None = None,
    steps: int | None = None,
    smoke: bool = False,
    repo_id: str | None = None,
) -> str:
    """The README.md of a trained model: its settings, training and evaluation data in words (``training_data`` and
    ``evaluation_data``: the recipe's pair specs, matched to ``data_stats``), the final results table, ``figures``
    (from :func:`card_figures`), the load snippets for ``repo_id`` (else a marked placeholder) and the warnings of a
    smoke run (``smoke``, or ``steps`` below the smoke rule of ``bitext_hf.hub.card_facts``) or of a model that
    retrieves worse than the encoder before fine-tuning (``initial``: the same evaluation before training)."""
    from bitext_hf.hub import render_model_card
    from bitext_hf.hub.card_facts import (
        DEFAULT_LICENSE,
        Comparison,
        describe_encoder,
        hub_model_id,
        is_smoke_run,
        language_codes,
        load_fields,
        quality_warnings,
    )
    from bitext_hf.training.default_config import configuration_notes

    config = model.config
    available = dict(data_stats.get("available_per_pair", {}))
    eval_sets = dict(data_stats.get("eval_sets", {}))
    data = _data_words(training_data, data_stats["selected_pairs"], available)
    evaluated = _data_words(evaluation_data, list(eval_sets), eval_sets)
    held = [name for name in eval_sets if name.endswith(":held-out")]
    evaluation = "; ".join(f"`{name}` ({count:,} pairs)" for name, count in eval_sets.items()) or "none was given"
    if evaluated.markdown != "- (not recorded)" and evaluation_data:
        evaluation += ", from\n\n" + evaluated.markdown
    if held:
        evaluation += "\n\nSets named `:held-out` are pairs held out of the training data (never trained on)."
    before = initial or {}
    comparisons = [
        Comparison(
            "retrieval accuracy (%)",
            _percent(final, "accuracy"),
            "the encoder before fine-tuning",
            _percent(before, "accuracy"),
            lower_is_better=False,
        ),
        Comparison(
            "xsim (%)", final.get("xsim"), "the encoder before fine-tuning", before.get("xsim"), lower_is_better=True
        ),
    ]
    warnings = quality_warnings(steps=steps, smoke=smoke, comparisons=comparisons, notes=configuration_notes())
    card_data: dict[str, Any] = {
        "language": language_codes([*data.languages, *evaluated.languages]) or ["multilingual"],
        "license": DEFAULT_LICENSE,
        "datasets": data.datasets or ["(not recorded)"],
    }
    base = hub_model_id(encoder)
    if base:
        card_data["base_model"] = base
    if is_smoke_run(steps, smoke=smoke):
        card_data["tags"] = ["smoke-run"]
    return render_model_card(
        "onealigner",
        card_data=card_data,
        layer=config.layer,
        similarity=config.similarity,
        alpha=config.alpha,
        softmax_temperature=config.softmax_temperature,
        loss_type=config.loss_type,
        encoder=describe_encoder(encoder),
        train_examples=f"{int(data_stats['train_examples']):,}",
        training_data=data.markdown,
        evaluation_data=evaluation,
        results_table=results_table(final, list(eval_sets)),
        warnings="\n\n".join(f"> {warning}" for warning in warnings),
        figures=figures,
        **load_fields(repo_id),
    )


def _percent(results: Mapping[str, float], key: str) -> float | None:
    value = results.get(key)
    return None if value is None else 100 * float(value)
