"""MuSR as it ships. :func:`save_outputs` writes a run's folder: the full model (decoder included) with its tokenizer
and remote code, the encoder alone as ``sentence-transformers/``, the model card with its figure and
``eval_results.json``, and pushes it.

As a sentence-transformers model, MuSR is pooled like the model (max over the encoder outputs, padding masked), then
L2-normalized, as ``model.encode(texts)`` does (:data:`SENTENCE_TRANSFORMERS`, for the full model's folder too: called
with ``input_ids`` and ``attention_mask`` only, it returns the encoder outputs as ``last_hidden_state``). The
encoder-only export leaves the decoder out (``with_decoder=False``): it only serves training.

The model card of a run (:func:`model_card`: data in words, protocol, the stage-1 / stage-2 table) and its figure
(:func:`card_figures`) are written here too."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bitext_hf.families.musr.losses import CrossConSTLoss
from bitext_hf.modeling.musr import MuSREncoderDecoder

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from bitext_hf.families.musr.arguments import ScriptArguments

__all__ = [
    "RESULTS_FILE",
    "SENTENCE_TRANSFORMERS",
    "ST_FOLDER",
    "card_figures",
    "encoder_only",
    "model_card",
    "save_outputs",
    "save_sentence_transformers",
]

RESULTS_FILE = "eval_results.json"
ST_FOLDER = "sentence-transformers"  # the encoder alone, inside the run's folder

# save_for_hub's sentence_transformers options of every MuSR folder; verify: reloaded and checked before it is kept.
SENTENCE_TRANSFORMERS = {"pooling": "max", "normalize": True, "verify": True}


def encoder_only(model: MuSREncoderDecoder) -> MuSREncoderDecoder:
    """A copy of ``model`` without its decoder and output layer (same encoder weights, same device and dtype)."""
    config = model.config.__class__.from_dict({**model.config.to_dict(), "with_decoder": False})
    encoder = MuSREncoderDecoder(config).to(device=model.device, dtype=model.dtype)
    encoder.encoder.load_state_dict(model.encoder.state_dict())
    return encoder.eval()


def save_sentence_transformers(
    model: MuSREncoderDecoder,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    model_card: str,
    figures: Sequence[str | os.PathLike] = (),
) -> Path:
    """Write the encoder as a folder that loads with ``SentenceTransformer(folder, trust_remote_code=True)`` and
    with ``AutoModel``; the export is reloaded and checked against the model's own pooling before it is kept."""
    from bitext_hf.hub import save_for_hub

    return save_for_hub(
        encoder_only(model),
        tokenizer,
        output_dir,
        model_card=model_card,
        sentence_transformers=SENTENCE_TRANSFORMERS,
        figures=figures,
    )


def card_figures(results: dict[str, Any], folder: str | os.PathLike) -> list[Any]:
    """The card's figure: this run's xsim into English per language, stage 1 vs stage 2 (none without held-out)."""
    from bitext_hf.hub.figures import xsim_by_series

    series = {
        label: {
            lang: results[stage]["final"][f"xsim_{lang}-en"]
            for lang in results["data"]["languages"]
            if f"xsim_{lang}-en" in results[stage]["final"]
        }
        for label, stage in (("stage 1", "stage1"), ("stage 2 (CrossConST)", "stage2"))
    }
    if not any(series.values()):
        return []
    return [xsim_by_series(series, Path(folder) / "xsim_by_stage.png", title="xsim into English, stage 1 vs stage 2")]


# results[stage]["final"] keys -> (model-index metric type, display name, lower is better)
_MUSR_METRICS = {
    "xsim_en": ("xsim", "xsim into English (%)", True),
    "accuracy_en": ("accuracy", "retrieval accuracy into English (fraction)", False),
    "xsim_pivot": ("xsim", "xsim into the pivot language (%)", True),
    "accuracy_pivot": ("accuracy", "retrieval accuracy into the pivot language (fraction)", False),
    "bucc_f1_en": ("f1", "BUCC-style mining F1 into English (fraction)", False),
}


def _stage_steps(results: dict[str, Any]) -> int | None:
    """Optimizer steps of both stages, from their log histories (``None`` when neither recorded any)."""
    steps = [
        max((entry.get("step", 0) for entry in results.get(stage, {}).get("log_history") or []), default=None)
        for stage in ("stage1", "stage2")
    ]
    known = [step for step in steps if step is not None]
    return sum(known) if known else None


