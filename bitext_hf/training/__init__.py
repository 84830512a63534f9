"""Shared training infrastructure for the recipes: argument parsing, the Trainer subclass, PEFT, tokenizer training.

``loop.py`` (the older hand-written accelerate loop) stays exported until its last user moves to ``BitextTrainer``.
"""

from __future__ import annotations

from bitext_hf.training.args import ConfigFileError, load_yaml_config, parse_args, run_recipe
from bitext_hf.training.callbacks import RetrievalEvalCallback
from bitext_hf.training.loop import (
    JsonlTracker,
    LoopArguments,
    TrainingResult,
    find_last_checkpoint,
    resolve_resume_checkpoint,
    run_training_loop,
)
from bitext_hf.training.peft import ModelArguments, apply_peft, export_peft
from bitext_hf.training.tokenizer import (
    SPECIAL_TOKENS,
    TokenizerTrainingError,
    train_or_reuse_tokenizer,
    train_tokenizer,
)
from bitext_hf.training.trainer import BitextTrainer, resume_checkpoint

__all__ = [
    "SPECIAL_TOKENS",
    "BitextTrainer",
    "ConfigFileError",
    "JsonlTracker",
    "LoopArguments",
    "ModelArguments",
    "RetrievalEvalCallback",
    "TokenizerTrainingError",
    "TrainingResult",
    "apply_peft",
    "export_peft",
    "find_last_checkpoint",
    "load_yaml_config",
    "parse_args",
    "resolve_resume_checkpoint",
    "resume_checkpoint",
    "run_recipe",
    "run_training_loop",
    "train_or_reuse_tokenizer",
    "train_tokenizer",
]
