"""The trained student as it ships: weights, tokenizer, remote code, sentence-transformers modules and a model card
with the xsim table of the run."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["save_student", "xsim_rows"]

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


def save_student(
    student: Any,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    languages: Sequence[str],
    teacher: str,
    training_data: Sequence[str],
    results: Mapping[str, Any],
) -> None:
    """Write ``student`` (a ``Laser3Student``) for the Hub into ``output_dir``: weights, tokenizer, remote code, the
    ``laser3`` model card and sentence-transformers modules (Transformer -> Pooling(max or cls) -> Dense(projection)
    when the student has a projection), checked to reproduce the model's embeddings. ``teacher`` is the recipe's
    teacher argument ("default": the offline USE teacher)."""
    from bitext_hf.hub import render_model_card, save_for_hub

    card = render_model_card(
        "laser3",
        card_data={"language": sorted({code[:2] if len(code) > 3 else code for code in [*languages, "en"]})},
        languages=", ".join(languages),
        teacher="USE v3 multilingual (offline default)" if teacher == "default" else teacher,
        pooling=student.config.pooling,
        embedding_dim=student.config.embedding_dim,
        xsim_table=xsim_rows(results) or "(no evaluation data was given)",
        training_data="\n".join(f"- `{spec}`" for spec in training_data),
    )
    options: dict[str, Any] = {"pooling": "max" if student.config.pooling == "max" else "cls", "verify": True}
    if student.projection is not None:
        options["dense"] = student.projection
    save_for_hub(student, tokenizer, output_dir, model_card=card, sentence_transformers=options)
