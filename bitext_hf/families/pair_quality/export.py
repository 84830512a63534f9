"""The trained pair classifier as it ships (:func:`save_outputs`): weights and remote code (configuration, features,
model) for the light classifier, weights and tokenizer for the cross-encoder (the base's own transformers class), a
model card (:func:`model_card`) with the held-out metrics beside the encoder's cosine and margin and its
figures (:func:`card_figures`: reliability diagram, wrong pairs rejected by kind), and ``quality_results.json``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from bitext_hf.families.pair_quality.arguments import PairDataArguments

__all__ = ["RESULTS_FILE", "card_figures", "metrics_table", "model_card", "save_outputs"]

RESULTS_FILE = "quality_results.json"
_COLUMNS = (("pairs", "pairs"), ("AUC", "auc"), ("cosine AUC", "cosine/auc"), ("margin AUC", "margin/auc"),
            ("MCC", "mcc"), ("cosine MCC", "cosine/mcc"), ("margin MCC", "margin/mcc"), ("ECE", "ece"),
            ("kept", "kept"))  # fmt: skip


def metrics_table(results: Mapping[str, Any]) -> str:
    """The Markdown table of every evaluated set of ``results`` (what :func:`~.evaluation.evaluate_sets` returns)."""
    sets = [name for name, value in results.items() if isinstance(value, Mapping) and "auc" in value]
    lines = ["| set | " + " | ".join(title for title, _ in _COLUMNS) + " |", "|---" * (len(_COLUMNS) + 1) + "|"]
    for name in sets:
        cells = []
        for _, key in _COLUMNS:
            value = results[name].get(key)
            cells.append("" if value is None else str(value) if key == "pairs" else f"{value:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def card_figures(results: Mapping[str, Any], predictions: Mapping[str, Any], folder: str | os.PathLike) -> list[Any]:
    """The card's figures, written into ``folder``: the reliability diagram of the held-out sets (``predictions``:
    set -> (probabilities, labels)) and the share of each kind of wrong pair rejected per set."""
    from bitext_hf.hub.figures import rejected_by_kind, reliability_diagram

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not predictions:
        return []
    sets = {name: results[name] for name in predictions if name in results}
    return [
        reliability_diagram(predictions, folder / "reliability.png"),
        rejected_by_kind(sets, folder / "rejected_by_kind.png"),
    ]


def model_card(
    *,
    script_args: PairDataArguments,
    results: Mapping[str, Any],
    encoder: str,
    figures: Sequence[Any] = (),
    repo_id: str | None = None,
    base: str | None = None,
) -> str:
    """The ``pair_quality`` card (or, with ``base``, the ``pair_quality_cross_encoder`` card of a cross-encoder built
    on that encoder): what the probability means, the inputs, the data and the held-out metrics, and the load snippet
    for ``repo_id`` (or a placeholder)."""
    from bitext_hf.hub import render_model_card
    from bitext_hf.hub.card_facts import DEFAULT_LICENSE, describe_encoder, hub_model_id, load_fields

    languages = sorted({"en", *results.get("data", {}).get("train_languages", [])})
    card_data: dict[str, Any] = {"language": languages, "license": DEFAULT_LICENSE}
    fields: dict[str, Any] = {}
    if base is not None:
        card_data["base_model"] = hub_model_id(base)
        fields["base"] = describe_encoder(base)
    return render_model_card(
        "pair_quality" if base is None else "pair_quality_cross_encoder",
        card_data={name: value for name, value in card_data.items() if value is not None},
        **fields,
        **load_fields(repo_id),
        figures=figures,
        encoder=encoder,
        training_data=", ".join(script_args.train_pairs),
        evaluation_data=", ".join(script_args.eval_pairs) or "none",
        negative_kinds=", ".join(script_args.negative_kinds),
        metrics=metrics_table(results),
    )


def save_outputs(
    model: Any,
    tokenizer: Any,
    script_args: PairDataArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    *,
    push: bool | None = None,
    predictions: Mapping[str, Any] | None = None,
) -> None:
    """Write the classifier for the Hub into ``training_args.output_dir`` (weights, remote code or tokenizer, card,
    figures), then ``quality_results.json``, and upload the folder when ``push`` (``None``:
    ``training_args.push_to_hub``). ``tokenizer`` is None for the light classifier (it reads features, not text) and
    the cross-encoder's otherwise."""
    from bitext_hf.hub import push_recipe_output, save_for_hub
    from bitext_hf.io import atomic_output

    output_dir = Path(training_args.output_dir)
    cross_encoder = tokenizer is not None
    with tempfile.TemporaryDirectory(prefix="pair-quality-figures-") as folder:
        figures = card_figures(results, predictions or {}, folder)
        card = model_card(
            script_args=script_args,
            results=results,
            encoder=results["data"]["encoder"] if cross_encoder else model.config.encoder,
            figures=figures,
            repo_id=training_args.hub_model_id,
            base=getattr(script_args, "base_model", None) if cross_encoder else None,
        )
        # The cross-encoder is the base's own transformers class: no remote code to ship.
        save_for_hub(model, tokenizer, output_dir, model_card=card, figures=figures, remote_code=not cross_encoder)
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2)
    push_recipe_output(output_dir, training_args, push=push)
