"""Tests for ``bitext_hf.training.ModelArguments``: TRL's ``ModelConfig`` with the recipes' LoRA defaults, the
``LoraConfig`` of ``trl.get_peft_config``, and the model-loading flags the recipes refuse."""

from __future__ import annotations

import pytest
import torch
import trl
from peft import LoraConfig, PeftModel
from transformers import TrainingArguments

from bitext_hf.errors import UsageError
from bitext_hf.training import ModelArguments, apply_peft, parse_args
from bitext_hf.training.peft import lora_config


def _old_lora_config(r: int, alpha: int, dropout: float, targets: list[str]) -> LoraConfig:
    """The LoraConfig the recipes built by hand before trl.get_peft_config."""
    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules="all-linear" if targets == ["all-linear"] else list(targets),
        bias="none",
    )


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], (16, 32, 0.05, ["query", "value"])),
        (["--lora_target_modules", "all-linear"], (16, 32, 0.05, ["all-linear"])),
        (["--lora_target_modules", "query"], (16, 32, 0.05, ["query"])),
        (
            ["--lora_r", "4", "--lora_alpha", "8", "--lora_dropout", "0.1", "--lora_target_modules", "key", "dense"],
            (4, 8, 0.1, ["key", "dense"]),
        ),
    ],
)
def test_the_lora_config_built_through_trl_equals_the_old_one(flags, expected):
    (model_args,) = parse_args(ModelArguments, args=["--use_peft", *flags])
    assert lora_config(model_args).to_dict() == _old_lora_config(*expected).to_dict()


def test_no_lora_config_without_use_peft():
    (model_args,) = parse_args(ModelArguments, args=["--lora_r", "4"])
    assert isinstance(model_args, trl.ModelConfig)
    assert lora_config(model_args) is None


def test_a_single_module_name_is_a_suffix_not_a_regex():
    # TRL makes a one-name list a string, which peft would read as a regex over whole module paths ("hidden" would
    # then match no "layers.0.hidden").
    model = torch.nn.Sequential(torch.nn.Sequential())
    model[0].add_module("hidden", torch.nn.Linear(4, 4))
    wrapped = apply_peft(model, ModelArguments(use_peft=True, lora_target_modules=["hidden"]))
    assert isinstance(wrapped, PeftModel)
    assert any("lora_A" in name for name, _ in wrapped.named_parameters())


@pytest.mark.parametrize(
    "flags",
    [
        ["--load_in_4bit"],
        ["--dtype", "bfloat16"],
        ["--model_name_or_path", "FacebookAI/xlm-roberta-base"],
        ["--attn_implementation", "sdpa"],
        ["--lora_task_type", "FEATURE_EXTRACTION"],
    ],
)
def test_model_loading_flags_are_refused_by_name(flags):
    with pytest.raises(UsageError, match=f"^{flags[0]}"):
        parse_args(ModelArguments, args=["--use_peft", *flags])


def test_help_lists_the_lora_flags_only(capsys):
    with pytest.raises(SystemExit):
        parse_args(TrainingArguments, ModelArguments, args=["--help"])
    help_text = capsys.readouterr().out
    for flag in ("--use_peft", "--lora_r", "--lora_target_modules", "--use_dora", "--merge_adapter"):
        assert flag in help_text
    for flag in ("--load_in_4bit", "--model_name_or_path", "--attn_implementation", "--lora_task_type"):
        assert flag not in help_text


def test_trl_options_reach_the_lora_config():
    (model_args,) = parse_args(ModelArguments, args=["--use_peft", "--use_rslora", "--lora_modules_to_save", "head"])
    config = lora_config(model_args)
    assert config.use_rslora is True and config.modules_to_save == ["head"]
