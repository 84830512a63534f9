"""Every family folder has the same files, and every family's training loss the same shape: an ``nn.Module`` whose
``forward(model, inputs)`` returns ``(loss, logged parts)``, with the paper's BibTeX as ``citation``."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
from torch import nn

FAMILIES = Path(__file__).resolve().parents[1] / "bitext_hf" / "families"
SHARED_FILES = ("__init__.py", "data.py", "losses.py", "evaluation.py", "export.py", "recipe.py")
LOSSES = {
    "contrastive_align": "AlignmentLoss",
    "laser3": "DistillationLoss",
    "musr": "CrossConSTLoss",
    "onealigner": "OneAlignerLoss",
}


def test_every_family_folder_has_the_shared_files():
    folders = sorted(path.name for path in FAMILIES.iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(LOSSES)
    for folder in folders:
        missing = [name for name in SHARED_FILES if not (FAMILIES / folder / name).is_file()]
        assert not missing, f"{folder} lacks {missing}"


@pytest.mark.parametrize("family", sorted(LOSSES))
def test_every_family_loss_has_one_shape(family):
    loss_class = getattr(importlib.import_module(f"bitext_hf.families.{family}.losses"), LOSSES[family])
    assert issubclass(loss_class, nn.Module)
    # (self, model, the collated batch): the model is passed at each call, so the Trainer can pass DDP's wrapper.
    parameters = list(inspect.signature(loss_class.forward).parameters)
    assert len(parameters) == 3 and parameters[1] == "model"
    assert loss_class.citation.startswith("@inproceedings{") and loss_class.citation.rstrip().endswith("}")
    assert getattr(importlib.import_module(f"bitext_hf.families.{family}"), LOSSES[family]) is loss_class


@pytest.mark.parametrize(
    ("alias", "recipe"), [("distill_wolof", "train_laser3"), ("align_contrastive", "train_contrastive_align")]
)
def test_the_used_by_names_run_the_family_named_recipes(alias, recipe):
    from recipe_support import ROOT, import_recipe

    aliased, named = import_recipe(alias), import_recipe(recipe)
    assert aliased.main.__code__.co_filename == str(ROOT / "recipes" / f"{recipe}.py")
    assert aliased.ScriptArguments is named.ScriptArguments  # the family's class, not a second copy
    default_config = named.DEFAULT_CONFIG
    assert default_config.is_file() and default_config.name == f"{alias}.yaml"