# The paper's Table 4 (phase 1 -> phase 2 = CrossConST), shown beside every card's table and the experiment's
# (experiments/musr_crossconst.py); what bitext-hf measured is in experiments/README.md (MuSR), which the card names
# rather than copies, so the two cannot drift apart.
PAPER_TABLE4 = (
    "Paper, Table 4 (Gao et al., 2023; phase 1 -> phase 2 = CrossConST, accuracy in %, the 512-wide 8-head model): "
    "Tatoeba-en 78.89 -> 82.69, Flores-200-en 95.30 -> 96.25, Flores-200-zh 94.38 -> 94.76 (768 wide: 80.76 -> "
    "83.96, 96.36 -> 97.37, 95.33 -> 95.95)."
)
PAPER_REFERENCE = (
    f"{PAPER_TABLE4} bitext-hf's reproduction under the paper's protocol (stage 1 to a plateau, controls of equal "
    "updates and of equal compute, over seeds) is in experiments/README.md of the bitext-hf repository."
)


def _stage_settings(script_args: ScriptArguments, results: dict[str, Any]) -> str:
    """How each stage ran, in words: where stage 1 stopped (a plateau, or its step budget) and stage 2's label
    smoothing."""
    plateau = results.get("stage1", {}).get("plateau") or {}
    if plateau.get("stopped_at"):
        stage1 = (
            f"stage 1 stopped at a plateau at step {plateau['stopped_at']} (held-out cross-entropy improving by less "
            f"than {plateau['min_improvement']:.0%} at {plateau['patience']} evaluations in a row)"
        )
    elif plateau:
        stage1 = "stage 1 ran its step budget without reaching the plateau"
    else:
        stage1 = "stage 1 ran its step budget"
    smoothing = script_args.stage2_label_smoothing
    stage2 = "the model's" if smoothing is None else f"{smoothing:g}"
    return f"{stage1}, stage-2 label smoothing {stage2}"


