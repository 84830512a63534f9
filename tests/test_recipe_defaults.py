"""A recipe run with no arguments (issue 21, section 8): ``accelerate launch recipes/distill_wolof.py`` as typed runs
the recipe's default configuration, the paper's setup; where that needs what this machine lacks (the hub with
downloads off, a GPU for bf16, eflomal), it stops at once with one line naming it and the offline command (exit 2)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bitext_hf.training import run_recipe

ROOT = Path(__file__).resolve().parent.parent
EXIT_USAGE = 2  # recipes/README.md: a default configuration this machine cannot run is a usage error

# recipe -> (what its default configuration needs that a CPU machine with downloads off lacks, the offline config)
RECIPES = {
    "distill_wolof": (["dataset allenai/nllb", "a GPU for bf16"], "distill_wolof-smoke.yaml"),
    "train_musr": (["a GPU for bf16"], "musr-gettext.yaml"),
    "train_onealigner": (["model FacebookAI/xlm-roberta-large", "a GPU for bf16"], "onealigner-gettext.yaml"),
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
def test_no_arguments_names_what_is_missing_and_the_offline_command(recipe, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [f"recipes/{recipe}.py"])
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(lambda *parsed: pytest.fail("the recipe must not run"), Arguments)
    assert exit_info.value.code == EXIT_USAGE
    [line] = capsys.readouterr().err.strip().splitlines()
    needs, offline = RECIPES[recipe]
    name = recipe.removeprefix("train_")
    assert line.startswith(f"{recipe}: error: the default configuration recipes/configs/{name}.yaml")
    assert all(need in line for need in needs), line
    assert line.endswith(f"run: python recipes/{recipe}.py --config recipes/configs/{offline}")
    if "dataset" in " ".join(needs) or "model" in " ".join(needs):
        assert "downloads are off: HF_HUB_OFFLINE=1" in line


@needs_cpu_only
def test_the_launch_line_as_typed_stops_at_once_with_one_line():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "recipes/distill_wolof.py"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "needs the Hugging Face Hub for dataset allenai/MADLAD-400, dataset allenai/nllb" in line
    assert line.endswith("python recipes/distill_wolof.py --config recipes/configs/distill_wolof-smoke.yaml")
    assert done.stdout == ""  # no Trainer log line: nothing was trained


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
    (tmp_path / "paper-smoke.yaml").write_text("encoder: random\nsteps: 1\n", encoding="utf-8")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["paper.py"])
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(lambda *parsed: pytest.fail("the recipe must not run"), Arguments, default_config=config)
    assert exit_info.value.code == EXIT_USAGE
    line = capsys.readouterr().err.strip()
    assert "model someone/not-cached-anywhere" in line and line.endswith("--config paper-smoke.yaml")
