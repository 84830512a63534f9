"""The LASER3 student: a Transformer encoder trained from random initialisation to map sentences of new languages
into a frozen teacher's embedding space (Heffernan et al., 2022).

Sentence embedding = max pooling over the last layer's non-padding tokens (or the BOS token), followed by a linear
projection to the teacher's dimension when the two differ. An MLM head (Linear -> tanh -> LayerNorm -> Linear(V))
serves the masked-language-modelling task on monolingual text during training only.

This file imports only its configuration, torch and transformers (4.57 or 5.x) so that ``save_pretrained`` ships it
as hub remote code (``AutoModel.from_pretrained(path)`` with ``trust_remote_code`` enabled, without bitext_hf installed): the
classes are registered for the Auto classes at the end of this file, so every ``save_pretrained`` copies them.
"""

from __future__ import annotations

import json
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

from .configuration_laser3 import Laser3StudentConfig

__all__ = [
    "Laser3InputError",
    "Laser3PreTrainedModel",
    "Laser3Student",
    "Laser3StudentOutput",
    "cosine_distillation_loss",
]


# Copied from modeling.onealigner.functional_onealigner.OneAlignerInputError with OneAligner->Laser3
class Laser3InputError(ValueError):
    """Inputs that the Laser3 model cannot use: bad tensors or arguments, no tokenizer to read text with."""


