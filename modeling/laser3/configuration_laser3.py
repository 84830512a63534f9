"""Configuration of the LASER3 student encoder (Heffernan et al., 2022, "Bitext Mining Using Distilled Sentence
Representations for Low-Resource Languages").

This file imports only transformers so that ``save_pretrained`` can ship it as hub remote code.
"""

from __future__ import annotations

# PretrainedConfig: the name transformers 4.x exports (5.x exports it too, as an alias of PreTrainedConfig).
from transformers import PretrainedConfig

__all__ = ["Laser3StudentConfig"]

_POOLING_MODES = ("max", "bos")


class Laser3StudentConfig(PretrainedConfig):
    r"""Configuration of a [`Laser3Student`]: a Transformer encoder trained from random initialisation to reproduce a
    frozen teacher's sentence embeddings (teacher-student distillation), optionally with an MLM head.

    The defaults are the paper's student (12 layers, width 1024, FFN 2048, 4 heads, max pooling) with an 8k
    vocabulary, the size the paper uses for one script family.

    Args:
        vocab_size (`int`, defaults to 8000): size of the student's own SentencePiece-style vocabulary.
        hidden_size (`int`, defaults to 1024): width of the encoder.
        num_hidden_layers (`int`, defaults to 12): number of Transformer layers.
        num_attention_heads (`int`, defaults to 4): attention heads per layer; must divide `hidden_size`.
        intermediate_size (`int`, defaults to 2048): width of the feed-forward block.
        hidden_act (`str`, defaults to `"gelu"`): activation of the feed-forward block (`"gelu"` or `"relu"`).
        hidden_dropout_prob (`float`, defaults to 0.1): dropout on embeddings and residual branches.
        attention_probs_dropout_prob (`float`, defaults to 0.1): dropout on attention probabilities.
        max_position_embeddings (`int`, defaults to 512): longest input (in subwords, specials included).
        layer_norm_eps (`float`, defaults to 1e-5): epsilon of every LayerNorm.
        initializer_range (`float`, defaults to 0.02): standard deviation of the normal weight initialisation.
        pooling (`str`, defaults to `"max"`): sentence embedding from the last layer: `"max"` (max over the
            non-padding tokens, the paper's choice) or `"bos"` (the first token's state).
        projection_dim (`int`, *optional*): the teacher's embedding size. When set and different from
            `hidden_size`, a linear projection maps the pooled vector to it; `None` or equal to `hidden_size`
            means no projection.
        normalize_embeddings (`bool`, defaults to `False`): L2-normalise `sentence_embedding` in `forward`.
            Distillation uses cosine, so training is unaffected; encoders usually normalise downstream.
        pad_token_id (`int`, defaults to 1): the padding id of the student tokenizer (XLM-R-like specials: `<s>` 0,
            `<pad>` 1, `</s>` 2, `<unk>` 3, `<mask>` 4).
        bos_token_id (`int`, defaults to 0): the id of `<s>`.
        eos_token_id (`int`, defaults to 2): the id of `</s>`.
        mask_token_id (`int`, defaults to 4): the id of `<mask>`.

    The MLM decoder is never tied to the input embeddings (`tie_word_embeddings` is always `False`): transformers
    4.x ties whenever the config says so, which would overwrite the decoder's trained weights on loading.
    """

    model_type = "laser3_student"

    def __init__(
        self,
        vocab_size: int = 8000,
        hidden_size: int = 1024,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 4,
        intermediate_size: int = 2048,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        pooling: str = "max",
        projection_dim: int | None = None,
        normalize_embeddings: bool = False,
        pad_token_id: int = 1,
        bos_token_id: int = 0,
        eos_token_id: int = 2,
        mask_token_id: int = 4,
        **kwargs,
    ) -> None:
        for name, value in (
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("num_hidden_layers", num_hidden_layers),
            ("num_attention_heads", num_attention_heads),
            ("intermediate_size", intermediate_size),
            ("max_position_embeddings", max_position_embeddings),
        ):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Laser3StudentConfig.{name} must be a positive integer, got {value!r}.")
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"Laser3StudentConfig: hidden_size ({hidden_size}) must be divisible by num_attention_heads "
                f"({num_attention_heads}); pick e.g. num_attention_heads={max(1, hidden_size // 64)}."
            )
        if pooling not in _POOLING_MODES:
            raise ValueError(f"Laser3StudentConfig.pooling must be one of {_POOLING_MODES}, got {pooling!r}.")
        if hidden_act not in ("gelu", "relu"):
            raise ValueError(f"Laser3StudentConfig.hidden_act must be 'gelu' or 'relu', got {hidden_act!r}.")
        if projection_dim is not None and (not isinstance(projection_dim, int) or projection_dim < 1):
            raise ValueError(
                f"Laser3StudentConfig.projection_dim must be None or the teacher's (positive) dimension, "
                f"got {projection_dim!r}."
            )
        for name, value in (
            ("hidden_dropout_prob", hidden_dropout_prob),
            ("attention_probs_dropout_prob", attention_probs_dropout_prob),
        ):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"Laser3StudentConfig.{name} must be in [0, 1), got {value!r}.")
        for name, value in (
            ("pad_token_id", pad_token_id),
            ("bos_token_id", bos_token_id),
            ("eos_token_id", eos_token_id),
            ("mask_token_id", mask_token_id),
        ):
            if not 0 <= value < vocab_size:
                raise ValueError(
                    f"Laser3StudentConfig.{name}={value} is outside the vocabulary (vocab_size={vocab_size})."
                )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.pooling = pooling
        self.projection_dim = projection_dim
        self.normalize_embeddings = normalize_embeddings
        self.mask_token_id = mask_token_id
        kwargs["tie_word_embeddings"] = False
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id, **kwargs)

    @property
    def has_projection(self) -> bool:
        """Whether the pooled vector is projected to the teacher's dimension."""
        return self.projection_dim is not None and self.projection_dim != self.hidden_size

    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding (the teacher's dimension when a projection exists)."""
        return self.projection_dim if self.has_projection else self.hidden_size
