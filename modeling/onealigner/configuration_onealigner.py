"""Configuration of OneAligner (BERTScore similarity + in-batch normalization over an XLM-R-like encoder).

This file imports only transformers, so that ``save_pretrained`` can ship it as hub remote code.

Choices where the paper is silent or ambiguous (all are fields below):

* ``layer`` counts the embedding output as hidden state 0 (paper: 8 for base, 17 for large).
* ``softmax_temperature`` (the paper's temperature) divides the normalized scores before the softmax
  (logits = S / softmax_temperature): training scores are raw dot products of hidden states, in the hundreds for
  XLM-R, so dividing is the reading that gives trainable logits.
* ``exclude_token_ids`` defaults to the encoder's BOS/CLS and EOS/SEP ids; padding is always excluded through the
  attention mask.
* In-batch normalization subtracts ``alpha`` times the *means* (the paper writes sums; its footnote's
  ``(2 alpha - 1) / MN`` term only keeps S around 0 with means) of the row and the column of f.
* The ``(2 alpha - 1)`` grand-mean term is added in training only: the paper states it does not affect evaluation,
  and at evaluation time it would shift whole blocks against each other. In training it cannot change the loss or
  its gradients either: it adds one number to every logit of the batch, and both losses (global and row-wise) are
  softmaxes over logits of one batch, which a shared shift leaves unchanged. It is kept for fidelity to the paper.
"""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig

__all__ = ["ONEALIGNER_ENCODER_TYPES", "PAPER_LAYERS", "OneAlignerConfig", "OneAlignerConfigError"]

# The hidden state the paper compares for its two encoders (counting the embedding output as 0), by encoder depth.
PAPER_LAYERS = {12: 8, 24: 17}

# Encoders whose token states OneAligner can use: bidirectional, BERT/RoBERTa-style masked-LM encoders.
ONEALIGNER_ENCODER_TYPES: tuple[str, ...] = (
    "xlm-roberta",
    "xlm-roberta-xl",
    "roberta",
    "roberta-prelayernorm",
    "camembert",
    "bert",
    "distilbert",
    "electra",
    "deberta",
    "deberta-v2",
    "rembert",
    "mpnet",
    "modernbert",
    "xmod",
)

_SIMILARITIES = ("bertscore", "mean_pool")
_LOSSES = ("global", "row")


class OneAlignerConfigError(ValueError):
    """A value of the OneAligner configuration is invalid."""


