"""The ContrastiveAlignedEncoder's data (Wu & Dredze 2020): English-centred pairs, their word alignment into training
examples (links moved from words to first-subword positions) and held-out evaluation sets, and the collator.

* :func:`load_data`: every training spec turned English-first, with a held-out split per language.
* :func:`align_data`: one aligner run per language over its training and held-out pairs (a statistical aligner needs
  the whole corpus), then :func:`build_examples` and the :class:`AlignmentEvalSet` of each language.
* :class:`AlignmentCollator`: pads both sides and stacks the links as ``(example, source position, target
  position)`` rows (the model's ``alignments``), plus each example's language index.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

from bitext_hf.data import PairSet, is_english, load_pairs, split_held_out
from bitext_hf.data.collators import pad_sequences
from bitext_hf.data.words import first_subword_positions, tokenize_words
from bitext_hf.errors import DataValidationError
from bitext_hf.families.contrastive_align.cache import align_words
from bitext_hf.families.contrastive_align.symmetrize import Link

if TYPE_CHECKING:
    from bitext_hf.families.contrastive_align.arguments import ScriptArguments

__all__ = [
    "AlignmentCollator",
    "AlignmentEvalSet",
    "align_data",
    "build_examples",
    "concat_pairs",
    "english_first",
    "load_data",
    "training_texts",
]

logger = logging.getLogger("align_contrastive")


class AlignmentEvalSet(NamedTuple):
    """A held-out set of one language: sentences, their words and their word links (English first)."""

    sources: list[str]
    targets: list[str]
    source_words: list[list[str]]
    target_words: list[list[str]]
    links: list[list[Link]]


def build_examples(
    tokenizer: Any,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
    word_links: Sequence[Sequence[Link]],
    language: int,
    max_length: int = 96,
) -> list[dict[str, Any]]:
    """One example per pair with at least one link left after truncation (pairs without links teach nothing)."""
    examples = []
    for src, tgt, links in zip(source_words, target_words, word_links):
        source_ids, source_positions = first_subword_positions(tokenizer, src, max_length)
        target_ids, target_positions = first_subword_positions(tokenizer, tgt, max_length)
        token_links = [
            (source_positions[i], target_positions[j])
            for i, j in links
            if source_positions[i] is not None and target_positions[j] is not None
        ]
        if token_links:
            examples.append(
                {"src_input_ids": source_ids, "tgt_input_ids": target_ids, "links": token_links, "language": language}
            )
    return examples


class AlignmentCollator:
    """Examples of :func:`build_examples` -> the keyword arguments of ``ContrastiveAlignedEncoder.forward``."""

    def __init__(self, pad_token_id: int) -> None:
        if pad_token_id is None:
            raise ValueError("AlignmentCollator needs a pad_token_id (the tokenizer has no pad token)")
        self.pad_token_id = int(pad_token_id)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_sequences([e["src_input_ids"] for e in examples], self.pad_token_id)
        target_ids, target_mask = pad_sequences([e["tgt_input_ids"] for e in examples], self.pad_token_id)
        rows = [(index, i, j) for index, example in enumerate(examples) for i, j in example["links"]]
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "target_input_ids": target_ids,
            "target_attention_mask": target_mask,
            "alignments": torch.tensor(rows, dtype=torch.long).reshape(-1, 3),
            "languages": torch.tensor([int(example["language"]) for example in examples], dtype=torch.long),
        }


def english_first(pairs: PairSet) -> tuple[str, PairSet]:
    """(non-English language, pairs with English as the source): the paper's S is English."""
    if is_english(pairs.src_lang) and not is_english(pairs.tgt_lang):
        return pairs.tgt_lang, pairs
    if is_english(pairs.tgt_lang) and not is_english(pairs.src_lang):
        swapped = PairSet(pairs.tgt_lang, pairs.src_lang, pairs.source, pairs.tgt, pairs.src, spec=pairs.spec)
        return pairs.src_lang, swapped
    raise DataValidationError(f"{pairs.name}: alignment needs English on exactly one side of every pair")


def load_data(script_args: ScriptArguments, seed: int) -> tuple[dict[str, PairSet], dict[str, PairSet]]:
    """{language: training pairs} and {language: held-out pairs}, English first; specs of one language pooled."""
    train: dict[str, PairSet] = {}
    held: dict[str, PairSet] = {}
    for position, spec in enumerate(script_args.train_pairs):
        language, pairs = english_first(load_pairs(spec, max_pairs=script_args.max_pairs or None))
        if script_args.held_out:
            draw = seed if script_args.held_out_seed is None else script_args.held_out_seed
            pairs, held_out = split_held_out(pairs, script_args.held_out, draw + position)
            held[language] = held_out if language not in held else concat_pairs(held[language], held_out)
        train[language] = pairs if language not in train else concat_pairs(train[language], pairs)
    return train, held


def concat_pairs(first: PairSet, second: PairSet) -> PairSet:
    """The pairs of ``first`` then those of ``second``, under ``first``'s languages and source."""
    return PairSet(first.src_lang, first.tgt_lang, first.source, first.src + second.src, first.tgt + second.tgt)


def training_texts(train: dict[str, PairSet]) -> list[str]:
    """Every sentence of the training pairs, both sides (a random encoder's tokenizer is trained on a sample)."""
    return [text for pairs in train.values() for text in (*pairs.src, *pairs.tgt)]


def align_data(
    script_args: ScriptArguments,
    tokenizer: Any,
    aligner: Any,
    train: dict[str, PairSet],
    held: dict[str, PairSet],
    cache: str,
) -> tuple[list[Any], dict[str, AlignmentEvalSet], dict[str, Any]]:
    """(training examples of every language, {language: held-out eval set}, data statistics).

    The examples' language index is the language's position in ``sorted(train)``, the model's languages.
    """
    languages = sorted(train)
    examples, eval_sets, stats = [], {}, {"languages": languages, "aligner": aligner.name}
    for index, language in enumerate(languages):
        # One aligner run over training and held-out pairs: a statistical aligner needs the whole corpus.
        pairs = concat_pairs(train[language], held[language]) if language in held else train[language]
        source_words, target_words = tokenize_words(pairs.src, pairs.tgt, pairs.name)
        links = align_words(
            aligner, source_words, target_words, cache_dir=cache, symmetrization=script_args.symmetrization
        )
        n = len(train[language])
        built = build_examples(
            tokenizer, source_words[:n], target_words[:n], links[:n], index, script_args.max_seq_length
        )
        stats[language] = {"pairs": n, "examples": len(built), "links": sum(map(len, links[:n]))}
        examples += built
        if language in held:
            eval_sets[language] = AlignmentEvalSet(
                pairs.src[n:], pairs.tgt[n:], source_words[n:], target_words[n:], links[n:]
            )
    if not examples:
        raise DataValidationError("no training pair has a word link left after symmetrization and the filters")
    logger.info("data: %s", json.dumps(stats))
    return examples, eval_sets, stats
