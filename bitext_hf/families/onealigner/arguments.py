"""The arguments of ``recipes/train_onealigner.py`` (data, encoder and OneAligner settings), apart from the steps that
use them, so that :mod:`~bitext_hf.families.onealigner.data` and :mod:`~bitext_hf.families.onealigner.export` can
take them without importing the recipe's module (which imports both)."""

# ruff: noqa: RUF009  (the fields' defaults come from arg_field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses

from bitext_hf.data import parse_spec
from bitext_hf.errors import UsageError
from bitext_hf.training.args import arg_field

__all__ = ["ScriptArguments"]

_CENTRES = ("any", "english", "non_english")


@dataclasses.dataclass
class ScriptArguments:
    """Data, encoder and OneAligner settings (training settings are ``TrainingArguments``, LoRA ``ModelArguments``)."""

    train_pairs: list[str] = arg_field(
        ["en-es=hub:Helsinki-NLP/opus-100:en-es:train"], "Training pair specs.", reads_files=True
    )
    top_k_pairs: int = arg_field(0, "Keep only the k richest training pairs (most examples); 0 keeps all.")
    centre: str = arg_field("any", "Training pairs to keep: any, english (en-xx only) or non_english.")
    example_budget: int = arg_field(
        1_000_000, "Training examples sampled uniformly from the pooled pairs (paper: 1M)."
    )
    min_tokens: int = arg_field(5, "After sampling, drop examples with fewer tokens on either side (paper: 5).")
    eval_pairs: list[str] = arg_field([], "Evaluation pair specs; their sentences leave training.", reads_files=True)
    held_out: int = arg_field(0, "Pairs held out of each training pair as an extra evaluation set.")
    eval_size: int = arg_field(1000, "At most this many pairs per evaluation set (sampled; Tatoeba-like 1k).")
    eval_min_words: int = arg_field(0, "Evaluate on pairs with at least this many words on both sides.")
    eval_before_training: bool = arg_field(True, "Evaluate (with the ablation) before training too.")
    ablation: bool = arg_field(True, "Also report the Table 1 ablation (mean pool / BERTScore x norm on/off).")
    encoder: str = arg_field(
        "FacebookAI/xlm-roberta-base", "Encoder path or hub id, or 'random' (sizes below).", reads_files=True
    )
    tokenizer: str | None = arg_field(
        None, "Tokenizer path; default: the encoder's, or one trained on the data.", reads_files=True
    )
    layer: int | None = arg_field(
        None, "Hidden state L (0 = embeddings); default the paper's: 8 of 12 layers, 17 of 24, else 2/3."
    )
    vocab_size: int = arg_field(8000, "Random encoder: tokenizer vocabulary.")
    tokenizer_training_texts: int = arg_field(100_000, "Random encoder: train the tokenizer on this many texts.")
    hidden_size: int = arg_field(256, "Random encoder: width.")
    num_hidden_layers: int = arg_field(4, "Random encoder: layers.")
    num_attention_heads: int = arg_field(4, "Random encoder: attention heads.")
    intermediate_size: int = arg_field(512, "Random encoder: FFN width.")
    dropout: float | None = arg_field(
        None, "Random encoder: dropout of its hidden states and attention (default: XLM-R's 0.1)."
    )
    mlm_steps: int = arg_field(0, "Random encoder: MLM pre-training steps on the training text first (0: none).")
    mlm_learning_rate: float = arg_field(5e-4, "MLM pre-training learning rate.")
    mlm_batch_size: int = arg_field(64, "MLM pre-training batch size.")
    max_seq_length: int = arg_field(100, "Tokens per sentence (paper: 100).")
    similarity: str = arg_field("bertscore", "bertscore or mean_pool.")
    normalization: bool = arg_field(True, "In-batch normalization.")
    alpha: float = arg_field(0.75, "Normalization strength (paper: 0.75).")
    softmax_temperature: float = arg_field(5.0, "Logits = S / temperature.")
    loss_type: str = arg_field("global", "global (N^2 - N negatives) or row.")
    eval_batch_size: int = arg_field(256, "Normalization block at evaluation.")
    pooled_loss_weight: float = arg_field(0.0, "Not in the paper: extra InfoNCE on mean-pooled vectors.")
    gather_across_devices: bool = arg_field(
        True,
        "Several processes: score each rank's batch against the global batch's negatives and normalize over it, as "
        "one process given the whole batch (false: each rank's own batch).",
    )

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise UsageError("--train_pairs is empty: give at least one LANGS=SOURCE spec")
        if self.centre not in _CENTRES:
            raise UsageError(f"--centre {self.centre}: expected one of {', '.join(_CENTRES)}")
        for name in ("example_budget", "eval_size"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be >= 1, got {getattr(self, name)}")
        for name in ("top_k_pairs", "min_tokens", "held_out", "mlm_steps", "eval_min_words"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout must be in [0, 1), got {self.dropout}")
        for spec in [*self.train_pairs, *self.eval_pairs]:
            parse_spec(spec)  # syntax only: nothing is read before every argument is known to be good