class OneAlignerConfig(PretrainedConfig):
    r"""Configuration of a [`OneAlignerModel`].

    Args:
        encoder_config (`dict` or `PretrainedConfig`, *optional*):
            Configuration of the wrapped XLM-R-like encoder; defaults to a 2-layer, 32-wide XLM-R config (a
            placeholder: real models come from `OneAlignerModel.from_encoder`).
        layer (`int`, *optional*):
            Hidden state whose token vectors are compared; 0 is the embedding output, `num_hidden_layers` the last.
            Defaults to the paper's layer for its two depths (8 of 12 for base, 17 of 24 for large), else
            round(2/3 * num_hidden_layers) of the encoder, so that
            `OneAlignerConfig()` is valid (transformers 4.x instantiates it without arguments while loading).
        similarity (`str`, defaults to `"bertscore"`):
            `"bertscore"` (token-level F of the paper) or `"mean_pool"` (cosine/dot of mean-pooled vectors, the
            paper's Table 1 baseline).
        normalization (`bool`, defaults to `True`):
            In-batch normalization against the popular-sentence effect.
        alpha (`float`, defaults to 0.75):
            Normalization strength: S_ij = f_ij - alpha * (mean_n f_in + mean_m f_mj).
        add_mean_term (`bool`, defaults to `True`):
            In training, add back (2 alpha - 1) * mean(f) (paper footnote 3); a shift shared by every logit of
            the batch, so it leaves both losses and their gradients unchanged.
        softmax_temperature (`float`, defaults to 5.0):
            Logits are S / softmax_temperature (named so because `temperature` and `max_length` are generation
            parameters that transformers refuses in a model config).
        loss_type (`str`, defaults to `"global"`):
            `"global"`: every positive competes with all N^2 - N negatives of the batch; `"row"`: row-wise InfoNCE
            (each source against the N targets of the batch).
        use_idf (`bool`, defaults to `False`):
            Weight tokens by idf in BERTScore; the weights are a buffer filled by `OneAlignerModel.fit_idf`.
        exclude_token_ids (`list[int]`, *optional*):
            Token ids left out of BERTScore (and of nothing else); defaults to the encoder's BOS and EOS ids.
        cosine_in_training (`bool`, defaults to `False`):
            Paper 3.3: training uses raw dot products of token vectors.
        cosine_in_evaluation (`bool`, defaults to `True`):
            Paper 3.3: evaluation uses cosine (token vectors L2-normalized).
        max_seq_length (`int`, defaults to 100):
            Maximum tokens per sentence in the text-level helpers; longer inputs are truncated with one warning.
        eval_batch_size (`int`, defaults to 256):
            Block size of the in-batch normalization at evaluation time.
        pooled_loss_weight (`float`, defaults to 0.0):
            Not in the paper: weight of an extra symmetric InfoNCE loss on the cosine of the mean-pooled layer-L
            vectors, which trains the first stage of two-stage retrieval (and the sentence-transformers export)
            along with BERTScore. 0 reproduces the paper's objective.
        pooled_loss_temperature (`float`, defaults to 0.05):
            Temperature of that extra loss (logits = cosine / temperature).
    """

    model_type = "onealigner"
    # The nested encoder config is a config of its own (dtype and attention settings reach it, 4.x diffs it).
    sub_configs = {"encoder_config": AutoConfig}  # noqa: RUF012  (the transformers class attribute)

    def __init__(
        self,
        encoder_config: dict[str, Any] | PretrainedConfig | None = None,
        layer: int | None = None,
        similarity: str = "bertscore",
        normalization: bool = True,
        alpha: float = 0.75,
        add_mean_term: bool = True,
        softmax_temperature: float = 5.0,
        loss_type: str = "global",
        use_idf: bool = False,
        exclude_token_ids: list[int] | None = None,
        cosine_in_training: bool = False,
        cosine_in_evaluation: bool = True,
        max_seq_length: int = 100,
        eval_batch_size: int = 256,
        pooled_loss_weight: float = 0.0,
        pooled_loss_temperature: float = 0.05,
        **kwargs: Any,
    ) -> None:
        self.encoder_config = _build_encoder_config(encoder_config)
        if layer is None:  # the same default as OneAlignerModel.from_encoder
            depth = int(self.encoder_config.num_hidden_layers)
            layer = PAPER_LAYERS.get(depth, max(1, round(2 * depth / 3)))
        self.layer = layer
        self.similarity = similarity
        self.normalization = normalization
        self.alpha = alpha
        self.add_mean_term = add_mean_term
        self.softmax_temperature = softmax_temperature
        self.loss_type = loss_type
        self.use_idf = use_idf
        if exclude_token_ids is None:
            exclude_token_ids = sorted(
                {
                    token_id
                    for token_id in (
                        getattr(self.encoder_config, "bos_token_id", None),
                        getattr(self.encoder_config, "eos_token_id", None),
                    )
                    if isinstance(token_id, int)
                }
            )
        self.exclude_token_ids = [int(token_id) for token_id in exclude_token_ids]
        self.cosine_in_training = cosine_in_training
        self.cosine_in_evaluation = cosine_in_evaluation
        self.max_seq_length = max_seq_length
        self.eval_batch_size = eval_batch_size
        self.pooled_loss_weight = pooled_loss_weight
        self.pooled_loss_temperature = pooled_loss_temperature
        # PretrainedConfig.__init__ sets the attention implementation on every sub-config, None when not asked for;
        # the encoder config may be the one of an already-built encoder (from_encoder), whose choice must survive.
        encoder_attention = getattr(self.encoder_config, "_attn_implementation_internal", None)
        asked = kwargs.get("attn_implementation") is not None
        super().__init__(**kwargs)
        if not asked and encoder_attention is not None:
            self.encoder_config._attn_implementation_internal = encoder_attention
        self._validate()

    def _validate(self) -> None:
        num_layers = self.encoder_config.num_hidden_layers
        if not isinstance(self.layer, int) or not 0 <= self.layer <= num_layers:
            raise OneAlignerConfigError(
                f"layer={self.layer!r} is out of range: the encoder has hidden states 0 (embeddings) to "
                f"{num_layers}; pick one in that range (paper: 8 of 12 for base, 17 of 24 for large)."
            )
        if self.similarity not in _SIMILARITIES:
            raise OneAlignerConfigError(f"similarity={self.similarity!r}: expected one of {_SIMILARITIES}.")
        if self.loss_type not in _LOSSES:
            raise OneAlignerConfigError(f"loss_type={self.loss_type!r}: expected one of {_LOSSES}.")
        if not 0.0 <= float(self.alpha) <= 1.0:
            raise OneAlignerConfigError(f"alpha={self.alpha!r}: expected a value in [0, 1] (paper: 0.75).")
        if not float(self.softmax_temperature) > 0.0:
            raise OneAlignerConfigError(
                f"softmax_temperature={self.softmax_temperature!r}: expected a positive number (paper: 5.0)."
            )
        if not isinstance(self.max_seq_length, int) or self.max_seq_length < 2:
            raise OneAlignerConfigError(
                f"max_seq_length={self.max_seq_length!r}: expected an integer >= 2 (paper: 100)."
            )
        max_positions = getattr(self.encoder_config, "max_position_embeddings", None)
        if isinstance(max_positions, int) and self.max_seq_length > max_positions:
            raise OneAlignerConfigError(
                f"max_seq_length={self.max_seq_length} exceeds the encoder's max_position_embeddings={max_positions}."
            )
        if not isinstance(self.eval_batch_size, int) or self.eval_batch_size < 1:
            raise OneAlignerConfigError(f"eval_batch_size={self.eval_batch_size!r}: expected a positive integer.")
        if float(self.pooled_loss_weight) < 0.0:
            raise OneAlignerConfigError(f"pooled_loss_weight={self.pooled_loss_weight!r}: expected a value >= 0.")
        if not float(self.pooled_loss_temperature) > 0.0:
            raise OneAlignerConfigError(
                f"pooled_loss_temperature={self.pooled_loss_temperature!r}: expected a positive number."
            )

    @property
    def hidden_size(self) -> int:
        """Width of the encoder's hidden states."""
        return int(self.encoder_config.hidden_size)

    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding that the model's `encode` returns (the hidden size)."""
        return self.hidden_size

    def get_text_config(self, decoder: bool | None = None, encoder: bool | None = None) -> PretrainedConfig:
        """The wrapped encoder's config: it holds the vocabulary and the layers that read the text.

        transformers looks for a text sub-config under its own names (`text_config`, `decoder`, ...), not under
        `encoder_config`, and would return this wrapper, which has no `vocab_size` (resizing embeddings, generation
        and the common model tests read it from here). There is no decoder, so both ends are the encoder.
        """
        del decoder, encoder
        return self.encoder_config


