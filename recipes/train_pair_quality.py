"""Train the light pair-quality classifier: the calibrated probability that a sentence pair is a translation, from
the encoder's cosine and margin and cheap checks of the two texts.

Correct pairs come from the training specs (default: the gettext catalogs of eight languages installed here), wrong
pairs are made from them (bicleaner-ai's synthetic negatives and what mining and alignment produce), each pair's
features are computed once (the encoder's cosine and ratio margin over its language's corpus), and a small MLP is
trained on them with ``BitextTrainer``; Platt scaling fitted on held-out calibration pairs makes its probabilities
calibrated. Languages never trained on measure it (AUC, MCC, calibration error, per kind of wrong pair, beside the
encoder's own cosine and margin).

    python recipes/train_pair_quality.py --config recipes/configs/pair_quality.yaml
    python recipes/train_pair_quality.py --config recipes/configs/pair_quality-smoke.yaml --output_dir runs/smoke

The model, its card with figures and ``quality_results.json`` go to ``--output_dir``; ``bitext-hf score
--classifier OUTPUT_DIR`` uses it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from transformers import TrainingArguments, default_data_collator

from bitext_hf.families.pair_quality import PairQualityLoss, save_outputs
from bitext_hf.families.pair_quality.data import load_data
from bitext_hf.families.pair_quality.evaluation import evaluate_sets, light_probabilities
from bitext_hf.families.pair_quality.recipe import ScriptArguments, build_model, calibrate, check_arguments
from bitext_hf.training import BitextTrainer, ModelArguments, resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ModelArguments", "ScriptArguments", "cli", "main"]

logger = logging.getLogger("train_pair_quality")


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict[str, Any]:
    """Prepare the pairs and their features, train, calibrate, evaluate, save (and push) the classifier."""
    output_dir = Path(training_args.output_dir)
    resume = resume_checkpoint(training_args.resume_from_checkpoint, output_dir)
    check_arguments(script_args, training_args, model_args)
    push, training_args.push_to_hub = training_args.push_to_hub, False  # the final export is pushed, not checkpoints
    data = load_data(script_args, training_args.seed, output_dir)
    logger.info("data: %s", json.dumps(data.stats))
    model = build_model(script_args, data, training_args.seed)
    trainer = BitextTrainer(
        model,
        training_args,
        loss_fn=PairQualityLoss(),
        train_dataset=data.train.select_columns(["features", "labels"]),
        data_collator=default_data_collator,
    )
    trainer.train(resume_from_checkpoint=resume)
    model = trainer.model.cpu().eval()
    results: dict[str, Any] = {"data": data.stats, "global_step": trainer.state.global_step}
    results["calibration_fit"] = calibrate(model, data)
    probabilities = light_probabilities(model)
    metrics, predictions = evaluate_sets(probabilities, data)
    results.update(metrics)
    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            save_outputs(model, None, script_args, training_args, results, push=push, predictions=predictions)
    logger.info("held out: %s", json.dumps({name: round(results[name]["auc"], 4) for name in data.eval_sets}))
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/pair_quality.yaml``."""
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)


if __name__ == "__main__":
    cli()
