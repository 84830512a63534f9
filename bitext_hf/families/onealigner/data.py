"""OneAligner's training data (paper, section 3.1): load every pair, hold out and de-overlap the evaluation sets,
keep the centred or top-k richest pairs, sample the example budget uniformly from the pooled pairs, tokenize once and
drop examples with fewer than ``min_tokens`` tokens on a side (``PreparedData``).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from bitext_hf.data import PairSet, is_english, load_pairs
from bitext_hf.data.filters import drop_overlap, min_words, split_held_out
from bitext_hf.data.samplers import sample_budget, sample_indices
from bitext_hf.errors import DataValidationError

if TYPE_CHECKING:
    from bitext_hf.families.onealigner.arguments import ScriptArguments

__all__ = ["PreparedData", "load_data", "select_pairs"]

logger = logging.getLogger("train_onealigner")  # the recipe's logger: its log lines name the recipe


@dataclasses.dataclass
class PreparedData:
    """Training examples (token ids), evaluation sets (texts) and how they were made."""

    train_examples: list[dict[str, list[int]]]
    eval_sets: dict[str, tuple[list[str], list[str]]]
    stats: dict[str, Any]


def select_pairs(pair_data: dict[str, PairSet], top_k: int, centre: str) -> list[str]:
    """Apply the centring filter, then keep the top-k richest pairs (all when top_k is 0)."""
    names = list(pair_data)
    if centre != "any":
        english = {
            name: is_english(pair_data[name].src_lang) or is_english(pair_data[name].tgt_lang) for name in names
        }
        names = [name for name in names if english[name] == (centre == "english")]
        if not names:
            raise DataValidationError(f"no training pair is {centre.replace('_', '-')}-centred")
    return sorted(names, key=lambda name: len(pair_data[name]), reverse=True)[: top_k or None]


def load_data(script_args: ScriptArguments, tokenizer_factory: Any, seed: int) -> tuple[PreparedData, Any]:
    """Load, hold out, de-overlap, sample the budget, get the tokenizer, tokenize once, drop short examples."""
    words = script_args.eval_min_words
    train = {spec: load_pairs(spec) for spec in script_args.train_pairs}
    eval_sets: dict[str, PairSet] = {}
    for spec in script_args.eval_pairs:
        pairs = min_words(load_pairs(spec), words)
        if not len(pairs):
            raise DataValidationError(f"{spec}: no pair has {words} words on both sides")
        eval_sets[pairs.name] = pairs.select(sample_indices(len(pairs), min(len(pairs), script_args.eval_size), seed))
    if script_args.held_out:
        eligible = lambda src, tgt: min(len(src.split()), len(tgt.split())) >= words  # noqa: E731
        for position, (spec, pairs) in enumerate(train.items()):  # one draw per pair: not the same rows everywhere
            train[spec], held = split_held_out(pairs, script_args.held_out, seed + position, eligible=eligible)
            eval_sets[f"{pairs.src_lang}-{pairs.tgt_lang}:held-out"] = held.select(
                range(script_args.eval_size)[: len(held)]
            )
    if not eval_sets:
        logger.warning("no evaluation set: give eval_pairs or held_out to measure retrieval during training")
    # Paper 3.1: drop training examples whose source or target appears in any evaluation set.
    eval_texts = [text for pairs in eval_sets.values() for text in (*pairs.src, *pairs.tgt)]
    available = {spec: drop_overlap(pairs, eval_texts) for spec, pairs in train.items()}
    removed = sum(len(train[spec]) - len(available[spec]) for spec in train)
    selected = [
        name for name in select_pairs(available, script_args.top_k_pairs, script_args.centre) if len(available[name])
    ]
    if not selected:
        raise DataValidationError("no training pairs left after removing the evaluation overlap")
    # By size without replacement: the same as drawing the budget uniformly from the pooled pairs (the paper's).
    sampled = sample_budget([available[name] for name in selected], script_args.example_budget, seed=seed)
    sources = [text for pairs in sampled for text in pairs.src]
    targets = [text for pairs in sampled for text in pairs.tgt]
    tokenizer = tokenizer_factory([*sources, *targets])
    tokenize = lambda texts: tokenizer(texts, truncation=True, max_length=script_args.max_seq_length)["input_ids"]  # noqa: E731
    # The ids are needed anyway: the token filter counts them (minus <s> ... </s>) rather than tokenizing again.
    examples = [
        {"src_input_ids": src_ids, "tgt_input_ids": tgt_ids}
        for src_ids, tgt_ids in zip(tokenize(sources), tokenize(targets))
        if min(len(src_ids), len(tgt_ids)) - 2 >= script_args.min_tokens
    ]
    if not examples:
        raise DataValidationError(f"every sampled example has fewer than {script_args.min_tokens} tokens on a side")
    stats = {
        "selected_pairs": selected,
        "available_per_pair": {name: len(pairs) for name, pairs in available.items()},
        "removed_eval_overlap": removed,
        "sampled": len(sources),
        "removed_short": len(sources) - len(examples),
        "train_examples": len(examples),
        "eval_sets": {name: len(pairs) for name, pairs in eval_sets.items()},
    }
    texts = {name: (pairs.src, pairs.tgt) for name, pairs in eval_sets.items()}
    return PreparedData(examples, texts, stats), tokenizer