def model_card(
    script_args: ScriptArguments,
    results: dict[str, Any],
    figures: Any = (),
    seed_table: str | None = None,
    *,
    repo_id: str | None = None,
    smoke: bool = False,
) -> str:
    """The card of a run: the data in words, the evaluation protocol, its stage-1 / stage-2 table and ``figures``;
    ``seed_table`` (Markdown, e.g. mean +- std over seeds from experiments/musr_crossconst.py) is added under the
    run's own table. Load snippets name ``repo_id`` (else a marked placeholder); a smoke run (``smoke``, or fewer steps
    over both stages than the smoke rule of ``bitext_hf.hub.card_facts``) and a stage 2 worse than stage 1 are
    warned about."""
    from huggingface_hub import EvalResult

    from bitext_hf.hub import markdown_table, render_model_card
    from bitext_hf.hub.card_facts import (
        DEFAULT_LICENSE,
        Comparison,
        describe_data,
        is_smoke_run,
        load_fields,
        quality_warnings,
    )
    from bitext_hf.training.default_config import configuration_notes

    data = results.get("data", {})
    described = describe_data(script_args.train_pairs, data.get("train_pairs"))
    rows = [
        {"stage": name, **{key: results[name]["final"].get(key) for key in _MUSR_METRICS}}
        for name in ("stage1", "stage2")
    ]
    final, first = results["stage2"]["final"], results["stage1"]["final"]
    steps = _stage_steps(results)
    warnings = quality_warnings(
        steps=steps,
        smoke=smoke,
        notes=configuration_notes(),
        comparisons=[
            Comparison(name, final.get(key), "stage 1 (before CrossConST)", first.get(key), lower)
            for key, (_, name, lower) in _MUSR_METRICS.items()
            if key in ("xsim_en", "accuracy_en")
        ],
    )
    eval_results = [
        EvalResult(
            task_type="sentence-similarity",
            task_name="Bitext mining",
            dataset_type="held-out",
            dataset_name="Held-out multi-way sentences",
            metric_type=metric,
            metric_name=name,
            metric_value=round(float(final[key]), 4),
        )
        for key, (metric, name, _) in _MUSR_METRICS.items()
        if final.get(key) is not None
    ]
    examples = data.get("train_examples")
    counts = ", ".join(f"{count:,}" for count in examples) if isinstance(examples, list) else examples
    card_data = {
        "language": sorted({*described.languages, "en"}),
        "license": DEFAULT_LICENSE,
        "datasets": described.datasets or ["(not recorded)"],
        "tags": ["musr", "crossconst"] + (["smoke-run"] if is_smoke_run(steps, smoke=smoke) else []),
    }
    return render_model_card(
        "generic",
        card_data=card_data,
        eval_results=eval_results,
        model_name="MuSR multilingual sentence encoder (bitext-hf), trained from scratch (no base model)",
        model_description="A max-pooled Transformer encoder trained from random initialization as the encoder of a "
        "many-to-one translation model into English (stage 1, label-smoothed cross-entropy), then with CrossConST "
        "(stage 2: a KL term that pulls a sentence's and its translation's decoder outputs together), with "
        "bitext-hf's `recipes/train_musr.py`. Only the encoder is needed for sentence embeddings.",
        paper="Gao et al., 2023, Learning Multilingual Sentence Representations with Cross-lingual Consistency "
        "Regularization",
        training_data=described.markdown + f"\n\nLanguages sampled with temperature T={script_args.temperature}; "
        f"{counts or 'an unrecorded number of'} pairs drawn per stage.",
        hyperparameters=f"alpha={script_args.alpha} (CrossConST weight), {counts} examples per stage, "
        + _stage_settings(script_args, results)
        + (
            " (stage 2 with an English -> English copy of each pair: a control, not the paper)"
            if script_args.stage2_english_copies
            else ""
        ),
        evaluation=f"Data: {script_args.held_out} English sentences held out of the training data with their "
        "translations in every training language (multi-way), so every language is tested on the same meanings; "
        f"pivot language {data.get('pivot')}.\n\nProtocol: xsim (LASER's margin error in percent, ratio margin, "
        "k = 4, lower is better) and top-1 retrieval accuracy (a fraction, higher is better) of each language "
        "against English and against the pivot, averaged over languages; BUCC-style F1 of mining the held-out "
        "pairs into English.",
        results_table=markdown_table(rows)
        + (f"\n\nOver seeds (mean ± std; xsim in %, accuracy in %):\n\n{seed_table}" if seed_table else "")
        + f"\n\n{PAPER_REFERENCE}",
        figures=figures,
        intended_use="Sentence embeddings for bitext mining and cross-lingual similarity search.",
        limitations="Trained on the data named above only: its size and domain bound what the encoder knows; a "
        "language outside it is not covered. The vocabulary is trained on the same data.",
        license="Apache-2.0 (the `license` above) for the code of bitext-hf and these weights as far as bitext-hf "
        'is concerned; the weights may also be bound by the terms of the training data (see "Training data").',
        citation=f"```bibtex\n{CrossConSTLoss.citation}\n```",
        model_path=load_fields(repo_id)["model_id"],
        warnings="\n\n".join(f"> {warning}" for warning in warnings),
        load_note=load_fields(repo_id)["load_note"],
    )


def save_outputs(
    model: MuSREncoderDecoder,
    tokenizer: Any,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    *,
    push: bool | None = None,
) -> None:
    """Into ``training_args.output_dir``: the full model (decoder included) with its tokenizer and remote code, the
    card with its figure, the encoder alone as ``sentence-transformers/``, then ``eval_results.json``; when ``push``
    (``None``: ``training_args.push_to_hub``), the upload of that folder (the full model, its card and results; not the
    stages). Both folders load with ``SentenceTransformer`` and give ``model.encode``'s vectors."""
    from bitext_hf.hub import push_recipe_output, save_for_hub
    from bitext_hf.io import atomic_output

    output_dir = Path(training_args.output_dir)
    # Drawn apart and copied in by save_for_hub: a failed export leaves no figure behind in output_dir.
    with tempfile.TemporaryDirectory(prefix="musr-figures-") as folder:
        figures = card_figures(results, folder)
        card = model_card(script_args, results, figures=figures)
        save_for_hub(
            model, tokenizer, output_dir, model_card=card, sentence_transformers=SENTENCE_TRANSFORMERS, figures=figures
        )
        save_sentence_transformers(model, tokenizer, output_dir / ST_FOLDER, model_card=card, figures=figures)
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")
    push_recipe_output(output_dir, training_args, push=push)
