"""LoRA fine-tuning for the recipes that start from a pretrained encoder: ``--use_peft`` and its settings.

``ModelArguments`` holds the flags (TRL's names: ``--use_peft --lora_r --lora_alpha --lora_dropout
--lora_target_modules``), parsed with the recipe's other dataclasses by ``parse_args``. ``apply_peft(model, args)``
wraps the model in a ``peft.PeftModel`` (only the LoRA matrices train); the Trainer then saves checkpoints as PEFT
adapters. ``export_peft(model, output_dir, merge=...)`` writes the final adapter (``adapter_config.json`` +
``adapter_model.safetensors``, loadable with ``PeftModel.from_pretrained(base, folder)``) and, with ``merge``,
returns the base model with the adapter merged into its weights, ready to ship as a plain checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from bitext_hf.errors import UsageError

__all__ = ["ADAPTER_FOLDER", "ModelArguments", "apply_peft", "export_peft", "lora_config"]

ADAPTER_FOLDER = "adapter"  # the final adapter's folder inside a recipe's output_dir when the model is merged


@dataclasses.dataclass
class ModelArguments:
    """PEFT (LoRA) settings shared by the recipes that fine-tune a pretrained encoder."""

    use_peft: bool = dataclasses.field(
        default=False, metadata={"help": "Train LoRA adapters instead of every weight of the encoder."}
    )
    lora_r: int = dataclasses.field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = dataclasses.field(default=32, metadata={"help": "LoRA scaling numerator (scale = alpha / r)."})
    lora_dropout: float = dataclasses.field(default=0.05, metadata={"help": "Dropout on the LoRA input."})
    lora_target_modules: list[str] = dataclasses.field(
        # BERT / XLM-R attention projections: the modules LoRA's paper adapts; "all-linear" is peft's catch-all.
        default_factory=lambda: ["query", "value"],
        metadata={"help": "Module names (suffixes) that get adapters, or all-linear."},
    )
    merge_adapter: bool = dataclasses.field(
        default=True,
        metadata={"help": "On export, merge the adapter into the weights (the adapter is also saved on its own)."},
    )

    def __post_init__(self) -> None:
        if self.lora_r < 1:
            raise UsageError(f"--lora_r must be >= 1, got {self.lora_r}")
        if self.lora_alpha <= 0:
            raise UsageError(f"--lora_alpha must be > 0, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise UsageError(f"--lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if not self.lora_target_modules:
            raise UsageError("--lora_target_modules is empty: name the modules to adapt (e.g. query value)")


def lora_config(model_args: ModelArguments) -> Any:
    """The ``peft.LoraConfig`` for these arguments, or None without ``--use_peft``."""
    if not model_args.use_peft:
        return None
    from peft import LoraConfig

    targets = model_args.lora_target_modules
    return LoraConfig(
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules="all-linear" if targets == ["all-linear"] else list(targets),
        bias="none",
    )


def apply_peft(model: torch.nn.Module, model_args: ModelArguments) -> torch.nn.Module:
    """``model`` wrapped with LoRA adapters (a ``PeftModel``), or ``model`` itself without ``--use_peft``.

    Raises:
        UsageError: no module of the model matches ``--lora_target_modules`` (the message lists the candidates).
    """
    config = lora_config(model_args)
    if config is None:
        return model
    from peft import get_peft_model

    try:
        return get_peft_model(model, config)
    except ValueError as error:
        linear = sorted(
            {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
        )
        raise UsageError(
            f"--lora_target_modules {' '.join(model_args.lora_target_modules)}: {error}; "
            f"linear modules of this model: {', '.join(linear[:20])}"
        ) from None


def export_peft(model: torch.nn.Module, adapter_dir: str | os.PathLike, *, merge: bool) -> torch.nn.Module:
    """Save a ``PeftModel``'s adapter to ``adapter_dir``; return the merged base model (``merge``) or ``model``.

    A model without adapters is returned unchanged and nothing is written.
    """
    from peft import PeftModel

    if not isinstance(model, PeftModel):
        return model
    model.save_pretrained(str(adapter_dir))
    return model.merge_and_unload() if merge else model
