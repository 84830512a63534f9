"""Train OneAligner: contrastive BERTScore alignment with in-batch normalization on one, top-k or all language pairs.

The paper's recipe (OneAligner, section 3): an XLM-R encoder, hidden state L, a fixed example budget (1M) sampled
across the chosen pairs, examples with fewer than 5 tokens on either side dropped after sampling, training pairs
that overlap the evaluation sets removed, batch 64, lr 3e-6, 3 epochs, max length 100, temperature 5.0.

    accelerate launch recipes/train_onealigner.py --config recipes/configs/onealigner.yaml
    python recipes/train_onealigner.py --config recipes/configs/onealigner-smoke.yaml --output_dir runs/smoke

Training runs on ``BitextTrainer`` (``transformers.Trainer``): every ``TrainingArguments`` flag works
(``--save_total_limit``, ``--resume_from_checkpoint auto|PATH``, ``--report_to``, ``--push_to_hub``, ``--bf16``);
``--use_peft`` trains LoRA adapters (``bitext_hf.training.ModelArguments``). Data specs are those of
``bitext_hf.data.load_pairs`` (``xx-yy=gettext``, ``xx-yy=hub:DATASET[:CONFIG][:SPLIT]``, ``xx-yy=a.xx,b.yy``,
``xx-yy=pairs.tsv``; ``xx=...`` pairs xx with English). Held-out retrieval (accuracy of both directions on the
normalized scores, LASER's xsim on the raw BERTScore; the paper's Table 1 ablation before and after training) runs
at ``eval_steps``; the model, tokenizer, ``eval_results.json`` and the model card with its figures (xsim by
direction, gold vs random margins, the training curve) go to ``--output_dir``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from bitext_hf.data.collators import PairCollator
from bitext_hf.families.onealigner import OneAlignerLoss, OneAlignerRetrievalEvaluator, evaluate_sets, save_outputs
from bitext_hf.families.onealigner.data import load_data
from bitext_hf.families.onealigner.recipe import ScriptArguments, build_model, check_arguments, tokenizer_factory
from bitext_hf.training import BitextTrainer, ModelArguments, apply_peft, resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ModelArguments", "ScriptArguments", "cli", "main"]

logger = logging.getLogger("train_onealigner")


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict[str, Any]:
    """Load the data, build the model, train with BitextTrainer, evaluate, save (and push) the model."""
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, output_dir)
    check_arguments(script_args, training_args, model_args)
    push, training_args.push_to_hub = training_args.push_to_hub, False  # the final export is pushed, not checkpoints
    data, tokenizer = load_data(
        script_args, tokenizer_factory(script_args, str(output_dir), resume is not None), training_args.seed
    )
    logger.info("data: %s", json.dumps(data.stats))
    model = apply_peft(build_model(script_args, tokenizer, data, training_args), model_args)
    initial: dict[str, float] = {}
    if script_args.eval_before_training and data.eval_sets and resume is None:
        model.to(training_args.device)  # scored where training runs (a GPU if any)
        initial = evaluate_sets(model.eval(), tokenizer, data.eval_sets, ablation=script_args.ablation)
    trainer = BitextTrainer(
        model,
        training_args,
        loss_fn=OneAlignerLoss(gather_across_devices=script_args.gather_across_devices),
        train_dataset=data.train_examples,
        data_collator=PairCollator(tokenizer.pad_token_id),
        retrieval_evaluator=OneAlignerRetrievalEvaluator(tokenizer, data.eval_sets) if data.eval_sets else None,
    )
    trainer.train(resume_from_checkpoint=resume)
    final = evaluate_sets(trainer.model.eval(), tokenizer, data.eval_sets, ablation=script_args.ablation)
    history = [entry for entry in trainer.state.log_history if any(key.startswith("eval_") for key in entry)]
    results = {
        "data": data.stats,
        "global_step": trainer.state.global_step,
        "initial": initial,
        "final": final,
        "eval_history": history,
    }
    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            save_outputs(
                trainer.model,
                tokenizer,
                script_args,
                training_args,
                results,
                push=push,
                model_args=model_args,
                eval_sets=data.eval_sets,
                log_history=trainer.state.log_history,
            )
    logger.info("final: %s", json.dumps({k: round(v, 4) for k, v in final.items() if "/" not in k}))
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/onealigner.yaml`` (the paper's setup) or its offline sibling."""
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)


if __name__ == "__main__":
    cli()
