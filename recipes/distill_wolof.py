"""Distil a LASER3 student for Wolof (and related Senegambian languages) from a frozen teacher.

The paper's setup (Heffernan et al., 2022, section 5.3): a student Transformer trained from random initialisation
with its own vocabulary, on Wolof bitexts together with related Senegambian languages, plus English self-training
(anchoring the student in the teacher's space); MLM on monolingual Wolof and the progressive curriculum apply to
Wolof only. Evaluation: xsim of student(xx) against teacher(English) on held-out pairs, before and after training
(and every ``eval_steps`` with ``--eval_strategy steps``), written to ``<output_dir>/xsim_results.json`` and the card,
with its figures (xsim by language, held-out gold vs random margins, the training curve).

    accelerate launch recipes/distill_wolof.py --config recipes/configs/distill_wolof.yaml
    python recipes/distill_wolof.py --config recipes/configs/distill_wolof-smoke.yaml --output_dir runs/smoke

Training runs on ``bitext_hf.training.BitextTrainer`` with the standard ``TrainingArguments`` (``--bf16``,
``--save_total_limit``, ``--resume_from_checkpoint`` (a folder, or ``auto``: the last checkpoint if any),
``--report_to``, ``--push_to_hub``...). Data arguments take ``bitext_hf.data`` specs: ``xx=pairs.tsv``,
``xx=a.xx,a.en``, ``xx=gettext``, ``xx=hub:DATASET[:CONFIG][:SPLIT]``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerFast, TrainingArguments, set_seed

from bitext_hf.data import PairSet, load_monolingual, load_pairs, read_lines
from bitext_hf.data.filters import drop_overlap, split_held_out
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.laser3 import (
    DEFAULT_TASK_WEIGHTS,
    DistillationBatches,
    DistillationLoss,
    TeacherEmbeddingCache,
    XsimEvaluator,
    evaluate_xsim,
    save_student,
)
from bitext_hf.io import atomic_output
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig
from bitext_hf.training import BitextTrainer, resume_checkpoint, run_recipe, train_or_reuse_tokenizer
from bitext_hf.training.args import arg_field

logger = logging.getLogger("distill_wolof")

RESULTS_FILE = "xsim_results.json"


@dataclasses.dataclass
class ScriptArguments:
    """Data, teacher and distillation settings."""

    bitexts: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:allenai/nllb:eng_Latn-wol_Latn", "fuv=hub:allenai/nllb:eng_Latn-fuv_Latn"],
        metadata={"help": "Training bitexts, xx=SOURCE: pairs.tsv (English<TAB>xx), a.xx,a.en, gettext, hub:..."},
    )
    monolingual: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:allenai/MADLAD-400:wo@clean"], metadata={"help": "MLM text, xx=SOURCE."}
    )
    english: list[str] = dataclasses.field(default_factory=list, metadata={"help": "English text files (self task)."})
    eval_bitexts: list[str] = dataclasses.field(
        default_factory=lambda: ["wol=hub:facebook/flores:wol_Latn-eng_Latn@devtest"],
        metadata={"help": "Held-out evaluation pairs, xx=SOURCE; empty: hold out --held_out training pairs instead."},
    )
    held_out: int = arg_field(0, "With no eval_bitexts: pairs held out of each eval language's training data.")
    eval_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages evaluated when holding out pairs."}
    )
    mlm_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages with MLM batches (the paper: Wolof only)."}
    )
    curriculum_languages: list[str] = dataclasses.field(
        default_factory=lambda: ["wol"], metadata={"help": "Languages trained with progressive prefixes."}
    )
    max_pairs_per_language: int | None = arg_field(None, "Cap per bitext.")
    max_monolingual: int | None = arg_field(None, "Cap per monolingual corpus.")
    teacher: str = arg_field(
        "default", "Teacher: 'default' (offline USE), a sentence-transformers folder, a HF model."
    )
    teacher_batch_size: int = arg_field(64, "Teacher encoding batch size.")
    cache_dir: str | None = arg_field(None, "Teacher embedding cache (default: <output_dir>/teacher_cache).")
    distil_weight: float = arg_field(DEFAULT_TASK_WEIGHTS["distil"], "Weight of the distil task (xx -> English).")
    self_weight: float = arg_field(DEFAULT_TASK_WEIGHTS["self"], "Weight of the self task (English -> English).")
    mask_weight: float = arg_field(DEFAULT_TASK_WEIGHTS["mask"], "Weight of the MLM task.")
    dataset_alpha: float = arg_field(0.5, "Datasets of a task are sampled proportionally to size ** alpha.")
    curriculum_increment: float = arg_field(0.1, "Stage increment (0.1: prefixes of 10, 20, ..., 100 percent).")
    curriculum_fraction: float | None = arg_field(
        None, "Share of the steps for the prefix stages (e.g. 0.5; whole sentences get the rest); default: even."
    )
    mask_rate: float = arg_field(0.15, "Fraction of the tokens of MLM sentences set to <mask>.")
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


@dataclasses.dataclass
class ModelArguments:
    """The student and its vocabulary (defaults: the paper's student with an 8k vocabulary)."""

    tokenizer_name: str | None = arg_field(
        None, "An existing student tokenizer; by default one is trained on the data."
    )
    vocab_size: int = arg_field(8000, "Student vocabulary size when trained.")
    hidden_size: int = arg_field(1024, "Student width.")
    num_hidden_layers: int = arg_field(12, "Student layers.")
    num_attention_heads: int = arg_field(4, "Attention heads.")
    intermediate_size: int = arg_field(2048, "Feed-forward width.")
    pooling: str = arg_field("max", "Sentence pooling: max or bos.")
    dropout: float = arg_field(0.1, "Hidden and attention dropout.")


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
    english = [line for path in args.english for line in read_lines(path)]
    return train, monolingual, english, evaluation


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict:
    from bitext_hf.encoders import load_encoder

    # Cheap checks first, before any data, teacher or tokenizer work.
    if training_args.max_steps <= 0:
        raise UsageError("distill_wolof needs --max_steps > 0 (batches are drawn by step, there are no epochs)")
    if training_args.activation_checkpointing and not Laser3Student.supports_gradient_checkpointing:
        raise UsageError("--activation_checkpointing (--gradient_checkpointing): Laser3Student does not support it")
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)

    train, monolingual, english, evaluation = load_data(script_args)
    teacher = load_encoder(None if script_args.teacher == "default" else script_args.teacher)
    cache = TeacherEmbeddingCache(
        script_args.cache_dir or output_dir / "teacher_cache",
        teacher,
        teacher_id=script_args.teacher,
        batch_size=script_args.teacher_batch_size,
    )
    # The first process trains the vocabulary and fills the teacher cache; the others then read both (a Unigram
    # vocabulary differs from one training to the next, and every process must share one).
    with training_args.main_process_first(desc="tokenizer and teacher cache", local=False):
        if model_args.tokenizer_name:
            # Not AutoTokenizer: a student folder's config.json has an auto_map and would ask about remote code.
            tokenizer = PreTrainedTokenizerFast.from_pretrained(model_args.tokenizer_name)
        else:
            corpus = [text for pairs in train for text in (*pairs.src, *pairs.tgt)]
            corpus += [text for texts in monolingual.values() for text in texts] + english
            tokenizer = train_or_reuse_tokenizer(
                corpus,
                output_dir=output_dir,
                reuse=resume is not None or training_args.process_index > 0,
                vocab_size=model_args.vocab_size,
                model_max_length=script_args.max_length,
            )
        batches = DistillationBatches(
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
            task_weights={task: getattr(script_args, f"{task}_weight") for task in DEFAULT_TASK_WEIGHTS},
            alpha=script_args.dataset_alpha,
            curriculum_increment=script_args.curriculum_increment,
            curriculum_fraction=script_args.curriculum_fraction,
            mask_rate=script_args.mask_rate,
            max_length=script_args.max_length,
            group_by_length=script_args.group_by_length,
            seed=training_args.seed,
        )
    # One dataset item is a whole micro-batch of per_device_train_batch_size sentences of one task, a function of
    # (seed, step): the Trainer takes one item per micro-batch, in order (the curriculum follows the step).
    training_args.per_device_train_batch_size = 1
    training_args.train_sampling_strategy = "sequential"
    # --push_to_hub uploads the final export once, without the teacher cache (the Trainer's own pushes during
    # training would upload output_dir with it, and replace the model card with its own).
    push, training_args.push_to_hub = training_args.push_to_hub, False

    set_seed(training_args.seed)
    sizes = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "pooling")
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_dropout_prob=model_args.dropout,
        attention_probs_dropout_prob=model_args.dropout,
        max_position_embeddings=max(script_args.max_length, 8),
        projection_dim=int(teacher.dim),  # a projection layer only when it differs from hidden_size
        **{name: getattr(model_args, name) for name in sizes},
        **{f"{name}_token_id": getattr(tokenizer, f"{name}_token_id") for name in ("pad", "bos", "eos", "mask")},
    )
    model = Laser3Student(config)
    evaluator = XsimEvaluator(tokenizer, cache, evaluation, max_length=script_args.max_length) if evaluation else None
    trainer = BitextTrainer(
        model=model,
        args=training_args,
        train_dataset=batches,
        data_collator=DistillationBatches.collate,
        processing_class=tokenizer,
        loss_fn=DistillationLoss(contrastive_weight=script_args.contrastive_weight),
        retrieval_evaluator=evaluator,
    )
    results: dict[str, Any] = {"teacher": script_args.teacher, "n_train_pairs": {p.src_lang: len(p) for p in train}}
    if evaluator is not None and trainer.is_world_process_zero():
        results["teacher_zero_shot"] = evaluate_xsim(teacher, cache, evaluation)
        results["student_before"] = evaluator.details(model)
        logger.info("xsim before training: %s", results["student_before"])

    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    results["train_seconds"] = round(time.perf_counter() - started, 1)
    results["global_step"] = trainer.state.global_step
    if trainer.is_world_process_zero():
        if evaluator is not None:
            results["student_after"] = evaluator.details(trainer.model)
            logger.info("xsim after training: %s", results["student_after"])
        save_student(
            trainer.model,
            tokenizer,
            output_dir,
            languages=sorted({spec.partition("=")[0] for spec in script_args.bitexts}),
            teacher=script_args.teacher,
            training_data=[*script_args.bitexts, *script_args.monolingual],
            results=results,
            log_history=trainer.state.log_history,
            evaluator=evaluator,  # its held-out pairs give the card's gold vs random margin figure
        )
        with atomic_output(output_dir / RESULTS_FILE) as handle:
            json.dump(results, handle, indent=2)
        if push:
            from bitext_hf.hub import push_to_hub

            repo, private = training_args.hub_model_id or output_dir.name, bool(training_args.hub_private_repo)
            push_to_hub(
                output_dir, repo, private=private, token=training_args.hub_token, revision=training_args.hub_revision
            )
    trainer.accelerator.wait_for_everyone()
    return results


if __name__ == "__main__":
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)
