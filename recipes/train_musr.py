"""Train MuSR: a many-to-one (into English) translation model whose decoder sees the source only through the
max-pooled sentence embedding; stage 1 label-smoothed cross-entropy, stage 2 CrossConST from the stage-1 model with
a fresh optimizer and scheduler (MuSR paper, sections 3-4).

    accelerate launch recipes/train_musr.py --config recipes/configs/musr.yaml
    python recipes/train_musr.py --config recipes/configs/musr-smoke.yaml --output_dir runs/musr-smoke

Both stages run on ``BitextTrainer`` (``transformers.Trainer``, every ``TrainingArguments`` flag works; the stages
are two Trainer runs in ``<output_dir>/stage1`` and ``<output_dir>/stage2``, ``--resume_from_checkpoint auto``
continues whichever is unfinished). Data specs are those of ``bitext_hf.data.load_pairs`` and need English on one
side; each stage draws ``--train_examples`` pairs by temperature (``--temperature``). The shared vocabulary is a
Unigram (SentencePiece-style) tokenizer trained on the sampled text. After each stage: xsim and bidirectional
accuracy against English and against ``--pivot``, and BUCC-style F1, on a multi-way held-out set. ``--output_dir``
receives the stage-2 model with its tokenizer (``AutoModel.from_pretrained``), ``sentence-transformers/`` (the encoder
alone), ``eval_results.json`` and the model card.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import TrainingArguments

from bitext_hf.families.musr import CrossConSTLoss
from bitext_hf.families.musr.recipe import (
    RESULTS_FILE,
    ST_FOLDER,
    ModelArguments,
    ScriptArguments,
    StageInputs,
    build_tokenizer,
    check_arguments,
    evaluate,
    model_card,
    model_config,
    prepare_stages,
    run_stage,
    save_outputs,
    stage_figure,
)
from bitext_hf.modeling.musr import MuSREncoderDecoder
from bitext_hf.training import resume_checkpoint, run_recipe

# Reached as attributes of this module by tests/ and experiments/ (recipe.ScriptArguments, recipe.model_card, ...).
__all__ = [
    "RESULTS_FILE",
    "ST_FOLDER",
    "ModelArguments",
    "ScriptArguments",
    "StageInputs",
    "build_tokenizer",
    "check_arguments",
    "evaluate",
    "main",
    "model_card",
    "run_stage",
    "stage_figure",
]

logger = logging.getLogger("train_musr")


def main(script_args: ScriptArguments, training_args: TrainingArguments, model_args: ModelArguments) -> dict:
    """Load and sample the data, train the vocabulary, run stage 1 and stage 2, evaluate each, save."""
    check_arguments(script_args, training_args, model_args)
    output_dir = Path(training_args.output_dir)
    resumes = {
        stage: resume_checkpoint(training_args.resume_from_checkpoint, output_dir / f"stage{stage}")
        for stage in (1, 2)
    }
    resuming = (training_args.resume_from_checkpoint or "").strip().lower() not in ("", "none", "false")
    stage1_done = resuming and (output_dir / "stage1" / "config.json").is_file()
    inputs = prepare_stages(script_args, training_args.seed, output_dir, reuse_tokenizer=resuming)
    tokenizer, examples, evaluator = inputs.tokenizer, inputs.examples, inputs.evaluator
    results: dict[str, Any] = {"data": inputs.data}
    logger.info("data: %s", json.dumps(results["data"]))

    if stage1_done:
        logger.info("stage 1 is finished in %s: starting from it", output_dir / "stage1")
    else:
        config = model_config(script_args, model_args, tokenizer)
        torch.manual_seed(training_args.seed)
        _, history = run_stage(
            1,
            MuSREncoderDecoder(config),
            tokenizer,
            examples[0],
            CrossConSTLoss(0.0),
            script_args.stage1_steps,
            training_args,
            evaluator,
            output_dir,
            resumes[1],
        )
    # Stage 2 starts from the saved stage-1 model with a new Trainer: fresh optimizer and scheduler.
    model = MuSREncoderDecoder.from_pretrained(output_dir / "stage1")
    results["stage1"] = {"final": evaluate(model, evaluator), **({} if stage1_done else {"log_history": history})}
    model, history = run_stage(
        2,
        model,
        tokenizer,
        examples[1],
        CrossConSTLoss(script_args.alpha),
        script_args.stage2_steps,
        training_args,
        evaluator,
        output_dir,
        resumes[2],
    )
    results["stage2"] = {"final": evaluate(model, evaluator), "log_history": history}
    logger.info("stage 1: %s", json.dumps(results["stage1"]["final"]))
    logger.info("stage 2: %s", json.dumps(results["stage2"]["final"]))

    if training_args.process_index == 0:
        save_outputs(model, tokenizer, script_args, results, output_dir)
    return results


if __name__ == "__main__":
    run_recipe(main, ScriptArguments, TrainingArguments, ModelArguments)
