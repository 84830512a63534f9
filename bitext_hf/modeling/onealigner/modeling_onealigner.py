"""OneAligner: cross-lingual BERTScore over hidden state L of an XLM-R-like encoder, with in-batch normalization.

This file imports only its configuration, torch and transformers, so that ``save_pretrained`` can ship it as hub
remote code (``AutoModel.from_pretrained(path, trust_remote_code=True)`` works without bitext_hf installed).

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
``target_last_hidden_state``, ``sentence_embedding``, ``target_sentence_embedding``. Called with source inputs
only (as sentence-transformers does), the model returns the layer-L token states as ``last_hidden_state`` and their
attention-mask mean as ``sentence_embedding``: a sentence-transformers ``Transformer -> Pooling(mean) ->
Normalize`` stack built on it produces exactly ``OneAlignerModel.encode``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pad_sequence
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_onealigner import OneAlignerConfig, OneAlignerConfigError

__all__ = [
    "OneAlignerInputError",
    "OneAlignerModel",
    "OneAlignerOutput",
    "OneAlignerPreTrainedModel",
    "bertscore_candidates",
    "bertscore_matrix",
    "bertscore_pairs",
    "contrastive_loss",
    "normalize_scores",
    "pooled_contrastive_loss",
]

logger = logging.getLogger(__name__)

# Upper bound on elements of one token-similarity tensor (source chunk x target block x tokens x tokens).
_MAX_SIMILARITY_ELEMENTS = 1 << 24
# Encoders whose last hidden state passes through a final LayerNorm: there, the last state of a model cut to L layers
# is not hidden state L of the full model.
_FINAL_NORM_ENCODER_TYPES = ("xlm-roberta-xl", "modernbert")


class OneAlignerInputError(ValueError):
    """The sentences or tensors given to OneAligner are unusable (mismatched counts, empty strings, ...)."""


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
    """

    loss: torch.FloatTensor | None = None
    scores: torch.FloatTensor | None = None
    raw_scores: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    target_last_hidden_state: torch.FloatTensor | None = None
    sentence_embedding: torch.FloatTensor | None = None
    target_sentence_embedding: torch.FloatTensor | None = None


# ----------------------------------------------------------------------------------------------------------------
# Pure tensor functions (no model state): the definitions the tests check against direct computations.
# ----------------------------------------------------------------------------------------------------------------