def cosine_distillation_loss(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """The distillation loss of the paper: mean over the batch of `1 - cos(student_i, teacher_i)`.

    Args:
        student: `(batch, d)` student sentence embeddings; need not be normalized.
        teacher: `(batch, d)` teacher embeddings of the same sentences (or their translations), cast to the
            student's dtype.
    """
    teacher = teacher.to(student.dtype)
    return (1.0 - F.cosine_similarity(student, teacher, dim=-1)).mean()


@dataclass
class Laser3StudentOutput(ModelOutput):
    """Output of [`Laser3Student`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): returned when `labels` (MLM) and/or
            `teacher_embeddings` (cosine distillation) are given; the sum of the losses that apply.
        last_hidden_state (`torch.FloatTensor` of shape `(batch, seq_len, hidden_size)`): token states of the last
            layer (after the final LayerNorm); first so that sentence-transformers finds the token embeddings at
            `outputs[0]`.
        sentence_embedding (`torch.FloatTensor` of shape `(batch, embedding_dim)`): pooled (and projected)
            sentence vectors in the teacher's space.
        mlm_logits (`torch.FloatTensor` of shape `(batch, seq_len, vocab_size)`, *optional*): returned when
            `labels` are given or `return_mlm_logits=True`.
        hidden_states (`tuple[torch.FloatTensor]`, *optional*): the embedding output and every layer's output,
            when `output_hidden_states=True`.
    """

    loss: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None
    mlm_logits: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class Laser3Embeddings(nn.Module):
    """Token + learned absolute position embeddings, LayerNorm, dropout."""

    def __init__(self, config: Laser3StudentConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.max_positions = config.max_position_embeddings

    def forward(self, input_ids: torch.LongTensor) -> torch.Tensor:
        seq_len = input_ids.shape[1]
        if seq_len > self.max_positions:
            raise ValueError(
                f"Input of {seq_len} tokens is longer than max_position_embeddings={self.max_positions}; "
                "truncate it in the tokenizer (truncation=True, max_length=...)."
            )
        positions = torch.arange(seq_len, device=input_ids.device)
        hidden = self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
        return self.dropout(self.LayerNorm(hidden))


class Laser3SelfAttention(nn.Module):
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

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        batch, seq_len, width = hidden.shape

        def split_heads(states: torch.Tensor) -> torch.Tensor:
            return states.view(batch, seq_len, self.num_heads, self.head_dim).transpose(1, 2)

        context = F.scaled_dot_product_attention(
            split_heads(self.query(hidden)),
            split_heads(self.key(hidden)),
            split_heads(self.value(hidden)),
            attn_mask=key_mask,
            dropout_p=self.dropout_prob if self.training else 0.0,
        )
        return self.output(context.transpose(1, 2).reshape(batch, seq_len, width))


class Laser3Layer(GradientCheckpointingLayer):
    """Pre-LayerNorm Transformer layer (stable when training from random initialisation).

    A `GradientCheckpointingLayer`: `gradient_checkpointing_enable()` recomputes it in the backward pass.
    """

    def __init__(self, config: Laser3StudentConfig) -> None:
        super().__init__()
        self.attention_LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention = Laser3SelfAttention(
            config.hidden_size, config.num_attention_heads, config.attention_probs_dropout_prob
        )
        self.ffn_LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.activation = nn.GELU() if config.hidden_act == "gelu" else nn.ReLU()
        self.ffn_output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden: torch.Tensor, key_mask: torch.Tensor) -> torch.Tensor:
        hidden = hidden + self.dropout(self.attention(self.attention_LayerNorm(hidden), key_mask))
        feed_forward = self.ffn_output(self.dropout(self.activation(self.intermediate(self.ffn_LayerNorm(hidden)))))
        return hidden + self.dropout(feed_forward)


class Laser3MLMHead(nn.Module):
    """The paper's MLM head: Linear -> tanh -> LayerNorm -> Linear(vocab)."""

    def __init__(self, config: Laser3StudentConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.LayerNorm(torch.tanh(self.dense(hidden))))


class Laser3PreTrainedModel(PreTrainedModel):
    """Base class: configuration, weight initialisation, gradient checkpointing."""

    config_class = Laser3StudentConfig
    config: Laser3StudentConfig
    base_model_prefix = "laser3"
    main_input_name = "input_ids"
    _no_split_modules = ("Laser3Layer",)
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Linear and embedding weights ~ normal(0, `initializer_range`) with zero biases and a zero padding row,
        LayerNorms at identity (BERT's scheme, for a model trained from random initialisation).

        `PreTrainedModel._init_weights` does exactly that for these module types in transformers 4.57 and 5.x alike
        (and in 5.x skips weights loaded from a checkpoint), so it is called rather than written again; the model
        has no other parameter types.
        """
        super()._init_weights(module)


class Laser3Student(Laser3PreTrainedModel):
    """The LASER3 student encoder with its (training-only) MLM head.

    `forward(input_ids, attention_mask)` returns token states and the sentence embedding; given `labels` (MLM
    targets, -100 where no prediction is wanted) it adds the MLM cross-entropy, given `teacher_embeddings` it adds
    the cosine distillation loss `mean(1 - cos(student, teacher))`.
    """

    def __init__(self, config: Laser3StudentConfig) -> None:
        super().__init__(config)
        self.embeddings = Laser3Embeddings(config)
        self.layers = nn.ModuleList([Laser3Layer(config) for _ in range(config.num_hidden_layers)])
        self.final_LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.projection = nn.Linear(config.hidden_size, config.projection_dim) if config.has_projection else None
        self.lm_head = Laser3MLMHead(config)
        # The tokenizer encode used last (given or loaded from the checkpoint): not a module, not in the weights.
        self._tokenizer: Any = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.word_embeddings = value

    def get_output_embeddings(self) -> nn.Linear:
        """The MLM decoder (hidden -> vocabulary): `resize_token_embeddings` resizes it with the input embeddings."""
        return self.lm_head.decoder

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head.decoder = value

    def pool(self, last_hidden_state: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pooled (and projected) sentence vectors from last-layer token states."""
        if self.config.pooling == "bos":
            pooled = last_hidden_state[:, 0]
        else:
            padding = ~attention_mask.bool()[..., None]
            pooled = last_hidden_state.masked_fill(padding, torch.finfo(last_hidden_state.dtype).min).amax(dim=1)
        if self.projection is not None:
            pooled = self.projection(pooled)
        if self.config.normalize_embeddings:
            pooled = F.normalize(pooled, dim=-1)
        return pooled

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        teacher_embeddings: torch.Tensor | None = None,
        return_mlm_logits: bool = False,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        output_attentions: bool | None = None,
        **kwargs,
    ) -> Laser3StudentOutput | tuple:
        """Encode a batch.

        Args:
            input_ids: `(batch, seq_len)` token ids from the student tokenizer.
            attention_mask: `(batch, seq_len)`, 1 for real tokens; defaults to `input_ids != pad_token_id`.
            token_type_ids: accepted for tokenizer compatibility and ignored (the student has no segments).
            labels: MLM targets `(batch, seq_len)`, -100 where no prediction is wanted.
            teacher_embeddings: `(batch, embedding_dim)` teacher vectors for the cosine distillation loss.
            return_mlm_logits: compute the MLM logits without labels.
            output_hidden_states: also return every layer's hidden states; default: the config's.
            output_attentions: refused when true (see `Laser3SelfAttention`); default: the config's.
        """
        del token_type_ids, kwargs
        if self.config.output_attentions if output_attentions is None else output_attentions:
            raise ValueError(Laser3SelfAttention.NO_ATTENTION_PROBABILITIES)
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict

        key_mask = attention_mask.bool()[:, None, None, :]
        hidden = self.embeddings(input_ids)
        all_hidden = [hidden] if output_hidden_states else None
        for layer in self.layers:
            hidden = layer(hidden, key_mask)  # positional: gradient checkpointing passes only positional tensors
            if all_hidden is not None:
                all_hidden.append(hidden)
        last_hidden_state = self.final_LayerNorm(hidden)
        sentence_embedding = self.pool(last_hidden_state, attention_mask)

        loss = None
        mlm_logits = None
        if labels is not None or return_mlm_logits:
            mlm_logits = self.lm_head(last_hidden_state)
        if labels is not None:
            loss = F.cross_entropy(mlm_logits.reshape(-1, mlm_logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
        if teacher_embeddings is not None:
            distillation = cosine_distillation_loss(sentence_embedding, teacher_embeddings)
            loss = distillation if loss is None else loss + distillation

        output = Laser3StudentOutput(
            loss=loss,
            last_hidden_state=last_hidden_state,
            sentence_embedding=sentence_embedding,
            mlm_logits=mlm_logits,
            hidden_states=tuple(all_hidden) if all_hidden is not None else None,
        )
        return output if return_dict else output.to_tuple()

    def encode(
        self, sentences: Sequence[str], tokenizer: Any = None, *, batch_size: int = 32, normalize: bool = True
    ) -> torch.Tensor:
        """Sentence embeddings `(n, embedding_dim)`, float32, L2-normalized by default (cosine = dot product).

        Args:
            sentences: the texts, truncated to `max_tokens` tokens.
            tokenizer: the student tokenizer; by default the one given before, else the one saved beside the
                weights (loaded once from `model.name_or_path`, the checkpoint folder or hub id).
            batch_size: sentences per forward pass (sorted by length, so that padding costs little).
            normalize: L2-normalize the rows (the model card's use: cosine similarity).
        """
        return self._encode_texts(sentences, tokenizer, batch_size, normalize)

    def _embed_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`encode`'s vectors of one padded batch, before normalization: `forward`'s sentence embedding."""
        return self(input_ids=input_ids, attention_mask=attention_mask, return_dict=True).sentence_embedding

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

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._resolve_tokenizer with OneAligner->Laser3
    def _resolve_tokenizer(self, tokenizer: Any) -> Any:
        """`tokenizer` (kept for the next call), else the one kept, else the one saved beside the weights, loaded
        without running code shipped with it unless `trust_remote_code` allows it."""
        if tokenizer is not None:
            self._tokenizer = tokenizer
        if self._tokenizer is None:
            if not self.name_or_path:
                raise Laser3InputError(
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
                raise Laser3InputError(
                    f"no tokenizer beside the weights in {self.name_or_path!r} ({error.__class__.__name__}): pass "
                    "encode(..., tokenizer=...)"
                ) from error
            if self._tokenizer is None:
                raise Laser3InputError(_untrusted_tokenizer_message(self.name_or_path, code))
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


# Every save_pretrained ships both files as remote code (auto_map in config.json), not only bitext_hf.hub's export.
Laser3StudentConfig.register_for_auto_class()
Laser3Student.register_for_auto_class("AutoModel")
