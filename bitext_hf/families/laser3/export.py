"""The trained student as it ships (:func:`save_outputs`): weights, tokenizer, remote code, sentence-transformers
modules, a model card (:func:`model_card`) with the xsim table of the run and its figures (:func:`card_figures`: xsim
by language, held-out gold vs random margins, training curve), and ``xsim_results.json``."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from bitext_hf.families.laser3.arguments import ScriptArguments

__all__ = ["RESULTS_FILE", "card_figures", "model_card", "save_outputs", "xsim_rows"]

RESULTS_FILE = "xsim_results.json"

_COLUMNS = {
    "teacher zero-shot": "teacher_zero_shot",
    "student before": "student_before",
    "student after": "student_after",
}


def xsim_rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per evaluated language of ``results`` (``evaluate_xsim`` outputs under ``teacher_zero_shot``,
    ``student_before`` and ``student_after``): the pairs and the three xsim values."""
    rows = []
    for language, after in results.get("student_after", {}).items():
        row: dict[str, Any] = {"language": language, "pairs": int(after["n"])}
        for title, key in _COLUMNS.items():
            value = results.get(key, {}).get(language, {}).get("xsim")
            row[title] = None if value is None else float(value)
        rows.append(row)
    return rows


def card_figures(
    student: Any,
    results: Mapping[str, Any],
    folder: str | os.PathLike,
    *,
    log_history: Sequence[Mapping[str, Any]] | None = None,
    evaluator: Any = None,
) -> list[Any]:
    """The card's figures, written into ``folder``: the student's xsim per evaluated language (into the teacher's
    English), the ratio margins (k=4, as xsim) of the held-out gold pairs against random pairs, and the training
    curve of ``log_history`` (the Trainer's ``state.log_history``).

    The margins need ``evaluator`` (the run's ``XsimEvaluator``: its held-out pairs, the teacher's cached English
    and the student's tokenizer); the held-out sentences are encoded once more, cheap beside an evaluation.
    """
    from bitext_hf.evaluation.margins import held_out_margins
    from bitext_hf.families.laser3.evaluation import StudentEncoder
    from bitext_hf.hub.figures import card_figures as make_figures

    after = results.get("student_after", {})
    xsim = {(language, "en"): values["xsim"] for language, values in after.items() if language != "all"}
    gold = random = None
    if evaluator is not None:
        encoder = StudentEncoder(student, evaluator.tokenizer, max_length=evaluator.max_length)
        gold, random = held_out_margins(
            (
                np.asarray(encoder.encode(pairs.src, batch_size=evaluator.batch_size)),
                evaluator.cache.get(pairs.tgt, 1.0),
            )
            for pairs in evaluator.bitexts
            if len(pairs) >= 2  # an evaluation set of 1 pair has no random pair: not encoded for nothing
        )
    return make_figures(folder, xsim=xsim, gold_scores=gold, random_scores=random, log_history=log_history)


def _overall(results: Mapping[str, Any], key: str) -> float | None:
    """xsim of ``results[key]`` over every evaluated language: the micro-average ``all`` when there are several."""
    by_language = results.get(key, {})
    entry = by_language.get("all") or (next(iter(by_language.values())) if len(by_language) == 1 else None)
    return None if entry is None or entry.get("xsim") is None else float(entry["xsim"])


def _mlm_note(check: Mapping[str, Any] | None) -> list[str]:
    """The card's warning for a run whose MLM head learned no context (``mlm_learning_check``)."""
    if not check or check["learned context"]:
        return []
    return [
        f"**Its MLM task learned no context.** The masked-LM loss ended at {check['final loss']:.3f} nats, not "
        f"{check['margin']:g} below the unigram entropy of the MLM text ({check['unigram entropy']:.3f} nats): the "
        "head predicts tokens by their frequency, so at this budget the MLM batches took updates from distillation "
        "without teaching the encoder. experiments/README.md of bitext-hf (LASER3) measures what that costs; "
        "`--mask_weight 0` trains without MLM."
    ]


