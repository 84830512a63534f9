"""MuSR: a multilingual Transformer encoder trained as the encoder of a many-to-one (into English) translation model
whose decoder sees the source only through the sentence embedding (Gao et al., 2023, section 3.1).

* Encoder: scaled token embedding + learned position, pre-LayerNorm Transformer layers, a final LayerNorm. The
  sentence embedding is the max over the encoder outputs with padding masked (not normalized).
* Decoder: no cross-attention. Its input at every step is the scaled token embedding + position (width d)
  concatenated with the sentence embedding (width d), so it is 2d wide; causal self-attention layers; an output
  layer of its own (untied). The sentence embedding is thus the only path from the encoder to the decoder.

This file imports only its configuration, torch and transformers (4.57 or 5.x) so that ``save_pretrained`` ships it
as hub remote code (``AutoModel.from_pretrained(path)`` with ``trust_remote_code`` enabled, without bitext_hf installed).

The layers are written here rather than taken from ``torch.nn.TransformerEncoderLayer``: its attention keeps a
fused ``in_proj_weight`` that ``PreTrainedModel._init_weights`` does not initialise the same way in transformers 4.57
and 5.x, and its inference fast path returns different numbers for padded positions. Attention itself is
``torch.nn.functional.scaled_dot_product_attention``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.models.auto.tokenization_auto import get_tokenizer_config
from transformers.utils import ModelOutput

from .configuration_musr import MuSRConfig

__all__ = [
    "MuSREncoderDecoder",
    "MuSRInputError",
    "MuSROutput",
    "MuSRPreTrainedModel",
    "label_smoothed_cross_entropy",
]


# Copied from modeling.onealigner.functional_onealigner.OneAlignerInputError with OneAligner->MuSR
class MuSRInputError(ValueError):
    """Inputs that the MuSR model cannot use: bad tensors or arguments, no tokenizer to read text with."""


@dataclass
class MuSROutput(ModelOutput):
    """Output of [`MuSREncoderDecoder`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): label-smoothed cross-entropy per target token,
            returned when `labels` are given.
        logits (`torch.FloatTensor` of shape `(batch, target_len, vocab_size)`, *optional*): decoder predictions,
            returned when `labels` or `decoder_input_ids` are given.
        last_hidden_state (`torch.FloatTensor` of shape `(batch, seq_len, hidden_size)`): encoder outputs (after the
            final LayerNorm); the token embeddings sentence-transformers pools (max pooling).
        sentence_embedding (`torch.FloatTensor` of shape `(batch, hidden_size)`): max over `last_hidden_state`,
            padding masked.
        hidden_states (`tuple[torch.FloatTensor]`, *optional*): the encoder's embedding output and every encoder
            layer's output (before the final LayerNorm), when `output_hidden_states=True`.
        decoder_hidden_states (`tuple[torch.FloatTensor]`, *optional*): the same for the decoder (width 2d), when
            `output_hidden_states=True` and the decoder runs.
    """

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    decoder_hidden_states: tuple[torch.FloatTensor, ...] | None = None


def label_smoothed_cross_entropy(logits: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Mean over the target tokens (labels != -100) of ``(1 - eps) * -log p(y) + eps * mean_v(-log p(v))``.

    This is PyTorch's ``cross_entropy(label_smoothing=eps)``; fairseq spreads eps over the V - 1 wrong classes
    instead of all V, a difference of order eps / V.
    """
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=-100, label_smoothing=epsilon
    )


