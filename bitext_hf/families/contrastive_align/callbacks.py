"""The ContrastiveAlignedEncoder's Trainer callbacks and the parameter regularizer's reference weights.

* :class:`OrthogonalizeCallback`: Eq. 2 after every optimizer step of the ``linear`` objective.
* :class:`ReferenceCallback`: theta_0 of the parameter regularizer, saved in every checkpoint folder and set back
  from there when a run resumes, so that a resumed run regularizes towards the same weights as an uninterrupted one;
  :func:`check_reference` refuses, before any expensive work, a checkpoint that lacks it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from bitext_hf.errors import DataValidationError
from bitext_hf.io import atomic_output
from bitext_hf.training.peft import base_model

__all__ = ["THETA_0_FILE", "OrthogonalizeCallback", "ReferenceCallback", "check_reference", "regularizes"]

THETA_0_FILE = "theta_0.safetensors"


class OrthogonalizeCallback(TrainerCallback):
    """W <- (1 + beta) W - beta (W W^T) W after each optimizer step (``on_step_end`` follows ``optimizer.step``)."""

    def on_step_end(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs: Any):
        if model is not None:
            base_model(model).orthogonalize_()
        return control


def regularizes(model: torch.nn.Module) -> bool:
    """Whether the model's loss carries the parameter regularizer (l2 / weak / strong with a weight above 0)."""
    config = base_model(model).config
    return config.objective != "linear" and float(config.regularization_weight) > 0


def check_reference(checkpoint: str | os.PathLike | None, regularized: bool) -> None:
    """Before any expensive work: a regularized run resumes only from a checkpoint that carries its theta_0.

    Raises:
        DataValidationError: naming the missing file (a checkpoint saved before theta_0 was saved with it).
    """
    if checkpoint is not None and regularized and not (Path(checkpoint) / THETA_0_FILE).is_file():
        raise DataValidationError(
            f"{Path(checkpoint) / THETA_0_FILE}: missing, and the parameter regularizer needs the run's initial "
            "weights; this checkpoint cannot be resumed: start afresh (or resume with --regularization_weight 0)"
        )


class ReferenceCallback(TrainerCallback):
    """theta_0 belongs to the run: taken when a fresh run begins, written into every checkpoint folder (a hard link to
    the previous checkpoint's copy where the file system allows, so that it costs its size once), and set back from
    ``resume_from_checkpoint`` when a run resumes. Without it a resumed run would regularize towards the checkpoint's
    weights, not the run's initial ones. A model without the regularizer is left alone.
    """

    def __init__(self, resume_from_checkpoint: str | os.PathLike | None = None) -> None:
        self.resume_from_checkpoint = resume_from_checkpoint
        self._written: Path | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs):
        if model is None or not regularizes(model):
            return control
        if self.resume_from_checkpoint is None:
            base_model(model).reset_reference()
            return control
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = Path(self.resume_from_checkpoint) / THETA_0_FILE
        check_reference(self.resume_from_checkpoint, True)
        try:
            base_model(model).reset_reference(load_file(str(path)))
        except (SafetensorError, OSError, ValueError) as error:  # the model's mismatch error is a ValueError
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise DataValidationError(
                f"{path}: {reason}; this checkpoint cannot be resumed with these arguments"
            ) from None
        return control

    def on_save(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs):
        if model is None or not regularizes(model) or not state.is_world_process_zero:
            return control
        target = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}" / THETA_0_FILE
        if not self._link(target):
            from safetensors.torch import save

            reference = {name: value.cpu() for name, value in base_model(model).regularization_reference().items()}
            with atomic_output(target, "wb", follow_symlinks=False) as handle:
                handle.write(save(reference, metadata={"format": "pt"}))
        self._written = target
        return control

    def _link(self, target: Path) -> bool:
        """Hard-link the copy written last (rotation may have removed it), replacing ``target`` atomically."""
        if self._written is None or self._written == target or not self._written.is_file():
            return False
        staged = target.with_name(f".{target.name}.link")
        try:
            staged.unlink(missing_ok=True)
            os.link(self._written, staged)
            os.replace(staged, target)
        except OSError:
            staged.unlink(missing_ok=True)
            return False
        return True
