"""The reusable parts of ``recipes/train_onealigner.py``: its arguments, data preparation, tokenizer and model
building, and the export of the trained model (model card, figures, results).

The recipe is the entry point (``main``: parse -> build -> train -> export); what it does step by step lives here,
so that experiments and tests can call each step on its own:

* ``ScriptArguments``: data, encoder and OneAligner settings (training settings are ``TrainingArguments``, LoRA
  ``bitext_hf.training.ModelArguments``);
* ``select_pairs`` and ``prepare_data`` (from :mod:`bitext_hf.families.onealigner.data`): load, hold out, de-overlap,
  sample the example budget, tokenize once and drop short examples (``PreparedData``);
* ``tokenizer_factory`` and ``build_model``: the tokenizer (given, the encoder's, or trained on the data) and the
  OneAligner model over a pretrained, random or MLM pre-trained encoder;
* ``save_outputs`` and ``push_export``: the model, tokenizer, model card with its figures and ``eval_results.json``,
  and the upload of that folder.
"""

# ruff: noqa: RUF009  (the fields' defaults come from _field, a dataclasses.field with its help text: no shared state)
from __future__ import annotations

import dataclasses
import json
import logging
import random
import tempfile
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, TrainingArguments

from bitext_hf.data import parse_spec
from bitext_hf.errors import UsageError
from bitext_hf.families.onealigner.data import PreparedData
from bitext_hf.families.onealigner.export import card_figures, model_card
from bitext_hf.hub import push_recipe_output, save_for_hub
from bitext_hf.io import atomic_output
from bitext_hf.modeling.onealigner import OneAlignerModel
from bitext_hf.training import ModelArguments, export_peft
from bitext_hf.training.args import arg_field
from bitext_hf.training.mlm import pretrain_mlm, random_encoder_config
from bitext_hf.training.peft import ADAPTER_FOLDER
from bitext_hf.training.tokenizer import train_or_reuse_tokenizer

logger = logging.getLogger("train_onealigner")  # the recipe's name: its log lines name the recipe

RESULTS_FILE = "eval_results.json"
_CENTRES = ("any", "english", "non_english")
_MODEL_FIELDS = (
    "similarity",
    "normalization",
    "alpha",
    "softmax_temperature",
    "loss_type",
    "max_seq_length",
    "eval_batch_size",
    "pooled_loss_weight",
)


