"""The arguments of ``recipes/train_musr.py`` (data, vocabulary, stages and evaluation; the architecture), apart from
the steps that use them, so that :mod:`~bitext_hf.families.musr.data` and :mod:`~bitext_hf.families.musr.export` can
take them without importing the recipe's module (which imports both)."""

# ruff: noqa: RUF009  (the fields' defaults come from arg_field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses

from bitext_hf.training.args import arg_field

__all__ = ["DEFAULT_STAGE1_PLATEAU", "ArchitectureArguments", "ScriptArguments"]

# Stage 1's default plateau: the criterion under which experiments/README.md's MuSR table shows CrossConST's gain.
DEFAULT_STAGE1_PLATEAU = 0.01


@dataclasses.dataclass
class ScriptArguments:
    """Data, vocabulary, stages and evaluation (training settings are ``TrainingArguments``)."""

    train_pairs: list[str] = arg_field(
        ["fr=gettext", "de=gettext"], "Pair specs, each with English on one side.", reads_files=True
    )
    temperature: float = arg_field(5.0, "Language sampling p_l ~ (n_l / sum n)^(1/T); 1: by size, larger: flatter.")
    train_examples: int = arg_field(1_000_000, "Pairs drawn (with replacement, by temperature) for each stage.")
    held_out: int = arg_field(1000, "English sentences shared by all languages held out, with their translations.")
    pivot: str | None = arg_field(None, "Non-English pivot language of the evaluation (default: the first language).")
    alpha: float = arg_field(
        1.0,
        "CrossConST weight in stage 2 (1: the better of 1 and 3 in experiments/README.md's MuSR table; the reference "
        "README, gpengzhi/CrossConST-SR, uses 3).",
    )
    stage1_steps: int = arg_field(0, "Stage-1 optimizer steps (0: --max_steps).")
    stage2_steps: int = arg_field(0, "Stage-2 optimizer steps (0: --max_steps).")
    stage1_plateau: float | None = arg_field(
        None,
        "Stop stage 1 at a plateau, as the paper trains each stage to convergence: when each of the last "
        "--stage1_patience held-out cross-entropies (plain, every --stage1_eval_steps steps) improved on the one "
        f"before by less than this fraction; the stage-1 steps are the cap (default: {DEFAULT_STAGE1_PLATEAU} with a "
        "held-out set, off without one; 0: off, run every step).",
    )
    stage1_eval_steps: int = arg_field(100, "Steps between the held-out cross-entropies of --stage1_plateau.")
    stage1_patience: int = arg_field(3, "Evaluations in a row that must improve too little (--stage1_plateau).")
    stage2_label_smoothing: float | None = arg_field(
        0.0,
        "Label smoothing of stage 2's cross-entropy (0: the reference CrossConST criterion's plain cross-entropy, as "
        "in experiments/README.md's MuSR table; none: the model's --label_smoothing, as stage 1).",
    )
    stage2_english_copies: bool = arg_field(
        False,
        "A control, not the paper (use with --alpha 0): stage 2 also trains on an English -> English copy of each of "
        "its pairs (a 1:1 mix, shuffled with them), so the encoder reads English as often as CrossConST's "
        "target-as-input pass makes it, without the KL term. Stage 1 and the vocabulary are unchanged.",
    )
    tokenizer: str | None = arg_field(
        None, "Tokenizer path; default: a Unigram vocabulary trained on the sampled text.", reads_files=True
    )
    vocab_size: int = arg_field(32000, "Size of the trained shared vocabulary.")
    tokenizer_training_texts: int = arg_field(200_000, "Train the vocabulary on this many sampled sentences.")
    max_unknown: float = arg_field(0.3, "Refuse a language whose held-out text is more than this share <unk>.")
    max_seq_length: int = arg_field(128, "Subwords per sentence, <s> and </s> included.")
    eval_batch_size: int = arg_field(64, "Sentences per encoding batch at evaluation.")


@dataclasses.dataclass
class ArchitectureArguments:
    """MuSR architecture (paper's 768 setting by default; see ``MuSRConfig``)."""

    hidden_size: int = arg_field(768, "Encoder width d (the decoder is 2d wide).")
    num_encoder_layers: int = arg_field(12, "Encoder layers.")
    num_decoder_layers: int = arg_field(3, "Decoder layers.")
    num_attention_heads: int = arg_field(12, "Attention heads.")
    encoder_ffn_dim: int = arg_field(3072, "Encoder feed-forward width.")
    decoder_ffn_dim: int = arg_field(6144, "Decoder feed-forward width.")
    dropout: float = arg_field(0.1, "Dropout (both CrossConST branches run with it).")
    attention_dropout: float = arg_field(0.1, "Attention dropout.")
    label_smoothing: float = arg_field(0.1, "Label smoothing of the cross-entropy.")
