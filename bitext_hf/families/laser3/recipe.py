"""The steps of ``recipes/distill_wolof.py`` between its arguments (:mod:`~bitext_hf.families.laser3.arguments`) and
its outputs (:func:`bitext_hf.families.laser3.export.save_outputs`): the checks run before any work, the teacher, the
tokenizer, the batches, the student, and the check that MLM learned context.

The recipe itself keeps only ``main`` (parse -> build -> train -> export) and its entry point.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerFast, TrainingArguments

from bitext_hf.data import PairSet
from bitext_hf.errors import UsageError
from bitext_hf.families.laser3.arguments import ScriptArguments, StudentArguments
from bitext_hf.families.laser3.cache import TeacherEmbeddingCache
from bitext_hf.families.laser3.data import DistillationBatches
from bitext_hf.families.laser3.masking import mlm_learning_check
from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.training import train_or_reuse_tokenizer

__all__ = [
    "ScriptArguments",
    "StudentArguments",
    "adapt_training_args",
    "build_batches",
    "build_student",
    "build_tokenizer",
    "check_arguments",
    "check_mlm_learning",
    "english_tokenizer",
    "load_teacher",
]

logger = logging.getLogger("distill_wolof")  # the recipe's name: its log lines name the recipe


def check_arguments(
    script_args: ScriptArguments, training_args: TrainingArguments, model_args: StudentArguments
) -> None:
    """The usage errors that need more than one group of arguments, before any data, teacher or tokenizer work (each
    group checks its own fields when parsed)."""
    if training_args.max_steps <= 0:
        raise UsageError("distill_wolof needs --max_steps > 0 (batches are drawn by step, there are no epochs)")
    if training_args.activation_checkpointing and not Laser3Student.supports_gradient_checkpointing:
        raise UsageError("--activation_checkpointing (--gradient_checkpointing): Laser3Student does not support it")


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
