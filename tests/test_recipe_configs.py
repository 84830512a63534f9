"""Every shipped recipe config names only arguments its recipe has: a key that the installed transformers dropped
(``warmup_ratio`` in transformers 5) or a typo would stop ``--config`` with exit 2 before any work. The full-size
configs ask for bf16 and GPUs, so they are checked key by key here rather than parsed into TrainingArguments."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest
from transformers import TrainingArguments

from bitext_hf.training import load_yaml_config

ROOT = Path(__file__).resolve().parent.parent
# Config file prefix -> (recipe script, the name of its third argument dataclass).
RECIPE_OF_CONFIG = {
    "distill_wolof": ("distill_wolof", "StudentArguments"),
    "musr": ("train_musr", "ArchitectureArguments"),
    "onealigner": ("train_onealigner", "ModelArguments"),
    "align_contrastive": ("align_contrastive", "ModelArguments"),
    "pair_quality": ("train_pair_quality", "ModelArguments"),
    "pair_quality_cross_encoder": ("train_pair_quality_cross_encoder", "ModelArguments"),
}
CONFIGS = sorted((ROOT / "recipes" / "configs").glob("*.yaml"))


def _recipe(name: str):
    spec = importlib.util.spec_from_file_location(f"recipe_configs_{name}", ROOT / "recipes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_config_belongs_to_a_recipe():
    assert len(CONFIGS) >= 11
    for path in CONFIGS:
        assert path.stem.split("-")[0] in RECIPE_OF_CONFIG, path.name


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_config_keys_are_fields_of_its_recipe(path: Path):
    script, model_arguments = RECIPE_OF_CONFIG[path.stem.split("-")[0]]
    module = _recipe(script)
    classes = (module.ScriptArguments, TrainingArguments, getattr(module, model_arguments))
    fields = {field.name for cls in classes for field in dataclasses.fields(cls)}
    unknown = sorted(set(load_yaml_config(path)) - fields - {"env"})
    assert not unknown, f"{path.name}: {unknown} are not arguments of recipes/{script}.py"
