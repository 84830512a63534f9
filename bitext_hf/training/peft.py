"""LoRA fine-tuning for the recipes that start from a pretrained encoder: ``--use_peft`` and its settings.

``ModelArguments`` is TRL's :class:`trl.ModelConfig` (its flags: ``--use_peft --lora_r --lora_alpha --lora_dropout
--lora_target_modules --use_rslora --use_dora --lora_modules_to_save``), parsed with the recipe's other dataclasses by
``parse_args``, with our defaults and ``--merge_adapter``; its model-loading flags (checkpoint, revision, dtype,
attention, quantization) are refused, since each recipe builds its own model. ``apply_peft(model, args)`` wraps the
model in a ``peft.PeftModel`` (only the LoRA matrices train), with the ``LoraConfig`` of ``trl.get_peft_config``; the
Trainer then saves checkpoints as PEFT adapters. ``export_peft(model, output_dir, merge=...)`` writes the final
adapter (``adapter_config.json`` + ``adapter_model.safetensors``, loadable with ``PeftModel.from_pretrained(base,
folder)``) and, with ``merge``, returns the base model with the adapter merged into its weights, ready to ship as a
plain checkpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

import torch
from trl import ModelConfig

from bitext_hf.errors import UsageError

__all__ = ["ADAPTER_FOLDER", "ModelArguments", "apply_peft", "base_model", "export_peft", "lora_config"]

ADAPTER_FOLDER = "adapter"  # the final adapter's folder inside a recipe's output_dir when the model is merged


# The inherited fields that reach the LoraConfig through trl.get_peft_config; every other one loads a model.
_LORA_FIELDS = frozenset(
    {
        "use_peft",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "lora_target_modules",
        "lora_target_parameters",
        "lora_modules_to_save",
        "lora_task_type",
        "use_rslora",
        "use_dora",
    }
)
_LINEAR_SHORTHAND = "all-linear"  # peft's name for every linear layer but the output head


def _refused(default: Any) -> Any:
    """An inherited model-loading flag: still parsed, so that ``__post_init__`` refuses it by name, but out of
    ``--help``, which lists only what the recipes honour."""
    return dataclasses.field(default=default, metadata={"help": argparse.SUPPRESS})


@dataclasses.dataclass
class ModelArguments(ModelConfig):
    """PEFT (LoRA) settings shared by the recipes that fine-tune a pretrained encoder: TRL's ``ModelConfig`` with
    our defaults; its model-loading flags are refused (the recipes name their encoder with ``--encoder``)."""

    model_name_or_path: str | None = _refused(None)
    model_revision: str = _refused("main")
    dtype: str | None = _refused("float32")
    attn_implementation: str | None = _refused(None)
    use_peft: bool = dataclasses.field(
        default=False, metadata={"help": "Train LoRA adapters instead of every weight of the encoder."}
    )
    lora_target_modules: list[str] | None = dataclasses.field(
        # BERT / XLM-R attention projections: the modules LoRA's paper adapts; "all-linear" is peft's catch-all.
        default_factory=lambda: ["query", "value"],
        metadata={"help": "Module names (suffixes) that get adapters, or all-linear."},
    )
    # None: a PEFT task type wraps forward() in a fixed signature (inputs_embeds, labels...) that the families'
    # models, scoring a source and a target batch, do not take.
    lora_task_type: str | None = _refused(None)
    load_in_8bit: bool = _refused(False)
    load_in_4bit: bool = _refused(False)
    bnb_4bit_quant_type: str = _refused("nf4")
    use_bnb_nested_quant: bool = _refused(False)
    bnb_4bit_quant_storage: str | None = _refused(None)
    merge_adapter: bool = dataclasses.field(
        default=True,
        metadata={"help": "On export, merge the adapter into the weights (the adapter is also saved on its own)."},
    )

    def __post_init__(self) -> None:
        for field in dataclasses.fields(ModelConfig):
            default = field.default_factory() if field.default is dataclasses.MISSING else field.default
            if field.name not in _LORA_FIELDS and getattr(self, field.name) != default:
                raise UsageError(f"--{field.name}: a model-loading option of TRL that the recipes do not use")
        if self.lora_task_type is not None:
            raise UsageError(f"--lora_task_type {self.lora_task_type}: not supported by the recipes' models")
        if self.lora_r < 1:
            raise UsageError(f"--lora_r must be >= 1, got {self.lora_r}")
        if self.lora_alpha <= 0:
            raise UsageError(f"--lora_alpha must be > 0, got {self.lora_alpha}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise UsageError(f"--lora_dropout must be in [0, 1), got {self.lora_dropout}")
        if not self.lora_target_modules:
            raise UsageError("--lora_target_modules is empty: name the modules to adapt (e.g. query value)")
        super().__post_init__()
        # TRL turns a one-name list into a string, which peft reads as a regex over whole module paths: only peft's
        # "all-linear" shorthand may stay a string, a single module name stays a list of suffixes.
        targets = self.lora_target_modules
        names = [targets] if isinstance(targets, str) else list(targets)
        self.lora_target_modules = _LINEAR_SHORTHAND if names == [_LINEAR_SHORTHAND] else names


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The family's model inside the wrappers training puts around it: DDP's (or another ``.module`` wrapper's),
    ``torch.compile``'s and a ``PeftModel`` (its adapters stay active). ``model`` itself when it has none."""
    model = getattr(model, "module", model)
    model = getattr(model, "_orig_mod", model)
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def lora_config(model_args: ModelArguments) -> Any:
    """The ``peft.LoraConfig`` for these arguments (``trl.get_peft_config``), or None without ``--use_peft``."""
    from trl import get_peft_config  # imports trl's trainers: only when LoRA is asked for

    return get_peft_config(model_args)


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
            f"--lora_target_modules {_targets(model_args)}: {error}; "
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


def _targets(model_args: ModelArguments) -> str:
    targets = model_args.lora_target_modules
    return targets if isinstance(targets, str) else " ".join(targets)
