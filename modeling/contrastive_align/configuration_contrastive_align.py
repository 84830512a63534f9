"""Configuration of the ContrastiveAlignedEncoder (explicit word-level alignment objectives, Wu & Dredze 2020).

This file imports only transformers, so that ``save_pretrained`` can ship it as hub remote code.

Choices where the paper is silent (all are fields below):

* ``layer`` (the hidden state the ``l2`` / ``weak`` / ``strong`` objectives align) defaults to the last one (the
  paper: "S and T come from the final layer"); 0 is the embedding output.
* ``linear`` learns one map per language and per hidden state 0..L (the paper: "different W^l for each target
  language"); its loss is the mean over those hidden states of the mean squared distance ``||s - t W||^2``.
* The parameter regularizer ``||theta - theta_0||^2`` is a plain sum of squares over the encoder's trainable
  parameters (not the projector's: it is new, it has no pretrained value to stay close to).
"""

from __future__ import annotations

from typing import Any

from transformers import AutoConfig, PretrainedConfig

__all__ = ["CONTRASTIVE_ALIGN_OBJECTIVES", "ContrastiveAlignConfig", "ContrastiveAlignConfigError"]

CONTRASTIVE_ALIGN_OBJECTIVES: tuple[str, ...] = ("linear", "l2", "weak", "strong")


# Copied from modeling.onealigner.configuration_onealigner.OneAlignerConfigError with OneAligner->ContrastiveAlign
class ContrastiveAlignConfigError(ValueError):
    """A value of the ContrastiveAlign configuration is invalid."""


