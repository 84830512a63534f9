"""A recipe run with no arguments: ``accelerate launch recipes/distill_wolof.py`` as
typed runs the recipe's default configuration, the paper's setup; where that needs what this machine lacks (the hub
with downloads off, a GPU for bf16, eflomal), it runs the offline configuration that runs here, its first line
naming what is missing and which configuration runs instead, the model card saying the same. With no offline
configuration that runs here it stops at once with one line (exit 2)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from recipe_support import import_recipe

from bitext_hf.training import load_yaml_config, run_recipe

ROOT = Path(__file__).resolve().parent.parent
EXIT_USAGE = 2  # recipes/README.md: a default configuration this machine cannot run is a usage error

# recipe -> (what its default configuration needs that a CPU machine with downloads off lacks, the offline config)
RECIPES = {
    "distill_wolof": (["dataset allenai/nllb", "a GPU for bf16"], "distill_wolof-smoke.yaml"),
    "train_musr": (["a GPU for bf16"], "musr-gettext.yaml"),
    "train_onealigner": (["model FacebookAI/xlm-roberta-large", "a GPU for bf16"], "onealigner-gettext.yaml"),
    "train_pair_quality_cross_encoder": (
        ["model FacebookAI/xlm-roberta-base"],
        "pair_quality_cross_encoder-smoke.yaml",
    ),
    "align_contrastive": (
        ["dataset Helsinki-NLP/opus-100", "model google-bert/bert-base-multilingual-cased"],
        # the gettext configuration aligns with eflomal: offered only where it is installed
        "align_contrastive-gettext.yaml" if importlib.util.find_spec("eflomal") else "align_contrastive-smoke.yaml",
    ),
}

needs_cpu_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="bf16 runs on a GPU: the paper setup would train"
)


@dataclasses.dataclass
class Arguments:
    """Never parsed when the default configuration is refused; a field the test configuration sets otherwise."""

    steps: int = 0


@needs_cpu_only
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_no_arguments_runs_the_offline_configuration_and_says_why_first(recipe, monkeypatch, capsys):
    """The recipe's own argument classes parse the offline configuration; ``main`` (not run here) gets it."""
    from transformers import TrainingArguments

    from bitext_hf.training.default_config import configuration_notes

    module = import_recipe(recipe)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [f"recipes/{recipe}.py"])
    needs, offline = RECIPES[recipe]
    third = {"distill_wolof": "StudentArguments", "train_musr": "ArchitectureArguments"}.get(recipe, "ModelArguments")
    run = run_recipe(lambda *parsed: parsed, module.ScriptArguments, TrainingArguments, getattr(module, third))
    expected = load_yaml_config(ROOT / "recipes" / "configs" / offline)["output_dir"]
    assert run[1].output_dir == expected
    first = capsys.readouterr().err.strip().splitlines()[0]
    name = recipe.removeprefix("train_")
    assert first.startswith(f"{recipe}: the default configuration recipes/configs/{name}.yaml (the paper's setup)")
    assert all(need in first for need in needs), first
    command = f"python recipes/{recipe}.py --config recipes/configs/{offline}"
    assert first.endswith(f"running the offline configuration recipes/configs/{offline} instead, as {command}")
    if "dataset" in " ".join(needs) or "model" in " ".join(needs):
        assert "downloads are off: HF_HUB_OFFLINE=1" in first
    [note] = configuration_notes()  # what the model card's warnings say
    assert note.startswith("**Not the paper's setup.** Run with no arguments, the recipe said: the default")
    assert command in note
    # A later run in the same process, with arguments, is not marked.
    run_recipe(lambda *parsed: None, Arguments, args=["--steps", "1"])
    assert configuration_notes() == []


def test_no_arguments_without_an_offline_configuration_that_runs_here_stops_in_one_line(tmp_path, monkeypatch, capsys):
    config = tmp_path / "paper.yaml"
    config.write_text("bf16: true\nsteps: 1\n", encoding="utf-8")
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["paper.py"])
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(lambda *parsed: pytest.fail("the recipe must not run"), Arguments, default_config=config)
    assert exit_info.value.code == EXIT_USAGE
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "paper: error: the default configuration paper.yaml (the paper's setup) needs a GPU for bf16 (none here); "
        "give --config with a configuration that runs here (recipes/README.md)"
    )


@pytest.mark.slow  # the whole distill_wolof smoke run (about half a minute), launched as a user types it
@needs_cpu_only
def test_the_launch_line_as_typed_trains_the_offline_configuration(tmp_path):
    """``accelerate launch recipes/distill_wolof.py`` in a folder of the user's: the first line of the recipe says
    which configuration runs and why, the run ends with exit 0 and a model whose card says the same."""
    script = ROOT / "recipes" / "distill_wolof.py"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    accelerate = shutil.which("accelerate") or "accelerate"
    done = subprocess.run(
        [accelerate, "launch", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [first] = [line for line in done.stderr.splitlines() if line.startswith("distill_wolof:")][:1]
    assert "(the paper's setup) needs the Hugging Face Hub for dataset allenai/MADLAD-400" in first
    assert first.endswith(f"--config {ROOT / 'recipes' / 'configs' / 'distill_wolof-smoke.yaml'}")
    card = (tmp_path / "runs" / "distill_wolof-smoke" / "README.md").read_text(encoding="utf-8")
    assert "**Not the paper's setup.**" in card and "distill_wolof-smoke.yaml" in card


def test_a_default_configuration_that_runs_here_is_run(tmp_path, monkeypatch):
    config = tmp_path / "tiny.yaml"
    config.write_text("steps: 3\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["tiny.py"])
    assert run_recipe(lambda arguments: arguments.steps, Arguments, default_config=config) == 3
    # Flags given: the default configuration is not read.
    assert run_recipe(lambda arguments: arguments.steps, Arguments, args=["--steps", "5"], default_config=config) == 5


def test_a_hub_model_in_the_default_configuration_is_named(tmp_path, monkeypatch, capsys):
    config = tmp_path / "paper.yaml"
    config.write_text("encoder: someone/not-cached-anywhere\nsteps: 1\n", encoding="utf-8")
    (tmp_path / "paper-smoke.yaml").write_text("steps: 2\n", encoding="utf-8")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["paper.py"])
    assert run_recipe(lambda arguments: arguments.steps, Arguments, default_config=config) == 2  # the smoke one
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "model someone/not-cached-anywhere" in line
    assert line.endswith(
        "running the offline configuration paper-smoke.yaml instead, as python paper.py --config paper-smoke.yaml"
    )
