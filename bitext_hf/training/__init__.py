"""Shared training infrastructure for the recipes: argument parsing, the Trainer subclass, PEFT, tokenizer training.

Family-specific pieces live in :mod:`bitext_hf.families` (one folder per family); the evaluators' base,
:class:`~bitext_hf.evaluation.RetrievalEvaluator`, in :mod:`bitext_hf.evaluation`.

The names below are imported on first access (PEP 562), as transformers' own packages do: importing a light
submodule (``bitext_hf.training.distributed``, which a recipe's launch check and spawned processes import first)
then costs no Trainer, PEFT or tokenizers import.
"""

from __future__ import annotations

from bitext_hf.lazy_imports import lazy_exports

# Each public name and the submodule that defines it.
_SUBMODULE_OF = {
    "ConfigFileError": "args",
    "load_yaml_config": "args",
    "parse_args": "args",
    "run_recipe": "args",
    "ModelArguments": "peft",
    "apply_peft": "peft",
    "base_model": "peft",
    "export_peft": "peft",
    "SPECIAL_TOKENS": "tokenizer",
    "TokenizerTrainingError": "tokenizer",
    "train_or_reuse_tokenizer": "tokenizer",
    "train_tokenizer": "tokenizer",
    "BitextTrainer": "trainer",
    "resume_checkpoint": "trainer",
}

__all__ = sorted(_SUBMODULE_OF)


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
