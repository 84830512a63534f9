"""Recipe errors are one line and a documented exit code (recipes/README.md), as in the CLI: a damaged checkpoint
given to ``--resume_from_checkpoint`` is refused before any work, naming the file, by all four recipes."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from transformers import TrainingArguments

from bitext_hf.errors import DataValidationError
from bitext_hf.training import run_recipe
from bitext_hf.training.trainer import check_resumable_checkpoint, resume_checkpoint

ROOT = Path(__file__).resolve().parent.parent
RECIPES = ("distill_wolof", "train_musr", "train_onealigner", "align_contrastive")
# Each recipe's third argument dataclass: the student, the architecture, or the LoRA settings.
MODEL_ARGUMENTS = {
    "distill_wolof": "StudentArguments",
    "train_musr": "ArchitectureArguments",
    "train_onealigner": "ModelArguments",
    "align_contrastive": "ModelArguments",
}


def _checkpoint(folder: Path) -> Path:
    """A checkpoint laid out as the Trainer saves one (weights, optimizer, scheduler, RNG state, trainer state)."""
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": []}), encoding="utf-8")
    save_file({"encoder.weight": torch.zeros(64, 16)}, folder / "model.safetensors")
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        torch.save({"state": torch.zeros(8)}, folder / name)
    return folder


def _cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _shard(folder: Path) -> None:
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}), encoding="utf-8")


DAMAGES = {
    "truncated weights": (lambda f: _cut(f / "model.safetensors"), r"model\.safetensors: not a complete safetensors"),
    "weights of junk": (lambda f: (f / "model.safetensors").write_bytes(b"junk" * 10), r"model\.safetensors: not a"),
    "no weights": (lambda f: (f / "model.safetensors").unlink(), r"checkpoint-2: no model weights"),
    "missing shard": (_shard, r"model-00002-of-00002\.safetensors: missing"),
    "truncated adapter": (
        lambda f: (_cut(f / "model.safetensors"), (f / "model.safetensors").rename(f / "adapter_model.safetensors")),
        r"adapter_model\.safetensors: not a complete",
    ),
    "no optimizer": (lambda f: (f / "optimizer.pt").unlink(), r"optimizer\.pt: missing"),
    "truncated optimizer": (lambda f: _cut(f / "optimizer.pt"), r"optimizer\.pt: truncated"),
    "truncated scheduler": (lambda f: _cut(f / "scheduler.pt"), r"scheduler\.pt: truncated"),
    "no rng state": (lambda f: (f / "rng_state.pth").unlink(), r"rng_state\.pth: missing"),
    "bad trainer state": (
        lambda f: (f / "trainer_state.json").write_text("{"),
        r"trainer_state\.json: not a readable",
    ),
    "deep trainer state": (
        lambda f: (f / "trainer_state.json").write_text("[" * 100_000 + "]" * 100_000),
        r"trainer_state\.json: not a readable",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage):
    folder = _checkpoint(tmp_path / "checkpoint-2")
    assert resume_checkpoint(str(folder), tmp_path) == str(folder)  # intact: accepted
    spoil, message = DAMAGES[damage]
    spoil(folder)
    with pytest.raises(DataValidationError, match=message):
        resume_checkpoint(str(folder), tmp_path)


def test_auto_checks_the_checkpoint_it_picks(tmp_path):
    _checkpoint(tmp_path / "checkpoint-1")
    latest = _checkpoint(tmp_path / "checkpoint-2")
    _cut(latest / "model.safetensors")
    with pytest.raises(DataValidationError, match=r"checkpoint-2/model\.safetensors"):
        resume_checkpoint("auto", tmp_path)


def test_deepspeed_layout_keeps_its_own_optimizer_states(tmp_path):
    folder = _checkpoint(tmp_path / "checkpoint-2")
    (folder / "optimizer.pt").unlink()
    (folder / "global_step2").mkdir()
    check_resumable_checkpoint(folder)  # no optimizer.pt: DeepSpeed keeps it under global_step2


@pytest.fixture(scope="module")
def recipes():
    modules = {}
    for name in RECIPES:
        spec = importlib.util.spec_from_file_location(f"recipe_errors_{name}", ROOT / "recipes" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_refuses_truncated_weights_in_one_line(recipes, name, tmp_path, capsys):
    folder = _checkpoint(tmp_path / "run" / "checkpoint-2")
    _cut(folder / "model.safetensors")
    recipe = recipes[name]
    flags = ["--output_dir", str(tmp_path / "run"), "--max_steps", "2", "--resume_from_checkpoint", str(folder)]
    with pytest.raises(SystemExit) as exit_info:
        model_arguments = getattr(recipe, MODEL_ARGUMENTS[name])
        run_recipe(recipe.main, recipe.ScriptArguments, TrainingArguments, model_arguments, args=flags)
    assert exit_info.value.code == DataValidationError.exit_code == 3
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert "error:" in lines[0] and f"{folder / 'model.safetensors'}: not a complete safetensors file" in lines[0]


@pytest.mark.slow
def test_the_recipe_script_exits_with_one_line(tmp_path):
    folder = _checkpoint(tmp_path / "run" / "checkpoint-2")
    _cut(folder / "model.safetensors")
    flags = ["--output_dir", str(tmp_path / "run"), "--max_steps", "2", "--resume_from_checkpoint", "auto"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("BITEXT_HF_DEBUG", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "recipes" / "train_onealigner.py"), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert lines == [f"train_onealigner: error: {folder / 'model.safetensors'}: " + lines[0].split(": ", 3)[-1]]
    assert "not a complete safetensors file" in lines[0] and "Traceback" not in done.stderr


def _fail_with(error: BaseException):
    def main(*_args):
        raise error

    return main


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (DataValidationError("data.tsv:3: empty line"), 3, "error: data.tsv:3: empty line"),
        (ValueError("NaN in the embeddings"), 3, "error: NaN in the embeddings"),
        (RuntimeError("CUDA out of memory"), 1, "RuntimeError: CUDA out of memory (BITEXT_HF_DEBUG=1 shows the"),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
)
def test_run_recipe_classifies_errors_as_the_cli_does(error, code, message, capsys, monkeypatch):
    monkeypatch.delenv("BITEXT_HF_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(_fail_with(error), TrainingArguments, args=["--output_dir", "unused"])
    assert exit_info.value.code == code
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_bitext_hf_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setenv("BITEXT_HF_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        run_recipe(_fail_with(RuntimeError("boom")), TrainingArguments, args=["--output_dir", "unused"])


DATA_FLAG = {"distill_wolof": "--bitexts"}  # the other recipes name their pairs --train_pairs


@pytest.mark.parametrize("inside", [False, True], ids=["output_dir is the data file", "output_dir holds it"])
@pytest.mark.parametrize("name", RECIPES)
def test_every_recipe_refuses_an_output_dir_that_holds_its_data(recipes, name, inside, tmp_path, capsys):
    data = tmp_path / "data" / "fr.tsv"
    data.parent.mkdir()
    data.write_text("Hello.\tBonjour.\n", encoding="utf-8")
    output_dir = data.parent if inside else data
    recipe = recipes[name]
    flags = ["--output_dir", str(output_dir), DATA_FLAG.get(name, "--train_pairs"), f"fr={data}", "--max_steps", "2"]
    with pytest.raises(SystemExit) as exit_info:
        model_arguments = getattr(recipe, MODEL_ARGUMENTS[name])
        run_recipe(recipe.main, recipe.ScriptArguments, TrainingArguments, model_arguments, args=flags)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert f"--output_dir {output_dir} {'holds' if inside else 'is'} {data}, an input" in lines[0]
    assert data.read_text(encoding="utf-8") == "Hello.\tBonjour.\n" and os.listdir(data.parent) == ["fr.tsv"]


def test_text_an_output_cannot_encode_is_a_failed_write_for_recipes_too():
    """The recipes and experiments report errors through the same classification as the command line: a
    UnicodeEncodeError (a ValueError) is an output that failed (exit 1), not bad input data (exit 3)."""
    from bitext_hf.errors import EXIT_ERROR, describe_error

    code, message = describe_error(UnicodeEncodeError("ascii", "Grüße", 2, 3, "ordinal not in range(128)"))
    assert code == EXIT_ERROR and "cannot represent" in message and "'ü' (U+00FC)" in message