def _build_encoder_config(encoder_config: dict[str, Any] | PretrainedConfig | None) -> PretrainedConfig:
    """Turn a config, a config dict or None into an encoder config, refusing encoders that are not XLM-R-like."""
    if encoder_config is None:
        encoder_config = {
            "model_type": "xlm-roberta",
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "vocab_size": 1000,
        }
    if isinstance(encoder_config, dict):
        encoder_config = dict(encoder_config)
        model_type = encoder_config.pop("model_type", None)
        if model_type is None:
            raise OneAlignerConfigError("encoder_config has no 'model_type': pass e.g. {'model_type': 'xlm-roberta'}.")
        encoder_config.pop("transformers_version", None)
        _check_encoder_type(model_type)
        encoder_config = AutoConfig.for_model(model_type, **encoder_config)
    elif isinstance(encoder_config, PretrainedConfig):
        _check_encoder_type(getattr(encoder_config, "model_type", ""))
    else:
        raise OneAlignerConfigError(
            f"encoder_config must be a dict or a PretrainedConfig, got {type(encoder_config).__name__}."
        )
    if getattr(encoder_config, "is_encoder_decoder", False) or getattr(encoder_config, "is_decoder", False):
        raise OneAlignerConfigError(
            f"encoder {encoder_config.model_type!r} is configured as a decoder: OneAligner needs a bidirectional "
            "encoder such as XLM-R."
        )
    return encoder_config


def _check_encoder_type(model_type: str) -> None:
    if model_type not in ONEALIGNER_ENCODER_TYPES:
        raise OneAlignerConfigError(
            f"encoder model_type {model_type!r} is not XLM-R-like: OneAligner wraps a bidirectional masked-LM "
            f"encoder, one of {', '.join(ONEALIGNER_ENCODER_TYPES)}."
        )
