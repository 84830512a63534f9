"""Configuration of MuSR (Gao et al., 2023, "Learning Multilingual Sentence Representations with Cross-lingual
Consistency Regularization"): a Transformer encoder whose max-pooled output is the only input the decoder gets from
the source.

This file imports only transformers so that ``save_pretrained`` can ship it as hub remote code.
"""

from __future__ import annotations

# PretrainedConfig: the name transformers 4.x exports (5.x exports it too, as an alias of PreTrainedConfig).
from transformers import PretrainedConfig

__all__ = ["MuSRConfig"]

_ACTIVATIONS = ("relu", "gelu")


class MuSRConfig(PretrainedConfig):
    r"""Configuration of a [`MuSREncoderDecoder`].

    The defaults are the paper's 768 setting (12 encoder layers, 3 decoder layers, 12 heads); the decoder is twice
    as wide as the encoder because its input at every step is the token embedding concatenated with the sentence
    embedding.

    Args:
        vocab_size (`int`, defaults to 32000): size of the shared (source and English) vocabulary.
        hidden_size (`int`, defaults to 768): width d of the encoder, of the token embeddings and of the sentence
            embedding; the decoder is 2d wide.
        num_encoder_layers (`int`, defaults to 12): encoder Transformer layers (also read as `num_hidden_layers`).
        num_decoder_layers (`int`, defaults to 3): decoder Transformer layers (self-attention only).
        num_attention_heads (`int`, defaults to 12): heads of every attention layer; must divide `hidden_size`.
        encoder_ffn_dim (`int`, defaults to 3072): feed-forward width of the encoder layers.
        decoder_ffn_dim (`int`, defaults to 6144): feed-forward width of the decoder layers.
        activation_function (`str`, defaults to `"relu"`): `"relu"` (fairseq's default) or `"gelu"`.
        dropout (`float`, defaults to 0.1): dropout on embeddings and residual branches.
        attention_dropout (`float`, defaults to 0.1): dropout on attention probabilities.
        max_position_embeddings (`int`, defaults to 512): longest source or target (in subwords, specials included).
        layer_norm_eps (`float`, defaults to 1e-5): epsilon of every LayerNorm.
        initializer_range (`float`, defaults to 0.02): standard deviation of the normal weight initialisation.
        scale_embedding (`bool`, defaults to `True`): multiply token embeddings by sqrt(d) before adding positions.
        label_smoothing (`float`, defaults to 0.1): label smoothing of the cross-entropy `forward` returns.
        with_decoder (`bool`, defaults to `True`): `False` builds the encoder alone (the sentence-transformers
            export: the decoder is only needed for training).
        pad_token_id (`int`, defaults to 1): the padding id of the tokenizer trained by bitext_hf (XLM-R-like
            specials: `<s>` 0, `<pad>` 1, `</s>` 2).
        bos_token_id (`int`, defaults to 0): the id of `<s>`.
        eos_token_id (`int`, defaults to 2): the id of `</s>`.
        decoder_start_token_id (`int`, defaults to 0): first decoder input (`<s>`).

    The output layer is never tied to an embedding (`tie_word_embeddings` is always `False`): the decoder is 2d wide
    and its output layer is a separate matrix, as in the paper.
    """

    model_type = "musr"
    # The name transformers (and its tests, PEFT, the Trainer's FLOP count...) reads a model's depth by: the encoder's,
    # whose layers make the sentence embedding (the decoder only trains it).
    attribute_map = {"num_hidden_layers": "num_encoder_layers"}  # noqa: RUF012  (the transformers class attribute)

    def __init__(
        self,
        vocab_size: int = 32000,
        hidden_size: int = 768,
        num_encoder_layers: int = 12,
        num_decoder_layers: int = 3,
        num_attention_heads: int = 12,
        encoder_ffn_dim: int = 3072,
        decoder_ffn_dim: int = 6144,
        activation_function: str = "relu",
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        max_position_embeddings: int = 512,
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        scale_embedding: bool = True,
        label_smoothing: float = 0.1,
        with_decoder: bool = True,
        pad_token_id: int = 1,
        bos_token_id: int = 0,
        eos_token_id: int = 2,
        decoder_start_token_id: int = 0,
        **kwargs,
    ) -> None:
        for name, value in (
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("num_encoder_layers", num_encoder_layers),
            ("num_decoder_layers", num_decoder_layers),
            ("num_attention_heads", num_attention_heads),
            ("encoder_ffn_dim", encoder_ffn_dim),
            ("decoder_ffn_dim", decoder_ffn_dim),
            ("max_position_embeddings", max_position_embeddings),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"MuSRConfig.{name} must be a positive integer, got {value!r}.")
        if hidden_size % num_attention_heads:
            raise ValueError(
                f"MuSRConfig: hidden_size ({hidden_size}) must be divisible by num_attention_heads "
                f"({num_attention_heads}); pick e.g. num_attention_heads={max(1, hidden_size // 64)}."
            )
        if activation_function not in _ACTIVATIONS:
            raise ValueError(
                f"MuSRConfig.activation_function must be one of {_ACTIVATIONS}, got {activation_function!r}."
            )
        for name, value in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"MuSRConfig.{name} must be in [0, 1), got {value!r}.")
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"MuSRConfig.label_smoothing must be in [0, 1), got {label_smoothing!r}.")
        for name, value in (
            ("pad_token_id", pad_token_id),
            ("bos_token_id", bos_token_id),
            ("eos_token_id", eos_token_id),
            ("decoder_start_token_id", decoder_start_token_id),
        ):
            if not isinstance(value, int) or not 0 <= value < vocab_size:
                raise ValueError(f"MuSRConfig.{name}={value!r} is outside the vocabulary (vocab_size={vocab_size}).")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_encoder_layers = num_encoder_layers
        self.num_decoder_layers = num_decoder_layers
        self.num_attention_heads = num_attention_heads
        self.encoder_ffn_dim = encoder_ffn_dim
        self.decoder_ffn_dim = decoder_ffn_dim
        self.activation_function = activation_function
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.max_position_embeddings = max_position_embeddings
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.scale_embedding = scale_embedding
        self.label_smoothing = label_smoothing
        self.with_decoder = bool(with_decoder)
        kwargs["tie_word_embeddings"] = False
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id, **kwargs)
        # After the base class: transformers 4.x's sets decoder_start_token_id (to None, unless passed in kwargs).
        self.decoder_start_token_id = decoder_start_token_id

    # Copied from modeling.onealigner.configuration_onealigner.OneAlignerConfig.embedding_dim
    @property
    def embedding_dim(self) -> int:
        """Size of the sentence embedding that the model's `encode` returns (the hidden size)."""
        return self.hidden_size

    @property
    def decoder_width(self) -> int:
        """Width of the decoder: token embedding (d) concatenated with the sentence embedding (d)."""
        return 2 * self.hidden_size
