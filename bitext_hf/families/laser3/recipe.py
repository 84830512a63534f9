"""The reusable steps of ``recipes/distill_wolof.py``: its argument dataclasses, data loading, teacher, tokenizer,
batches and student building, and the export of the trained student (card, figures, ``xsim_results.json``, push).

The recipe itself keeps only ``main`` (parse -> build -> train -> export) and its entry point.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerFast, TrainingArguments

from bitext_hf.data import PairSet, load_monolingual, load_pairs, read_lines
from bitext_hf.data.filters import drop_overlap, split_held_out
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.laser3.cache import TeacherEmbeddingCache
from bitext_hf.families.laser3.data import DistillationBatches
from bitext_hf.families.laser3.evaluation import XsimEvaluator
from bitext_hf.families.laser3.export import save_student
from bitext_hf.families.laser3.masking import MLM_BREAK_MODES, mlm_learning_check
from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, TASK_SAMPLING
from bitext_hf.hub import push_recipe_output
from bitext_hf.io import atomic_output
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.training import train_or_reuse_tokenizer
from bitext_hf.training.args import READS_FILES, arg_field

logger = logging.getLogger("distill_wolof")

RESULTS_FILE = "xsim_results.json"

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


def check_training_args(training_args: TrainingArguments) -> None:
    """The cheap checks, before any data, teacher or tokenizer work."""
    if training_args.max_steps <= 0:
        raise UsageError("distill_wolof needs --max_steps > 0 (batches are drawn by step, there are no epochs)")
    if training_args.activation_checkpointing and not Laser3Student.supports_gradient_checkpointing:
        raise UsageError("--activation_checkpointing (--gradient_checkpointing): Laser3Student does not support it")


def load_data(args: ScriptArguments) -> tuple[list[PairSet], dict[str, list[str]], list[str], list[PairSet]]:
    """Training bitexts, monolingual text, extra English and evaluation bitexts, validated."""
    train = [load_pairs(spec, max_pairs=args.max_pairs_per_language) for spec in args.bitexts]
    evaluation = [load_pairs(spec) for spec in args.eval_bitexts]
    if not evaluation and args.held_out > 0:
        by_language = {pairs.src_lang: index for index, pairs in enumerate(train)}
        for language in args.eval_languages:
            if language not in by_language:
                raise DataValidationError(f"eval language {language!r} has no data among the training bitexts")
            train[by_language[language]], held = split_held_out(train[by_language[language]], args.held_out)
            evaluation.append(held)
    # No evaluation sentence may be trained on: drop training pairs sharing a side with the evaluation pairs.
    held_texts = [text for pairs in evaluation for text in (*pairs.src, *pairs.tgt)]
    train = [drop_overlap(pairs, held_texts) for pairs in train] if held_texts else train
    monolingual: dict[str, list[str]] = {}
    for spec in args.monolingual:
        language, texts = load_monolingual(spec, max_sentences=args.max_monolingual)
        monolingual.setdefault(language, []).extend(texts)
    unused = sorted(set(monolingual) - set(args.mlm_languages))
    if unused:
        logger.warning(
            "monolingual text of %s trains the vocabulary only: MLM runs on --mlm_languages (%s)",
            ", ".join(unused),
            ", ".join(args.mlm_languages) or "none",
        )
    english = [line for path in args.english for line in read_lines(path)]
    return train, monolingual, english, evaluation


def load_teacher(script_args: ScriptArguments, output_dir: Path) -> tuple[Any, TeacherEmbeddingCache]:
    """The frozen teacher and its embedding cache (default: ``<output_dir>/teacher_cache``)."""
    from bitext_hf.encoders import load_encoder

    teacher = load_encoder(None if script_args.teacher == "default" else script_args.teacher)
    cache = TeacherEmbeddingCache(
        script_args.cache_dir or output_dir / "teacher_cache",
        teacher,
        teacher_id=script_args.teacher,
        batch_size=script_args.teacher_batch_size,
    )
    return teacher, cache


def build_tokenizer(
    model_args: StudentArguments,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    texts: tuple[list[PairSet], dict[str, list[str]], list[str]],
    reuse: bool,
) -> PreTrainedTokenizerFast:
    """``--tokenizer_name``, else a vocabulary trained on ``texts`` (bitexts, monolingual, English), or the one
    already in ``output_dir`` when ``reuse`` (a resumed run); in a distributed job the ranks after the first read
    the one rank 0 trained."""
    if model_args.tokenizer_name:
        # Not AutoTokenizer: a student folder's config.json has an auto_map and would ask about remote code.
        return PreTrainedTokenizerFast.from_pretrained(model_args.tokenizer_name)
    train, monolingual, english = texts
    corpus = [text for pairs in train for text in (*pairs.src, *pairs.tgt)]
    corpus += [text for texts in monolingual.values() for text in texts] + english
    return train_or_reuse_tokenizer(
        corpus,
        output_dir=Path(training_args.output_dir),
        reuse=reuse,
        vocab_size=model_args.vocab_size,
        model_max_length=script_args.max_length,
    )


def build_batches(
    tokenizer: PreTrainedTokenizerFast,
    cache: TeacherEmbeddingCache,
    texts: tuple[list[PairSet], dict[str, list[str]], list[str]],
    script_args: ScriptArguments,
    training_args: TrainingArguments,
) -> DistillationBatches:
    """The step-indexed micro-batches of the whole run (filling the teacher cache for them)."""
    train, monolingual, english = texts
    return DistillationBatches(
        tokenizer=tokenizer,
        cache=cache,
        bitexts=train,
        monolingual=monolingual,
        english=english,
        mlm_languages=script_args.mlm_languages,
        curriculum_languages=script_args.curriculum_languages,
        # Every process draws its own micro-batches: the dataset holds the batches of the whole run.
        total_steps=training_args.max_steps * training_args.gradient_accumulation_steps * training_args.world_size,
        batch_size=training_args.per_device_train_batch_size,
        mlm_batch_size=script_args.mlm_batch_blocks,
        task_weights={task: getattr(script_args, f"{task}_weight") for task in DEFAULT_TASK_WEIGHTS},
        alpha=script_args.dataset_alpha,
        task_sampling=script_args.task_sampling,
        mlm_break_mode=script_args.mlm_break_mode,
        curriculum_increment=script_args.curriculum_increment,
        curriculum_fraction=script_args.curriculum_fraction,
        teacher_tokenizer=english_tokenizer(script_args, cache.teacher),
        mask_rate=script_args.mask_rate,
        max_length=script_args.max_length,
        group_by_length=script_args.group_by_length,
        seed=training_args.seed,
    )


def english_tokenizer(script_args: ScriptArguments, teacher: Any) -> Any | None:
    """The tokenizer that cuts the English side of the curriculum's prefixes: None (the student's) unless
    ``--curriculum_english_cut teacher``, then the teacher's own (USE's SentencePiece for the default teacher, the
    Hugging Face tokenizer of a model teacher)."""
    if script_args.curriculum_english_cut == "student":
        return None
    if script_args.teacher == "default":
        from bitext_hf.encoders.use import UseTokenizer

        return UseTokenizer()
    tokenizer = getattr(teacher, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "is_fast", False):
        raise UsageError(
            f"--curriculum_english_cut teacher: the teacher {script_args.teacher!r} has no fast tokenizer with offsets"
        )
    return tokenizer


def adapt_training_args(training_args: TrainingArguments) -> bool:
    """Set the Trainer up for step-indexed batches; returns whether to push the final export (``--push_to_hub``)."""
    # One dataset item is a whole micro-batch of per_device_train_batch_size sentences of one task, a function of
    # (seed, step): the Trainer takes one item per micro-batch, in order (the curriculum follows the step).
    training_args.per_device_train_batch_size = 1
    training_args.train_sampling_strategy = "sequential"
    # --push_to_hub uploads the final export once, without the teacher cache (the Trainer's own pushes during
    # training would upload output_dir with it, and replace the model card with its own).
    push, training_args.push_to_hub = training_args.push_to_hub, False
    return push


def build_student(
    model_args: StudentArguments, script_args: ScriptArguments, tokenizer: PreTrainedTokenizerFast, teacher_dim: int
) -> Laser3Student:
    """A randomly initialised student over ``tokenizer``, projecting to the teacher's ``teacher_dim``."""
    sizes = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "pooling")
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_dropout_prob=model_args.dropout,
        attention_probs_dropout_prob=model_args.dropout,
        max_position_embeddings=max(script_args.max_length, 8),
        projection_dim=int(teacher_dim),  # a projection layer only when it differs from hidden_size
        **{name: getattr(model_args, name) for name in sizes},
        **{f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos", "mask")},
    )
    return Laser3Student(config)


