"""The arguments of ``recipes/distill_wolof.py`` (data, teacher and distillation settings; the student), apart from
the steps that use them, so that :mod:`~bitext_hf.families.laser3.data` and :mod:`~bitext_hf.families.laser3.export`
can take them without importing the recipe's module (which imports both)."""

from __future__ import annotations

import dataclasses
import logging

from bitext_hf.errors import UsageError
from bitext_hf.families.laser3.masking import MLM_BREAK_MODES
from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, TASK_SAMPLING
from bitext_hf.training.args import READS_FILES, arg_field

__all__ = ["CURRICULUM_ENGLISH_CUTS", "ScriptArguments", "StudentArguments"]

logger = logging.getLogger("distill_wolof")  # the recipe's name: its log lines name the recipe

# Whose tokenizer cuts the English side of the curriculum's prefixes (--curriculum_english_cut); the first is the
# default.
CURRICULUM_ENGLISH_CUTS: tuple[str, ...] = ("student", "teacher")


@dataclasses.dataclass
class ScriptArguments:
    """Data, teacher and distillation settings."""

    bitexts: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:allenai/nllb:eng_Latn-wol_Latn", "fuv=hub:allenai/nllb:eng_Latn-fuv_Latn"],
        metadata={
            READS_FILES: True,
            "help": "Training bitexts, xx=SOURCE: pairs.tsv (English<TAB>xx), a.xx,a.en, gettext, hub:...",
        },
    )
    monolingual: list[str] = dataclasses.field(
        default_factory=list,
        metadata={
            READS_FILES: True,
            "help": "MLM text, xx=SOURCE, for --mlm_languages (it also trains the vocabulary); the paper's: "
            "wol=hub:allenai/MADLAD-400:wo@clean (recipes/configs/distill_wolof.yaml).",
        },
    )
    english: list[str] = dataclasses.field(
        default_factory=list, metadata={READS_FILES: True, "help": "English text files (self task)."}
    )
    eval_bitexts: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:facebook/flores:wol_Latn-eng_Latn@devtest"],
        metadata={
            READS_FILES: True,
            "help": "Held-out evaluation pairs, xx=SOURCE; empty: hold out --held_out training pairs instead.",
        },
    )
    held_out: int = arg_field(0, "With no eval_bitexts: pairs held out of each eval language's training data.")
    eval_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages evaluated when holding out pairs."}
    )
    # Distillation alone by default: at small budgets MLM and the curriculum cost xsim against distillation of the
    # same updates (experiments/README.md, LASER3); the paper's Wolof setting is its configuration file.
    mlm_languages: list[str] = dataclasses.field(
        default_factory=list,
        metadata={
            "help": "Languages with MLM batches (default: none; the paper: wol, as recipes/configs/distill_wolof.yaml; "
            "every run reports whether its MLM head learned context)."
        },
    )
    curriculum_languages: list[str] = dataclasses.field(
        default_factory=list,
        metadata={
            "help": "Languages trained with progressive prefixes (default: none; the paper: wol, as "
            "recipes/configs/distill_wolof.yaml)."
        },
    )
    max_pairs_per_language: int | None = arg_field(None, "Cap per bitext.")
    max_monolingual: int | None = arg_field(None, "Cap per monolingual corpus.")
    teacher: str = arg_field(
        "default", "Teacher: 'default' (offline USE), a sentence-transformers folder, a HF model.", reads_files=True
    )
    teacher_batch_size: int = arg_field(64, "Teacher encoding batch size.")
    cache_dir: str | None = arg_field(None, "Teacher embedding cache (default: <output_dir>/teacher_cache).")
    task_sampling: str = arg_field(
        "size_alpha",
        "What the task weights mean. size_alpha (fairseq's laser_distillation): batches are drawn across languages "
        "by size ** dataset_alpha (all tasks of a language together, then by size) and each weight multiplies its "
        "task's loss. probability: the weights are the probabilities of drawing each task, losses unweighted.",
    )
    distil_weight: float = arg_field(DEFAULT_TASK_WEIGHTS["distil"], "Weight of the distil task (xx -> English).")
    self_weight: float = arg_field(DEFAULT_TASK_WEIGHTS["self"], "Weight of the self task (English -> English).")
    mask_weight: float = arg_field(
        DEFAULT_TASK_WEIGHTS["mask"], "Weight of the MLM task (fairseq's --lambda-mask); 0 turns MLM off."
    )
    dataset_alpha: float | None = arg_field(
        None,
        "Size exponent of the dataset sampling (1: by size, 0: uniform); default 0.91 with size_alpha (fairseq's "
        "--joint-weighting-alpha 0.09, an upsampling exponent: share ~ size ** (1 - 0.09)), 0.5 with probability.",
    )
    mlm_break_mode: str = arg_field(
        "complete",
        "MLM examples: complete (blocks of whole consecutive monolingual sentences up to max_length, as fairseq's "
        "TokenBlockDataset) or eos (one sentence each).",
    )
    curriculum_increment: float = arg_field(0.1, "Stage increment (0.1: prefixes of 10, 20, ..., 100 percent).")
    curriculum_fraction: float | None = arg_field(
        None, "Share of the steps for the prefix stages (e.g. 0.5; whole sentences get the rest); default: even."
    )
    curriculum_english_cut: str = arg_field(
        "student",
        "Whose subwords cut the English side's curriculum prefixes: student (the student tokenizer, as for the "
        "student side) or teacher (the teacher's own tokenizer, the paper's reading: each side counts its own "
        "subwords; the default teacher's is USE's SentencePiece).",
    )
    mask_rate: float = arg_field(0.15, "Fraction of the tokens of MLM sentences set to <mask>.")
    mlm_batch_blocks: int | None = arg_field(
        None,
        "Blocks per MLM batch (default: --per_device_train_batch_size). fairseq batches by tokens (--max-tokens), so "
        "its MLM batches of full blocks hold fewer examples than its batches of short sentences; set this to give "
        "MLM batches about as many tokens as the others.",
    )
    contrastive_weight: float = arg_field(0.0, "Weight of the optional in-batch contrastive term.")
    max_length: int = arg_field(128, "Student truncation length in subwords.")
    group_by_length: bool = arg_field(True, "Batch sentences of similar length (far less padding); else uniformly.")

    def __post_init__(self) -> None:
        if not self.bitexts:
            raise UsageError("bitexts: give at least one xx=SOURCE training bitext")
        if not self.eval_bitexts and self.held_out <= 0:
            logger.warning("no eval_bitexts and held_out=0: the run will not report xsim")
        for name in ("distil_weight", "self_weight", "mask_weight"):
            if getattr(self, name) < 0:
                raise UsageError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.task_sampling not in TASK_SAMPLING:
            raise UsageError(f"task_sampling must be one of {list(TASK_SAMPLING)}, got {self.task_sampling!r}")
        if self.curriculum_english_cut not in CURRICULUM_ENGLISH_CUTS:
            raise UsageError(
                f"curriculum_english_cut must be one of {list(CURRICULUM_ENGLISH_CUTS)}, got "
                f"{self.curriculum_english_cut!r}"
            )
        if self.mlm_break_mode not in MLM_BREAK_MODES:
            raise UsageError(f"mlm_break_mode must be one of {list(MLM_BREAK_MODES)}, got {self.mlm_break_mode!r}")
        if self.dataset_alpha is not None and not 0.0 <= self.dataset_alpha <= 1.0:
            raise UsageError(f"dataset_alpha must be in [0, 1] (1: by size, 0: uniform), got {self.dataset_alpha}")


@dataclasses.dataclass
class StudentArguments:
    """The student and its vocabulary (defaults: the paper's student with an 8k vocabulary)."""

    tokenizer_name: str | None = arg_field(
        None, "An existing student tokenizer; by default one is trained on the data.", reads_files=True
    )
    vocab_size: int = arg_field(8000, "Student vocabulary size when trained.")
    hidden_size: int = arg_field(1024, "Student width.")
    num_hidden_layers: int = arg_field(12, "Student layers.")
    num_attention_heads: int = arg_field(4, "Attention heads.")
    intermediate_size: int = arg_field(2048, "Feed-forward width.")
    pooling: str = arg_field("max", "Sentence pooling: max or bos.")
    dropout: float = arg_field(0.1, "Hidden and attention dropout.")