def model_card(
    *,
    languages: Sequence[str],
    teacher: str,
    training_data: Sequence[str],
    results: Mapping[str, Any],
    pooling: str = "max",
    embedding_dim: Any = None,
    monolingual: Sequence[str] = (),
    evaluation_data: Sequence[str] = (),
    repo_id: str | None = None,
    smoke: bool = False,
    figures: Sequence[Any] = (),
) -> str:
    """The ``laser3`` model card (README.md) of a student: the data in words (pair counts from
    ``results["n_train_pairs"]``), the evaluation protocol and xsim table, the load snippets for ``repo_id`` (or a
    marked placeholder), and the warnings: a smoke run (``smoke``, or fewer optimizer steps than the smoke rule of
    ``bitext_hf.hub.card_facts`` by ``results["global_step"]``), a student worse than its teacher or than itself
    before training, and an MLM head that learned no context (``results["mlm"]``)."""
    from bitext_hf.hub import render_model_card
    from bitext_hf.hub.card_facts import (
        DEFAULT_LICENSE,
        Comparison,
        describe_data,
        hub_model_id,
        is_smoke_run,
        language_codes,
        load_fields,
        quality_warnings,
    )
    from bitext_hf.training.default_config import configuration_notes

    data = describe_data(training_data, results.get("n_train_pairs"), monolingual=monolingual)
    evaluated = describe_data(evaluation_data) if evaluation_data else None
    rows = xsim_rows(results)
    held_out = ", ".join(f"{row['language']}: {row['pairs']} pairs" for row in rows if row["language"] != "all")
    if evaluated is not None:
        evaluation = f"{held_out or 'held-out pairs'}, from\n\n{evaluated.markdown}"
    else:
        evaluation = f"{held_out}, held out of the training data" if held_out else "(no evaluation data was given)"
    after = _overall(results, "student_after")
    comparisons = [
        Comparison("xsim (%)", after, name, _overall(results, key), lower_is_better=True)
        for name, key in (("its teacher", "teacher_zero_shot"), ("the untrained student", "student_before"))
    ]
    steps = results.get("global_step")
    notes = [*configuration_notes(), *_mlm_note(results.get("mlm"))]
    warnings = quality_warnings(steps=steps, smoke=smoke, comparisons=comparisons, notes=notes)
    base = hub_model_id(teacher)
    card_data: dict[str, Any] = {
        "language": sorted({*data.languages, *language_codes(languages), "en"}),
        "license": DEFAULT_LICENSE,
        "datasets": data.datasets or ["(not recorded)"],
    }
    if base:
        card_data["base_model"] = base
    if warnings and is_smoke_run(steps, smoke=smoke):
        card_data["tags"] = ["smoke-run"]
    return render_model_card(
        "laser3",
        card_data=card_data,
        languages=", ".join(languages),
        teacher="USE v3 multilingual (offline default)" if teacher == "default" else teacher,
        pooling=pooling,
        embedding_dim=embedding_dim,
        xsim_table=rows or "(no evaluation data was given)",
        training_data=data.markdown,
        evaluation_data=evaluation,
        warnings="\n\n".join(f"> {warning}" for warning in warnings),
        figures=figures,
        **load_fields(repo_id),
    )


def save_outputs(
    model: Any,
    tokenizer: Any,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    *,
    push: bool | None = None,
    log_history: Sequence[Mapping[str, Any]] | None = None,
    evaluator: Any = None,
) -> None:
    """Write the trained student (a ``Laser3Student``) for the Hub into ``training_args.output_dir``: weights,
    tokenizer, remote code, the ``laser3`` model card with its figures (:func:`card_figures`; ``log_history`` and
    ``evaluator`` as there; the card's data, teacher and languages from ``script_args``) and sentence-transformers
    modules (Transformer -> Pooling(max or cls) -> Dense(projection) when the student has a projection), checked to
    reproduce the model's embeddings; then ``xsim_results.json``, and the upload of the folder when ``push`` (``None``:
    ``training_args.push_to_hub``), the results staying local."""
    from bitext_hf.hub import push_recipe_output, save_for_hub
    from bitext_hf.io import atomic_output

    output_dir = Path(training_args.output_dir)
    options: dict[str, Any] = {"pooling": "max" if model.config.pooling == "max" else "cls", "verify": True}
    if model.projection is not None:
        options["dense"] = model.projection
    # Drawn apart and copied in by save_for_hub: a failed export leaves no figures behind in output_dir.
    with tempfile.TemporaryDirectory(prefix="laser3-figures-") as folder:
        figures = card_figures(model, results, folder, log_history=log_history, evaluator=evaluator)
        card = model_card(
            languages=sorted({spec.partition("=")[0] for spec in script_args.bitexts}),
            teacher=script_args.teacher,
            training_data=script_args.bitexts,
            results=results,
            pooling=model.config.pooling,
            embedding_dim=model.config.embedding_dim,
            monolingual=script_args.monolingual,
            evaluation_data=script_args.eval_bitexts,
            repo_id=training_args.hub_model_id,
            figures=figures,
        )
        save_for_hub(model, tokenizer, output_dir, model_card=card, sentence_transformers=options, figures=figures)
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2)
    push_recipe_output(output_dir, training_args, push=push)
