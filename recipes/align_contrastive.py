"""Align a multilingual encoder with explicit word-level objectives (Wu & Dredze 2020): linear, l2, weak, strong.

The paper's recipe (section 3): English-centred bitext, words from an unsupervised aligner run both ways and
symmetrized with grow-diag-final-and, one-to-one links only, identical strings dropped, a word = its first subword,
max length 96; every batch mixes all target languages; Adam, lr 1e-4, batch 128, 100k steps, 4k warmup, linear
decay (linear mapping: linear decay from 1e-4 over 20k steps); lambda = 1 for the parameter regularizer.

    accelerate launch recipes/align_contrastive.py --config recipes/configs/align_contrastive.yaml
    python recipes/align_contrastive.py --config recipes/configs/align_contrastive-smoke.yaml --output_dir runs/x

Data specs are those of ``bitext_hf.data.load_pairs`` with English on one side (``de=gettext``,
``en-de=hub:DATASET[:CONFIG][:SPLIT]``, ``en-de=a.en,a.de``, ``en-de=pairs.tsv``). ``--use_peft`` trains LoRA adapters
instead of every weight (the regularizer is then off unless ``--regularization_weight`` says otherwise). Outputs in
``--output_dir``: the ContrastiveAlignedEncoder checkpoint (``AutoModel``, remote code), ``encoder/`` the plain
encoder without the projector (transformers + sentence-transformers; ``encoder-<lang>/`` per language for
``linear``, its W as a Dense layer), ``adapter/`` with LoRA, ``eval_results.json`` (held-out word-level retrieval
accuracy and sentence xsim before and after training).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from bitext_hf.families.contrastive_align import AlignmentRetrievalEvaluator, make_aligner, save_outputs
from bitext_hf.families.contrastive_align.data import align_data, load_data, training_texts
from bitext_hf.families.contrastive_align.recipe import (
    ScriptArguments,
    alignment_trainer,
    build_model,
    build_tokenizer,
    check_arguments,
    prepare_peft,
)
from bitext_hf.training import ModelArguments, resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ModelArguments", "ScriptArguments", "cli", "main"]

logger = logging.getLogger("align_contrastive")


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict[str, Any]:
    """Load and align the words, build the model, train with BitextTrainer, evaluate, save and export."""
    # Parse: the arguments, the checkpoint to resume from, the pairs.
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, output_dir)
    check_arguments(script_args, training_args, model_args, resume=resume)
    push, training_args.push_to_hub = training_args.push_to_hub, False  # the final export is pushed, not checkpoints
    train, held = load_data(script_args, training_args.seed)
    languages = sorted(train)

    # Build: tokenizer, model, word alignments -> examples and held-out evaluation sets.
    tokenizer = build_tokenizer(script_args, training_texts(train), output_dir, resume is not None)
    model = build_model(script_args, tokenizer, languages, model_args.use_peft, training_args.seed)
    aligner = make_aligner(script_args.aligner, model.encoder, tokenizer, max_length=script_args.max_seq_length)
    cache = script_args.alignment_cache or str(output_dir / "alignments")
    examples, eval_sets, stats = align_data(script_args, tokenizer, aligner, train, held, cache)
    evaluator = AlignmentRetrievalEvaluator(tokenizer, eval_sets, script_args.max_seq_length) if eval_sets else None

    # Train, with the evaluation before (fresh runs) and after.
    fresh = evaluator is not None and resume is None and script_args.eval_before_training
    initial = evaluator(model.eval()) if fresh else {}
    model = prepare_peft(model, model_args)
    trainer = alignment_trainer(model, tokenizer, examples, evaluator, script_args, training_args, resume)
    trainer.train(resume_from_checkpoint=resume)
    final = evaluator(trainer.model.eval()) if evaluator is not None else {}
    results = {"data": stats, "global_step": trainer.state.global_step, "initial": initial, "final": final}

    # Export: checkpoint, plain encoders, card and figures, eval_results.json, hub.
    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            save_outputs(
                trainer.model,
                tokenizer,
                script_args,
                training_args,
                results,
                push=push,
                log_history=trainer.state.log_history,
            )
    logger.info("final: %s", json.dumps({key: round(value, 4) for key, value in final.items() if "/" not in key}))
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/align_contrastive.yaml`` (the paper's setup) or its offline
    sibling."""
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)


if __name__ == "__main__":
    cli()
