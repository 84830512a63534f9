"""OneAligner: cross-lingual BERTScore over hidden state L of an XLM-R-like encoder, with in-batch normalization.

This file imports only torch, transformers and, relatively, its two siblings: ``configuration_onealigner`` and
``functional_onealigner`` (the pure tensor functions: BERTScore, normalization, losses, pooling; re-exported here).
``save_pretrained`` therefore ships all three as hub remote code (``AutoModel.from_pretrained(path)``
with ``trust_remote_code`` enabled works without bitext_hf installed). Text, corpora and retrieval (tokenizing, block-wise
scoring, two-stage search) live in ``bitext_hf.families.onealigner``, which uses the public methods below.

The model adds no parameters to the encoder (paper 4.2). For a batch of N source and N target sentences,
``forward`` returns

* ``raw_scores`` f (N x N): BERTScore F between every source and target, over the token vectors of hidden state
  ``config.layer`` (padding and ``config.exclude_token_ids`` left out, optional idf weights); raw dot products in
  training, cosine in evaluation (paper 3.3);
* ``scores`` S (N x N): f after in-batch normalization, S_ij = f_ij - alpha * (mean_n f_in + mean_m f_mj)
  [+ (2 alpha - 1) * mean(f) in training];
* ``loss`` when ``return_loss=True``: cross-entropy with logits S / softmax_temperature where every positive
  (diagonal) competes with all N^2 - N negatives of the batch (``loss_type="global"``) or with its row
  (``"row"``).

``OneAlignerOutput`` fields, in order: ``loss``, ``scores``, ``raw_scores``, ``last_hidden_state``,
``target_last_hidden_state``, ``sentence_embedding``, ``target_sentence_embedding``, and the source batch's
``hidden_states`` / ``attentions`` (every hidden state and attention map of the encoder) when asked for with
``output_hidden_states`` / ``output_attentions``, as transformers models return them. Called with source inputs
only (as sentence-transformers does), the model returns the layer-L token states as ``last_hidden_state`` and their
attention-mask mean as ``sentence_embedding``: a sentence-transformers ``Transformer -> Pooling(mean) ->
Normalize`` stack built on it produces exactly ``bitext_hf.families.onealigner.encode``.

Public model methods: ``from_encoder``, ``token_states``, ``token_weights``, ``features`` (token vectors, weights and
pooled vector of a padded batch), ``similarity`` (f between two ``OneAlignerFeatures``), ``normalize``, ``fit_idf``
(from token ids) and ``forward``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig, PreTrainedModel
from transformers.models.auto.tokenization_auto import get_tokenizer_config
from transformers.utils import ModelOutput

from .configuration_onealigner import OneAlignerConfig, OneAlignerConfigError

# Relative, so that transformers' remote-code saving (which follows relative imports) ships the file with this one.
from .functional_onealigner import (
    MAX_SIMILARITY_ELEMENTS,
    OneAlignerInputError,
    append_mask_columns,
    bertscore_augmented,
    bertscore_candidates,
    bertscore_matrix,
    bertscore_pairs,
    contrastive_loss,
    mask_penalty,
    mean_pool,
    normalize_scores,
    pooled_contrastive_loss,
)

__all__ = [
    "MAX_SIMILARITY_ELEMENTS",
    "OneAlignerFeatures",
    "OneAlignerInputError",
    "OneAlignerModel",
    "OneAlignerOutput",
    "OneAlignerPreTrainedModel",
    "append_mask_columns",
    "bertscore_augmented",
    "bertscore_candidates",
    "bertscore_matrix",
    "bertscore_pairs",
    "contrastive_loss",
    "mask_penalty",
    "mean_pool",
    "normalize_scores",
    "pooled_contrastive_loss",
]

# Encoders whose last hidden state passes through a final LayerNorm: there, the last state of a model cut to L layers
# is not hidden state L of the full model.
_FINAL_NORM_ENCODER_TYPES = ("xlm-roberta-xl", "modernbert")


@dataclass
class OneAlignerOutput(ModelOutput):
    """Output of [`OneAlignerModel.forward`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): contrastive loss, only when `return_loss=True`.
        scores (`torch.FloatTensor` of shape `(n_source, n_target)`): normalized scores S (f when
            `config.normalization` is off).
        raw_scores (`torch.FloatTensor` of shape `(n_source, n_target)`): similarities f before normalization.
        last_hidden_state (`torch.FloatTensor` of shape `(n_source, length, hidden)`): source token vectors of
            hidden state `config.layer`.
        target_last_hidden_state (`torch.FloatTensor`, *optional*): the same for the targets.
        sentence_embedding (`torch.FloatTensor` of shape `(n_source, hidden)`): attention-mask mean of
            `last_hidden_state` (not L2-normalized).
        target_sentence_embedding (`torch.FloatTensor`, *optional*): the same for the targets.
        hidden_states (`tuple[torch.FloatTensor]`, *optional*): the encoder's hidden states of the source batch, the
            embedding output first, when `output_hidden_states=True` (`hidden_states[config.layer]` is
            `last_hidden_state`).
        attentions (`tuple[torch.FloatTensor]`, *optional*): the encoder's attention probabilities of the source
            batch, one `(n_source, heads, length, length)` per layer, when `output_attentions=True` (and the encoder's
            attention implementation computes them, e.g. `attn_implementation="eager"`).
    """

    loss: torch.FloatTensor | None = None
    scores: torch.FloatTensor | None = None
    raw_scores: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    target_last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None
    target_sentence_embedding: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


class OneAlignerFeatures(NamedTuple):
    """What f is computed from, for a padded batch `(n, length, hidden)` or one sentence `(length, hidden)`.

    Attributes:
        vectors: token vectors of hidden state `config.layer`, L2-normalized when compared by cosine.
        weights: BERTScore token weights (0: left out; 1 or the idf weight).
        pooled: attention-mask mean of the (un-normalized) token vectors, the `"mean_pool"` similarity's input.
    """

    vectors: torch.Tensor | None
    weights: torch.Tensor | None
    pooled: torch.Tensor


class OneAlignerPreTrainedModel(PreTrainedModel):
    """Weights initialization and the hooks shared by OneAligner models."""

    config_class = OneAlignerConfig
    base_model_prefix = "onealigner"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, OneAlignerModel) and module.idf_weights is not None:
            module.idf_weights.fill_(1.0)


class OneAlignerModel(OneAlignerPreTrainedModel):
    """OneAligner over an XLM-R-like encoder (see the module docstring for the outputs).

    Build one from an encoder with [`OneAlignerModel.from_encoder`]; reload with `from_pretrained` /
    `AutoModel.from_pretrained`. `encode` keeps the tokenizer it used last (given, or loaded from the checkpoint
    folder, which holds one); pairwise and corpus-level scoring go through `bitext_hf.families.onealigner`
    (`similarity_matrix(model, tokenizer, sources, targets)`, ...) or through the tokenizer and `forward`.
    """

    def __init__(self, config: OneAlignerConfig, encoder: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if encoder is None:
            encoder = AutoModel.from_config(config.encoder_config)
        # The pooler sits after the last layer and never reaches hidden state L: drop it so that it neither costs
        # time nor leaves parameters without gradients under DDP.
        if getattr(encoder, "pooler", None) is not None:
            encoder.pooler = None
        self.encoder = encoder
        self.config.encoder_config = encoder.config
        if config.use_idf:
            self.register_buffer("idf_weights", torch.ones(config.encoder_config.vocab_size), persistent=True)
        else:
            self.idf_weights = None
        # The tokenizer encode used last (given or loaded from the checkpoint): not a module, not in the weights.
        self._tokenizer: Any = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        """The encoder's token embeddings (what `resize_token_embeddings` and PEFT work on)."""
        return self.encoder.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.encoder.set_input_embeddings(value)

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """`PreTrainedModel.resize_token_embeddings` (the encoder's embeddings; its config, which `get_text_config`
        returns, follows, so the resized model reloads), and the idf weights with it (new tokens get weight 1)."""
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.idf_weights is not None and self.idf_weights.shape[0] != embeddings.weight.shape[0]:
            kept = min(self.idf_weights.shape[0], embeddings.weight.shape[0])
            idf = self.idf_weights.new_ones(embeddings.weight.shape[0])
            idf[:kept] = self.idf_weights[:kept]
            self.idf_weights = idf
        return embeddings

    @classmethod
    def from_encoder(
        cls,
        name_or_path_or_config: str | PretrainedConfig | PreTrainedModel,
        layer: int | None = None,
        *,
        drop_unused_layers: bool = True,
        **config_kwargs: object,
    ) -> OneAlignerModel:
        """Wrap an encoder: a local path / hub id (pretrained weights), an encoder config (random init) or a model.

        Args:
            layer: hidden state to use, 0 = embeddings; defaults to the paper's (8 of 12 layers, 17 of 24), else
                round(2/3 * num_layers).
            drop_unused_layers: remove the layers above `layer` (they never influence hidden state `layer`) to save
                time and memory; ignored when an instantiated model is passed. Encoders that normalize their last
                hidden state (xlm-roberta-xl, modernbert) keep one layer more, so that state `layer` stays
                un-normalized as in the full model.
            config_kwargs: other [`OneAlignerConfig`] fields.
        """
        if "tokenizer" in config_kwargs:
            raise OneAlignerInputError(
                "OneAlignerModel keeps no tokenizer: pass it to the bitext_hf.families.onealigner functions instead."
            )
        encoder_config = _encoder_config(name_or_path_or_config)
        encoder_model = name_or_path_or_config if isinstance(name_or_path_or_config, PreTrainedModel) else None
        num_layers = int(encoder_config.num_hidden_layers)
        # Validates the encoder type and the layer range (and picks the default layer) before any weights are loaded.
        layer = OneAlignerConfig(encoder_config=encoder_config, layer=layer, **config_kwargs).layer
        if encoder_model is None:
            encoder_config = type(encoder_config).from_dict(encoder_config.to_dict())
            kept = layer + 1 if encoder_config.model_type in _FINAL_NORM_ENCODER_TYPES else layer
            if drop_unused_layers and 1 <= kept < num_layers:
                encoder_config.num_hidden_layers = kept
            if isinstance(name_or_path_or_config, str):
                try:  # BERT-family encoders can skip building the unused pooler (and the load report about it)
                    encoder_model = AutoModel.from_pretrained(
                        name_or_path_or_config, config=encoder_config, add_pooling_layer=False
                    )
                except TypeError:
                    encoder_model = AutoModel.from_pretrained(name_or_path_or_config, config=encoder_config)
            else:
                encoder_model = AutoModel.from_config(encoder_config)
        config = OneAlignerConfig(encoder_config=encoder_model.config, layer=layer, **config_kwargs)
        return cls(config, encoder=encoder_model)

    # -- tensor level --------------------------------------------------------------------------------------------

    def token_states(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        *,
        all_states: bool = False,
    ) -> torch.Tensor:
        """Hidden state `config.layer` `(batch, length, hidden)`, or with `all_states` every hidden state, the
        embedding output first, `(states, batch, length, hidden)`.

        Args:
            input_ids: token ids `(batch, length)`.
            attention_mask: `(batch, length)`, 1 for real tokens; all ones by default.
            token_type_ids: segment ids for encoders that have them (BERT's tokenizers return them).
            all_states: return every hidden state, stacked.
        """
        return self._encode(input_ids, attention_mask, token_type_ids, all_states=all_states)[0]

    def _encode(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None = None,
        *,
        all_states: bool = False,
        output_hidden_states: bool | list[int] = False,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None, tuple[torch.Tensor, ...] | None]:
        """What `token_states` gives, and the encoder's hidden states and attention maps when asked for
        (`output_hidden_states` may list the indices of the hidden states to keep, as transformers 5 allows)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        inner = all_states or self.config.layer != self.encoder.config.num_hidden_layers
        chosen = list(output_hidden_states) if isinstance(output_hidden_states, (list, tuple)) else None
        # The states this model uses are needed whatever the list says: inner ones are asked for with all of them.
        request = chosen if chosen is not None and not inner else bool(output_hidden_states) or inner
        # Only when given: some encoders (DistilBERT, ModernBERT) have no segments and no such argument.
        segments = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
        outputs = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=request,
            output_attentions=output_attentions,
            return_dict=True,
            **segments,
        )
        if all_states:
            states = torch.stack(outputs.hidden_states)
        else:
            states = outputs.hidden_states[self.config.layer] if inner else outputs.last_hidden_state
        hidden_states = outputs.hidden_states if output_hidden_states else None
        if chosen and inner:
            kept = {index % len(hidden_states) for index in chosen}
            hidden_states = tuple(state if index in kept else None for index, state in enumerate(hidden_states))
        return states, hidden_states, outputs.attentions if output_attentions else None

    def token_weights(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """BERTScore token weights `(batch, length)`: 0 for padding and excluded ids, else 1 or the idf weight.

        A sentence left with no token (only special tokens) falls back to its attention mask, so its score is
        defined; the text functions refuse empty strings before that can happen.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        keep = attention_mask.bool()
        for token_id in self.config.exclude_token_ids:
            keep &= input_ids != token_id
        keep = torch.where(keep.any(dim=1, keepdim=True), keep, attention_mask.bool())
        weights = keep.float()
        if self.idf_weights is not None:
            weights = weights * self.idf_weights.float()[input_ids]
        return weights

    def _cosine(self, cosine: bool | None) -> bool:
        """Paper 3.3: raw dot products in training, cosine in evaluation, unless the caller decides."""
        if cosine is not None:
            return cosine
        return self.config.cosine_in_training if self.training else self.config.cosine_in_evaluation

    def features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, cosine: bool | None = None
    ) -> OneAlignerFeatures:
        """What `similarity` compares, for a padded batch (`cosine` defaults to the config's choice for the mode)."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return self.features_from_states(
            self.token_states(input_ids, attention_mask), input_ids, attention_mask, cosine
        )

    def features_from_states(
        self,
        states: torch.Tensor,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        cosine: bool | None = None,
    ) -> OneAlignerFeatures:
        """`features` of token states the encoder already gave (`forward`'s `last_hidden_state` and
        `target_last_hidden_state`), so that a training loop can gather them across processes."""
        vectors = F.normalize(states, dim=-1) if self._cosine(cosine) else states
        return OneAlignerFeatures(
            vectors, self.token_weights(input_ids, attention_mask), mean_pool(states, attention_mask)
        )

    def similarity(
        self, source: OneAlignerFeatures, target: OneAlignerFeatures, *, cosine: bool | None = None
    ) -> torch.Tensor:
        """f between two padded batches of features, `(n_source, n_target)`: BERTScore F of the token vectors, or
        with `similarity="mean_pool"` the dot product of the pooled vectors (L2-normalized when `cosine`)."""
        if self.config.similarity == "mean_pool":
            source_pooled, target_pooled = source.pooled, target.pooled
            if self._cosine(cosine):
                source_pooled, target_pooled = F.normalize(source_pooled, dim=-1), F.normalize(target_pooled, dim=-1)
            return source_pooled @ target_pooled.transpose(0, 1)
        return bertscore_matrix(source.vectors, source.weights, target.vectors, target.weights)

    def normalize(self, raw_scores: torch.Tensor, *, training: bool | None = None) -> torch.Tensor:
        """Apply the configured in-batch normalization to a block of f (identity when normalization is off)."""
        if not self.config.normalization:
            return raw_scores
        training = self.training if training is None else training
        return normalize_scores(
            raw_scores, self.config.alpha, add_mean_term=bool(self.config.add_mean_term and training)
        )

    def score_batch(
        self, source: OneAlignerFeatures, target: OneAlignerFeatures, *, return_loss: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """f, its in-batch normalization S and, when asked, the contrastive loss (row i of the sources aligned with
        row i of the targets) of two batches of features: what `forward` computes after encoding, public so that a
        training loop can score the features of every process's batch at once (the global batch's negatives)."""
        raw_scores = self.similarity(source, target)
        scores = self.normalize(raw_scores)
        if not return_loss:
            return raw_scores, scores, None
        if scores.shape[0] != scores.shape[1]:
            raise OneAlignerInputError(
                f"the loss needs aligned batches: {scores.shape[0]} sources vs {scores.shape[1]} targets."
            )
        loss = contrastive_loss(scores, self.config.softmax_temperature, self.config.loss_type)
        if self.config.pooled_loss_weight > 0:
            loss = loss + self.config.pooled_loss_weight * pooled_contrastive_loss(
                source.pooled, target.pooled, self.config.pooled_loss_temperature
            )
        return raw_scores, scores, loss

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        target_input_ids: torch.Tensor | None = None,
        target_attention_mask: torch.Tensor | None = None,
        return_loss: bool | None = None,
        return_dict: bool | None = None,
        token_type_ids: torch.Tensor | None = None,
        target_token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool | list[int] | None = None,
        output_attentions: bool | None = None,
    ) -> OneAlignerOutput | tuple:
        """Score a batch of sources against a batch of targets (see the module docstring).

        Args:
            input_ids: source token ids `(n_source, length)`.
            attention_mask: source attention mask `(n_source, length)`.
            target_input_ids: target token ids `(n_target, length)`; without them the model only encodes the
                sources (the sentence-transformers path).
            target_attention_mask: target attention mask `(n_target, length)`.
            return_loss: compute the contrastive loss; needs n_source == n_target, row i aligned with row i.
            token_type_ids: source segment ids for encoders that have them (BERT's tokenizers return them), passed
                to the encoder.
            target_token_type_ids: the same for the targets.
            output_hidden_states: also return the encoder's hidden states of the source batch (default: the
                config's); may list the indices to keep.
            output_attentions: also return the encoder's attention maps of the source batch (default: the
                config's).
        """
        if input_ids is None:
            raise OneAlignerInputError("forward needs input_ids (the source batch).")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return_dict = self.config.return_dict if return_dict is None else return_dict
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        source_states, hidden_states, attentions = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=bool(output_attentions),
        )
        source = self.features_from_states(source_states, input_ids, attention_mask)
        fields: dict[str, torch.Tensor | None] = {}
        if target_input_ids is not None:
            if target_attention_mask is None:
                target_attention_mask = torch.ones_like(target_input_ids)
            if return_loss and target_input_ids.shape[0] != input_ids.shape[0]:
                raise OneAlignerInputError(
                    f"the loss needs aligned batches: {input_ids.shape[0]} sources vs {target_input_ids.shape[0]} "
                    "targets."
                )
            target_states = self.token_states(target_input_ids, target_attention_mask, target_token_type_ids)
            target = self.features_from_states(target_states, target_input_ids, target_attention_mask)
            raw_scores, scores, loss = self.score_batch(source, target, return_loss=bool(return_loss))
            fields.update(
                raw_scores=raw_scores,
                scores=scores,
                target_last_hidden_state=target_states,
                target_sentence_embedding=target.pooled,
            )
            if return_loss:
                fields["loss"] = loss
        elif return_loss:
            raise OneAlignerInputError("return_loss=True needs target_input_ids (the aligned target batch).")
        fields.update(hidden_states=hidden_states, attentions=attentions)
        # Built in one call so that the tuple/key order is the field order (loss first).
        output = OneAlignerOutput(last_hidden_state=source_states, sentence_embedding=source.pooled, **fields)
        return output if return_dict else output.to_tuple()

    @torch.no_grad()
    def fit_idf(self, token_ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """Set the idf weights from a tokenized reference corpus: idf(w) = log((M + 1) / (df(w) + 1)) (BERTScore's).

        `bitext_hf.families.onealigner.fit_idf(model, tokenizer, texts)` tokenizes texts for it.
        """
        if self.idf_weights is None:
            raise OneAlignerConfigError("this model was built with use_idf=False: rebuild it with use_idf=True.")
        document_frequency = torch.zeros_like(self.idf_weights, dtype=torch.float64, device="cpu")
        for ids in token_ids:
            document_frequency[torch.as_tensor(sorted(set(ids)), dtype=torch.long)] += 1.0
        idf = torch.log((len(token_ids) + 1.0) / (document_frequency + 1.0))
        self.idf_weights.copy_(idf.to(self.idf_weights.dtype))
        return self.idf_weights

    # -- text level (the minimum a checkpoint needs to turn text into vectors without bitext_hf) ------------------

    def encode(
        self, sentences: Sequence[str], tokenizer: Any = None, *, batch_size: int = 64, normalize: bool = True
    ) -> torch.Tensor:
        """Mean-pooled layer-L sentence vectors `(n, hidden)`, float32, L2-normalized by default: the vectors of
        `bitext_hf.families.onealigner.encode` and of the sentence-transformers export (BERTScore itself compares token
        vectors: use `forward` or the `bitext_hf.families.onealigner` functions for that).

        Args:
            sentences: the texts, truncated to `max_tokens` tokens.
            tokenizer: the encoder's tokenizer; by default the one given before, else the one saved beside the
                weights (loaded once from `model.name_or_path`, the checkpoint folder or hub id).
            batch_size: sentences per forward pass (sorted by length, so that padding costs little).
            normalize: L2-normalize the rows (cosine = dot product).
        """
        return self._encode_texts(sentences, tokenizer, batch_size, normalize)

    def _embed_batch(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """`encode`'s vectors of one padded batch, before normalization: the mean of hidden state `config.layer`."""
        return mean_pool(self.token_states(input_ids, attention_mask), attention_mask)

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
        """Tokens per sentence, special tokens included, that `encode` keeps: `config.max_seq_length`, never more
        than the encoder's position table numbers (longer inputs would index past it)."""
        capacity = _position_capacity(self.encoder)
        return self.config.max_seq_length if capacity is None else min(self.config.max_seq_length, capacity)

    # Whether `encode` may run Python code shipped with the tokenizer saved beside the weights (an `auto_map` in its
    # tokenizer_config.json): the caller's `trust_remote_code` when `from_pretrained` loaded the model, else False.
    trust_remote_code: bool = False

    @classmethod
    def from_pretrained(cls, *args: Any, **kwargs: Any) -> Any:
        """`PreTrainedModel.from_pretrained`, keeping the caller's `trust_remote_code` (else False) as the model's
        `trust_remote_code` for `encode`: transformers consumes the argument (the Auto classes pass on the choice
        they resolved), so the model could not know it otherwise."""
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # (model, info) with output_loading_info=True
        model.trust_remote_code = kwargs.get("trust_remote_code") is True
        return loaded

    def _resolve_tokenizer(self, tokenizer: Any) -> Any:
        """`tokenizer` (kept for the next call), else the one kept, else the one saved beside the weights, loaded
        without running code shipped with it unless `trust_remote_code` allows it."""
        if tokenizer is not None:
            self._tokenizer = tokenizer
        if self._tokenizer is None:
            if not self.name_or_path:
                raise OneAlignerInputError(
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
                raise OneAlignerInputError(
                    f"no tokenizer beside the weights in {self.name_or_path!r} ({error.__class__.__name__}): pass "
                    "encode(..., tokenizer=...)"
                ) from error
            if self._tokenizer is None:
                raise OneAlignerInputError(_untrusted_tokenizer_message(self.name_or_path, code))
        return self._tokenizer

    def save_pretrained(self, save_directory: Any, *args: Any, tokenizer: Any = None, **kwargs: Any) -> None:
        """`PreTrainedModel.save_pretrained`, plus the tokenizer (`tokenizer`, else the one `encode` used) beside the
        weights, so that the checkpoint turns text into embeddings by itself."""
        super().save_pretrained(save_directory, *args, **kwargs)
        tokenizer = tokenizer if tokenizer is not None else self._tokenizer
        if tokenizer is not None and kwargs.get("is_main_process", True):
            tokenizer.save_pretrained(save_directory)
            _portable_tokenizer_class(Path(save_directory))


def _encoder_config(name_or_path_or_config: str | PretrainedConfig | PreTrainedModel) -> PretrainedConfig:
    """The config of the encoder `from_encoder` wraps: a model's, a config as given, or read from a local folder or
    hub id (refused with the fix when it cannot be read, before any weights are loaded)."""
    if isinstance(name_or_path_or_config, PreTrainedModel):
        return name_or_path_or_config.config
    if isinstance(name_or_path_or_config, PretrainedConfig):
        return name_or_path_or_config
    if isinstance(name_or_path_or_config, str):
        try:
            return AutoConfig.from_pretrained(name_or_path_or_config)
        except (OSError, ValueError) as error:
            raise OneAlignerInputError(
                f"cannot load the encoder {name_or_path_or_config!r} ({error.__class__.__name__}): pass a local "
                "folder with config.json and weights, or an encoder config for a random initialization"
            ) from error
    raise OneAlignerInputError(
        "from_encoder expects a path, a hub id, a PretrainedConfig or a PreTrainedModel, got "
        f"{type(name_or_path_or_config).__name__}"
    )


def _position_capacity(encoder: nn.Module) -> int | None:
    """How many tokens the encoder's learned absolute position table numbers, or None without one (relative or
    rotary positions). RoBERTa-style encoders (XLM-R) count positions from padding_idx + 1, the table's own
    `padding_idx`, so the rows up to it are never a token's."""
    table = getattr(getattr(encoder, "embeddings", None), "position_embeddings", None)
    if not isinstance(table, nn.Embedding):
        return None
    return table.num_embeddings - (0 if table.padding_idx is None else table.padding_idx + 1)


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


def _untrusted_tokenizer_message(name_or_path: str, code: str | None) -> str:
    return (
        f"the tokenizer saved in {name_or_path!r} runs Python code shipped with the checkpoint ({code}), which is "
        "never run unasked: if you trust it, load the model with the argument trust_remote_code of from_pretrained "
        "set to True (or set the model's trust_remote_code attribute to True); otherwise pass encode(..., "
        "tokenizer=...)"
    )


def _portable_tokenizer_class(folder: Path) -> None:
    """transformers 5 names a plain `tokenizers` tokenizer `TokenizersBackend`, a class 4.x lacks; both read its
    older name `PreTrainedTokenizerFast` as the same class, so that is the name written."""
    path = folder / "tokenizer_config.json"
    if path.is_file():
        config = json.loads(path.read_text(encoding="utf-8"))
        if config.get("tokenizer_class") == "TokenizersBackend":
            config["tokenizer_class"] = "PreTrainedTokenizerFast"
            path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# Saving a model ships the three files as remote code (auto_map in config.json; the relative imports follow).
OneAlignerConfig.register_for_auto_class()
OneAlignerModel.register_for_auto_class("AutoModel")
