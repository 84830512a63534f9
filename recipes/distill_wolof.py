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

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers import TrainingArguments, set_seed

from bitext_hf.families.laser3 import DistillationBatches, DistillationLoss, XsimEvaluator, evaluate_xsim, save_outputs
from bitext_hf.families.laser3.data import load_data
from bitext_hf.families.laser3.recipe import (
    ScriptArguments,
    StudentArguments,
    adapt_training_args,
    build_batches,
    build_student,
    build_tokenizer,
    check_arguments,
    check_mlm_learning,
    load_teacher,
)
from bitext_hf.training import BitextTrainer, resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ScriptArguments", "StudentArguments", "cli", "main"]

logger = logging.getLogger("distill_wolof")


def main(
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    model_args: StudentArguments,
    *,
    evaluator_class: type = XsimEvaluator,
    teacher_xsim: Callable[..., dict] = evaluate_xsim,
) -> dict:
    """Build, train, export. ``evaluator_class`` and ``teacher_xsim`` let an experiment measure more at each
    evaluation, or score the teacher once for several runs, without replacing this module's names."""
    check_arguments(script_args, training_args, model_args)  # before any data, teacher or tokenizer work
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, training_args.output_dir)

    # Build: data, teacher, vocabulary, batches, student.
    train, monolingual, english, evaluation = load_data(script_args)
    teacher, cache = load_teacher(script_args, output_dir)
    # The first process trains the vocabulary and fills the teacher cache; the others then read both (a Unigram
    # vocabulary differs from one training to the next, and every process must share one).
    with main_process_first():
        texts = (train, monolingual, english)
        tokenizer = build_tokenizer(model_args, script_args, training_args, texts, reuse=resume is not None)
        batches = build_batches(tokenizer, cache, texts, script_args, training_args)
    push = adapt_training_args(training_args)
    set_seed(training_args.seed)
    model = build_student(model_args, script_args, tokenizer, teacher.dim)
    evaluator = (
        evaluator_class(tokenizer, cache, evaluation, max_length=script_args.max_length) if evaluation else None
    )
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
        results["teacher_zero_shot"] = teacher_xsim(teacher, cache, evaluation)
        results["student_before"] = evaluator.details(model)
        logger.info("xsim before training: %s", results["student_before"])

    # Train.
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume)
    results["train_seconds"] = round(time.perf_counter() - started, 1)
    results["global_step"] = trainer.state.global_step
    # Each task's loss (loss_distil, loss_self, loss_mask) as the Trainer logged it: what each task learned.
    results["log_history"] = [entry for entry in trainer.state.log_history if "loss" in entry]
    if mlm := check_mlm_learning(batches, results["log_history"]):  # did MLM learn context? (the card says)
        results["mlm"] = mlm

    # Export: the student, its card and figures, xsim_results.json (and the hub with --push_to_hub).
    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            if evaluator is not None:
                results["student_after"] = evaluator.details(trainer.model)
                logger.info("xsim after training: %s", results["student_after"])
            save_outputs(
                trainer.model,
                tokenizer,
                script_args,
                training_args,
                results,
                push=push,
                log_history=trainer.state.log_history,
                evaluator=evaluator,  # its held-out pairs give the card's gold vs random margin figure
            )
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/distill_wolof.yaml`` (the paper's setup) or its offline
    sibling."""
    run_recipe(main, ScriptArguments, TrainingArguments, StudentArguments)


if __name__ == "__main__":
    cli()
