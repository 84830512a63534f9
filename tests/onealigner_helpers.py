"""Helpers shared by the OneAligner tests (model and retrieval): a tiny encoder config, a tiny model, a batch."""

from __future__ import annotations

import torch
from transformers import XLMRobertaConfig

from bitext_hf.families import onealigner
from bitext_hf.modeling.onealigner import OneAlignerModel


def tiny_encoder_config(tokenizer, layers: int = 2) -> XLMRobertaConfig:
    return XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def tiny_aligner(tokenizer, layer: int = 1, **config_kwargs) -> OneAlignerModel:
    """A 2-layer, 32-wide OneAligner with seeded random weights, in evaluation mode."""
    torch.manual_seed(0)
    return OneAlignerModel.from_encoder(tiny_encoder_config(tokenizer), layer=layer, **config_kwargs).eval()


def batch(model: OneAlignerModel, tokenizer, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """`(input_ids, attention_mask)` of sentences, tokenized and padded as the text-level functions do."""
    return onealigner.pad_token_ids(model, onealigner.tokenize(model, tokenizer, sentences))
