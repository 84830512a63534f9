"""A trained OneAligner as it ships: :func:`save_outputs` writes the run's folder (the model or its LoRA adapter,
tokenizer, sentence-transformers modules, the model card with its figures, ``eval_results.json``) and pushes it;
:func:`model_card` (settings, data in words, results table, warnings, load snippets) and :func:`card_figures` (xsim
by direction, gold against random margins, the training curve) are rendered through ``bitext_hf.hub``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from bitext_hf.families.onealigner.scoring import encode
from bitext_hf.training.peft import ADAPTER_FOLDER, base_model, export_peft

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from bitext_hf.families.onealigner.arguments import ScriptArguments
    from bitext_hf.training import ModelArguments

__all__ = ["RESULTS_FILE", "card_figures", "model_card", "results_table", "save_outputs"]

RESULTS_FILE = "eval_results.json"


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
    model = base_model(model)

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


def save_outputs(
    model: torch.nn.Module,
    tokenizer: Any,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    *,
    push: bool | None = None,
    model_args: ModelArguments | None = None,
    eval_sets: Mapping[str, tuple[Sequence[str], Sequence[str]]] | None = None,
    log_history: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Write the run into ``training_args.output_dir``: the LoRA adapter (``model_args.use_peft``), the merged or
    full model with its tokenizer, model card, figures (:func:`card_figures`, from ``eval_sets`` and the Trainer's
    ``log_history``) and sentence-transformers modules (unless an unmerged adapter is all there is), then
    ``eval_results.json``; upload that folder (not the checkpoints) to ``--hub_model_id`` when ``push`` (``None``:
    ``training_args.push_to_hub``)."""
    from bitext_hf.hub import push_recipe_output, save_for_hub
    from bitext_hf.io import atomic_output

    output_dir = Path(training_args.output_dir)
    merge = model_args is not None and model_args.merge_adapter
    model = export_peft(model, output_dir / ADAPTER_FOLDER, merge=merge)
    if model_args is None or not model_args.use_peft or merge:
        # Drawn apart and copied in by save_for_hub: a failed export leaves no figures behind in output_dir.
        with tempfile.TemporaryDirectory(prefix="onealigner-figures-") as folder:
            figures = card_figures(model, tokenizer, eval_sets or {}, results["final"], log_history, folder)
            card = model_card(
                model,
                script_args.encoder,
                results["data"],
                results["final"],
                figures,
                training_data=script_args.train_pairs,
                evaluation_data=script_args.eval_pairs,
                initial=results.get("initial"),
                steps=results.get("global_step"),  # the repository id goes in when the folder is pushed
            )
            # Mean-pooled layer-L vectors, L2-normalized: exactly the model's sentence embedding (checked on reload).
            save_for_hub(
                model,
                tokenizer,
                output_dir,
                model_card=card,
                figures=figures,
                sentence_transformers={"pooling": "mean", "normalize": True, "verify": True},
            )
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")
    push_recipe_output(output_dir, training_args, push=push)
