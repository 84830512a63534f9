"""Distillation data: bitexts (student language, English), monolingual student text, English text; read from local
files, hub datasets or this machine's gettext catalogs, validated with one-line errors.

A source spec is ``LANG=SOURCE`` where SOURCE is one of
``path/pairs.tsv`` (English <TAB> translation per line), ``path/xx.txt,path/en.txt`` (two line-aligned files,
student side first), ``gettext`` (``bitext_hf.data.gettext_pairs(LANG)``), or
``hub:DATASET_ID[:CONFIG][@SPLIT]`` (a Hugging Face dataset with a ``translation`` dict column or one English and
one other text column). Monolingual specs take ``path/xx.txt`` or ``hub:...`` (a ``text`` column).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.data import DataValidationError
from bitext_hf.data import readers as data_readers
from bitext_hf.training.distillation.errors import DistillationDataError

__all__ = [
    "Bitext",
    "load_bitext",
    "load_monolingual",
    "parse_source_spec",
    "read_lines",
    "split_held_out",
]

logger = logging.getLogger(__name__)


@dataclass
class Bitext:
    """Aligned pairs of one student language: ``student_texts[i]`` translates ``teacher_texts[i]`` (English)."""

    language: str
    student_texts: list[str]
    teacher_texts: list[str]

    def __post_init__(self) -> None:
        if len(self.student_texts) != len(self.teacher_texts):
            raise DistillationDataError(
                f"{self.language}: {len(self.student_texts)} student sentences but {len(self.teacher_texts)} "
                "teacher (English) sentences; the two sides must be line-aligned"
            )
        if not self.student_texts:
            raise DistillationDataError(f"language {self.language!r} has no data (0 sentence pairs)")

    def __len__(self) -> int:
        return len(self.student_texts)


def parse_source_spec(spec: str) -> tuple[str, str]:
    """Split ``LANG=SOURCE`` into (language, source)."""
    language, sep, source = spec.partition("=")
    if not sep or not language.strip() or not source.strip():
        raise DistillationDataError(
            f"bad data source {spec!r}: expected LANG=SOURCE, e.g. 'wol=data/wol-eng.tsv' or 'wol=gettext'"
        )
    return language.strip(), source.strip()


def _read(reader: Callable[..., Any], *paths: str | Path) -> Any:
    """Run a ``bitext_hf.data`` reader: its errors (file and line named) become ``DistillationDataError``s."""
    for path in paths:
        if not Path(path).is_file():
            raise DistillationDataError(f"data file not found: {path}")
    try:
        return reader(*paths)
    except DataValidationError as error:
        raise DistillationDataError(str(error)) from None


def read_lines(path: str | Path) -> list[str]:
    """Lines of a UTF-8 text file (``bitext_hf.data.read_lines``: the file and line of any problem are named)."""
    return _read(data_readers.read_lines, path)


def _load_hub(source: str) -> list[dict]:
    """Rows of ``hub:DATASET_ID[:CONFIG][@SPLIT]``; a missing dataset offline raises with the local-file hint."""
    spec = source.removeprefix("hub:")
    spec, _, split = spec.partition("@")
    dataset_id, _, config = spec.partition(":")
    try:
        from datasets import load_dataset

        dataset = load_dataset(dataset_id, config or None, split=split or "train")
    except Exception as error:  # the datasets library raises many types when offline or for a wrong id
        raise DistillationDataError(
            f"cannot load hub dataset {dataset_id!r} (config {config or None!r}, split {split or 'train'!r}): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}; offline, pass local "
            "files instead (LANG=path/pairs.tsv or LANG=path/xx.txt,path/en.txt)"
        ) from error
    return list(dataset)


def _is_english_column(name: str) -> bool:
    """``en``, ``eng``, ``english``, ``eng_Latn``, ``sentence_eng_Latn``, ``text_en``... (case-insensitive)."""
    parts = name.lower().replace("-", "_").split("_")
    return any(part in ("en", "eng", "english") for part in parts)


def _pairs_from_rows(rows: list[dict], language: str, source: str) -> tuple[list[str], list[str]]:
    if not rows:
        return [], []
    first = rows[0]
    if "translation" in first and isinstance(first["translation"], dict):
        rows = [row["translation"] for row in rows]
        first = rows[0]
    columns = [name for name, value in first.items() if isinstance(value, str)]
    english = [name for name in columns if _is_english_column(name)]
    others = [name for name in columns if name not in english]
    if len(english) != 1 or len(others) < 1:
        raise DistillationDataError(
            f"{source}: cannot tell the English column from the {language!r} column among {columns}"
        )
    student_column = next((name for name in others if language in name), others[0])
    return [row[student_column] for row in rows], [row[english[0]] for row in rows]


def _validate_nonempty(texts: Sequence[str], where: str) -> None:
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DistillationDataError(f"{where}: empty sentence at row {index} (remove it, or the pair)")


def load_bitext(spec: str, max_pairs: int | None = None) -> Bitext:
    """Load the bitext of a ``LANG=SOURCE`` spec (see the module docstring)."""
    language, source = parse_source_spec(spec)
    if source == "gettext":
        from bitext_hf.data import gettext_pairs

        pairs = gettext_pairs(language)
        teacher, student = [english for english, _ in pairs], [translation for _, translation in pairs]
    elif source.startswith("hub:"):
        student, teacher = _pairs_from_rows(_load_hub(source), language, source)
    elif "," in source:
        student_file, teacher_file = (part.strip() for part in source.split(",", 1))
        student, teacher = _read(data_readers.read_moses, student_file, teacher_file)
    else:
        teacher, student = _read(data_readers.read_tsv_pairs, source)  # English<TAB>translation
    _validate_nonempty(student, f"{spec} (student side)")
    _validate_nonempty(teacher, f"{spec} (English side)")
    if max_pairs is not None:
        student, teacher = student[:max_pairs], teacher[:max_pairs]
    return Bitext(language, list(student), list(teacher))


def load_monolingual(spec: str, max_sentences: int | None = None) -> tuple[str, list[str]]:
    """Load monolingual student-language text of a ``LANG=path.txt`` or ``LANG=hub:...`` spec."""
    language, source = parse_source_spec(spec)
    if source.startswith("hub:"):
        rows = _load_hub(source)
        if rows and "text" not in rows[0]:
            raise DistillationDataError(f"{source}: monolingual hub data needs a 'text' column, got {list(rows[0])}")
        texts = [row["text"] for row in rows]
        _validate_nonempty(texts, spec)
    else:
        texts = read_lines(source)
    if not texts:
        raise DistillationDataError(f"language {language!r} has no monolingual data in {source}")
    return language, texts[:max_sentences] if max_sentences is not None else texts


def split_held_out(bitext: Bitext, held_out: int, seed: int = 0) -> tuple[Bitext, Bitext]:
    """Split off ``held_out`` random pairs for evaluation; the rest trains. English sentences of held-out pairs
    are also removed from training (a duplicated English side would leak the test target)."""
    if not 0 < held_out < len(bitext):
        raise DistillationDataError(
            f"{bitext.language}: cannot hold out {held_out} of {len(bitext)} pairs for evaluation"
        )
    order = np.random.default_rng(seed).permutation(len(bitext))
    test_index = sorted(order[:held_out].tolist())
    test_english = {bitext.teacher_texts[i] for i in test_index}
    test_student = {bitext.student_texts[i] for i in test_index}
    train_index = [
        i
        for i in sorted(order[held_out:].tolist())
        if bitext.teacher_texts[i] not in test_english and bitext.student_texts[i] not in test_student
    ]
    return _subset(bitext, train_index), _subset(bitext, test_index)


def _subset(bitext: Bitext, index: list[int]) -> Bitext:
    return Bitext(bitext.language, [bitext.student_texts[i] for i in index], [bitext.teacher_texts[i] for i in index])
