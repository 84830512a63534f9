"""ContrastiveAligned resume: theta_0 of the parameter regularizer belongs to the run, so a run interrupted and
resumed from a checkpoint regularizes towards the same weights, and ends with the same weights, as an uninterrupted
one (full fine-tuning and LoRA with the regularizer on); a checkpoint without theta_0 is refused in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from recipe_support import run_align
from safetensors.torch import load_file

from bitext_hf.errors import DataValidationError
from bitext_hf.families.contrastive_align.callbacks import THETA_0_FILE, ReferenceCallback

# The slow set (`python -m pytest -m slow`, which CI also runs): recipe runs interrupted and resumed.
pytestmark = pytest.mark.slow


def _regularizer_log(checkpoint: Path) -> dict[int, float]:
    history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    return {entry["step"]: entry["regularization_loss"] for entry in history if "regularization_loss" in entry}


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    name = "adapter_model.safetensors" if (folder / "adapter_model.safetensors").is_file() else "model.safetensors"
    return load_file(folder / name)


@pytest.mark.parametrize("flags", [(), ("--use_peft", "--lora_r", "4", "--regularization_weight", "1")])
def test_resumed_run_keeps_theta_0_and_ends_as_the_uninterrupted_one(
    request: pytest.FixtureRequest, tmp_path: Path, flags: tuple[str, ...]
) -> None:
    resumed = tmp_path / "resumed"
    if flags:
        whole = tmp_path / "whole"
        results = run_align(whole, *flags)
    else:
        whole, results = request.getfixturevalue("uninterrupted_align")
    assert results["global_step"] == 6
    # The run interrupted after step 3: its output folder as it was then (the tokenizer trained on the data, the
    # word-alignment cache, checkpoint-3), resumed with the same command line.
    for name in ("tokenizer", "alignments", "checkpoint-3"):
        shutil.copytree(whole / name, resumed / name)
    run_align(resumed, "--resume_from_checkpoint", "auto", *flags)

    # theta_0 is the run's initial weights in every checkpoint, the resumed run's included.
    first = load_file(whole / "checkpoint-3" / THETA_0_FILE)
    for checkpoint in (whole / "checkpoint-6", resumed / "checkpoint-6"):
        saved = load_file(checkpoint / THETA_0_FILE)
        assert saved.keys() == first.keys() and all(torch.equal(saved[name], first[name]) for name in first)
    assert any("lora" in name for name in first) == ("--use_peft" in flags)

    # The regularizer goes on growing across the resume (it restarted at zero when theta_0 was re-taken) ...
    expected, actual = _regularizer_log(whole / "checkpoint-6"), _regularizer_log(resumed / "checkpoint-6")
    assert expected[4] > 0 and actual[4] == pytest.approx(expected[4], rel=1e-4)
    assert [actual[step] for step in (5, 6)] == pytest.approx([expected[step] for step in (5, 6)], rel=1e-4)
    # ... and the weights end where the uninterrupted run's did.
    expected_weights, actual_weights = _weights(whole / "checkpoint-6"), _weights(resumed / "checkpoint-6")
    assert expected_weights.keys() == actual_weights.keys()
    for name, tensor in expected_weights.items():
        assert torch.equal(tensor, actual_weights[name]), name

    # A checkpoint without theta_0 (saved before it was saved) is refused before any data is read.
    old = tmp_path / "old" / "checkpoint-3"
    shutil.copytree(whole / "checkpoint-3", old)
    (old / THETA_0_FILE).unlink()
    with pytest.raises(DataValidationError, match=f"{THETA_0_FILE}: missing"):
        run_align(tmp_path / "refused", "--resume_from_checkpoint", str(old), *flags)
    assert not (tmp_path / "refused").exists()


def test_saved_theta_0_that_does_not_fit_the_model_is_one_line(tmp_path: Path) -> None:
    from test_contrastive_align import contrastive_model

    model = contrastive_model("strong")
    from safetensors.torch import save_file

    save_file({"not.a.parameter": torch.zeros(2)}, tmp_path / THETA_0_FILE)
    with pytest.raises(DataValidationError, match=r"theta_0.safetensors: theta_0 does not match"):
        ReferenceCallback(tmp_path).on_train_begin(None, None, None, model=model)
