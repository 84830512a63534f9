"""The MuSR encoder alone as a sentence-transformers model: the decoder only serves training, so the export leaves
it out (``with_decoder=False``) and pools like the model (max over the encoder outputs, padding masked), then
L2-normalizes, as ``model.encode(texts)`` does."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bitext_hf.modeling.musr import MuSREncoderDecoder

__all__ = ["encoder_only", "save_sentence_transformers"]


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
        sentence_transformers={"pooling": "max", "normalize": True, "verify": True},
        figures=figures,
    )
