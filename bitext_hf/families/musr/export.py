"""MuSR as a sentence-transformers model: pooled like the model (max over the encoder outputs, padding masked), then
L2-normalized, as ``model.encode(texts)`` does (:data:`SENTENCE_TRANSFORMERS`, for the full model's folder too: called
with ``input_ids`` and ``attention_mask`` only, it returns the encoder outputs as ``last_hidden_state``). The
encoder-only export leaves the decoder out (``with_decoder=False``): it only serves training."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bitext_hf.modeling.musr import MuSREncoderDecoder

__all__ = ["SENTENCE_TRANSFORMERS", "encoder_only", "save_sentence_transformers"]

# save_for_hub's sentence_transformers options of every MuSR folder; verify: reloaded and checked before it is kept.
SENTENCE_TRANSFORMERS = {"pooling": "max", "normalize": True, "verify": True}


def encoder_only(model: MuSREncoderDecoder) -> MuSREncoderDecoder:
    """A copy of ``model`` without its decoder and output layer (same encoder weights, same device and dtype)."""
    config = model.config.__class__.from_dict({**model.config.to_dict(), "with_decoder": False})
    encoder = MuSREncoderDecoder(config).to(device=model.device, dtype=model.dtype)
    encoder.encoder.load_state_dict(model.encoder.state_dict())
    return encoder.eval()


def save_sentence_transformers(
    model: MuSREncoderDecoder,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    model_card: str,
    figures: Sequence[str | os.PathLike] = (),
) -> Path:
    """Write the encoder as a folder that loads with ``SentenceTransformer(folder, trust_remote_code=True)`` and
    with ``AutoModel``; the export is reloaded and checked against the model's own pooling before it is kept."""
    from bitext_hf.hub import save_for_hub

    return save_for_hub(
        encoder_only(model),
        tokenizer,
        output_dir,
        model_card=model_card,
        sentence_transformers=SENTENCE_TRANSFORMERS,
        figures=figures,
    )