class ContrastiveAlignConfig(PretrainedConfig):
    r"""Configuration of a [`ContrastiveAlignedEncoder`].

    Args:
        encoder_config (`dict` or `PretrainedConfig`, *optional*):
            The wrapped mBERT / XLM-R-like encoder; defaults to a 2-layer, 32-wide BERT config (a placeholder so that
            `ContrastiveAlignConfig()` works: real models come from `ContrastiveAlignedEncoder.from_encoder`).
        objective (`str`, defaults to `"strong"`):
            `"linear"` (orthogonal map per language and layer, encoder frozen), `"l2"` (mean squared distance of
            aligned words), `"weak"` or `"strong"` (contrastive, learned projector).
        layer (`int`, *optional*):
            Hidden state aligned by `l2` / `weak` / `strong` (0 = embeddings); defaults to the last.
        languages (`list[str]`, defaults to `[]`):
            The non-English languages, in the order of the `languages` index passed to `forward`; `linear` keeps one
            map per entry.
        projection_dim (`int`, defaults to 128):
            Output width of the projector f = Linear(d, d) -> ReLU -> Linear(d, projection_dim), no biases.
        contrastive_temperature (`float`, defaults to 0.1):
            T in cos(f(a), f(b)) / T (named so because `temperature` is a generation parameter in transformers).
        regularization_weight (`float`, defaults to 1.0):
            lambda of lambda * ||theta - theta_0||^2 for `l2`, `weak` and `strong` (0 turns it off, e.g. with LoRA).
        orthogonal_beta (`float`, defaults to 0.01):
            beta of W <- (1 + beta) W - beta (W W^T) W, applied after each optimizer step of `linear`.
        max_seq_length (`int`, defaults to 96):
            Tokens per sentence in `encode` (paper: 96).
    """

    model_type = "contrastive_align"
    sub_configs = {"encoder_config": AutoConfig}  # noqa: RUF012  (the transformers class attribute)

    def __init__(
        self,
        encoder_config: dict[str, Any] | PretrainedConfig | None = None,
        objective: str = "strong",
        layer: int | None = None,
        languages: list[str] | None = None,
        projection_dim: int = 128,
        contrastive_temperature: float = 0.1,
        regularization_weight: float = 1.0,
        orthogonal_beta: float = 0.01,
        max_seq_length: int = 96,
        **kwargs: Any,
    ) -> None:
        self.encoder_config = _build_encoder_config(encoder_config)
        num_layers = int(self.encoder_config.num_hidden_layers)
        self.objective = objective
        self.layer = num_layers if layer is None else layer
        self.languages = [str(language) for language in (languages or [])]
        self.projection_dim = projection_dim
        self.contrastive_temperature = contrastive_temperature
        self.regularization_weight = regularization_weight
        self.orthogonal_beta = orthogonal_beta
        self.max_seq_length = max_seq_length
        super().__init__(**kwargs)
        self._validate(num_layers)

    def _validate(self, num_layers: int) -> None:
        if self.objective not in CONTRASTIVE_ALIGN_OBJECTIVES:
            raise ContrastiveAlignConfigError(
                f"objective={self.objective!r}: expected one of {', '.join(CONTRASTIVE_ALIGN_OBJECTIVES)}."
            )
        if not isinstance(self.layer, int) or not 0 <= self.layer <= num_layers:
            raise ContrastiveAlignConfigError(
                f"layer={self.layer!r}: the encoder has hidden states 0 (embeddings) to {num_layers}."
            )
        if len(set(self.languages)) != len(self.languages):
            raise ContrastiveAlignConfigError(f"languages={self.languages!r} has duplicates.")
        if not isinstance(self.projection_dim, int) or self.projection_dim < 1:
            raise ContrastiveAlignConfigError(f"projection_dim={self.projection_dim!r}: expected a positive integer.")
        if not float(self.contrastive_temperature) > 0.0:
            raise ContrastiveAlignConfigError(
                f"contrastive_temperature={self.contrastive_temperature!r}: expected a positive number (paper: 0.1)."
            )
        if float(self.regularization_weight) < 0.0:
            raise ContrastiveAlignConfigError(
                f"regularization_weight={self.regularization_weight!r}: expected a value >= 0 (paper: 1.0)."
            )
        if not 0.0 <= float(self.orthogonal_beta) < 1.0:
            raise ContrastiveAlignConfigError(
                f"orthogonal_beta={self.orthogonal_beta!r}: expected a value in [0, 1) (paper: 0.01)."
            )

        if not isinstance(self.max_seq_length, int) or self.max_seq_length < 2:
            raise ContrastiveAlignConfigError(f"max_seq_length={self.max_seq_length!r}: expected an integer >= 2.")

    # Copied from modeling.onealigner.configuration_onealigner.OneAlignerConfig.hidden_size
    @property
    def hidden_size(self) -> int:
        """Width of the encoder's hidden states."""
        return int(self.encoder_config.hidden_size)

    # Copied from modeling.onealigner.configuration_onealigner.OneAlignerConfig.embedding_dim
    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding that the model's `encode` returns (the hidden size)."""
        return self.hidden_size

    # Copied from modeling.onealigner.configuration_onealigner.OneAlignerConfig.get_text_config
    def get_text_config(self, decoder: bool | None = None, encoder: bool | None = None) -> PretrainedConfig:
        """The wrapped encoder's config: it holds the vocabulary and the layers that read the text.

        transformers looks for a text sub-config under its own names (`text_config`, `decoder`, ...), not under
        `encoder_config`, and would return this wrapper, which has no `vocab_size` (resizing embeddings, generation
        and the common model tests read it from here). There is no decoder, so both ends are the encoder.
        """
        del decoder, encoder
        return self.encoder_config


def _build_encoder_config(encoder_config: dict[str, Any] | PretrainedConfig | None) -> PretrainedConfig:
    """A config, a config dict (with `model_type`) or None -> the encoder's config.

    OneAligner's configuration does much the same, but a family folder ships alone as remote code and cannot
    import another family's file: the few lines are repeated on purpose.
    """
    if encoder_config is None:
        encoder_config = {
            "model_type": "bert",
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
            raise ContrastiveAlignConfigError("encoder_config has no 'model_type': pass e.g. {'model_type': 'bert'}.")
        encoder_config.pop("transformers_version", None)
        encoder_config = AutoConfig.for_model(model_type, **encoder_config)
    elif isinstance(encoder_config, PretrainedConfig):
        # A copy: building this config resets the attention implementation of the configs it holds, and the
        # caller's object may belong to a live encoder (which would then run a different attention than on reload).
        encoder_config = type(encoder_config).from_dict(encoder_config.to_dict())
    else:
        raise ContrastiveAlignConfigError(
            f"encoder_config must be a dict or a PretrainedConfig, got {type(encoder_config).__name__}."
        )
    if getattr(encoder_config, "is_encoder_decoder", False) or getattr(encoder_config, "is_decoder", False):
        raise ContrastiveAlignConfigError(
            f"encoder {encoder_config.model_type!r} is a decoder: alignment needs a bidirectional encoder (mBERT, XLM-R)."
        )
    return encoder_config
