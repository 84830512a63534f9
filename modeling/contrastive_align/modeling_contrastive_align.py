"""ContrastiveAlignedEncoder: an mBERT / XLM-R-like encoder trained with explicit word-level alignment objectives.

Wu & Dredze (2020), "Do Explicit Alignments Robustly Improve Multilingual Encoders?", section 2. The inputs are
English sentences (source, S), their translations (target, T) and word alignments between them, each word
represented by its first subword. ``alignments`` is a `(n_links, 3)` int64 tensor of rows
`(example, source token position, target token position)`; ``languages`` gives each example's target language as
an index into ``config.languages``. The objectives (``config.objective``):

* ``linear``: one orthogonal map W per language and hidden state (identity at initialisation, encoder frozen);
  loss = mean over hidden states of mean_i ||s_i - t_i W||^2 (Eq. 1); after every optimizer step call
  ``orthogonalize_()``: W <- (1 + beta) W - beta (W W^T) W (Eq. 2, beta = 0.01).
* ``l2``: mean_i ||s_i - t_i||^2 (Eq. 3) + lambda ||theta - theta_0||^2 (Eq. 5, 6).
* ``weak``: symmetric InfoNCE over the batch's aligned words with sim(a, b) = cos(f(a), f(b)) / T, negatives from
  the other language only (Eq. 7) + the regularizer.
* ``strong``: InfoNCE over the 2n x 2n matrix of all aligned words of both languages, each word's own row left out
  (Eq. 8) + the regularizer.

f = Linear(d, d) -> ReLU -> Linear(d, 128), no biases; T = 0.1. f is dropped after training: the export is the
inner encoder (``model.encoder``, a plain transformers model). For ``linear`` the maps stay outside the encoder
(they are per language, so they cannot be folded into shared weights): ``linear_map(language)`` returns the last
hidden state's W, which a sentence-transformers export applies as a bias-free Dense layer after mean pooling
(mean pooling commutes with a linear map).

Text in, vectors out: ``encode(texts, tokenizer=None, language=None)`` mean-pools hidden state ``config.layer``
(L2-normalized; for ``linear`` with a ``language``, mapped by its W), the vectors of the sentence-transformers export;
``save_pretrained(dir, tokenizer=...)`` writes the tokenizer beside the weights so that a checkpoint encodes text by
itself. ``token_states`` gives the hidden states of a padded batch.

theta_0 is a snapshot of the encoder's trainable parameters, taken at the first forward that needs the regularizer
(before the first optimizer step) or by ``reset_reference()``. It belongs to the training run, not to the model: it is
not in the model's weights, and a run that resumes from a checkpoint must set it back with
``reset_reference(saved)`` (``regularization_reference()`` gives it to save), or the regularizer would start again at
zero from the checkpoint's weights; the align_contrastive recipe saves it in each checkpoint folder.

This file holds the model (its output, its classes, loading and saving); the objectives' equations themselves (the
losses, Eq. 2's step, the regularizer, mean pooling) are pure tensor functions in ``functional_contrastive_align``,
re-exported here. This file imports only torch, transformers and, relatively, its two siblings
(``configuration_contrastive_align`` and ``functional_contrastive_align``), so that ``save_pretrained`` ships all three
as hub remote code (``AutoModel.from_pretrained(path)`` with ``trust_remote_code`` enabled works without bitext_hf
installed).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer, PretrainedConfig, PreTrainedModel
from transformers.models.auto.tokenization_auto import get_tokenizer_config
from transformers.utils import ModelOutput

from .configuration_contrastive_align import ContrastiveAlignConfig, ContrastiveAlignConfigError

# Relative, so that transformers' remote-code saving (which follows relative imports) ships the file with this one.
from .functional_contrastive_align import (
    ContrastiveAlignInputError,
    l2_alignment_loss,
    linear_mapping_loss,
    mean_pool,
    orthogonalize_,
    parameter_regularization,
    strong_contrastive_loss,
    weak_contrastive_loss,
)

__all__ = [
    "ContrastiveAlignInputError",
    "ContrastiveAlignOutput",
    "ContrastiveAlignPreTrainedModel",
    "ContrastiveAlignedEncoder",
    "l2_alignment_loss",
    "linear_mapping_loss",
    "mean_pool",
    "orthogonalize_",
    "parameter_regularization",
    "strong_contrastive_loss",
    "weak_contrastive_loss",
]


@dataclass
class ContrastiveAlignOutput(ModelOutput):
    """Output of [`ContrastiveAlignedEncoder.forward`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*): alignment loss + lambda * regularizer, when
            `alignments` are given.
        alignment_loss (`torch.FloatTensor`, *optional*): the objective's term alone.
        regularization_loss (`torch.FloatTensor`, *optional*): ||theta - theta_0||^2 (unweighted), when it applies.
        last_hidden_state (`torch.FloatTensor` of shape `(batch, length, hidden)`): hidden state `config.layer` of
            the (source) input; first after the loss so that sentence-transformers finds the token vectors.
        target_last_hidden_state (`torch.FloatTensor`, *optional*): the same for the target input.
        hidden_states (`tuple[torch.FloatTensor]`, *optional*): the encoder's hidden states of the (source) input, the
            embedding output first, when `output_hidden_states=True` (not mapped by a `linear` W).
        attentions (`tuple[torch.FloatTensor]`, *optional*): the encoder's attention probabilities of the (source)
            input, one `(batch, heads, length, length)` per layer, when `output_attentions=True` (and the encoder's
            attention implementation computes them, e.g. `attn_implementation="eager"`).
    """

    loss: torch.FloatTensor | None = None
    alignment_loss: torch.FloatTensor | None = None
    regularization_loss: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    target_last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


class ContrastiveAlignPreTrainedModel(PreTrainedModel):
    """Weights initialization shared by the alignment models."""

    config_class = ContrastiveAlignConfig
    base_model_prefix = "contrastive_align"
    supports_gradient_checkpointing = True
    _supports_sdpa = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # Linear layers (the projector) ~ normal(0, initializer_range) as transformers does for every model.
        super()._init_weights(module)
        if isinstance(module, LinearMaps):
            module.weight.copy_(torch.eye(module.weight.shape[-1]).expand_as(module.weight))


class LinearMaps(nn.Module):
    """`weight` `(languages, hidden states, d, d)`: the linear objective's maps, identity at initialisation."""

    def __init__(self, languages: int, states: int, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.eye(hidden).repeat(languages, states, 1, 1))


