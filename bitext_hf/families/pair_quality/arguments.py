"""The arguments of ``recipes/train_pair_quality.py`` (data, negatives, encoder and classifier settings), apart from
the steps that use them, so that :mod:`~bitext_hf.families.pair_quality.data` and
:mod:`~bitext_hf.families.pair_quality.export` can take them without importing the recipe's module."""

# ruff: noqa: RUF009  (the fields' defaults come from arg_field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses

from bitext_hf.data import parse_spec
from bitext_hf.errors import UsageError
from bitext_hf.training.args import arg_field

__all__ = ["NEGATIVE_KINDS", "CrossEncoderArguments", "PairDataArguments", "ScriptArguments"]

# How a wrong pair is made (families/pair_quality/data.py): bicleaner-ai's four (misalignment, dropped words,
# frequency-based word replacement, fuzzy neighbour mixing: here the encoder's nearest other target) and what mining
# and alignment really produce (the neighbouring sentence's translation, a truncated translation, an untranslated
# copy, a correct translation in another language, numbers that differ).
NEGATIVE_KINDS = (
    "misaligned",
    "neighbour",
    "nearest",
    "truncated",
    "dropped_words",
    "replaced_words",
    "copy",
    "wrong_language",
    "numbers",
)
TRAINING_LANGUAGES = ("de", "fr", "es", "it", "ru", "ja", "pl", "nl")
HELD_OUT_LANGUAGES = ("pt_BR", "ko", "tr", "zh_CN", "ar", "th")


@dataclasses.dataclass
class PairDataArguments:
    """The pairs both variants are trained and measured on: data, negatives and the encoder whose cosine and margin
    are the light classifier's features and both variants' baselines."""

    train_pairs: list[str] = arg_field(
        [f"en-{language}=gettext" for language in TRAINING_LANGUAGES],
        "Training pair specs (bitext_hf.data.load_pairs); their languages' translations also make the "
        "wrong_language negatives.",
        reads_files=True,
    )
    eval_pairs: list[str] = arg_field(
        [f"en-{language}=gettext" for language in HELD_OUT_LANGUAGES],
        "Held-out evaluation specs: languages never trained or calibrated on.",
        reads_files=True,
    )
    pairs_per_language: int = arg_field(3000, "Correct pairs sampled from each training spec.")
    eval_pairs_per_language: int = arg_field(1000, "Correct pairs sampled from each evaluation spec.")
    negatives_per_pair: float = arg_field(1.0, "Wrong pairs made per correct pair (their kinds in turn).")
    # wrong_language is left out by default: the features know no language and the default encoder maps a message
    # and its translation in any language together, so those pairs could only teach the classifier to doubt correct
    # translations; --lid removes them before scoring. The benchmark still tests it.
    negative_kinds: list[str] = arg_field(
        [kind for kind in NEGATIVE_KINDS if kind != "wrong_language"], "The kinds of wrong pairs made."
    )
    calibration_fraction: float = arg_field(
        0.2, "Share of each training language's pairs held out to fit the calibration (Platt scaling)."
    )
    min_words: int = arg_field(1, "Leave out pairs whose English side has fewer words.")
    encoder: str = arg_field(
        "default",
        "The sentence encoder whose cosine and margin are features (default: the embedded USE).",
        reads_files=True,
    )
    encode_batch_size: int = arg_field(128, "Sentences per encoder batch.")
    margin_k: int = arg_field(4, "Neighbours of the ratio margin feature (what `score` and `mine` default to).")

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise UsageError("--train_pairs is empty: give at least one LANGS=SOURCE spec")
        unknown = sorted(set(self.negative_kinds) - set(NEGATIVE_KINDS))
        if unknown or not self.negative_kinds:
            raise UsageError(f"--negative_kinds {unknown or '[]'}: choose among {', '.join(NEGATIVE_KINDS)}")
        for name in ("pairs_per_language", "eval_pairs_per_language", "encode_batch_size", "margin_k"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.min_words < 0:
            raise UsageError(f"--min_words must be >= 0, got {self.min_words}")
        if not 0 < self.negatives_per_pair <= 10:
            raise UsageError(f"--negatives_per_pair must be in (0, 10], got {self.negatives_per_pair}")
        if not 0 < self.calibration_fraction < 1:
            raise UsageError(f"--calibration_fraction must be in (0, 1), got {self.calibration_fraction}")
        for spec in [*self.train_pairs, *self.eval_pairs]:
            parse_spec(spec)  # syntax only: nothing is read before every argument is known to be good


@dataclasses.dataclass
class ScriptArguments(PairDataArguments):
    """``recipes/train_pair_quality.py``: the pairs, and the light classifier's width (training settings are
    ``TrainingArguments``)."""

    hidden_size: int = arg_field(32, "Width of the classifier's two hidden layers.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_size < 1:
            raise UsageError(f"--hidden_size must be >= 1, got {self.hidden_size}")


@dataclasses.dataclass
class CrossEncoderArguments(PairDataArguments):
    """``recipes/train_pair_quality_cross_encoder.py``: the pairs, and the cross-encoder's base and input length."""

    base_model: str = arg_field(
        "",
        "The Hugging Face encoder the cross-encoder is made of (a folder or a hub id; its sequence-classification "
        "class gets a one-logit head).",
        reads_files=True,
    )
    max_length: int = arg_field(128, "Tokens of a pair (source and target together) the cross-encoder reads.")
    score_batch_size: int = arg_field(64, "Pairs per batch when calibrating and evaluating.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.base_model.strip():
            raise UsageError("--base_model is empty: give the Hugging Face encoder to build the cross-encoder on")
        for name in ("max_length", "score_batch_size"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be >= 1, got {getattr(self, name)}")
        if self.max_length > 8192:
            raise UsageError(f"--max_length {self.max_length}: more tokens than any encoder base reads (8192)")
