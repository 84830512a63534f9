"""Masked-LM pre-training of a freshly initialized encoder, as a ``transformers.Trainer`` run, and the config of such
an encoder (``random_encoder_config``: XLM-R-like, sized by the recipe, over a tokenizer trained here).

``pretrain_mlm`` trains ``AutoModelForMaskedLM.from_config(config)`` on already tokenized text with
``DataCollatorForLanguageModeling`` (15% of tokens: 80% ``<mask>``, 10% random, 10% kept) and saves the encoder
(without the LM head) to ``<output_dir>/mlm-encoder``. A run that finds that folder with the same settings reuses it
(a resumed recipe does not pre-train again); other settings there are an error rather than a silent reuse.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from transformers import (
    AutoModelForMaskedLM,
    DataCollatorForLanguageModeling,
    PretrainedConfig,
    Trainer,
    TrainingArguments,
    XLMRobertaConfig,
)

from bitext_hf.errors import UsageError

__all__ = ["MLM_FOLDER", "EncoderSizes", "pretrain_mlm", "random_encoder_config"]

logger = logging.getLogger(__name__)

MLM_FOLDER = "mlm-encoder"
_SETTINGS_FILE = "mlm_settings.json"


class EncoderSizes(Protocol):
    """The sizes of a random encoder, as the recipes' arguments name them."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_seq_length: int


def random_encoder_config(tokenizer: Any, sizes: EncoderSizes) -> XLMRobertaConfig:
    """An XLM-R-like encoder config of ``sizes`` over ``tokenizer`` (its vocabulary and special ids), with a position
    table for ``sizes.max_seq_length`` tokens: XLM-R numbers positions from after the padding id."""
    return XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=sizes.hidden_size,
        num_hidden_layers=sizes.num_hidden_layers,
        num_attention_heads=sizes.num_attention_heads,
        intermediate_size=sizes.intermediate_size,
        pad_token_id=tokenizer.pad_token_id,
        max_position_embeddings=sizes.max_seq_length + 2 + tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def pretrain_mlm(
    encoder_config: PretrainedConfig,
    tokenizer: Any,
    token_ids: Sequence[Sequence[int]],
    *,
    output_dir: str | os.PathLike,
    steps: int,
    learning_rate: float,
    batch_size: int,
    training_args: TrainingArguments,
) -> Path:
    """Pre-train a random encoder by masked LM on ``token_ids`` (sequences with special tokens); return its folder.

    Args:
        encoder_config: the encoder to initialize (e.g. an ``XLMRobertaConfig``).
        tokenizer: supplies the mask and pad tokens and the special-token mask to the collator.
        token_ids: the training sequences, tokenized once by the caller.
        output_dir: the recipe's output folder; the encoder goes to ``output_dir/mlm-encoder``.
        steps, learning_rate, batch_size: the MLM run (linear decay after 5% warm-up, weight decay 0.01).
        training_args: the recipe's arguments: seed, precision and device settings carry over.
    """
    folder = Path(output_dir) / MLM_FOLDER
    settings = {
        "steps": steps,
        "learning_rate": learning_rate,
        "batch_size": batch_size,
        "seed": training_args.seed,
        "examples": len(token_ids),
        "encoder": encoder_config.to_diff_dict(),
    }
    if (folder / _SETTINGS_FILE).is_file():
        try:
            saved = json.loads((folder / _SETTINGS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            saved = None  # unreadable, malformed or nested too deep: not the settings of this run
        if json.loads(json.dumps(settings, default=str)) != saved:
            raise UsageError(
                f"{folder} holds an MLM encoder pre-trained with other settings; delete it to pre-train again"
            )
        logger.info("reusing the MLM pre-trained encoder in %s", folder)
        return folder
    torch.manual_seed(training_args.seed)
    # A copy: the model (and the Trainer) may change their config, and the caller's must stay as the fingerprint.
    model = AutoModelForMaskedLM.from_config(copy.deepcopy(encoder_config))
    args = TrainingArguments(
        output_dir=str(Path(output_dir) / "mlm-run"),
        max_steps=steps,
        learning_rate=learning_rate,
        per_device_train_batch_size=batch_size,
        warmup_steps=max(1, steps // 20),
        weight_decay=0.01,
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to="none",
        seed=training_args.seed,
        bf16=training_args.bf16,
        fp16=training_args.fp16,
        use_cpu=training_args.use_cpu,
        disable_tqdm=training_args.disable_tqdm,
        dataloader_drop_last=True,
    )
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=training_args.seed)
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=[{"input_ids": list(ids)} for ids in token_ids],
        data_collator=collator,
    )
    trainer.train()
    if trainer.accelerator.is_main_process:
        partial = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(partial, ignore_errors=True)
        trainer.accelerator.unwrap_model(trainer.model).base_model.save_pretrained(str(partial))
        (partial / _SETTINGS_FILE).write_text(json.dumps(settings, indent=2, default=str), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(partial, folder)  # complete or absent: a killed run never leaves a half-saved encoder to reuse
    trainer.accelerator.wait_for_everyone()
    return folder
