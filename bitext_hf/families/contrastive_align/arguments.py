"""The arguments of ``recipes/align_contrastive.py`` (data, aligner, encoder and objective), apart from the steps that
use them, so that :mod:`~bitext_hf.families.contrastive_align.data` and
:mod:`~bitext_hf.families.contrastive_align.export` can take them without importing the recipe's module (which
imports both)."""

# ruff: noqa: RUF009  (the fields' defaults come from arg_field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses

from bitext_hf.data import parse_spec
from bitext_hf.errors import UsageError
from bitext_hf.families.contrastive_align.aligners import ALIGNERS, EflomalAligner
from bitext_hf.families.contrastive_align.symmetrize import SYMMETRIZATIONS
from bitext_hf.modeling.contrastive_align import CONTRASTIVE_ALIGN_OBJECTIVES
from bitext_hf.training.args import arg_field

__all__ = ["ScriptArguments"]


@dataclasses.dataclass
class ScriptArguments:
    """Data, aligner, encoder and objective (training settings are ``TrainingArguments``, LoRA ``ModelArguments``)."""

    train_pairs: list[str] = arg_field(
        ["de=hub:Helsinki-NLP/opus-100:de-en:train"], "English-centred pair specs.", reads_files=True
    )
    max_pairs: int = arg_field(0, "Read at most this many pairs per spec (0: all; the paper samples 1M).")
    held_out: int = arg_field(0, "Pairs held out per language for word / sentence retrieval (0: no evaluation).")
    held_out_seed: int | None = arg_field(
        None, "Seed of the held-out draw (default: --seed); fix it to evaluate every seed on the same pairs."
    )
    eval_before_training: bool = arg_field(True, "Evaluate the untrained model too (the 'initial' results).")
    objective: str = arg_field("strong", "linear, l2, weak or strong.")
    aligner: str = arg_field("auto", "eflomal (pip install 'bitext-hf[align]'), similarity (fallback), or auto.")
    symmetrization: str = arg_field("grow-diag-final-and", "grow-diag-final-and (paper), intersect or union.")
    alignment_cache: str | None = arg_field(None, "Word-alignment cache folder (default <output_dir>/alignments).")
    encoder: str = arg_field(
        "google-bert/bert-base-multilingual-cased", "Encoder path or hub id, or 'random'.", reads_files=True
    )
    tokenizer: str | None = arg_field(
        None, "Tokenizer path; default: the encoder's, or one trained on the data.", reads_files=True
    )
    max_seq_length: int = arg_field(96, "Tokens per sentence (paper: 96).")
    layer: int | None = arg_field(None, "Hidden state aligned by l2/weak/strong (default: the last).")
    projection_dim: int = arg_field(128, "Projector output width (paper: 128).")
    contrastive_temperature: float = arg_field(0.1, "T of the contrastive objectives (paper: 0.1).")
    gather_across_devices: bool = arg_field(
        True,
        "Several processes, weak and strong objectives: every link of the global batch is a negative, as in one "
        "process given the whole batch (false: each rank's own links).",
    )
    regularization_weight: float | None = arg_field(
        None, "lambda of ||theta - theta_0||^2 (default 1.0; 0 with LoRA)."
    )
    vocab_size: int = arg_field(8000, "Random encoder: tokenizer vocabulary.")
    hidden_size: int = arg_field(256, "Random encoder: width.")
    num_hidden_layers: int = arg_field(4, "Random encoder: layers.")
    num_attention_heads: int = arg_field(4, "Random encoder: attention heads.")
    intermediate_size: int = arg_field(512, "Random encoder: FFN width.")
    dropout: float | None = arg_field(
        None, "Random encoder: dropout of its hidden states and attention (default: XLM-R's 0.1)."
    )

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise UsageError("--train_pairs is empty: give at least one LANG=SOURCE spec with English on one side")
        if self.objective not in CONTRASTIVE_ALIGN_OBJECTIVES:
            raise UsageError(
                f"--objective {self.objective}: expected one of {', '.join(CONTRASTIVE_ALIGN_OBJECTIVES)}"
            )
        if self.aligner not in ALIGNERS:
            raise UsageError(f"--aligner {self.aligner}: expected one of {', '.join(ALIGNERS)}")
        if self.symmetrization not in SYMMETRIZATIONS:
            raise UsageError(f"--symmetrization {self.symmetrization}: expected one of {', '.join(SYMMETRIZATIONS)}")
        for name in ("max_pairs", "held_out"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.max_seq_length < 8:
            raise UsageError(f"--max_seq_length must be >= 8, got {self.max_seq_length}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout must be in [0, 1), got {self.dropout}")
        for spec in self.train_pairs:
            parse_spec(spec)  # syntax only: nothing is read before every argument is known to be good
        if self.aligner == "eflomal":
            EflomalAligner()  # a missing eflomal is a usage error naming the fallback, before any data is read
