"""Masked language modelling inputs: a fraction of the real (non-special, non-padding) tokens become ``<mask>``."""

from __future__ import annotations

import torch

__all__ = ["mask_tokens"]


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_token_id: int,
    special_token_ids: list[int] | tuple[int, ...],
    rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace ``rate`` of the maskable tokens by ``mask_token_id`` (the paper: 15% of tokens to <mask>).

    Each maskable token is masked independently with probability ``rate``; a sentence with no masked token gets
    one (a random maskable position), so every MLM example carries a prediction.

    Returns:
        (masked_input_ids, labels): labels hold the original id at masked positions and -100 elsewhere.
    """
    if not 0.0 < rate < 1.0:
        raise ValueError(f"MLM masking rate must be in (0, 1), got {rate}")
    maskable = torch.ones_like(input_ids, dtype=torch.bool)
    for token_id in special_token_ids:
        maskable &= input_ids != token_id
    draws = torch.rand(input_ids.shape, generator=generator)
    masked = (draws < rate) & maskable
    # Rows with maskable tokens but no draw below the rate: mask their lowest-draw maskable token.
    empty_rows = (~masked.any(dim=1)) & maskable.any(dim=1)
    if empty_rows.any():
        lowest = draws.masked_fill(~maskable, 2.0).argmin(dim=1)
        masked[empty_rows, lowest[empty_rows]] = True
    labels = input_ids.masked_fill(~masked, -100)
    return input_ids.masked_fill(masked, mask_token_id), labels