def _with_mask_columns(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Append two columns so that one product both gives s.t and pushes left-out tokens below every real score.

    source' = [s, -penalty * left_out_s, 1] and target' = [t, 1, -penalty * left_out_t], so
    source'.target' = s.t - penalty * (left_out_s + left_out_t). With penalty > 2 max|s| max|t| (Cauchy-Schwarz),
    a left-out token can never be the max over tokens, with no masked copy of the (large) similarity tensor.
    """
    penalty = _mask_penalty(source_states, target_states)
    return _augment(source_states, source_weights, penalty, source=True), _augment(
        target_states, target_weights, penalty, source=False
    )


def _mask_penalty(source_states: torch.Tensor, target_states: torch.Tensor) -> torch.Tensor:
    """A penalty above 2 max|s| max|t|: larger than any difference of two real token similarities."""
    with torch.no_grad():
        bound = source_states.norm(dim=-1).amax() * target_states.norm(dim=-1).amax()
        return (4.0 * bound + 1.0).to(source_states.dtype)


def _augment(
    states: torch.Tensor, weights: torch.Tensor, penalty: torch.Tensor | float, *, source: bool
) -> torch.Tensor:
    """One side of `_with_mask_columns`: [s, -penalty * left_out, 1] (source) or [t, 1, -penalty * left_out]."""
    left_out = (-penalty * (weights <= 0).to(states.dtype)).unsqueeze(-1)
    ones = torch.ones_like(left_out)
    return torch.cat([states, left_out, ones] if source else [states, ones, left_out], dim=-1)


def bertscore_matrix(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
    *,
    max_elements: int = _MAX_SIMILARITY_ELEMENTS,
) -> torch.Tensor:
    """BERTScore F between every source and every target sentence.

    Args:
        source_states: `(n_s, L_s, d)` token vectors (already L2-normalized for cosine).
        source_weights: `(n_s, L_s)` token weights; 0 marks tokens left out (padding, special tokens), 1 or the
            idf weight marks tokens that count. Every sentence needs at least one token with a positive weight.
        target_states, target_weights: the same for the targets.

    Returns:
        `(n_s, n_t)`: F = 2PR / (P + R) with P = weighted mean over target tokens of the max similarity to a
        source token and R the reverse (Zhang et al. 2020, as OneAligner defines them).
    """
    n_source, source_length, _ = source_states.shape
    n_target, target_length, _ = target_states.shape
    per_source = max(1, n_target * source_length * target_length)
    chunk = max(1, max_elements // per_source)
    source_augmented, target_augmented = _with_mask_columns(
        source_states, source_weights, target_states, target_weights
    )
    # Token-major layout ((length, sentence) rows): both max reductions then run over outer dimensions, 5-12x faster
    # on CPU than reducing a short innermost dimension (16 x 64 x 16 x 256 block, one thread: 1.0 / 0.7 ms against
    # 5.2 / 8.9 ms).
    target_flat = target_augmented.transpose(0, 1).reshape(target_length * n_target, -1).transpose(0, 1)
    target_weights_by_token = target_weights.transpose(0, 1).unsqueeze(0)  # (1, L_t, n_t)
    target_total = target_weights.sum(-1)
    rows = []
    for start in range(0, n_source, chunk):
        states = source_augmented[start : start + chunk]
        weights = source_weights[start : start + chunk]
        n_chunk = states.shape[0]
        similarity = (states.transpose(0, 1).reshape(source_length * n_chunk, -1) @ target_flat).view(
            source_length, n_chunk, target_length, n_target
        )
        # P: each target token takes its best source token; R: each source token its best target token. Left-out
        # tokens never win a max (see _with_mask_columns) and have weight 0 in the means.
        best_for_target = similarity.amax(dim=0)  # (n_chunk, L_t, n_t)
        precision = (best_for_target * target_weights_by_token).sum(1) / target_total.unsqueeze(0)
        best_for_source = similarity.amax(dim=2)  # (L_s, n_chunk, n_t)
        recall = (best_for_source * weights.transpose(0, 1).unsqueeze(-1)).sum(0) / weights.sum(-1, keepdim=True)
        rows.append(_f_measure(precision, recall))
    return torch.cat(rows, dim=0)


def bertscore_candidates(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    candidate_states: torch.Tensor,
    candidate_weights: torch.Tensor,
) -> torch.Tensor:
    """BERTScore F of each source against its own k candidates: `(n, L_s, d)` x `(n, k, L_t, d)` -> `(n, k)`.

    One batched product per source against all of its candidates (weights as in `bertscore_matrix`).
    """
    n_source = source_states.shape[0]
    if candidate_states.ndim != 4 or candidate_states.shape[0] != n_source:
        raise OneAlignerInputError(
            f"candidate_states must be (n_source={n_source}, k, length, hidden), got {tuple(candidate_states.shape)}."
        )
    source_augmented, candidate_augmented = _with_mask_columns(
        source_states, source_weights, candidate_states, candidate_weights
    )
    return _bertscore_augmented_candidates(source_augmented, source_weights, candidate_augmented, candidate_weights)


def _bertscore_augmented_candidates(
    source_augmented: torch.Tensor,
    source_weights: torch.Tensor,
    candidate_augmented: torch.Tensor,
    candidate_weights: torch.Tensor,
) -> torch.Tensor:
    """`bertscore_candidates` on sides already augmented by `_with_mask_columns` (`(n, L_s, d+2)`, `(n, k, L_t, d+2)`)."""
    n_source, source_length, width = source_augmented.shape
    _, k, target_length, _ = candidate_augmented.shape
    similarity = torch.bmm(
        source_augmented, candidate_augmented.reshape(n_source, k * target_length, width).transpose(1, 2)
    ).view(n_source, source_length, k, target_length)
    precision = (similarity.amax(dim=1) * candidate_weights).sum(-1) / candidate_weights.sum(-1)  # (n, k)
    best_for_source = similarity.amax(dim=3)  # (n, L_s, k)
    recall = (best_for_source * source_weights.unsqueeze(-1)).sum(1) / source_weights.sum(-1, keepdim=True)
    return _f_measure(precision, recall)


def bertscore_pairs(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
) -> torch.Tensor:
    """BERTScore F of aligned pairs: row i of the sources against row i of the targets; returns `(n,)`."""
    if source_states.shape[0] != target_states.shape[0]:
        raise OneAlignerInputError(
            f"bertscore_pairs needs as many sources as targets, got {source_states.shape[0]} and "
            f"{target_states.shape[0]}."
        )
    return bertscore_candidates(
        source_states, source_weights, target_states.unsqueeze(1), target_weights.unsqueeze(1)
    ).squeeze(1)


def _f_measure(precision: torch.Tensor, recall: torch.Tensor) -> torch.Tensor:
    # Raw dot products can make P + R tiny or negative; keep the denominator away from 0 with its sign.
    denominator = precision + recall
    eps = torch.finfo(denominator.dtype).eps
    denominator = torch.where(denominator.abs() < eps, torch.full_like(denominator, eps), denominator)
    return 2.0 * precision * recall / denominator


def normalize_scores(raw_scores: torch.Tensor, alpha: float, *, add_mean_term: bool) -> torch.Tensor:
    """In-batch normalization: S_ij = f_ij - alpha * (mean_n f_in + mean_m f_mj) [+ (2 alpha - 1) mean(f)]."""
    scores = raw_scores - alpha * (raw_scores.mean(dim=1, keepdim=True) + raw_scores.mean(dim=0, keepdim=True))
    if add_mean_term:
        scores = scores + (2.0 * alpha - 1.0) * raw_scores.mean()
    return scores


def contrastive_loss(scores: torch.Tensor, temperature: float, loss_type: str = "global") -> torch.Tensor:
    """Cross-entropy over in-batch negatives; the positives are the diagonal of the square `scores`.

    `"global"`: each positive logit l_ii against all N^2 - N off-diagonal logits of the batch,
    loss_i = -l_ii + log(exp(l_ii) + sum_{m != n} exp(l_mn)); `"row"`: InfoNCE over row i.
    """
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise OneAlignerInputError(f"the contrastive loss needs a square score matrix, got {tuple(scores.shape)}.")
    logits = scores.float() / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    if loss_type == "row":
        return F.cross_entropy(logits, labels)
    if loss_type != "global":
        raise OneAlignerInputError(f"loss_type={loss_type!r}: expected 'global' or 'row'.")
    positives = logits.diagonal()
    if logits.shape[0] == 1:  # no negatives: the softmax over one logit is 1
        return (positives - positives).sum()
    off_diagonal = logits.masked_fill(torch.eye(logits.shape[0], dtype=torch.bool, device=logits.device), -math.inf)
    negatives = torch.logsumexp(off_diagonal.flatten(), dim=0)
    return (torch.logaddexp(positives, negatives) - positives).mean()


def pooled_contrastive_loss(source: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE on the cosine of pooled vectors (row i of each side aligned): the first-stage loss."""
    logits = F.normalize(source.float(), dim=-1) @ F.normalize(target.float(), dim=-1).transpose(0, 1) / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.transpose(0, 1), labels)) / 2


