"""Stage 1 until a plateau: the held-out cross-entropy, and a callback that ends the stage when it stops improving.

The reference trains each stage to convergence (10 epochs on Europarl); a CPU budget cannot, so stage 1 stops at a
stated criterion instead: every ``every`` steps the plain (unsmoothed) cross-entropy of the held-out pairs (each
language into English, mean over target tokens) is measured, and the stage ends when the last ``patience``
evaluations improved on the one before them by less than ``min_improvement`` (a fraction: 0.01 is 1%), or at the
stage's step cap. The held-out pairs are those the retrieval metrics use, never trained on.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch
from transformers import TrainerCallback

from bitext_hf.data import PairSet
from bitext_hf.data.collators import PairCollator
from bitext_hf.data.filters import tokenize_pairs
from bitext_hf.families.musr.losses import CrossConSTLoss, split_target

__all__ = ["PlateauCallback", "held_out_cross_entropy", "reached_plateau"]


def held_out_cross_entropy(
    model: Any, tokenizer: Any, held_out: Mapping[str, PairSet], *, batch_size: int = 64, max_length: int | None = None
) -> float:
    """Plain cross-entropy (nats per target token) of the model on every held-out pair, in eval mode."""
    examples = [
        example
        for pairs in held_out.values()
        for example in tokenize_pairs(pairs, tokenizer, max_length=max_length, min_tokens=1)
    ]
    collate, loss = PairCollator(model.config.pad_token_id), CrossConSTLoss(0.0, label_smoothing=0.0)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        with torch.no_grad():
            for start in range(0, len(examples), batch_size):
                batch = {key: value.to(device) for key, value in collate(examples[start : start + batch_size]).items()}
                count = int((split_target(batch["tgt_input_ids"], batch["tgt_attention_mask"])[1] != -100).sum())
                total += float(loss(model, batch)[0]) * count
                tokens += count
    finally:
        model.train(was_training)
    return total / max(tokens, 1)


def reached_plateau(losses: list[float], min_improvement: float, patience: int) -> bool:
    """Whether each of the last ``patience`` losses improved on the one before it by less than ``min_improvement``
    (relative): ``patience + 1`` evaluations are needed."""
    if len(losses) <= patience:
        return False
    recent = losses[-patience - 1 :]
    return all(before - after < min_improvement * before for before, after in itertools.pairwise(recent))


class PlateauCallback(TrainerCallback):
    """Every ``every`` steps, the held-out cross-entropy; stop training once ``reached_plateau``. ``history`` holds
    ``{"step", "held_out_ce"}`` entries and ``stopped_at`` the step of the stop (``None``: the step cap came first)."""

    def __init__(
        self,
        tokenizer: Any,
        held_out: Mapping[str, PairSet],
        *,
        every: int,
        min_improvement: float,
        patience: int,
        batch_size: int = 64,
        max_length: int | None = None,
    ) -> None:
        if every < 1 or patience < 1 or min_improvement < 0:
            raise ValueError("PlateauCallback: every and patience must be >= 1, min_improvement >= 0")
        self.tokenizer, self.held_out = tokenizer, held_out
        self.every, self.min_improvement, self.patience = every, min_improvement, patience
        self.batch_size, self.max_length = batch_size, max_length
        self.history: list[dict[str, float]] = []
        self.stopped_at: int | None = None

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> Any:
        if state.global_step % self.every or model is None:
            return control
        value = held_out_cross_entropy(
            model, self.tokenizer, self.held_out, batch_size=self.batch_size, max_length=self.max_length
        )
        self.history.append({"step": state.global_step, "held_out_ce": round(value, 4)})
        if reached_plateau([entry["held_out_ce"] for entry in self.history], self.min_improvement, self.patience):
            self.stopped_at = state.global_step
            control.should_training_stop = True
        return control

    def summary(self) -> dict[str, Any]:
        """What the results record: the criterion, every evaluation, and where the stage stopped."""
        return {
            "every": self.every,
            "min_improvement": self.min_improvement,
            "patience": self.patience,
            "history": self.history,
            "stopped_at": self.stopped_at,
        }