def check_mlm_learning(batches: DistillationBatches, log_history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's MLM loss against the unigram entropy of its MLM text (``mlm_learning_check``), with a warning when
    the head learned no context; ``None`` for a run without MLM."""
    entropy = batches.mlm_unigram_entropy().get("mean")  # None without MLM text
    check = mlm_learning_check(entropy, log_history) if entropy is not None else None
    if check is not None and not check["learned context"]:
        logger.warning(
            "the MLM loss ended at %.3f nats, not %g below the unigram entropy of the MLM text (%.3f): the MLM head "
            "learned no context, so at this budget MLM batches only took updates from distillation (--mask_weight 0 "
            "turns MLM off; experiments/README.md, LASER3)",
            check["final loss"],
            check["margin"],
            check["unigram entropy"],
        )
    return check


def export_student(
    trainer: Any,
    tokenizer: PreTrainedTokenizerFast,
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    results: dict[str, Any],
    evaluator: XsimEvaluator | None,
    push: bool,
) -> None:
    """Save the trained student with its card and figures, ``xsim_results.json``, and push it when ``push``."""
    output_dir = Path(training_args.output_dir)
    save_student(
        trainer.model,
        tokenizer,
        output_dir,
        languages=sorted({spec.partition("=")[0] for spec in script_args.bitexts}),
        teacher=script_args.teacher,
        training_data=script_args.bitexts,
        monolingual=script_args.monolingual,
        evaluation_data=script_args.eval_bitexts,
        repo_id=training_args.hub_model_id,
        results=results,
        log_history=trainer.state.log_history,
        evaluator=evaluator,  # its held-out pairs give the card's gold vs random margin figure
    )
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2)
    push_recipe_output(output_dir, training_args, push=push)