def mean_pool(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Attention-mask mean of token vectors: what sentence-transformers' mean Pooling computes."""
    mask = attention_mask.to(states.dtype).unsqueeze(-1)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)


# ----------------------------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------------------------


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
    `AutoModel.from_pretrained`. The text-level helpers (`encode`, `score_pairs`, `similarity_matrix`, `retrieve`,
    `rerank`) take a `tokenizer=` argument or use the one attached by `from_encoder` / `attach_tokenizer`.
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
        self.tokenizer: Any = None
        self._warned_truncation = False
        self.post_init()

    # -- construction ------------------------------------------------------------------------------------------

    @classmethod
    def from_encoder(
        cls,
        name_or_path_or_config: str | PretrainedConfig | PreTrainedModel,
        layer: int | None = None,
        *,
        drop_unused_layers: bool = True,
        tokenizer: Any = None,
        **config_kwargs: Any,
    ) -> OneAlignerModel:
        """Wrap an encoder: a local path / hub id (pretrained weights), an encoder config (random init) or a model.

        Args:
            layer: hidden state to use, 0 = embeddings; defaults to round(2/3 * num_layers) (paper: 8 of 12).
            drop_unused_layers: remove the layers above `layer` (they never influence hidden state `layer`) to save
                time and memory; ignored when an instantiated model is passed. Encoders that normalize their last
                hidden state (xlm-roberta-xl, modernbert) keep one layer more, so that state `layer` stays
                un-normalized as in the full model.
            tokenizer: attached for the text helpers; by default loaded from the path when there is one.
            config_kwargs: other [`OneAlignerConfig`] fields.
        """
        encoder_model = None
        if isinstance(name_or_path_or_config, PreTrainedModel):
            encoder_model = name_or_path_or_config
            encoder_config = encoder_model.config
        elif isinstance(name_or_path_or_config, PretrainedConfig):
            encoder_config = name_or_path_or_config
        elif isinstance(name_or_path_or_config, str):
            try:
                encoder_config = AutoConfig.from_pretrained(name_or_path_or_config)
            except (OSError, ValueError) as error:
                raise OneAlignerInputError(
                    f"cannot load the encoder {name_or_path_or_config!r} ({error.__class__.__name__}): pass a local "
                    "folder with config.json and weights, or an encoder config for a random initialization."
                ) from error
        else:
            raise OneAlignerInputError(
                "from_encoder expects a path, a hub id, a PretrainedConfig or a PreTrainedModel, got "
                f"{type(name_or_path_or_config).__name__}."
            )
        num_layers = int(encoder_config.num_hidden_layers)
        if layer is None:
            layer = max(1, round(2 * num_layers / 3))
        # Validates the encoder type and the layer range before any weights are loaded.
        OneAlignerConfig(encoder_config=encoder_config, layer=layer, **config_kwargs)
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
                if tokenizer is None:
                    try:
                        tokenizer = AutoTokenizer.from_pretrained(name_or_path_or_config)
                    except (OSError, ValueError):
                        logger.info(
                            "no tokenizer found next to %s; pass tokenizer= to the text helpers",
                            name_or_path_or_config,
                        )
            else:
                encoder_model = AutoModel.from_config(encoder_config)
        config = OneAlignerConfig(encoder_config=encoder_model.config, layer=layer, **config_kwargs)
        model = cls(config, encoder=encoder_model)
        if tokenizer is not None:
            model.attach_tokenizer(tokenizer)
        return model

    def attach_tokenizer(self, tokenizer: Any) -> OneAlignerModel:
        """Remember the tokenizer used by the text-level helpers."""
        self.tokenizer = tokenizer
        return self

    # -- tensor level --------------------------------------------------------------------------------------------

    def token_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Token vectors of hidden state `config.layer`, `(batch, length, hidden)`."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        num_layers = self.encoder.config.num_hidden_layers
        want_all = self.config.layer != num_layers
        outputs = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=want_all, return_dict=True
        )
        return outputs.hidden_states[self.config.layer] if want_all else outputs.last_hidden_state

    def token_weights(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """BERTScore token weights `(batch, length)`: 0 for padding and excluded ids, else 1 or the idf weight.

        A sentence left with no token (only special tokens) falls back to its attention mask, so its score is
        defined; the text helpers refuse empty strings before that can happen.
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

    def _prepare(self, states: torch.Tensor, attention_mask: torch.Tensor, cosine: bool) -> torch.Tensor:
        if self.config.similarity == "mean_pool":
            pooled = mean_pool(states, attention_mask)
            return F.normalize(pooled, dim=-1) if cosine else pooled
        return F.normalize(states, dim=-1) if cosine else states

    def raw_similarity(
        self,
        source: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
        target: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    ) -> torch.Tensor:
        """f between prepared (vectors, weights, attention mask) triples, `(n_source, n_target)`."""
        if self.config.similarity == "mean_pool":
            return source[0] @ target[0].transpose(0, 1)
        return bertscore_matrix(source[0], source[1], target[0], target[1])

    def normalize(self, raw_scores: torch.Tensor, *, training: bool | None = None) -> torch.Tensor:
        """Apply the configured in-batch normalization to a block of f (identity when normalization is off)."""
        if not self.config.normalization:
            return raw_scores
        training = self.training if training is None else training
        return normalize_scores(
            raw_scores, self.config.alpha, add_mean_term=bool(self.config.add_mean_term and training)
        )

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        target_input_ids: torch.Tensor | None = None,
        target_attention_mask: torch.Tensor | None = None,
        return_loss: bool | None = None,
        return_dict: bool | None = None,
    ) -> OneAlignerOutput | tuple:
        """Score a batch of sources against a batch of targets (see the module docstring).

        Args:
            input_ids, attention_mask: source batch `(n_source, length)`.
            target_input_ids, target_attention_mask: target batch `(n_target, length)`; without them the model
                only encodes the sources (the sentence-transformers path).
            return_loss: compute the contrastive loss; needs n_source == n_target, row i aligned with row i.
        """
        if input_ids is None:
            raise OneAlignerInputError("forward needs input_ids (the source batch).")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return_dict = self.config.return_dict if return_dict is None else return_dict
        source_states = self.token_states(input_ids, attention_mask)
        fields: dict[str, torch.Tensor | None] = {}
        if target_input_ids is not None:
            if target_attention_mask is None:
                target_attention_mask = torch.ones_like(target_input_ids)
            if return_loss and target_input_ids.shape[0] != input_ids.shape[0]:
                raise OneAlignerInputError(
                    f"the loss needs aligned batches: {input_ids.shape[0]} sources vs {target_input_ids.shape[0]} "
                    "targets."
                )
            target_states = self.token_states(target_input_ids, target_attention_mask)
            cosine = self.config.cosine_in_training if self.training else self.config.cosine_in_evaluation
            source = (
                self._prepare(source_states, attention_mask, cosine),
                self.token_weights(input_ids, attention_mask),
                attention_mask,
            )
            target = (
                self._prepare(target_states, target_attention_mask, cosine),
                self.token_weights(target_input_ids, target_attention_mask),
                target_attention_mask,
            )
            raw_scores = self.raw_similarity(source, target)
            scores = self.normalize(raw_scores)
            fields.update(
                raw_scores=raw_scores,
                scores=scores,
                target_last_hidden_state=target_states,
                target_sentence_embedding=mean_pool(target_states, target_attention_mask),
            )
            if return_loss:
                loss = contrastive_loss(scores, self.config.softmax_temperature, self.config.loss_type)
                if self.config.pooled_loss_weight > 0:
                    loss = loss + self.config.pooled_loss_weight * pooled_contrastive_loss(
                        mean_pool(source_states, attention_mask),
                        fields["target_sentence_embedding"],
                        self.config.pooled_loss_temperature,
                    )
                fields["loss"] = loss
        elif return_loss:
            raise OneAlignerInputError("return_loss=True needs target_input_ids (the aligned target batch).")
        # Built in one call so that the tuple/key order is the field order (loss first).
        output = OneAlignerOutput(
            last_hidden_state=source_states, sentence_embedding=mean_pool(source_states, attention_mask), **fields
        )
        return output if return_dict else output.to_tuple()

    # -- text level ----------------------------------------------------------------------------------------------

    def _tokenizer(self, tokenizer: Any) -> Any:
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        if tokenizer is None:
            raise OneAlignerInputError(
                "no tokenizer: pass tokenizer= or call model.attach_tokenizer(AutoTokenizer.from_pretrained(path))."
            )
        return tokenizer

    def tokenize(self, sentences: Sequence[str], tokenizer: Any = None) -> list[list[int]]:
        """Token ids with special tokens, truncated to `config.max_seq_length` (keeping the final EOS); warns once."""
        tokenizer = self._tokenizer(tokenizer)
        if isinstance(sentences, str):
            raise OneAlignerInputError("expected a list of sentences, got a single string.")
        for index, sentence in enumerate(sentences):
            if not isinstance(sentence, str):
                raise OneAlignerInputError(f"sentence {index} is a {type(sentence).__name__}, not a string.")
            if not sentence.strip():
                raise OneAlignerInputError(f"sentence {index} is empty: remove empty lines before scoring.")
        encoded = tokenizer(list(sentences), add_special_tokens=True, truncation=False)["input_ids"]
        limit = self.config.max_seq_length
        too_long = sum(len(ids) > limit for ids in encoded)
        if too_long and not self._warned_truncation:
            logger.warning(
                "%d sentence(s) exceed max_seq_length=%d tokens and are truncated (this warning is shown once).",
                too_long,
                limit,
            )
            self._warned_truncation = True
        return [ids if len(ids) <= limit else [*ids[: limit - 1], ids[-1]] for ids in encoded]

    def _pad(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        pad_id = self.config.encoder_config.pad_token_id
        pad_id = 0 if pad_id is None else int(pad_id)
        width = max(len(ids) for ids in sequences)
        input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        return input_ids.to(self.device), attention_mask.to(self.device)

    @torch.inference_mode()
    def _encode_tokens(
        self, sentences: Sequence[str], tokenizer: Any, batch_size: int
    ) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per sentence (cosine-ready token vectors or pooled vector, BERTScore weights, pooled vector), in order.

        Batches are formed from length-sorted sentences so that padding costs little.
        """
        token_ids = self.tokenize(sentences, tokenizer)
        order = sorted(range(len(token_ids)), key=lambda index: len(token_ids[index]))
        encoded: list[Any] = [None] * len(token_ids)
        cosine = self.config.cosine_in_evaluation
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            input_ids, attention_mask = self._pad([token_ids[index] for index in batch])
            states = self.token_states(input_ids, attention_mask)
            pooled = mean_pool(states, attention_mask).float()
            vectors = F.normalize(states, dim=-1) if cosine else states
            weights = self.token_weights(input_ids, attention_mask)
            lengths = attention_mask.sum(1).tolist()
            for row, index in enumerate(batch):
                length = int(lengths[row])
                encoded[index] = (vectors[row, :length].float(), weights[row, :length], pooled[row])
        return encoded

    def _stack(self, items: Sequence[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        """Pad per-sentence encodings into (vectors, weights, attention mask) for `raw_similarity`."""
        cosine = self.config.cosine_in_evaluation
        if self.config.similarity == "mean_pool":
            pooled = torch.stack([item[2] for item in items])
            return (F.normalize(pooled, dim=-1) if cosine else pooled), None, None
        # pad_sequence copies in C++: a Python loop of row copies dominated the two-stage search.
        vectors = pad_sequence([item[0] for item in items], batch_first=True)
        weights = pad_sequence([item[1] for item in items], batch_first=True)
        return vectors, weights, weights > 0

    def _grouped_similarity(self, sources: Sequence[Any], targets: Sequence[Any], group: int = 64) -> torch.Tensor:
        """f between two lists of per-sentence encodings, `(len(sources), len(targets))` float32.

        BERTScore costs grow with the padded lengths, so both sides are cut into groups of similar length
        (sorted by length) and every pair of groups is scored on its own; the scores do not depend on the grouping.
        """
        if self.config.similarity == "mean_pool":
            return self.raw_similarity(self._stack(sources), self._stack(targets)).float()
        source_order = sorted(range(len(sources)), key=lambda index: sources[index][0].shape[0])
        target_order = sorted(range(len(targets)), key=lambda index: targets[index][0].shape[0])
        source_groups = [source_order[start : start + group] for start in range(0, len(source_order), group)]
        target_groups = [target_order[start : start + group] for start in range(0, len(target_order), group)]
        stacked_targets = [self._stack([targets[index] for index in indices]) for indices in target_groups]
        result = torch.empty((len(sources), len(targets)), dtype=torch.float32, device=self.device)
        for source_indices in source_groups:
            stacked_source = self._stack([sources[index] for index in source_indices])
            rows = torch.as_tensor(source_indices, device=self.device).unsqueeze(1)
            for target_indices, stacked_target in zip(target_groups, stacked_targets):
                columns = torch.as_tensor(target_indices, device=self.device).unsqueeze(0)
                result[rows, columns] = self.raw_similarity(stacked_source, stacked_target).float()
        return result

    @torch.inference_mode()
    def encode(
        self, sentences: Sequence[str], tokenizer: Any = None, batch_size: int = 64, normalize: bool = True
    ) -> torch.Tensor:
        """Mean-pooled layer-L sentence vectors `(n, hidden)` (L2-normalized by default): the first-stage index."""
        encoded = self._encode_tokens(sentences, tokenizer, batch_size)
        pooled = torch.stack([item[2] for item in encoded])
        return F.normalize(pooled, dim=-1) if normalize else pooled

    @torch.inference_mode()
    def similarity_matrix(
        self,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        tokenizer: Any = None,
        batch_size: int | None = None,
        normalize: bool | None = None,
    ) -> torch.Tensor:
        """Evaluation scores for every source-target pair, `(n_source, n_target)` float32 on CPU.

        Cosine similarities; in-batch normalization (when configured, or forced with `normalize`) is applied
        per evaluation block of `batch_size` sources x `batch_size` targets, as the paper does at inference, so a
        score depends only on its block.
        """
        matrix = torch.empty((len(source_sentences), len(target_sentences)), dtype=torch.float32)
        start = 0
        for rows in self._score_row_blocks(source_sentences, target_sentences, tokenizer, batch_size, normalize):
            matrix[start : start + rows.shape[0]] = rows
            start += rows.shape[0]
        return matrix

    def _score_row_blocks(
        self,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        tokenizer: Any,
        batch_size: int | None,
        normalize: bool | None,
    ) -> Iterator[torch.Tensor]:
        """`similarity_matrix` one block of `batch_size` source rows at a time, `(rows, n_target)` float32 on CPU."""
        batch_size = batch_size or self.config.eval_batch_size
        normalize = self.config.normalization if normalize is None else normalize
        source = self._encode_tokens(source_sentences, tokenizer, batch_size)
        target = self._encode_tokens(target_sentences, tokenizer, batch_size)
        for source_start in range(0, len(source), batch_size):
            source_block = source[source_start : source_start + batch_size]
            rows = torch.empty((len(source_block), len(target)), dtype=torch.float32)
            for target_start in range(0, len(target), batch_size):
                raw = self._grouped_similarity(source_block, target[target_start : target_start + batch_size])
                if normalize:
                    raw = normalize_scores(raw, self.config.alpha, add_mean_term=False)
                rows[:, target_start : target_start + raw.shape[1]] = raw.cpu()
            yield rows

    @torch.inference_mode()
    def score_pairs(
        self,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        tokenizer: Any = None,
        batch_size: int | None = None,
        normalize: bool | None = None,
    ) -> torch.Tensor:
        """Scores of aligned pairs (source i with target i), `(n,)`.

        With normalization, each consecutive block of `batch_size` pairs is normalized against itself (the pairs'
        own sources and targets are the in-batch context), as in training and evaluation.
        """
        if len(source_sentences) != len(target_sentences):
            raise OneAlignerInputError(
                f"score_pairs needs aligned lists: {len(source_sentences)} sources vs {len(target_sentences)} targets."
            )
        batch_size = batch_size or self.config.eval_batch_size
        normalize = self.config.normalization if normalize is None else normalize
        source = self._encode_tokens(source_sentences, tokenizer, batch_size)
        target = self._encode_tokens(target_sentences, tokenizer, batch_size)
        scores = []
        for start in range(0, len(source), batch_size):
            if normalize:
                raw = self._grouped_similarity(source[start : start + batch_size], target[start : start + batch_size])
                scores.append(normalize_scores(raw, self.config.alpha, add_mean_term=False).diagonal().cpu())
            else:
                block = slice(start, start + batch_size)
                own = torch.arange(len(source[block])).unsqueeze(1)
                scores.append(self._candidate_scores(source[block], target[block], own, batch_size)[:, 0])
        return torch.cat(scores) if scores else torch.empty(0)

    @torch.inference_mode()
    def retrieve(
        self,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        tokenizer: Any = None,
        batch_size: int | None = None,
        normalize: bool | None = None,
    ) -> torch.Tensor:
        """Top-1 target index for every source over the full score matrix, `(n_source,)` int64.

        Row block by row block: only `batch_size` rows of the matrix exist at a time (the whole matrix is 1.6 GB
        at 20k x 20k)."""
        blocks = self._score_row_blocks(source_sentences, target_sentences, tokenizer, batch_size, normalize)
        best = [rows.argmax(dim=1) for rows in blocks]
        return torch.cat(best) if best else torch.empty(0, dtype=torch.long)

    @torch.inference_mode()
    def rerank(
        self,
        source_sentences: Sequence[str],
        target_sentences: Sequence[str],
        candidates: torch.Tensor,
        tokenizer: Any = None,
        batch_size: int | None = None,
        normalize: bool | None = None,
        normalization_sample: int | None = None,
        seed: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Second stage: BERTScore only for the given candidates, `candidates[i]` = target indices for source i.

        In-batch normalization needs each source's mean score against a batch of targets and each target's mean
        against a batch of sources; here that batch is a fixed random sample of `normalization_sample`
        (default: `config.eval_batch_size`) sentences of the other side, so that the terms estimate the same
        quantity as in-batch normalization at that batch size, at the cost of n x sample pairs instead of n^2.

        Returns:
            `(scores, indices)`, both `(n_source, k)`, sorted by decreasing score; `indices` are target indices.
        """
        batch_size = batch_size or self.config.eval_batch_size
        source = self._encode_tokens(source_sentences, tokenizer, batch_size)
        target = self._encode_tokens(target_sentences, tokenizer, batch_size)
        return self._rerank_encoded(source, target, candidates, batch_size, normalize, normalization_sample, seed)

    def _rerank_encoded(
        self,
        source: Sequence[Any],
        target: Sequence[Any],
        candidates: torch.Tensor,
        batch_size: int,
        normalize: bool | None,
        normalization_sample: int | None,
        seed: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`rerank` on encodings from `_encode_tokens` (lets the two-stage search encode each sentence once)."""
        candidates = torch.as_tensor(candidates, dtype=torch.long).cpu()
        if candidates.ndim != 2 or candidates.shape[0] != len(source):
            raise OneAlignerInputError(
                f"candidates must be (n_source, k) = ({len(source)}, k), got {tuple(candidates.shape)}."
            )
        if candidates.numel() and (candidates.min() < 0 or candidates.max() >= len(target)):
            raise OneAlignerInputError("candidates hold target indices outside [0, n_target).")
        normalize = self.config.normalization if normalize is None else normalize
        n_source = candidates.shape[0]
        raw = self._candidate_scores(source, target, candidates, batch_size)
        if normalize:
            sample_size = normalization_sample or self.config.eval_batch_size
            generator = torch.Generator().manual_seed(seed)
            target_sample = torch.randperm(len(target), generator=generator)[: min(sample_size, len(target))]
            source_sample = torch.randperm(len(source), generator=generator)[: min(sample_size, len(source))]
            row_means = self._mean_against(source, torch.arange(n_source), target, target_sample, batch_size)
            used_targets = torch.unique(candidates)
            column_means = torch.zeros(len(target))
            column_means[used_targets] = self._mean_against(target, used_targets, source, source_sample, batch_size)
            raw = raw - self.config.alpha * (row_means.unsqueeze(1) + column_means[candidates])
        scores, order = raw.sort(dim=1, descending=True)
        return scores, candidates.gather(1, order)

    def _candidate_scores(
        self, source: Sequence[Any], target: Sequence[Any], candidates: torch.Tensor, batch_size: int
    ) -> torch.Tensor:
        """f of every source i against its candidates `candidates[i]`, `(n_source, k)` float32 on CPU."""
        n_source, k = candidates.shape
        scores = torch.empty((n_source, k), dtype=torch.float32)
        if not n_source or not k:
            return scores
        if self.config.similarity == "mean_pool":
            sources = self._stack(source)[0]
            targets = self._stack(target)[0]
            for start in range(0, n_source, batch_size):
                rows = candidates[start : start + batch_size].to(targets.device)
                block = (sources[start : start + batch_size].unsqueeze(1) * targets[rows]).sum(-1)
                scores[start : start + batch_size] = block.float().cpu()
            return scores
        # Every target is padded and augmented (`_with_mask_columns`) once; each chunk of sources gathers its
        # candidates into one reused buffer. Fresh per-chunk copies cost more than the scoring itself, mostly in page
        # faults of new allocations (63 sources x 64 candidates, one thread: gather 46 ms + augmentation 62 ms
        # against a 16 ms product; into the reused buffer the gather takes 11 ms). 20k x 64 pairs: 18.3 s -> 8.8 s.
        target_vectors, target_weights, _ = self._stack(target)
        # Each source sentence's largest token norm as a 1-d "vector": no copy of every source token is needed.
        source_norms = torch.stack([item[0].norm(dim=-1).amax() for item in source]).unsqueeze(-1)
        penalty = _mask_penalty(source_norms, target_vectors)
        target_augmented = _augment(target_vectors, target_weights, penalty, source=False)
        target_lengths = torch.as_tensor([item[0].shape[0] for item in target])
        full_length, width = target_augmented.shape[1:]
        # Sources sorted by length, a chunk at a time, each padded only to its own longest sentences; a chunk
        # gathers about 2^24 candidate elements.
        order = sorted(range(n_source), key=lambda index: source[index][0].shape[0])
        chunk = max(1, min(n_source, _MAX_SIMILARITY_ELEMENTS // (k * full_length * width)))
        buffer = torch.empty(chunk * k * full_length * width, dtype=target_augmented.dtype, device=self.device)
        for start in range(0, n_source, chunk):
            rows = order[start : start + chunk]
            vectors, weights, _ = self._stack([source[index] for index in rows])
            chosen = candidates[rows]
            length = int(target_lengths[chosen].max())
            flat = chosen.reshape(-1).to(target_augmented.device)
            gathered = buffer[: flat.numel() * length * width].view(flat.numel(), length, width)
            torch.index_select(target_augmented[:, :length], 0, flat, out=gathered)
            values = _bertscore_augmented_candidates(
                _augment(vectors, weights, penalty, source=True),
                weights,
                gathered.view(len(rows), k, length, width),
                target_weights[:, :length][flat].view(len(rows), k, length),
            )
            scores[torch.as_tensor(rows)] = values.float().cpu()
        return scores

    def _mean_against(
        self,
        queries: Sequence[Any],
        query_indices: torch.Tensor,
        others: Sequence[Any],
        other_sample: torch.Tensor,
        batch_size: int,
    ) -> torch.Tensor:
        """Mean f of each selected query sentence against the sampled sentences of the other side."""
        sampled = [others[int(index)] for index in other_sample]
        means = []
        for start in range(0, len(query_indices), batch_size):
            block = [queries[int(index)] for index in query_indices[start : start + batch_size]]
            means.append(self._grouped_similarity(block, sampled).mean(dim=1).cpu())
        return torch.cat(means) if means else torch.empty(0)

    @torch.no_grad()
    def fit_idf(self, sentences: Sequence[str], tokenizer: Any = None) -> torch.Tensor:
        """Set the idf weights from a reference corpus: idf(w) = log((M + 1) / (df(w) + 1)) (BERTScore's)."""
        if self.idf_weights is None:
            raise OneAlignerConfigError("this model was built with use_idf=False: rebuild it with use_idf=True.")
        token_ids = self.tokenize(sentences, tokenizer)
        document_frequency = torch.zeros_like(self.idf_weights, dtype=torch.float64, device="cpu")
        for ids in token_ids:
            document_frequency[torch.as_tensor(sorted(set(ids)), dtype=torch.long)] += 1.0
        idf = torch.log((len(token_ids) + 1.0) / (document_frequency + 1.0))
        self.idf_weights.copy_(idf.to(self.idf_weights.dtype))
        return self.idf_weights


# Saving a model ships both files as remote code (auto_map in config.json).
OneAlignerConfig.register_for_auto_class()
OneAlignerModel.register_for_auto_class("AutoModel")