@dataclasses.dataclass
class ScriptArguments:
    """Data, encoder and OneAligner settings (training settings are ``TrainingArguments``, LoRA ``ModelArguments``)."""

    train_pairs: list[str] = arg_field(
        ["en-es=hub:Helsinki-NLP/opus-100:en-es:train"], "Training pair specs.", reads_files=True
    )
    top_k_pairs: int = arg_field(0, "Keep only the k richest training pairs (most examples); 0 keeps all.")
    centre: str = arg_field("any", "Training pairs to keep: any, english (en-xx only) or non_english.")
    example_budget: int = arg_field(
        1_000_000, "Training examples sampled uniformly from the pooled pairs (paper: 1M)."
    )
    min_tokens: int = arg_field(5, "After sampling, drop examples with fewer tokens on either side (paper: 5).")
    eval_pairs: list[str] = arg_field([], "Evaluation pair specs; their sentences leave training.", reads_files=True)
    held_out: int = arg_field(0, "Pairs held out of each training pair as an extra evaluation set.")
    eval_size: int = arg_field(1000, "At most this many pairs per evaluation set (sampled; Tatoeba-like 1k).")
    eval_min_words: int = arg_field(0, "Evaluate on pairs with at least this many words on both sides.")
    eval_before_training: bool = arg_field(True, "Evaluate (with the ablation) before training too.")
    ablation: bool = arg_field(True, "Also report the Table 1 ablation (mean pool / BERTScore x norm on/off).")
    encoder: str = arg_field(
        "FacebookAI/xlm-roberta-base", "Encoder path or hub id, or 'random' (sizes below).", reads_files=True
    )
    tokenizer: str | None = arg_field(
        None, "Tokenizer path; default: the encoder's, or one trained on the data.", reads_files=True
    )
    layer: int | None = arg_field(
        None, "Hidden state L (0 = embeddings); default the paper's: 8 of 12 layers, 17 of 24, else 2/3."
    )
    vocab_size: int = arg_field(8000, "Random encoder: tokenizer vocabulary.")
    tokenizer_training_texts: int = arg_field(100_000, "Random encoder: train the tokenizer on this many texts.")
    hidden_size: int = arg_field(256, "Random encoder: width.")
    num_hidden_layers: int = arg_field(4, "Random encoder: layers.")
    num_attention_heads: int = arg_field(4, "Random encoder: attention heads.")
    intermediate_size: int = arg_field(512, "Random encoder: FFN width.")
    dropout: float | None = arg_field(
        None, "Random encoder: dropout of its hidden states and attention (default: XLM-R's 0.1)."
    )
    mlm_steps: int = arg_field(0, "Random encoder: MLM pre-training steps on the training text first (0: none).")
    mlm_learning_rate: float = arg_field(5e-4, "MLM pre-training learning rate.")
    mlm_batch_size: int = arg_field(64, "MLM pre-training batch size.")
    max_seq_length: int = arg_field(100, "Tokens per sentence (paper: 100).")
    similarity: str = arg_field("bertscore", "bertscore or mean_pool.")
    normalization: bool = arg_field(True, "In-batch normalization.")
    alpha: float = arg_field(0.75, "Normalization strength (paper: 0.75).")
    softmax_temperature: float = arg_field(5.0, "Logits = S / temperature.")
    loss_type: str = arg_field("global", "global (N^2 - N negatives) or row.")
    eval_batch_size: int = arg_field(256, "Normalization block at evaluation.")
    pooled_loss_weight: float = arg_field(0.0, "Not in the paper: extra InfoNCE on mean-pooled vectors.")
    gather_across_devices: bool = arg_field(
        True,
        "Several processes: score each rank's batch against the global batch's negatives and normalize over it, as "
        "one process given the whole batch (false: each rank's own batch).",
    )

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise UsageError("--train_pairs is empty: give at least one LANGS=SOURCE spec")
        if self.centre not in _CENTRES:
            raise UsageError(f"--centre {self.centre}: expected one of {', '.join(_CENTRES)}")
        for name in ("example_budget", "eval_size"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be >= 1, got {getattr(self, name)}")
        for name in ("top_k_pairs", "min_tokens", "held_out", "mlm_steps", "eval_min_words"):
            if getattr(self, name) < 0:
                raise UsageError(f"--{name} must be >= 0, got {getattr(self, name)}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise UsageError(f"--dropout must be in [0, 1), got {self.dropout}")
        for spec in [*self.train_pairs, *self.eval_pairs]:
            parse_spec(spec)  # syntax only: nothing is read before every argument is known to be good


def tokenizer_factory(script_args: ScriptArguments, output_dir: str, resuming: bool) -> Any:
    """texts -> tokenizer: the given or the encoder's, or one trained on a sample of the texts (saved in the output
    folder and reused from there when the run resumes)."""

    def factory(texts: list[str]) -> Any:
        if script_args.tokenizer or script_args.encoder != "random":
            return AutoTokenizer.from_pretrained(script_args.tokenizer or script_args.encoder)
        sample = random.Random(0).sample(texts, min(len(texts), script_args.tokenizer_training_texts))
        return train_or_reuse_tokenizer(
            sample,
            output_dir=output_dir,
            reuse=resuming,
            vocab_size=script_args.vocab_size,
            model_max_length=script_args.max_seq_length,
        )

    return factory


def build_model(script_args: ScriptArguments, tokenizer: Any, data: PreparedData, args: TrainingArguments) -> Any:
    """The OneAligner model over a pretrained encoder, a random one, or a random one after MLM pre-training."""
    kwargs = {name: getattr(script_args, name) for name in _MODEL_FIELDS}
    encoder: Any = script_args.encoder
    if encoder == "random":
        encoder = random_encoder_config(tokenizer, script_args)
        if script_args.dropout is not None:
            encoder.hidden_dropout_prob = encoder.attention_probs_dropout_prob = script_args.dropout
        torch.manual_seed(args.seed)
        if script_args.mlm_steps:
            ids = [example[key] for example in data.train_examples for key in ("src_input_ids", "tgt_input_ids")]
            encoder = str(
                pretrain_mlm(
                    encoder,
                    tokenizer,
                    ids,
                    output_dir=args.output_dir,
                    steps=script_args.mlm_steps,
                    learning_rate=script_args.mlm_learning_rate,
                    batch_size=script_args.mlm_batch_size,
                    training_args=args,
                )
            )
    return OneAlignerModel.from_encoder(encoder, script_args.layer, **kwargs)


def save_outputs(
    model: Any,
    tokenizer: Any,
    script_args: ScriptArguments,
    model_args: ModelArguments,
    output_dir: Path,
    results: dict[str, Any],
    data: PreparedData,
    log_history: list,
) -> None:
    """Adapter (LoRA), merged or full model with tokenizer, model card, its figures (xsim heatmap, gold vs random
    margins, training curve) and sentence-transformers modules; results."""
    model = export_peft(model, output_dir / ADAPTER_FOLDER, merge=model_args.merge_adapter)
    if not model_args.use_peft or model_args.merge_adapter:
        # Drawn apart and copied in by save_for_hub: a failed export leaves no figures behind in output_dir.
        with tempfile.TemporaryDirectory(prefix="onealigner-figures-") as folder:
            figures = card_figures(model, tokenizer, data.eval_sets, results["final"], log_history, folder)
            card = model_card(
                model,
                script_args.encoder,
                results["data"],
                results["final"],
                figures,
                training_data=script_args.train_pairs,
                evaluation_data=script_args.eval_pairs,
                initial=results.get("initial"),
                steps=results.get("global_step"),  # the repository id goes in when the folder is pushed
            )
            # Mean-pooled layer-L vectors, L2-normalized: exactly the model's sentence embedding (checked on reload).
            save_for_hub(
                model,
                tokenizer,
                output_dir,
                model_card=card,
                figures=figures,
                sentence_transformers={"pooling": "mean", "normalize": True, "verify": True},
            )
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")


def push_export(output_dir: Path, training_args: TrainingArguments, push: bool) -> None:
    """Upload the exported folder (not the checkpoints) to ``--hub_model_id`` (default: the folder's name)."""
    push_recipe_output(output_dir, training_args, push=push)