class MuSREmbeddings(nn.Module):
    """sqrt(d) * token embedding + learned absolute position embedding, then dropout."""

    def __init__(self, config: MuSRConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.scale = math.sqrt(config.hidden_size) if config.scale_embedding else 1.0
        self.dropout = nn.Dropout(config.dropout)
        self.max_positions = config.max_position_embeddings

    def forward(self, input_ids: torch.LongTensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if seq_len > self.max_positions:
            raise ValueError(
                f"Input of {seq_len} tokens is longer than max_position_embeddings={self.max_positions}; "
                "truncate it in the tokenizer (truncation=True, max_length=...)."
            )
        positions = torch.arange(seq_len, device=input_ids.device)
        return self.dropout(self.word_embeddings(input_ids) * self.scale + self.position_embeddings(positions)[None])


# Copied from modeling.laser3.modeling_laser3.Laser3SelfAttention with Laser3->MuSR, key_mask->mask
class MuSRSelfAttention(nn.Module):
    """Multi-head self-attention over `scaled_dot_product_attention` with a boolean mask (True = may attend)."""

    # The fused kernel never materializes the attention probabilities, so `forward(output_attentions=True)` is refused
    # rather than answered with nothing.
    NO_ATTENTION_PROBABILITIES = (
        "output_attentions=True: this model's attention is torch's fused scaled_dot_product_attention, which computes "
        "no attention probabilities to return"
    )

    def __init__(self, width: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = width // num_heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.output = nn.Linear(width, width)
        self.dropout_prob = dropout

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = hidden.shape

        def split_heads(states: torch.Tensor) -> torch.Tensor:
            return states.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

        context = F.scaled_dot_product_attention(
            split_heads(self.query(hidden)),
            split_heads(self.key(hidden)),
            split_heads(self.value(hidden)),
            attn_mask=mask,
            dropout_p=self.dropout_prob if self.training else 0.0,
        )
        return self.output(context.transpose(1, 2).reshape(batch, seq_len, width))


class MuSRLayer(GradientCheckpointingLayer):
    """Pre-LayerNorm Transformer layer: self-attention and feed-forward, no cross-attention (encoder and decoder
    alike; the decoder's is causal through its mask)."""

    def __init__(self, config: MuSRConfig, width: int, ffn_dim: int) -> None:
        super().__init__()
        self.attention_LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.attention = MuSRSelfAttention(width, config.num_attention_heads, config.attention_dropout)
        self.ffn_LayerNorm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(width, ffn_dim)
        self.activation = nn.GELU() if config.activation_function == "gelu" else nn.ReLU()
        self.ffn_output = nn.Linear(ffn_dim, width)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.dropout(self.attention(self.attention_LayerNorm(hidden), mask))
        return hidden + self.dropout(self.ffn_output(self.activation(self.intermediate(self.ffn_LayerNorm(hidden)))))


class MuSREncoder(nn.Module):
    """Token embeddings, `num_encoder_layers` layers of width d, final LayerNorm."""

    def __init__(self, config: MuSRConfig) -> None:
        super().__init__()
        self.embeddings = MuSREmbeddings(config)
        self.layers = nn.ModuleList(
            [MuSRLayer(config, config.hidden_size, config.encoder_ffn_dim) for _ in range(config.num_encoder_layers)]
        )
        self.final_LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, all_hidden: list[torch.Tensor] | None = None
    ) -> torch.Tensor:
        """The encoder outputs; with a list `all_hidden`, the embedding output and each layer's output appended."""
        mask = attention_mask.bool()[:, None, None, :]
        hidden = self.embeddings(input_ids)
        if all_hidden is not None:
            all_hidden.append(hidden)
        for layer in self.layers:
            hidden = layer(hidden, mask)  # positional: gradient checkpointing passes only positional tensors
            if all_hidden is not None:
                all_hidden.append(hidden)
        return self.final_LayerNorm(hidden)


class MuSRDecoder(nn.Module):
    """Decoder without cross-attention: [token embedding + position ; sentence embedding] -> causal layers of width
    2d -> final LayerNorm. The output layer (vocabulary logits) is the model's `lm_head`."""

    def __init__(self, config: MuSRConfig) -> None:
        super().__init__()
        self.embeddings = MuSREmbeddings(config)
        self.layers = nn.ModuleList(
            [MuSRLayer(config, config.decoder_width, config.decoder_ffn_dim) for _ in range(config.num_decoder_layers)]
        )
        self.final_LayerNorm = nn.LayerNorm(config.decoder_width, eps=config.layer_norm_eps)

    def forward(
        self,
        sentence_embedding: torch.Tensor,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None,
        all_hidden: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """The decoder states; with a list `all_hidden`, the input and each layer's output appended."""
        seq_len = input_ids.shape[1]
        tokens = self.embeddings(input_ids)
        context = sentence_embedding.to(tokens.dtype)[:, None, :].expand(-1, seq_len, -1)
        hidden = torch.cat([tokens, context], dim=-1)
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool, device=input_ids.device).tril()[None, None]
        if attention_mask is not None:
            # Every position may still attend to itself: a left-padded row would otherwise have no key at all
            # (NaN from the softmax); such rows carry no label.
            diagonal = torch.eye(seq_len, dtype=torch.bool, device=input_ids.device)[None, None]
            mask = (mask & attention_mask.bool()[:, None, None, :]) | diagonal
        if all_hidden is not None:
            all_hidden.append(hidden)
        for layer in self.layers:
            hidden = layer(hidden, mask)
            if all_hidden is not None:
                all_hidden.append(hidden)
        return self.final_LayerNorm(hidden)


class MuSRPreTrainedModel(PreTrainedModel):
    """Base class: configuration, weight initialisation, gradient checkpointing."""

    config_class = MuSRConfig
    config: MuSRConfig
    base_model_prefix = "musr"
    main_input_name = "input_ids"
    _no_split_modules = ("MuSRLayer",)
    supports_gradient_checkpointing = True

    # Copied from modeling.laser3.modeling_laser3.Laser3PreTrainedModel._init_weights
    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Linear and embedding weights ~ normal(0, `initializer_range`) with zero biases and a zero padding row,
        LayerNorms at identity (BERT's scheme, for a model trained from random initialisation).

        `PreTrainedModel._init_weights` does exactly that for these module types in transformers 4.57 and 5.x alike
        (and in 5.x skips weights loaded from a checkpoint), so it is called rather than written again; the model
        has no other parameter types.
        """
        super()._init_weights(module)


class MuSREncoderDecoder(MuSRPreTrainedModel):
    """The MuSR encoder with its training decoder (see the module docstring).

    * `forward(input_ids, attention_mask)`: encoder outputs and the sentence embedding (what sentence-transformers
      and `bitext_hf.encoders.HFEncoder(pooling="model")` call);
    * `forward(..., labels=...)` (English target ids, -100 where no prediction is wanted; the decoder input is the
      labels shifted right behind `decoder_start_token_id`) or `forward(..., decoder_input_ids=...)`: also the
      decoder logits, and with labels the label-smoothed cross-entropy;
    * `encode(input_ids, attention_mask)`: sentence embeddings; `decode(sentence_embedding, decoder_input_ids)`:
      logits; `generate(input_ids, attention_mask)`: greedy translation into English, for sanity checks.
    """

    def __init__(self, config: MuSRConfig) -> None:
        super().__init__(config)
        self.encoder = MuSREncoder(config)
        self.decoder = MuSRDecoder(config) if config.with_decoder else None
        self.lm_head = nn.Linear(config.decoder_width, config.vocab_size, bias=False) if config.with_decoder else None
        # The tokenizer encode used last (given or loaded from the checkpoint): not a module, not in the weights.
        self._tokenizer: Any = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embeddings.word_embeddings = value

    def get_output_embeddings(self) -> nn.Linear | None:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def _check_decoder(self) -> None:
        if self.decoder is None:
            raise MuSRInputError(
                "this MuSR model was built without its decoder (with_decoder=False, the sentence-transformers "
                "export): it encodes but cannot decode; load the full training checkpoint instead"
            )

    @staticmethod
    def pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Max over the sequence, padding positions excluded."""
        padding = ~attention_mask.bool()[..., None]
        return last_hidden_state.masked_fill(padding, torch.finfo(last_hidden_state.dtype).min).amax(dim=1)

    def _attention_mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        return (input_ids != self.config.pad_token_id).long() if attention_mask is None else attention_mask

    def encode(
        self,
        inputs: torch.LongTensor | Sequence[str],
        attention_mask: torch.Tensor | Any = None,
        tokenizer: Any = None,
        *,
        batch_size: int = 32,
        normalize: bool = True,
    ) -> torch.Tensor:
        """Sentence embeddings `(batch, hidden_size)`.

        * `encode(input_ids, attention_mask)`: the max-pooled encoder outputs, not normalized, in the graph
          (training uses this);
        * `encode(texts, tokenizer=None)` (the second positional argument is then the tokenizer, as for the other
          bitext_hf families): float32 on the CPU, L2-normalized unless `normalize=False`, computed in eval mode
          without gradients in length-sorted batches, each text truncated to `max_tokens` tokens; the tokenizer
          defaults to the one used before, else the one saved beside the weights.
        """
        if isinstance(inputs, torch.Tensor):
            return self._embed_batch(inputs, self._attention_mask(inputs, attention_mask))
        if attention_mask is not None and not isinstance(attention_mask, torch.Tensor):
            tokenizer = attention_mask
        return self._encode_texts(inputs, tokenizer, batch_size, normalize)

    def _embed_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`encode`'s vectors of one padded batch, before normalization: the max-pooled encoder outputs."""
        return self.pool(self.encoder(input_ids, attention_mask), attention_mask)

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._encode_texts
    @torch.no_grad()
    def _encode_texts(
        self, sentences: Sequence[str], tokenizer: Any, batch_size: int, normalize: bool, **options: Any
    ) -> torch.Tensor:
        """`encode` for a list of texts: `_embed_batch` over length-sorted batches in eval mode, rows back in the
        input order, float32 on the CPU.

        Args:
            sentences: the texts, each truncated to `max_tokens` tokens.
            tokenizer: the tokenizer, or None for the one `_resolve_tokenizer` finds.
            batch_size: texts per batch.
            normalize: L2-normalize the rows.
            **options: passed on to `_embed_batch`.
        """
        if isinstance(sentences, str) or not all(isinstance(sentence, str) for sentence in sentences):
            raise TypeError("encode expects a list of strings")
        tokenizer = self._resolve_tokenizer(tokenizer)
        order = sorted(range(len(sentences)), key=lambda index: len(sentences[index]))
        rows: list[torch.Tensor] = [torch.empty(0)] * len(sentences)
        was_training = self.training
        self.eval()
        try:
            for start in range(0, len(order), batch_size):
                batch = order[start : start + batch_size]
                inputs = tokenizer(
                    [sentences[index] for index in batch],
                    padding=True,
                    truncation=True,
                    max_length=self.max_tokens,
                    return_tensors="pt",
                )
                vectors = self._embed_batch(
                    inputs["input_ids"].to(self.device), inputs["attention_mask"].to(self.device), **options
                ).float()
                for row, index in enumerate(batch):
                    rows[index] = vectors[row]
        finally:
            self.train(was_training)
        if not rows:
            return torch.empty(0, self.config.embedding_dim)
        stacked = torch.stack(rows).cpu()
        return F.normalize(stacked, dim=-1) if normalize else stacked

    # Copied from modeling.laser3.modeling_laser3.Laser3Student.max_tokens
    @property
    def max_tokens(self) -> int:
        """Tokens per sentence, special tokens included, that `encode` keeps: the rows of the position table."""
        return int(self.config.max_position_embeddings)

    # Whether `encode` may run Python code shipped with the tokenizer saved beside the weights (an `auto_map` in its
    # tokenizer_config.json): the caller's `trust_remote_code` when `from_pretrained` loaded the model, else False.
    trust_remote_code: bool = False

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.from_pretrained
    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        """`PreTrainedModel.from_pretrained`, keeping the caller's `trust_remote_code` (else False) as the model's
        `trust_remote_code` for `encode`: transformers consumes the argument (the Auto classes pass on the choice
        they resolved), so the model could not know it otherwise."""
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, info) with output_loading_info=True
        model.trust_remote_code = kwargs.get("trust_remote_code") is True
        return loaded

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._resolve_tokenizer with OneAligner->MuSR
    def _resolve_tokenizer(self, tokenizer: Any) -> Any:
        """`tokenizer` (kept for the next call), else the one kept, else the one saved beside the weights, loaded
        without running code shipped with it unless `trust_remote_code` allows it."""
        if tokenizer is not None:
            self._tokenizer = tokenizer
        if self._tokenizer is None:
            if not self.name_or_path:
                raise MuSRInputError(
                    "no tokenizer: pass encode(..., tokenizer=...); a model loaded with from_pretrained finds "
                    "the tokenizer saved beside its weights"
                )
            try:
                code = _tokenizer_code(self.name_or_path, self.config)
                if code is None or self.trust_remote_code:
                    self._tokenizer = AutoTokenizer.from_pretrained(
                        self.name_or_path, trust_remote_code=self.trust_remote_code
                    )
            except (OSError, ValueError) as error:
                raise MuSRInputError(
                    f"no tokenizer beside the weights in {self.name_or_path!r} ({error.__class__.__name__}): pass "
                    "encode(..., tokenizer=...)"
                ) from error
            if self._tokenizer is None:
                raise MuSRInputError(_untrusted_tokenizer_message(self.name_or_path, code))
        return self._tokenizer

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.save_pretrained
    def save_pretrained(self, save_directory: Any, *args: Any, tokenizer: Any = None, **kwargs: Any) -> None:
        """`PreTrainedModel.save_pretrained`, plus the tokenizer (`tokenizer`, else the one `encode` used) beside the
        weights, so that the checkpoint turns text into embeddings by itself."""
        super().save_pretrained(save_directory, *args, **kwargs)
        tokenizer = tokenizer if tokenizer is not None else self._tokenizer
        if tokenizer is not None and kwargs.get("is_main_process", True):
            tokenizer.save_pretrained(save_directory)
            _portable_tokenizer_class(Path(save_directory))

    def resize_token_embeddings(self, new_num_tokens: int | None = None, *args: Any, **kwargs: Any) -> nn.Embedding:
        """`PreTrainedModel.resize_token_embeddings` (encoder embeddings, output layer, config), plus the decoder's
        own token embeddings, which the base class does not know about (the vocabulary is shared)."""
        embeddings = super().resize_token_embeddings(new_num_tokens, *args, **kwargs)
        if self.decoder is not None:
            old = self.decoder.embeddings.word_embeddings
            size = embeddings.weight.shape[0]
            if old.weight.shape[0] != size:
                new = nn.Embedding(size, old.weight.shape[1], padding_idx=old.padding_idx)
                new.to(device=old.weight.device, dtype=old.weight.dtype)
                with torch.no_grad():
                    new.weight.normal_(0.0, self.config.initializer_range)
                    keep = min(size, old.weight.shape[0])
                    new.weight[:keep] = old.weight[:keep]
                self.decoder.embeddings.word_embeddings = new
        return embeddings

    def decode(
        self,
        sentence_embedding: torch.Tensor,
        decoder_input_ids: torch.LongTensor,
        decoder_attention_mask: torch.Tensor | None = None,
        all_hidden: list[torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Next-token logits `(batch, target_len, vocab_size)` given the sentence embeddings and the target prefix
        (with a list `all_hidden`, the decoder's hidden states appended to it)."""
        self._check_decoder()
        return self.lm_head(self.decoder(sentence_embedding, decoder_input_ids, decoder_attention_mask, all_hidden))

    def shift_right(self, labels: torch.LongTensor) -> torch.LongTensor:
        """Decoder inputs for `labels`: `decoder_start_token_id` then the labels but the last, -100 read as padding."""
        shifted = labels.new_full(labels.shape, self.config.pad_token_id)
        shifted[:, 0] = self.config.decoder_start_token_id
        shifted[:, 1:] = labels[:, :-1]
        return shifted.masked_fill(shifted == -100, self.config.pad_token_id)

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> MuSROutput | tuple:
        """Encode `input_ids`; decode when `labels` or `decoder_input_ids` are given (see the class docstring).

        Args:
            input_ids: `(batch, seq_len)` source token ids.
            attention_mask: `(batch, seq_len)`, 1 for real tokens; defaults to `input_ids != pad_token_id`.
            decoder_input_ids: `(batch, target_len)` target prefix; defaults to `labels` shifted right.
            decoder_attention_mask: `(batch, target_len)`; defaults to `decoder_input_ids != pad_token_id`.
            labels: `(batch, target_len)` target ids, -100 where no prediction is wanted.
            token_type_ids: accepted for tokenizer compatibility and ignored (the model has no segments).
            output_hidden_states: also return the encoder's (and the decoder's) hidden states; default: the config's.
            output_attentions: refused when true (see `MuSRSelfAttention`); default: the config's.
            **kwargs (`Any`): ignored.
        """
        del token_type_ids, kwargs
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        if self.config.output_attentions if output_attentions is None else output_attentions:
            raise ValueError(MuSRSelfAttention.NO_ATTENTION_PROBABILITIES)
        attention_mask = self._attention_mask(input_ids, attention_mask)
        hidden_states: list[torch.Tensor] | None = [] if output_hidden_states else None
        decoder_hidden_states: list[torch.Tensor] | None = [] if output_hidden_states else None
        last_hidden_state = self.encoder(input_ids, attention_mask, hidden_states)
        sentence_embedding = self.pool(last_hidden_state, attention_mask)
        loss = logits = None
        if labels is not None and decoder_input_ids is None:
            decoder_input_ids = self.shift_right(labels)
        if decoder_input_ids is not None:
            if decoder_attention_mask is None:
                decoder_attention_mask = (decoder_input_ids != self.config.pad_token_id).long()
                decoder_attention_mask[:, 0] = 1  # the start token may equal the pad id
            logits = self.decode(sentence_embedding, decoder_input_ids, decoder_attention_mask, decoder_hidden_states)
        if labels is not None:
            loss = label_smoothed_cross_entropy(logits, labels, self.config.label_smoothing)
        output = MuSROutput(
            loss=loss,
            logits=logits,
            last_hidden_state=last_hidden_state,
            sentence_embedding=sentence_embedding,
            hidden_states=tuple(hidden_states) if hidden_states is not None else None,
            decoder_hidden_states=tuple(decoder_hidden_states) if decoder_hidden_states else None,
        )
        return output if return_dict else output.to_tuple()

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        max_new_tokens: int | None = None,
    ) -> torch.LongTensor:
        """Greedy decoding (for sanity checks, not speed: no key/value cache): `(batch, length)` ids starting with
        `decoder_start_token_id`; a row that produced `eos_token_id` is padded with `pad_token_id` after it."""
        self._check_decoder()
        limit = self.config.max_position_embeddings - 1
        steps = min(max_new_tokens if max_new_tokens is not None else limit, limit)
        embedding = self.encode(input_ids, self._attention_mask(input_ids, attention_mask))
        output = input_ids.new_full((input_ids.shape[0], 1), self.config.decoder_start_token_id)
        finished = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        for _ in range(steps):
            next_ids = self.decode(embedding, output)[:, -1].argmax(dim=-1)
            next_ids = next_ids.masked_fill(finished, self.config.pad_token_id)
            output = torch.cat([output, next_ids[:, None]], dim=1)
            finished |= next_ids == self.config.eos_token_id
            if finished.all():
                break
        return output


# Copied from modeling.onealigner.modeling_onealigner._tokenizer_code
def _tokenizer_code(name_or_path: str, config: Any) -> str | None:
    """The class references that the checkpoint's tokenizer files ask `AutoTokenizer` to import from the checkpoint's
    own Python files (`auto_map` in tokenizer_config.json, or in config.json, which transformers 4.x also reads), or
    None when the tokenizer is a plain transformers class."""
    for auto_map in (get_tokenizer_config(name_or_path).get("auto_map"), getattr(config, "auto_map", None)):
        references = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map
        if isinstance(references, str):
            references = [references]
        if isinstance(references, (list, tuple)) and any(references):
            return ", ".join(str(reference) for reference in references if reference)
    return None


# Copied from modeling.onealigner.modeling_onealigner._untrusted_tokenizer_message
def _untrusted_tokenizer_message(name_or_path: str, code: str | None) -> str:
    return (
        f"the tokenizer saved in {name_or_path!r} runs Python code shipped with the checkpoint ({code}), which is "
        "never run unasked: if you trust it, load the model with the argument trust_remote_code of from_pretrained "
        "set to True (or set the model's trust_remote_code attribute to True); otherwise pass encode(..., "
        "tokenizer=...)"
    )


# Copied from modeling.onealigner.modeling_onealigner._portable_tokenizer_class
def _portable_tokenizer_class(folder: Path) -> None:
    """transformers 5 names a plain `tokenizers` tokenizer `TokenizersBackend`, a class 4.x lacks; both read its
    older name `PreTrainedTokenizerFast` as the same class, so that is the name written."""
    path = folder / "tokenizer_config.json"
    if path.is_file():
        config = json.loads(path.read_text(encoding="utf-8"))
        if config.get("tokenizer_class") == "TokenizersBackend":
            config["tokenizer_class"] = "PreTrainedTokenizerFast"
            path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# Every save_pretrained ships both files as remote code (auto_map in config.json).
MuSRConfig.register_for_auto_class()
MuSREncoderDecoder.register_for_auto_class("AutoModel")