class ContrastiveAlignedEncoder(ContrastiveAlignPreTrainedModel):
    """The wrapped encoder, the projector (`weak`, `strong`) or the linear maps (`linear`); see the module docstring.

    Build one with [`ContrastiveAlignedEncoder.from_encoder`]; reload with `from_pretrained` / `AutoModel`.
    """

    def __init__(self, config: ContrastiveAlignConfig, encoder: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if encoder is None:
            encoder = AutoModel.from_config(config.encoder_config)
        if getattr(encoder, "pooler", None) is not None:
            encoder.pooler = None  # after the last layer and never trained here: no gradient-less parameters
        self.encoder = encoder
        self.config.encoder_config = encoder.config
        hidden = config.hidden_size
        self.projector: nn.Module | None = None
        self.linear_maps: LinearMaps | None = None
        if config.objective in ("weak", "strong"):
            self.projector = nn.Sequential(
                nn.Linear(hidden, hidden, bias=False), nn.ReLU(), nn.Linear(hidden, config.projection_dim, bias=False)
            )
        elif config.objective == "linear":
            if not config.languages:
                raise ContrastiveAlignConfigError(
                    "objective='linear' keeps one map per target language: set languages=[...] in the config."
                )
            states = int(config.encoder_config.num_hidden_layers) + 1
            self.linear_maps = LinearMaps(len(config.languages), states, hidden)
            self.encoder.requires_grad_(False)  # the paper's feature-based setting: only W trains
        self._reference: dict[str, torch.Tensor] | None = None
        # The tokenizer encode used last (given or loaded from the checkpoint): not a module, not in the weights.
        self._tokenizer: Any = None
        self.post_init()

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.get_input_embeddings
    def get_input_embeddings(self) -> nn.Module:
        """The encoder's token embeddings (what `resize_token_embeddings` and PEFT work on)."""
        return self.encoder.get_input_embeddings()

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.set_input_embeddings
    def set_input_embeddings(self, value: nn.Module) -> None:
        self.encoder.set_input_embeddings(value)

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """`PreTrainedModel.resize_token_embeddings`: the encoder's embeddings; its config, the one `get_text_config`
        returns, follows."""
        return super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)

    @classmethod
    def from_encoder(
        cls, name_or_path_or_config: str | PretrainedConfig | PreTrainedModel, **config_kwargs: object
    ) -> ContrastiveAlignedEncoder:
        """Wrap an encoder: a local path / hub id (pretrained weights), an encoder config (random init) or a model.

        `config_kwargs` are the other [`ContrastiveAlignConfig`] fields (objective, languages, ...).
        """
        encoder_config = _encoder_config(name_or_path_or_config)
        if isinstance(name_or_path_or_config, PreTrainedModel):
            encoder = name_or_path_or_config
        elif isinstance(name_or_path_or_config, str):
            encoder = AutoModel.from_pretrained(name_or_path_or_config)
        else:
            encoder = AutoModel.from_config(encoder_config)
        return cls(ContrastiveAlignConfig(encoder_config=encoder.config, **config_kwargs), encoder=encoder)

    # -- pieces ---------------------------------------------------------------------------------------------------

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.token_states
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

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._encode
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

    def linear_map(self, language: str | int, state: int | None = None) -> torch.Tensor:
        """The `linear` objective's W `(d, d)` of a language (name or index) for hidden state `state` (default
        `config.layer`); apply it as `t @ W` to that language's vectors."""
        if self.linear_maps is None:
            raise ContrastiveAlignConfigError(f"objective={self.config.objective!r} has no linear maps.")
        index = self.config.languages.index(language) if isinstance(language, str) else int(language)
        return self.linear_maps.weight[index, self.config.layer if state is None else state]

    @torch.no_grad()
    def orthogonalize_(self) -> None:
        """Eq. 2 on every linear map (call after each optimizer step of the `linear` objective)."""
        if self.linear_maps is not None:
            orthogonalize_(self.linear_maps.weight, float(self.config.orthogonal_beta))

    def _regularized_parameters(self) -> dict[str, torch.Tensor]:
        return {name: parameter for name, parameter in self.encoder.named_parameters() if parameter.requires_grad}

    @torch.no_grad()
    def reset_reference(self, reference: dict[str, torch.Tensor] | None = None) -> None:
        """Take theta_0 now, or set it to `reference` (a saved theta_0 of the same trainable parameters, e.g. from
        the checkpoint a run resumes from): the regularizer measures the encoder's distance from there."""
        parameters = self._regularized_parameters()
        reference = {name: value.detach() for name, value in (parameters if reference is None else reference).items()}
        wrong = [
            name for name in parameters if name not in reference or reference[name].shape != parameters[name].shape
        ]
        if wrong or len(reference) != len(parameters):
            name = wrong[0] if wrong else sorted(set(reference) - set(parameters))[0]
            raise ContrastiveAlignInputError(f"theta_0 does not match the trainable parameters (first: {name!r}).")
        self._reference = {
            name: reference[name].to(value.device, value.dtype, copy=True) for name, value in parameters.items()
        }

    def regularization_reference(self) -> dict[str, torch.Tensor]:
        """theta_0 by parameter name (taken now if no forward has needed it yet): what a checkpoint must carry."""
        if self._reference is None:
            self.reset_reference()
        return self._reference

    def regularization(self) -> torch.Tensor:
        """||theta - theta_0||^2 over the encoder's trainable parameters (zero until they move from theta_0)."""
        return parameter_regularization(self._regularized_parameters(), self.regularization_reference())

    def _check_links(self, alignments: torch.Tensor, source_mask: torch.Tensor, target_mask: torch.Tensor) -> None:
        if alignments.ndim != 2 or alignments.shape[1] != 3:
            raise ContrastiveAlignInputError(
                f"alignments must be (n_links, 3) rows of (example, source position, target position), got "
                f"{tuple(alignments.shape)}."
            )
        if alignments.numel() == 0:
            return
        examples = alignments[:, 0]
        if examples.min() < 0 or examples.max() >= source_mask.shape[0]:
            raise ContrastiveAlignInputError(
                f"an alignment names an example outside the batch of {source_mask.shape[0]}."
            )
        for column, mask, side in ((1, source_mask, "source"), (2, target_mask, "target")):
            lengths = mask.sum(1)[examples]
            outside = (alignments[:, column] < 0) | (alignments[:, column] >= lengths)
            if outside.any():
                row = int(outside.nonzero()[0, 0])
                raise ContrastiveAlignInputError(
                    f"alignment {alignments[row].tolist()} points outside the {side} sentence "
                    f"({int(lengths[row])} tokens)."
                )

    def _alignment_loss(
        self,
        source: torch.Tensor,
        target_input_ids: torch.Tensor,
        target_attention_mask: torch.Tensor,
        target_token_type_ids: torch.Tensor | None,
        alignments: torch.Tensor,
        languages: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The objective's loss from the source batch's states (every hidden state, stacked, for `linear`; hidden
        state `config.layer` otherwise) and the target batch, with the source and target states at `config.layer`."""
        examples, source_positions, target_positions = alignments.unbind(1)
        objective = self.config.objective
        if objective == "linear":
            source_all = source
            with torch.no_grad():  # the encoder is frozen: no graph through it
                target_all = self.token_states(
                    target_input_ids, target_attention_mask, all_states=True, token_type_ids=target_token_type_ids
                )
            source_links = source_all[:, examples, source_positions]
            target_links = target_all[:, examples, target_positions]
            link_languages = languages[examples]
            total = source_links.new_zeros(())
            for language in link_languages.unique():  # one (states, d, d) map per language present
                chosen = link_languages == language
                count = chosen.sum()
                loss = linear_mapping_loss(
                    source_links[:, chosen], target_links[:, chosen], self.linear_maps.weight[language]
                )
                total = total + loss * count
            loss = total / max(1, examples.numel())
            if examples.numel() == 0:
                loss = self.linear_maps.weight.sum() * 0.0  # keeps the graph (and the Trainer) happy
            return loss, source_all[self.config.layer], target_all[self.config.layer]
        source_states = source
        target_states = self.token_states(
            target_input_ids, target_attention_mask, token_type_ids=target_token_type_ids
        )
        source_links = source_states[examples, source_positions]
        target_links = target_states[examples, target_positions]
        if examples.numel() == 0:
            loss = (source_states.sum() + target_states.sum()) * 0.0
        elif objective == "l2":
            loss = l2_alignment_loss(source_links, target_links)
        else:
            loss = self.contrastive_link_loss(source_links, target_links)
        return loss, source_states, target_states

    def contrastive_link_loss(self, source_links: torch.Tensor, target_links: torch.Tensor) -> torch.Tensor:
        """The `weak` or `strong` objective on the states of linked tokens `(n_links, hidden)`, row i of each side
        aligned: public so that a training loop can score the links of every process's batch at once (the global
        batch's negatives)."""
        if self.projector is None:
            raise ContrastiveAlignConfigError(f"objective={self.config.objective!r} has no contrastive loss.")
        temperature = float(self.config.contrastive_temperature)
        loss_fn = weak_contrastive_loss if self.config.objective == "weak" else strong_contrastive_loss
        return loss_fn(self.projector(source_links), self.projector(target_links), temperature)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        target_input_ids: torch.Tensor | None = None,
        target_attention_mask: torch.Tensor | None = None,
        alignments: torch.Tensor | None = None,
        languages: torch.Tensor | None = None,
        return_dict: bool | None = None,
        token_type_ids: torch.Tensor | None = None,
        target_token_type_ids: torch.Tensor | None = None,
        output_hidden_states: bool | list[int] | None = None,
        output_attentions: bool | None = None,
        **kwargs: object,
    ) -> ContrastiveAlignOutput | tuple:
        """Encode, and with `target_input_ids` + `alignments` compute the objective's loss.

        Args:
            input_ids: token ids of the English (source) batch `(batch, length)`.
            attention_mask: attention mask of the source batch `(batch, length)`.
            target_input_ids: token ids of the translations, row i aligned with row i.
            target_attention_mask: attention mask of the translations.
            alignments: `(n_links, 3)` rows (example, source position, target position); positions index tokens
                (first subwords) of the padded batches.
            languages: `(batch,)` index into `config.languages` of each target sentence (needed by `linear`).
                Without a target batch, the inputs themselves are in these languages and, for `linear`, the
                returned states are mapped by their W (index -1: English, no map).
            token_type_ids: source segment ids for encoders that have them (BERT's tokenizers return them),
                passed to the encoder.
            target_token_type_ids: the same for the translations.
            output_hidden_states: also return the encoder's hidden states of the (source) input (default: the
                config's); may list the indices to keep.
            output_attentions: also return the encoder's attention maps of the (source) input (default: the
                config's).
            kwargs: ignored (what a Trainer or a tokenizer adds beyond these).
        """
        if input_ids is None:
            raise ContrastiveAlignInputError("forward needs input_ids.")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        return_dict = self.config.return_dict if return_dict is None else return_dict
        asked = {
            "output_hidden_states": self.config.output_hidden_states
            if output_hidden_states is None
            else output_hidden_states,
            "output_attentions": bool(
                self.config.output_attentions if output_attentions is None else output_attentions
            ),
        }
        fields: dict[str, torch.Tensor | None] = {}
        if alignments is not None:
            if target_input_ids is None:
                raise ContrastiveAlignInputError("alignments need target_input_ids (the aligned translations).")
            if target_attention_mask is None:
                target_attention_mask = torch.ones_like(target_input_ids)
            self._check_links(alignments, attention_mask, target_attention_mask)
            linear = self.config.objective == "linear"
            if linear and languages is None:
                raise ContrastiveAlignInputError("objective='linear' needs `languages` (each example's language).")
            with torch.no_grad() if linear else contextlib.nullcontext():  # linear: the encoder is frozen
                source, hidden_states, attentions = self._encode(
                    input_ids, attention_mask, token_type_ids, all_states=linear, **asked
                )
            alignment_loss, states, target_states = self._alignment_loss(
                source, target_input_ids, target_attention_mask, target_token_type_ids, alignments, languages
            )
            loss = alignment_loss
            weight = float(self.config.regularization_weight)
            if self.config.objective != "linear" and weight > 0:
                regularization = self.regularization()
                loss = loss + weight * regularization
                fields["regularization_loss"] = regularization
            fields.update(loss=loss, alignment_loss=alignment_loss, target_last_hidden_state=target_states)
        else:
            states, hidden_states, attentions = self._encode(input_ids, attention_mask, token_type_ids, **asked)
            if target_input_ids is not None:
                if target_attention_mask is None:
                    target_attention_mask = torch.ones_like(target_input_ids)
                fields["target_last_hidden_state"] = self.token_states(
                    target_input_ids, target_attention_mask, token_type_ids=target_token_type_ids
                )
            elif languages is not None and self.linear_maps is not None:
                states = self._map_languages(states, languages)
        fields.update(hidden_states=hidden_states, attentions=attentions)
        output = ContrastiveAlignOutput(last_hidden_state=states, **fields)
        return output if return_dict else output.to_tuple()

    # -- text level (what a checkpoint needs to turn text into vectors without bitext_hf) ---------------------

    def encode(
        self,
        sentences: Sequence[str],
        tokenizer: Any = None,
        *,
        language: str | None = None,
        batch_size: int = 64,
        normalize: bool = True,
    ) -> torch.Tensor:
        """Mean-pooled sentence vectors of hidden state `config.layer`, `(n, hidden)`, float32, L2-normalized by
        default: the vectors of the sentence-transformers export.

        Args:
            sentences: the texts, truncated to `max_tokens` tokens.
            tokenizer: the encoder's tokenizer; by default the one given before, else the one saved beside the
                weights (loaded once from the checkpoint folder or hub id).
            language: for `linear`, the texts' language (one of `config.languages`): its W maps them into the
                English space; None (English, or another objective) applies nothing.
            batch_size: sentences per forward pass (sorted by length, so that padding costs little).
            normalize: L2-normalize the rows (cosine = dot product).
        """
        target_map = self.linear_map(language).detach().float() if language is not None else None
        return self._encode_texts(sentences, tokenizer, batch_size, normalize, target_map=target_map)

    def _embed_batch(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, target_map: torch.Tensor | None = None
    ) -> torch.Tensor:
        """`encode`'s vectors of one padded batch, before normalization: the mean of hidden state `config.layer`,
        times `target_map` when given (mean pooling commutes with the linear map)."""
        pooled = mean_pool(self.token_states(input_ids, attention_mask), attention_mask).float()
        return pooled if target_map is None else pooled @ target_map.to(pooled.device)

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

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel.max_tokens
    @property
    def max_tokens(self) -> int:
        """Tokens per sentence, special tokens included, that `encode` keeps: `config.max_seq_length`, never more
        than the encoder's position table numbers (longer inputs would index past it)."""
        capacity = _position_capacity(self.encoder)
        return self.config.max_seq_length if capacity is None else min(self.config.max_seq_length, capacity)

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

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._resolve_tokenizer with OneAligner->ContrastiveAlign
    def _resolve_tokenizer(self, tokenizer: Any) -> Any:
        """`tokenizer` (kept for the next call), else the one kept, else the one saved beside the weights, loaded
        without running code shipped with it unless `trust_remote_code` allows it."""
        if tokenizer is not None:
            self._tokenizer = tokenizer
        if self._tokenizer is None:
            if not self.name_or_path:
                raise ContrastiveAlignInputError(
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
                raise ContrastiveAlignInputError(
                    f"no tokenizer beside the weights in {self.name_or_path!r} ({error.__class__.__name__}): pass "
                    "encode(..., tokenizer=...)"
                ) from error
            if self._tokenizer is None:
                raise ContrastiveAlignInputError(_untrusted_tokenizer_message(self.name_or_path, code))
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

    def _map_languages(self, states: torch.Tensor, languages: torch.Tensor) -> torch.Tensor:
        """Each row's states times its language's W at `config.layer` (rows with index -1 stay as they are)."""
        maps = self.linear_maps.weight[:, self.config.layer]
        mapped = states.clone()
        for language in languages.unique():
            if int(language) >= 0:
                rows = languages == language
                mapped[rows] = states[rows] @ maps[language]
        return mapped


# Copied from modeling.onealigner.modeling_onealigner._encoder_config with OneAligner->ContrastiveAlign
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
            raise ContrastiveAlignInputError(
                f"cannot load the encoder {name_or_path_or_config!r} ({error.__class__.__name__}): pass a local "
                "folder with config.json and weights, or an encoder config for a random initialization"
            ) from error
    raise ContrastiveAlignInputError(
        "from_encoder expects a path, a hub id, a PretrainedConfig or a PreTrainedModel, got "
        f"{type(name_or_path_or_config).__name__}"
    )


# Copied from modeling.onealigner.modeling_onealigner._position_capacity
def _position_capacity(encoder: nn.Module) -> int | None:
    """How many tokens the encoder's learned absolute position table numbers, or None without one (relative or
    rotary positions). RoBERTa-style encoders (XLM-R) count positions from padding_idx + 1, the table's own
    `padding_idx`, so the rows up to it are never a token's."""
    table = getattr(getattr(encoder, "embeddings", None), "position_embeddings", None)
    if not isinstance(table, nn.Embedding):
        return None
    return table.num_embeddings - (0 if table.padding_idx is None else table.padding_idx + 1)


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


# Saving a model ships the three files as remote code (auto_map in config.json; the relative imports follow).
ContrastiveAlignConfig.register_for_auto_class()
ContrastiveAlignedEncoder.register_for_auto_class("AutoModel")
