"""Shared training infrastructure for the recipes: argument parsing, tokenizer training, the accelerate loop."""

from __future__ import annotations

from bitext_hf.training.args import ConfigFileError, load_yaml_config, parse_args
from bitext_hf.training.loop import (
    JsonlTracker,
    LoopArguments,
    TrainingResult,
    find_last_checkpoint,
    resolve_resume_checkpoint,
    run_training_loop,
)
from bitext_hf.training.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerTrainingError,
    train_or_reuse_tokenizer,
    train_tokenizer,
)

__all__ = [
    "SPECIAL_TOKENS",
    "ConfigFileError",
    "JsonlTracker",
    "LoopArguments",
    "TokenizerTrainingError",
    "TrainingResult",
    "find_last_checkpoint",
    "load_yaml_config",
    "parse_args",
    "resolve_resume_checkpoint",
    "run_training_loop",
    "train_or_reuse_tokenizer",
    "train_tokenizer",
]
