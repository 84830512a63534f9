"""The ContrastiveAlignedEncoder as it ships: the run's folders (:func:`save_outputs`), its model card (the
``contrastive_align`` template) with its figures, and the trained encoder as plain transformers + sentence-transformers
folders, through the shared ``save_for_hub``.

* :func:`save_outputs`: the full model, ``encoder/`` (and ``encoder-<lang>/``), ``adapter/`` with LoRA,
  ``eval_results.json``, and the upload of ``encoder/``.
* :func:`model_card`: the card of the run (objective, base encoder, languages, held-out retrieval), and of each
  per-language export of ``linear`` (``mapped_language``); :func:`card_figures`: its figures (xsim by language, the
  training curve).
* :func:`export_encoders`: the inner encoder without the projector; for ``linear``, one more folder per language
  whose sentence-transformers stack ends with a bias-free Dense layer holding that language's W (mean pooling
  commutes with a linear map, so this equals pooling the mapped token vectors).
* :data:`SENTENCE_TRANSFORMERS`: the ``save_for_hub`` options of every folder, the full model's included (called
  with ``input_ids`` and ``attention_mask`` only, it returns hidden state ``config.layer`` as ``last_hidden_state``):
  mean pooling, L2-normalized, as ``encode`` does.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from bitext_hf.hub import markdown_table, push_recipe_output, render_model_card, save_for_hub
from bitext_hf.io import atomic_output
from bitext_hf.training.peft import ADAPTER_FOLDER, base_model, export_peft

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from bitext_hf.families.contrastive_align.arguments import ScriptArguments

__all__ = [
    "ENCODER_FOLDER",
    "RESULTS_FILE",
    "SENTENCE_TRANSFORMERS",
    "card_figures",
    "export_encoders",
    "model_card",
    "save_outputs",
]

logger = logging.getLogger(__name__)

RESULTS_FILE = "eval_results.json"
ENCODER_FOLDER = "encoder"  # the plain encoder inside the run's folder: what --push_to_hub uploads

# verify: each folder is reloaded with SentenceTransformer and checked against the pooling before it is kept.
SENTENCE_TRANSFORMERS = {"pooling": "mean", "normalize": True, "verify": True}


def card_figures(
    results: Mapping[str, float],
    folder: str | os.PathLike,
    *,
    log_history: Sequence[Mapping[str, Any]] | None = None,
) -> list[Any]:
    """The card's figures, written into ``folder``: the sentence xsim of each held-out language from English (the
    per-language ``<lang>/xsim`` of ``results``, the run's final evaluation) and the training curve of
    ``log_history`` (the Trainer's ``state.log_history``); none of what the run did not measure."""
    from bitext_hf.hub.figures import card_figures as make_figures

    xsim = {("en", key.partition("/")[0]): value for key, value in results.items() if key.endswith("/xsim")}
    return make_figures(folder, xsim=xsim, log_history=log_history)


def model_card(
    objective: str,
    encoder: str,
    languages: Sequence[str],
    results: Mapping[str, float],
    mapped_language: str | None = None,
    *,
    training_data: Sequence[str] = (),
    data_stats: Mapping[str, Any] | None = None,
    initial: Mapping[str, float] | None = None,
    steps: int | None = None,
    smoke: bool = False,
    repo_id: str | None = None,
    figures: Sequence[Any] = (),
) -> str:
    """The README.md of an exported encoder: what it is, how it was aligned, the data in words (``training_data``:
    the recipe's pair specs; ``data_stats``: its ``results["data"]``, with the pairs per language), the evaluation
    protocol and final retrieval numbers (the means over languages; per-language keys ``<lang>/<metric>`` stay in
    ``eval_results.json``), the load snippets for ``repo_id`` (else a marked placeholder), and the warnings of a smoke
    run (``smoke`` or ``steps`` below the smoke rule of ``bitext_hf.hub.card_facts``) or of numbers worse than the
    encoder before alignment (``initial``), and ``figures`` (:func:`card_figures`). ``mapped_language``: the language
    whose W the export applies (the per-language folders of ``linear``)."""
    from huggingface_hub import EvalResult

    from bitext_hf.hub.card_facts import (
        DEFAULT_LICENSE,
        Comparison,
        describe_data,
        describe_encoder,
        hub_model_id,
        is_smoke_run,
        language_codes,
        load_fields,
        quality_warnings,
    )
    from bitext_hf.training.default_config import configuration_notes

    stats = dict(data_stats or {})
    pairs = {lang: stats[lang]["pairs"] for lang in languages if isinstance(stats.get(lang), Mapping)}
    data = describe_data(training_data, pairs)
    held = ", ".join(
        f"{lang}: {stats[lang]['held_out']} pairs" for lang in languages if "held_out" in stats.get(lang, {})
    )
    evaluated = [key for key in results if "/" not in key]
    evaluation = (
        f"pairs of each language held out of the training data before alignment ({held or ', '.join(languages)})"
        if evaluated
        else "none (the run had no --held_out pairs)"
    )
    before = initial or {}
    comparisons = [
        Comparison(metric, results.get(metric), "the encoder before alignment", before.get(metric), lower)
        for metric, lower in (("word_accuracy", False), ("sentence_accuracy", False), ("xsim", True))
    ]
    warnings = quality_warnings(steps=steps, smoke=smoke, comparisons=comparisons, notes=configuration_notes())
    base = hub_model_id(encoder)
    card_data: dict[str, Any] = {
        "language": sorted({*data.languages, *language_codes([*languages, "en"])}),
        "license": DEFAULT_LICENSE,
        "datasets": data.datasets or ["(not recorded)"],
    }
    if base:
        card_data["base_model"] = base
    if is_smoke_run(steps, smoke=smoke):
        card_data["tags"] = ["smoke-run"]
    rows = [{"metric": key, "value": float(value)} for key, value in sorted(results.items()) if "/" not in key]
    eval_results = [
        EvalResult(
            task_type="sentence-similarity",
            task_name="Cross-lingual retrieval",
            dataset_type="held-out",
            dataset_name="Held-out pairs",
            metric_type=row["metric"],
            metric_name=row["metric"] + (" (%)" if "xsim" in row["metric"] else " (fraction)"),
            metric_value=round(row["value"], 4),
        )
        for row in rows
        if row["value"] == row["value"]
    ]
    return render_model_card(
        "contrastive_align",
        strict=True,
        card_data=card_data,
        eval_results=eval_results,
        encoder=describe_encoder(encoder),
        objective=objective,
        languages=", ".join(languages),
        mapped_language=mapped_language,
        aligner=stats.get("aligner", "(not recorded)"),
        training_data=data.markdown,
        evaluation_data=evaluation,
        results_table=markdown_table(rows or [{"metric": "(no held-out set)", "value": None}], float_format=".4f"),
        warnings="\n\n".join(f"> {warning}" for warning in warnings),
        figures=figures,
        **load_fields(repo_id),
    )


def export_encoders(
    model: torch.nn.Module,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    model_card: str | Callable[[str | None], str],
    figures: Sequence[Any] = (),
) -> dict[str, Path]:
    """Write the trained encoder without the projector: ``<output_dir>`` for English (and every language for the
    fine-tuning objectives), plus ``<output_dir>-<lang>`` per language for ``linear`` (its W as a Dense layer).

    Each folder loads with ``AutoModel.from_pretrained`` (a plain BERT / XLM-R model, no remote code) and with
    ``SentenceTransformer`` (mean pooling, L2-normalized). ``model_card``: the README.md text of every folder, or a
    function of the mapped language (``None`` for ``<output_dir>``) that renders each folder's card, e.g.
    ``functools.partial(model_card, objective, encoder, languages, results)``. ``figures``: the card's figures,
    copied into every folder. Returns {language or "en": folder}.
    """
    card = model_card if callable(model_card) else lambda language: model_card
    aligned = base_model(model)
    encoder = aligned.encoder
    if aligned.config.layer != encoder.config.num_hidden_layers:
        logger.warning(
            "the exported encoder pools its last layer, but training aligned hidden state %d of %d: use the "
            "full checkpoint's encode() for the aligned layer",
            aligned.config.layer,
            encoder.config.num_hidden_layers,
        )
    # The full model's encode truncates to its max_tokens; the bare encoder would otherwise take its tokenizer's limit.
    options = {**SENTENCE_TRANSFORMERS, "max_seq_length": aligned.max_tokens}
    output_dir = Path(output_dir)
    folders = {
        "en": save_for_hub(
            encoder,
            tokenizer,
            output_dir,
            model_card=card(None),
            sentence_transformers=options,
            remote_code=False,
            figures=figures,
        )
    }
    if aligned.config.objective == "linear":
        for language in aligned.config.languages:
            weight = aligned.linear_map(language).detach().cpu()
            dense = torch.nn.Linear(weight.shape[0], weight.shape[1], bias=False)
            with torch.no_grad():
                dense.weight.copy_(weight.T)  # Linear computes x A^T: A = W^T gives x W
            folders[language] = save_for_hub(
                encoder,
                tokenizer,
                output_dir.with_name(f"{output_dir.name}-{language}"),
                model_card=card(language),
                remote_code=False,
                sentence_transformers={**options, "dense": dense},
                figures=figures,
            )
    return folders


def save_outputs(
    model: torch.nn.Module,
    tokenizer: Any,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    *,
    push: bool | None = None,
    log_history: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Into ``training_args.output_dir``: ``adapter/`` with LoRA (merged into the model for the rest), the full model
    (remote code, a sentence-transformers model too, giving ``encode()``'s vectors), ``encoder/`` (and
    ``encoder-<lang>/`` for ``linear``: :func:`export_encoders`), each with the card and its figures (the final
    results and the Trainer's ``log_history``), then ``eval_results.json``; when ``push`` (``None``:
    ``training_args.push_to_hub``), the upload of ``encoder/`` to ``--hub_model_id`` (default:
    ``<output_dir name>-encoder``)."""
    output_dir = Path(training_args.output_dir)
    model = export_peft(model, output_dir / ADAPTER_FOLDER, merge=True)
    # Drawn apart and copied in by save_for_hub: a failed export leaves no figures behind in output_dir.
    with tempfile.TemporaryDirectory(prefix="contrastive-figures-") as folder:
        figures = card_figures(results["final"], folder, log_history=log_history)
        card = functools.partial(
            model_card,
            script_args.objective,
            script_args.encoder,
            results["data"]["languages"],
            results["final"],
            training_data=script_args.train_pairs,
            data_stats=results["data"],
            initial=results.get("initial"),
            steps=results.get("global_step"),
            repo_id=training_args.hub_model_id,
            figures=figures,
        )
        save_for_hub(
            model,
            tokenizer,
            output_dir,
            model_card=card(),
            sentence_transformers=SENTENCE_TRANSFORMERS,
            figures=figures,
        )
        export_encoders(model, tokenizer, output_dir / ENCODER_FOLDER, model_card=card, figures=figures)
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")
    push_recipe_output(output_dir / ENCODER_FOLDER, training_args, f"{output_dir.name}-{ENCODER_FOLDER}", push=push)
