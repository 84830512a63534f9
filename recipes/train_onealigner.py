"""Train OneAligner: contrastive BERTScore alignment with in-batch normalization on one, top-k or all language pairs.

The paper's recipe (OneAligner, section 3): an XLM-R encoder, hidden state L, a fixed example budget (1M) sampled
across the chosen pairs, examples with fewer than 5 tokens on either side dropped after sampling, training pairs
that overlap the evaluation sets removed, batch 64, lr 3e-6, 3 epochs, max length 100, temperature 5.0.

    accelerate launch recipes/train_onealigner.py --config recipes/configs/onealigner.yaml
    python recipes/train_onealigner.py --config recipes/configs/onealigner-smoke.yaml --output_dir runs/smoke

Data specs are ``SRC-TGT=SOURCE`` with SOURCE one of

* ``gettext``: this machine's translation catalogs (``bitext_hf.data.gettext_pairs``); a pair without English
  (e.g. ``fr-de=gettext``) is pivoted through the shared English message, which gives non-English-centred data;
* ``hub:DATASET_ID[:CONFIG][@SPLIT]``: a datasets hub id (or a local dataset folder), rows with a ``translation``
  dict keyed by language (OPUS-100, WMT), columns named after the two languages, or ``sentence1``/``sentence2``;
* ``file.tsv`` (source<TAB>target) or ``src.txt,tgt.txt`` (line-aligned files).

Held-out retrieval (accuracy in both directions on the normalized scores, LASER's xsim on the raw BERTScore, and
optionally the paper's Table 1 ablation) runs before training, every ``eval_steps`` and at the end. The model, its
tokenizer, ``eval_results.json`` and the model card are written to ``--output_dir`` next to the checkpoints.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer, DataCollatorForLanguageModeling, XLMRobertaConfig, XLMRobertaForMaskedLM

from bitext_hf.data import gettext_pairs
from bitext_hf.data.readers import DataValidationError, read_moses, read_tsv_pairs
from bitext_hf.metrics.functional import xsim_from_similarity
from bitext_hf.io import atomic_output
from bitext_hf.modeling.onealigner import OneAlignerModel, normalize_scores
from bitext_hf.training import (
    LoopArguments,
    parse_args,
    resolve_resume_checkpoint,
    run_training_loop,
    train_or_reuse_tokenizer,
    train_tokenizer,
)

logger = logging.getLogger("train_onealigner")

RESULTS_FILE = "eval_results.json"
_CENTRES = ("any", "english", "non_english")


class OneAlignerDataError(ValueError):
    """A data spec or data set of the OneAligner recipe is unusable."""


@dataclasses.dataclass
class ScriptArguments:
    """Data, encoder and OneAligner settings (the training loop's own settings are `LoopArguments`)."""

    train_pairs: list[str] = dataclasses.field(
        default_factory=lambda: ["en-es=hub:Helsinki-NLP/opus-100:en-es@train"],
        metadata={"help": "Training pairs, SRC-TGT=SOURCE (gettext, hub:ID[:CONFIG][@SPLIT], file.tsv, a.txt,b.txt)."},
    )
    top_k_pairs: int = dataclasses.field(
        default=0, metadata={"help": "Keep only the k richest training pairs (most examples); 0 keeps all."}
    )
    centre: str = dataclasses.field(
        default="any", metadata={"help": "Training pairs to keep: any, english (en-xx only) or non_english."}
    )
    example_budget: int = dataclasses.field(
        default=1_000_000, metadata={"help": "Training examples sampled uniformly from the pooled pairs (paper: 1M)."}
    )
    min_tokens: int = dataclasses.field(
        default=5, metadata={"help": "After sampling, drop examples with fewer tokens on either side (paper: 5)."}
    )
    eval_pairs: list[str] = dataclasses.field(
        default_factory=list, metadata={"help": "Evaluation pairs, SRC-TGT=SOURCE; their sentences leave training."}
    )
    held_out: int = dataclasses.field(
        default=0, metadata={"help": "Pairs held out of each training pair as an extra evaluation set."}
    )
    eval_size: int = dataclasses.field(
        default=1000, metadata={"help": "At most this many pairs per evaluation set (sampled; Tatoeba-like 1k)."}
    )
    eval_min_words: int = dataclasses.field(
        default=0,
        metadata={"help": "Keep evaluation pairs with at least this many whitespace-separated words on both sides."},
    )
    eval_before_training: bool = dataclasses.field(default=True, metadata={"help": "Evaluate at step 0 too."})
    ablation: bool = dataclasses.field(
        default=True, metadata={"help": "Also report the Table 1 ablation (mean pool / BERTScore x norm on/off)."}
    )

    encoder: str = dataclasses.field(
        default="FacebookAI/xlm-roberta-base",
        metadata={"help": "Encoder path or hub id, or 'random' for a fresh XLM-R of the sizes below."},
    )
    tokenizer: str | None = dataclasses.field(
        default=None, metadata={"help": "Tokenizer path; default: the encoder's, or one trained on the data."}
    )
    layer: int | None = dataclasses.field(
        default=None, metadata={"help": "Hidden state L (0 = embeddings); default round(2/3 * layers)."}
    )
    vocab_size: int = dataclasses.field(default=8000, metadata={"help": "Random encoder: tokenizer vocabulary."})
    tokenizer_training_texts: int = dataclasses.field(
        default=100_000, metadata={"help": "Random encoder: train the tokenizer on at most this many sampled texts."}
    )
    hidden_size: int = dataclasses.field(default=256, metadata={"help": "Random encoder: width."})
    num_hidden_layers: int = dataclasses.field(default=4, metadata={"help": "Random encoder: layers."})
    num_attention_heads: int = dataclasses.field(default=4, metadata={"help": "Random encoder: attention heads."})
    intermediate_size: int = dataclasses.field(default=512, metadata={"help": "Random encoder: FFN width."})
    mlm_steps: int = dataclasses.field(
        default=0, metadata={"help": "Random encoder: MLM pre-training steps on the training text first (0: none)."}
    )
    mlm_learning_rate: float = dataclasses.field(default=5e-4, metadata={"help": "MLM pre-training learning rate."})
    mlm_batch_size: int = dataclasses.field(default=64, metadata={"help": "MLM pre-training batch size."})

    max_seq_length: int = dataclasses.field(default=100, metadata={"help": "Tokens per sentence (paper: 100)."})
    similarity: str = dataclasses.field(default="bertscore", metadata={"help": "bertscore or mean_pool."})
    normalization: bool = dataclasses.field(default=True, metadata={"help": "In-batch normalization."})
    alpha: float = dataclasses.field(default=0.75, metadata={"help": "Normalization strength (paper: 0.75)."})
    softmax_temperature: float = dataclasses.field(default=5.0, metadata={"help": "Logits = S / temperature."})
    loss_type: str = dataclasses.field(default="global", metadata={"help": "global (N^2 - N negatives) or row."})
    eval_batch_size: int = dataclasses.field(default=256, metadata={"help": "Normalization block at evaluation."})
    pooled_loss_weight: float = dataclasses.field(
        default=0.0,
        metadata={"help": "Not in the paper: extra InfoNCE on mean-pooled vectors (trains two-stage's first stage)."},
    )

    def __post_init__(self) -> None:
        if not self.train_pairs:
            raise OneAlignerDataError("train_pairs is empty: give at least one SRC-TGT=SOURCE spec.")
        if self.centre not in _CENTRES:
            raise OneAlignerDataError(f"centre={self.centre!r}: expected one of {_CENTRES}.")
        for name in ("example_budget", "eval_size"):
            if getattr(self, name) < 1:
                raise OneAlignerDataError(f"{name} must be >= 1, got {getattr(self, name)}.")
        for name in ("top_k_pairs", "min_tokens", "held_out", "mlm_steps", "eval_min_words"):
            if getattr(self, name) < 0:
                raise OneAlignerDataError(f"{name} must be >= 0, got {getattr(self, name)}.")
        for spec in [*self.train_pairs, *self.eval_pairs]:
            parse_pair_spec(spec)


# -- data -------------------------------------------------------------------------------------------------------------


def parse_pair_spec(spec: str) -> tuple[str, str, str]:
    """``SRC-TGT=SOURCE`` -> (src, tgt, source)."""
    languages, separator, source = spec.partition("=")
    src, dash, tgt = languages.strip().partition("-")
    if not separator or not dash or not src or not tgt or not source.strip():
        raise OneAlignerDataError(f"data spec {spec!r} is not SRC-TGT=SOURCE (e.g. en-fr=gettext, en-de=pairs.tsv).")
    if src == tgt:
        raise OneAlignerDataError(f"data spec {spec!r} pairs a language with itself.")
    return src, tgt, source.strip()


def eval_set_name(spec: str) -> str:
    """A short name for an evaluation spec: ``SRC-TGT:SOURCE`` with a file reduced to its name."""
    src, tgt, source = parse_pair_spec(spec)
    if not source.startswith("hub:") and source != "gettext":
        source = ",".join(Path(part.strip()).name for part in source.split(","))
    return f"{src}-{tgt}:{source}"


def _gettext_pairs(src: str, tgt: str) -> list[tuple[str, str]]:
    if src == "en":
        return gettext_pairs(tgt)
    if tgt == "en":
        return [(translation, english) for english, translation in gettext_pairs(src)]
    # Pivot through the shared English message: a non-English-centred pair.
    source_by_english = dict(gettext_pairs(src))
    pairs, seen_target = [], set()
    for english, translation in gettext_pairs(tgt):
        source = source_by_english.get(english)
        if source is not None and source != translation and translation not in seen_target:
            seen_target.add(translation)
            pairs.append((source, translation))
    return pairs


def _hub_pairs(source: str, src: str, tgt: str) -> list[tuple[str, str]]:
    from datasets import load_dataset

    reference = source[len("hub:") :]
    reference, _, split = reference.partition("@")
    dataset_id, _, config = reference.partition(":")
    try:
        rows = load_dataset(dataset_id, config or None, split=split or "train")
    except Exception as error:  # datasets raises many types; all mean "cannot load this here"
        raise OneAlignerDataError(
            f"cannot load hub dataset {dataset_id!r} (config {config or None!r}, split {split or 'train'!r}): "
            f"{error.__class__.__name__}: {error}. Offline, use a local folder or a TSV file instead."
        ) from error
    columns = rows.column_names
    if "translation" in columns:
        return [(row["translation"][src], row["translation"][tgt]) for row in rows]
    for first, second in ((src, tgt), ("sentence1", "sentence2")):
        if first in columns and second in columns:
            return list(zip(rows[first], rows[second]))
    raise OneAlignerDataError(
        f"{source}: expected a 'translation' column or columns {src!r}/{tgt!r} or sentence1/sentence2, got {columns}."
    )


def load_pairs(spec: str) -> list[tuple[str, str]]:
    """All (source, target) pairs of a spec, stripped, empty ones dropped."""
    src, tgt, source = parse_pair_spec(spec)
    if source == "gettext":
        pairs = _gettext_pairs(src, tgt)
    elif source.startswith("hub:"):
        pairs = _hub_pairs(source, src, tgt)
    elif "," in source:
        source_file, target_file = (part.strip() for part in source.split(",", 1))
        try:
            pairs = list(zip(*read_moses(source_file, target_file)))
        except DataValidationError as error:
            raise OneAlignerDataError(f"{spec}: {error}") from None
    else:
        pairs = list(zip(*read_tsv_pairs(source)))
    pairs = [(a.strip(), b.strip()) for a, b in pairs if a and b and a.strip() and b.strip()]
    if not pairs:
        raise OneAlignerDataError(f"{spec}: no sentence pairs.")
    return pairs


@dataclasses.dataclass
class PreparedData:
    """Training examples (token ids) and evaluation sets (texts), with the bookkeeping of how they were made."""

    train_examples: list[dict[str, list[int]]]
    eval_sets: dict[str, tuple[list[str], list[str]]]
    stats: dict[str, Any]


def select_pairs(pair_data: dict[str, list[tuple[str, str]]], top_k: int, centre: str) -> list[str]:
    """Apply the centring filter, then keep the top-k richest pairs (all when top_k is 0)."""
    names = list(pair_data)
    if centre != "any":
        has_english = {name: "en" in parse_pair_spec(name)[:2] for name in names}
        names = [name for name in names if has_english[name] == (centre == "english")]
        if not names:
            raise OneAlignerDataError(f"no training pair is {centre.replace('_', '-')}-centred.")
    names.sort(key=lambda name: len(pair_data[name]), reverse=True)
    return names[:top_k] if top_k else names


def prepare_data(script_args: ScriptArguments, tokenizer_factory: Any, seed: int) -> tuple[PreparedData, Any]:
    """Load, split, de-overlap, sample the budget, build/load the tokenizer, tokenize, filter short examples."""
    rng = random.Random(seed)
    train_data = {spec: load_pairs(spec) for spec in script_args.train_pairs}
    eval_sets: dict[str, tuple[list[str], list[str]]] = {}

    def long_enough(pair: tuple[str, str]) -> bool:
        return min(len(pair[0].split()), len(pair[1].split())) >= script_args.eval_min_words

    for spec in script_args.eval_pairs:
        pairs = [pair for pair in load_pairs(spec) if long_enough(pair)]
        if not pairs:
            raise OneAlignerDataError(f"{spec}: no pair has {script_args.eval_min_words} words on both sides.")
        rng.shuffle(pairs)
        pairs = pairs[: script_args.eval_size]
        eval_sets[eval_set_name(spec)] = (
            [a for a, _ in pairs],
            [b for _, b in pairs],
        )
    if script_args.held_out:
        for spec, pairs in train_data.items():
            if len(pairs) <= script_args.held_out:
                raise OneAlignerDataError(
                    f"{spec}: {len(pairs)} pairs, not enough to hold out {script_args.held_out}."
                )
            rng.shuffle(pairs)
            # Held-out pairs come from the pairs that pass the evaluation filter; all others stay for training.
            held_indices = [index for index, pair in enumerate(pairs) if long_enough(pair)][: script_args.held_out]
            if len(held_indices) < script_args.held_out:
                raise OneAlignerDataError(
                    f"{spec}: only {len(held_indices)} pairs have {script_args.eval_min_words} words on both sides."
                )
            held_set = set(held_indices)
            held = [pairs[index] for index in held_indices][: script_args.eval_size]
            train_data[spec] = [pair for index, pair in enumerate(pairs) if index not in held_set]
            eval_sets[f"{spec.split('=', 1)[0]}:held-out"] = ([a for a, _ in held], [b for _, b in held])
    if not eval_sets:
        logger.warning("no evaluation set: give eval_pairs or held_out to measure retrieval during training")

    # Paper 3.1: drop training examples whose source or target appears in any evaluation set.
    eval_sentences = {sentence for sources, targets in eval_sets.values() for sentence in (*sources, *targets)}
    removed_overlap = 0
    for spec, pairs in train_data.items():
        kept = [pair for pair in pairs if pair[0] not in eval_sentences and pair[1] not in eval_sentences]
        removed_overlap += len(pairs) - len(kept)
        train_data[spec] = kept

    selected = select_pairs(train_data, script_args.top_k_pairs, script_args.centre)
    pool = [pair for name in selected for pair in train_data[name]]
    if not pool:
        raise OneAlignerDataError("no training pairs left after removing the evaluation overlap.")
    sampled = rng.sample(pool, min(script_args.example_budget, len(pool)))

    tokenizer = tokenizer_factory([text for pair in sampled for text in pair])
    limit = script_args.max_seq_length
    sources = tokenizer([a for a, _ in sampled], add_special_tokens=True, truncation=True, max_length=limit)
    targets = tokenizer([b for _, b in sampled], add_special_tokens=True, truncation=True, max_length=limit)
    specials = 2  # <s> ... </s>
    examples = [
        {"input_ids": source_ids, "target_input_ids": target_ids}
        for source_ids, target_ids in zip(sources["input_ids"], targets["input_ids"])
        if len(source_ids) - specials >= script_args.min_tokens
        and len(target_ids) - specials >= script_args.min_tokens
    ]
    if not examples:
        raise OneAlignerDataError(f"every sampled example has fewer than {script_args.min_tokens} tokens on a side.")
    stats = {
        "selected_pairs": selected,
        "available_per_pair": {name: len(train_data[name]) for name in train_data},
        "removed_eval_overlap": removed_overlap,
        "sampled": len(sampled),
        "removed_short": len(sampled) - len(examples),
        "train_examples": len(examples),
        "eval_sets": {name: len(sources_) for name, (sources_, _) in eval_sets.items()},
    }
    return PreparedData(examples, eval_sets, stats), tokenizer


# -- model --------------------------------------------------------------------------------------------------------


def _config_kwargs(script_args: ScriptArguments) -> dict[str, Any]:
    return {
        "similarity": script_args.similarity,
        "normalization": script_args.normalization,
        "alpha": script_args.alpha,
        "softmax_temperature": script_args.softmax_temperature,
        "loss_type": script_args.loss_type,
        "max_seq_length": script_args.max_seq_length,
        "eval_batch_size": script_args.eval_batch_size,
        "pooled_loss_weight": script_args.pooled_loss_weight,
    }


def _random_encoder_config(script_args: ScriptArguments, tokenizer: Any) -> XLMRobertaConfig:
    return XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=script_args.hidden_size,
        num_hidden_layers=script_args.num_hidden_layers,
        num_attention_heads=script_args.num_attention_heads,
        intermediate_size=script_args.intermediate_size,
        max_position_embeddings=script_args.max_seq_length + 2 + tokenizer.pad_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


def mlm_pretrain(
    encoder_config: XLMRobertaConfig, tokenizer: Any, texts: Sequence[str], script_args: ScriptArguments, seed: int
) -> XLMRobertaForMaskedLM:
    """A brief masked-LM pre-training of a random encoder on the (monolingual) training text, one side at a time."""
    torch.manual_seed(seed)
    model = XLMRobertaForMaskedLM(encoder_config)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=seed)
    encoded = tokenizer(list(texts), truncation=True, max_length=script_args.max_seq_length)["input_ids"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=script_args.mlm_learning_rate, weight_decay=0.01)
    warmup = max(1, script_args.mlm_steps // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (script_args.mlm_steps - step) / script_args.mlm_steps)),
    )
    generator = random.Random(seed)
    model.train()
    started = time.perf_counter()
    for step in range(script_args.mlm_steps):
        batch = collator([{"input_ids": ids} for ids in generator.sample(encoded, script_args.mlm_batch_size)])
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        if step % max(1, script_args.mlm_steps // 10) == 0 or step == script_args.mlm_steps - 1:
            logger.info(
                "mlm step %d/%d loss %.3f (%.0fs)",
                step + 1,
                script_args.mlm_steps,
                loss.item(),
                time.perf_counter() - started,
            )
    return model


def build_tokenizer_factory(script_args: ScriptArguments, loop_args: LoopArguments | None = None) -> Any:
    """A callable texts -> tokenizer: a given/encoder tokenizer, or one trained on the sampled training text (saved in
    the output folder, and reused from there when the run resumes)."""

    def factory(texts: Sequence[str]) -> Any:
        if script_args.tokenizer:
            return AutoTokenizer.from_pretrained(script_args.tokenizer)
        if script_args.encoder != "random":
            return AutoTokenizer.from_pretrained(script_args.encoder)
        # A sample is enough to fit a Unigram vocabulary and keeps this step short on large budgets.
        sample = random.Random(0).sample(list(texts), min(len(texts), script_args.tokenizer_training_texts))
        if loop_args is None:
            return train_tokenizer(
                sample, vocab_size=script_args.vocab_size, model_max_length=script_args.max_seq_length
            )
        return train_or_reuse_tokenizer(
            sample,
            output_dir=loop_args.output_dir,
            reuse=resolve_resume_checkpoint(loop_args) is not None,
            vocab_size=script_args.vocab_size,
            model_max_length=script_args.max_seq_length,
        )

    return factory


def build_aligner(
    script_args: ScriptArguments, tokenizer: Any, examples: Sequence[dict[str, list[int]]], seed: int
) -> OneAlignerModel:
    """Wrap the encoder (pretrained, random, or random + brief MLM) into a OneAligner model."""
    kwargs = _config_kwargs(script_args)
    if script_args.encoder != "random":
        return OneAlignerModel.from_encoder(script_args.encoder, script_args.layer, tokenizer=tokenizer, **kwargs)
    encoder_config = _random_encoder_config(script_args, tokenizer)
    if not script_args.mlm_steps:
        torch.manual_seed(seed)
        return OneAlignerModel.from_encoder(encoder_config, script_args.layer, tokenizer=tokenizer, **kwargs)
    texts = tokenizer.batch_decode(
        [example[key] for example in examples for key in ("input_ids", "target_input_ids")], skip_special_tokens=True
    )
    mlm_model = mlm_pretrain(encoder_config, tokenizer, texts, script_args, seed)
    with tempfile.TemporaryDirectory() as folder:
        mlm_model.roberta.save_pretrained(folder)
        return OneAlignerModel.from_encoder(folder, script_args.layer, tokenizer=tokenizer, **kwargs)


# -- training and evaluation ----------------------------------------------------------------------------------------


class PairCollator:
    """Pads source and target token ids of a list of examples into the model's forward inputs."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def _pad(self, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(ids) for ids in sequences)
        input_ids = torch.full((len(sequences), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = torch.as_tensor(ids, dtype=torch.long)
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask

    def __call__(self, examples: Sequence[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = self._pad([example["input_ids"] for example in examples])
        target_input_ids, target_attention_mask = self._pad([example["target_input_ids"] for example in examples])
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "target_input_ids": target_input_ids,
            "target_attention_mask": target_attention_mask,
        }


def compute_loss(model: OneAlignerModel, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    output = model(**batch, return_loss=True)
    labels = torch.arange(output.scores.shape[0], device=output.scores.device)
    accuracy = (output.scores.argmax(dim=1) == labels).float().mean()
    return output.loss, {"train_batch_accuracy": accuracy.item()}


def _normalize_blocks(raw: torch.Tensor, alpha: float, block: int) -> torch.Tensor:
    normalized = torch.empty_like(raw)
    for row in range(0, raw.shape[0], block):
        for column in range(0, raw.shape[1], block):
            normalized[row : row + block, column : column + block] = normalize_scores(
                raw[row : row + block, column : column + block], alpha, add_mean_term=False
            )
    return normalized


def _retrieval_metrics(matrix: torch.Tensor) -> dict[str, float]:
    gold = torch.arange(matrix.shape[0])
    src2tgt = (matrix.argmax(dim=1) == gold).float().mean().item()
    tgt2src = (matrix.argmax(dim=0) == gold).float().mean().item()
    return {"src2tgt_accuracy": src2tgt, "tgt2src_accuracy": tgt2src, "accuracy": (src2tgt + tgt2src) / 2}


@torch.no_grad()
def evaluate_sets(
    model: OneAlignerModel, eval_sets: dict[str, tuple[list[str], list[str]]], *, ablation: bool
) -> dict[str, float]:
    """Retrieval on every evaluation set (and its macro average); keys ``<set>/<metric>``.

    ``accuracy`` uses the configured similarity and normalization, evaluation blocks of ``eval_batch_size``;
    ``xsim`` is LASER's margin error (ratio margin, k=4) on the un-normalized similarity; with ``ablation``, the
    accuracy of mean pooling and BERTScore, each without and with normalization (the paper's Table 1).
    """
    results: dict[str, float] = {}
    configured = model.config.similarity
    variants = [("bertscore", False), ("bertscore", True), ("mean_pool", False), ("mean_pool", True)]
    for name, (sources, targets) in eval_sets.items():
        matrices = {}
        for similarity in ("bertscore", "mean_pool") if ablation else (configured,):
            model.config.similarity = similarity
            try:
                raw = model.similarity_matrix(sources, targets, normalize=False)
            finally:
                model.config.similarity = configured
            # Normalization is applied per evaluation block, exactly as similarity_matrix(normalize=True) does.
            matrices[(similarity, False)] = raw
            matrices[(similarity, True)] = _normalize_blocks(raw, model.config.alpha, model.config.eval_batch_size)
        scores = matrices[(configured, bool(model.config.normalization))]
        results.update({f"{name}/{key}": value for key, value in _retrieval_metrics(scores).items()})
        raw = matrices[(configured, False)]
        results[f"{name}/xsim"] = float(xsim_from_similarity(raw.numpy(), k=4, margin="ratio")["xsim"])
        if ablation:
            for similarity, normalize in variants:
                label = f"{similarity}_{'norm' if normalize else 'no_norm'}"
                accuracy = _retrieval_metrics(matrices[(similarity, normalize)])["accuracy"]
                results[f"{name}/ablation_{label}_accuracy"] = accuracy
    if eval_sets:
        metric_names = {key.rsplit("/", 1)[1] for key in results}
        for metric in sorted(metric_names):
            values = [results[f"{name}/{metric}"] for name in eval_sets]
            results[f"average/{metric}"] = float(np.mean(values))
    return results


def _results_table(results: dict[str, float], eval_sets: Sequence[str]) -> list[dict[str, str]]:
    rows = []
    for name in [*eval_sets, "average"]:
        if f"{name}/accuracy" in results:
            rows.append(
                {
                    "evaluation set": name,
                    "accuracy (%)": f"{100 * results[f'{name}/accuracy']:.1f}",
                    "xsim (%)": f"{results[f'{name}/xsim']:.1f}",
                }
            )
    return rows


def save_outputs(
    model: OneAlignerModel,
    tokenizer: Any,
    output_dir: Path,
    script_args: ScriptArguments,
    results: dict[str, Any],
) -> None:
    """The final model, tokenizer, results and model card in ``output_dir`` (and a sentence-transformers export)."""
    from bitext_hf.hub import render_model_card, save_for_hub

    final = results["final"]
    card = render_model_card(
        "onealigner",
        layer=model.config.layer,
        similarity=model.config.similarity,
        alpha=model.config.alpha,
        softmax_temperature=model.config.softmax_temperature,
        loss_type=model.config.loss_type,
        encoder=script_args.encoder,
        train_pairs=", ".join(results["data"]["selected_pairs"]),
        train_examples=results["data"]["train_examples"],
        results_table=_results_table(final, list(results["data"]["eval_sets"])),
    )
    save_for_hub(
        model,
        tokenizer,
        output_dir,
        model_card=card,
        # Mean-pooled layer-L vectors, L2-normalized: exactly OneAlignerModel.encode (checked on reload).
        sentence_transformers={"pooling": "mean", "normalize": True, "verify": True},
    )
    with atomic_output(output_dir / RESULTS_FILE) as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")


def main(script_args: ScriptArguments, loop_args: LoopArguments) -> dict[str, Any]:
    """Prepare data, build the model, train with the shared accelerate loop, evaluate and save."""
    output_dir = Path(loop_args.output_dir)
    data, tokenizer = prepare_data(script_args, build_tokenizer_factory(script_args, loop_args), loop_args.seed)
    logger.info("data: %s", json.dumps(data.stats))
    model = build_aligner(script_args, tokenizer, data.train_examples, loop_args.seed)
    from accelerate import PartialState

    model.to(PartialState().device)  # the evaluation before training runs where training will (a GPU if any)

    def evaluate(trained: OneAlignerModel) -> dict[str, float]:
        return evaluate_sets(trained, data.eval_sets, ablation=False)

    initial = (
        evaluate_sets(model.eval(), data.eval_sets, ablation=script_args.ablation)
        if (script_args.eval_before_training and data.eval_sets)
        else {}
    )
    if initial:
        logger.info(
            "before training: %s", json.dumps({k: round(v, 4) for k, v in initial.items() if k.startswith("average/")})
        )
    result = run_training_loop(
        model,
        data.train_examples,
        args=loop_args,
        compute_loss=compute_loss,
        collate_fn=PairCollator(tokenizer.pad_token_id),
        evaluate=evaluate if data.eval_sets else None,
    )
    trained: OneAlignerModel = result.model
    trained.eval()
    final = evaluate_sets(trained, data.eval_sets, ablation=script_args.ablation) if data.eval_sets else {}
    results = {
        "data": data.stats,
        "global_step": result.global_step,
        "initial": initial,
        "final": final,
        "eval_history": result.eval_history,
    }
    if result.global_step and _is_main_process():
        save_outputs(trained, tokenizer, output_dir, script_args, results)
    logger.info("final: %s", json.dumps({k: round(v, 4) for k, v in final.items() if k.startswith("average/")}))
    return results


def _is_main_process() -> bool:
    from accelerate import PartialState

    return PartialState().is_main_process


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    main(*parse_args(ScriptArguments, LoopArguments))
