"""Train the cross-encoder pair classifier: the calibrated probability that a sentence pair is a translation, from the
two texts read together by a Hugging Face encoder with a one-logit head (``AutoModelForSequenceClassification``; it
loads with sentence-transformers' ``CrossEncoder`` too).

The pairs are the light classifier's (``recipes/train_pair_quality.py``): correct pairs from the training specs,
wrong pairs made from them (bicleaner-ai's synthetic negatives and what mining and alignment produce), prepared once
by rank 0. The cross-encoder is trained on their texts with ``BitextTrainer`` and a padding collator; Platt scaling
fitted on held-out calibration pairs is folded into its head, so ``sigmoid(logit)`` is the calibrated probability.
Languages never trained on measure it beside the sentence encoder's own cosine and margin.

    python recipes/train_pair_quality_cross_encoder.py --config recipes/configs/pair_quality_cross_encoder.yaml \\
        --base_model path/to/encoder
    python recipes/train_pair_quality_cross_encoder.py --config recipes/configs/pair_quality_cross_encoder-smoke.yaml \\
        --base_model path/to/encoder --output_dir runs/smoke

The model, its tokenizer, card with figures and ``quality_results.json`` go to ``--output_dir``; ``bitext-hf score
--classifier OUTPUT_DIR`` uses it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from transformers import DataCollatorWithPadding, TrainingArguments

from bitext_hf.families.pair_quality import CrossEncoderLoss, save_outputs
from bitext_hf.families.pair_quality.arguments import CrossEncoderArguments as ScriptArguments
from bitext_hf.families.pair_quality.cross_encoder import (
    build_cross_encoder,
    calibrate_cross_encoder,
    check_cross_encoder_arguments,
    cross_encoder_probabilities,
    tokenized_pairs,
)
from bitext_hf.families.pair_quality.data import load_data
from bitext_hf.families.pair_quality.evaluation import evaluate_sets
from bitext_hf.training import BitextTrainer, ModelArguments, resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ModelArguments", "ScriptArguments", "cli", "main"]

logger = logging.getLogger("train_pair_quality_cross_encoder")


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict[str, Any]:
    """Prepare the pairs, train the cross-encoder, calibrate, evaluate, save (and push) it."""
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, output_dir)
    check_cross_encoder_arguments(script_args, training_args, model_args)
    push, training_args.push_to_hub = training_args.push_to_hub, False  # the final export is pushed, not checkpoints
    data = load_data(script_args, training_args.seed, output_dir)
    logger.info("data: %s", json.dumps(data.stats))
    model, tokenizer = build_cross_encoder(script_args, data, training_args, resuming=resume is not None)
    trainer = BitextTrainer(
        model,
        training_args,
        loss_fn=CrossEncoderLoss(),
        train_dataset=tokenized_pairs(data.train, tokenizer, script_args.max_length),
        data_collator=DataCollatorWithPadding(tokenizer),
    )
    trainer.train(resume_from_checkpoint=resume)
    model = trainer.model.cpu().eval()
    results: dict[str, Any] = {"data": data.stats, "global_step": trainer.state.global_step}
    results["calibration_fit"] = calibrate_cross_encoder(model, tokenizer, data, script_args)
    probabilities = cross_encoder_probabilities(model, tokenizer, script_args)
    metrics, predictions = evaluate_sets(probabilities, data)
    results.update(metrics)
    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            save_outputs(model, tokenizer, script_args, training_args, results, push=push, predictions=predictions)
    logger.info("held out: %s", json.dumps({name: round(results[name]["auc"], 4) for name in data.eval_sets}))
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/pair_quality_cross_encoder.yaml``."""
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)


if __name__ == "__main__":
    cli()
