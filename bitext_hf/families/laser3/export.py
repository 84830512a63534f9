"""The trained student as it ships: weights, tokenizer, remote code, sentence-transformers modules and a model card
with the xsim table of the run and its figures (xsim by language, held-out gold vs random margins, training curve)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["card_figures", "save_student", "xsim_rows"]

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


def save_student(
    student: Any,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    languages: Sequence[str],
    teacher: str,
    training_data: Sequence[str],
    results: Mapping[str, Any],
    log_history: Sequence[Mapping[str, Any]] | None = None,
    evaluator: Any = None,
) -> None:
    """Write ``student`` (a ``Laser3Student``) for the Hub into ``output_dir``: weights, tokenizer, remote code, the
    ``laser3`` model card with its figures (:func:`card_figures`; ``log_history`` and ``evaluator`` as there) and
    sentence-transformers modules (Transformer -> Pooling(max or cls) -> Dense(projection) when the student has a
    projection), checked to reproduce the model's embeddings. ``teacher`` is the recipe's teacher argument
    ("default": the offline USE teacher)."""
    from bitext_hf.hub import render_model_card, save_for_hub

    options: dict[str, Any] = {"pooling": "max" if student.config.pooling == "max" else "cls", "verify": True}
    if student.projection is not None:
        options["dense"] = student.projection
    # Drawn apart and copied in by save_for_hub: a failed export leaves no figures behind in output_dir.
    with tempfile.TemporaryDirectory(prefix="laser3-figures-") as folder:
        figures = card_figures(student, results, folder, log_history=log_history, evaluator=evaluator)
        card = render_model_card(
            "laser3",
            card_data={"language": sorted({code[:2] if len(code) > 3 else code for code in [*languages, "en"]})},
            languages=", ".join(languages),
            teacher="USE v3 multilingual (offline default)" if teacher == "default" else teacher,
            pooling=student.config.pooling,
            embedding_dim=student.config.embedding_dim,
            xsim_table=xsim_rows(results) or "(no evaluation data was given)",
            training_data="\n".join(f"- `{spec}`" for spec in training_data),
            figures=figures,
        )
        save_for_hub(student, tokenizer, output_dir, model_card=card, sentence_transformers=options, figures=figures)
