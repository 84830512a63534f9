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

from transformers import TrainingArguments

from bitext_hf.families.musr import save_outputs
from bitext_hf.families.musr.recipe import (
    ArchitectureArguments,
    ScriptArguments,
    check_arguments,
    is_resuming,
    prepare_stages,
    train_stages,
)
from bitext_hf.training import resume_checkpoint, run_recipe
from bitext_hf.training.distributed import main_process_first

__all__ = ["ArchitectureArguments", "ScriptArguments", "cli", "main"]

logger = logging.getLogger("train_musr")


def main(
    script_args: ScriptArguments, training_args: TrainingArguments, model_args: ArchitectureArguments
) -> dict[str, Any]:
    """Load and sample the data, train the vocabulary, run stage 1 and stage 2, evaluate each, save."""
    check_arguments(script_args, training_args, model_args)
    output_dir = Path(training_args.output_dir)
    # Both stages' checkpoints are checked before any data is read.
    resumes = {
        stage: resume_checkpoint(training_args.resume_from_checkpoint, output_dir / f"stage{stage}")
        for stage in (1, 2)
    }
    inputs = prepare_stages(script_args, training_args.seed, output_dir, reuse_tokenizer=is_resuming(training_args))
    logger.info("data: %s", json.dumps(inputs.data))

    model, results = train_stages(script_args, training_args, model_args, inputs, resumes)
    logger.info("stage 1: %s", json.dumps(results["stage1"]["final"]))
    logger.info("stage 2: %s", json.dumps(results["stage2"]["final"]))

    with main_process_first() as main_process:  # rank 0 writes, the others wait for it
        if main_process:
            save_outputs(model, inputs.tokenizer, script_args, training_args, results)
    return results


def cli() -> None:
    """The command line; with no arguments, ``configs/musr.yaml`` (the paper's setup) or its offline sibling."""
    run_recipe(main, ScriptArguments, TrainingArguments, ArchitectureArguments)


if __name__ == "__main__":
    cli()
