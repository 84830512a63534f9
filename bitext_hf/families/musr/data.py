"""MuSR's data: many-to-one pairs into English, a multi-way held-out set, temperature sampling, vocabulary checks.

* Every training spec must have English on one side (``xx=...`` or ``en-xx=...``); pairs are turned so that English
  is the target (many-to-one: the decoder only ever writes English, no language tags).
* The held-out set is multi-way: the same English sentences in every language (chosen among the English sentences
  that all training languages share), so that a non-English pivot can be evaluated as well (xx <-> zz through the
  shared English, as Flores does); those sentences, on either side, leave training.
* Each stage draws its examples with replacement, language l with probability p_l proportional to
  (n_l / sum n) ^ (1 / T) (``bitext_hf.data.samplers``: the paper's section 4.1).
* A control, not the paper: ``english_copies`` turns a stage's English targets into English -> English pairs, so that
  an alpha-0 stage 2 shows the encoder English (which stage 1 never does) without CrossConST's KL term.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bitext_hf.data import PairSet, is_english, load_pairs
from bitext_hf.data.filters import drop_overlap, split_held_out
from bitext_hf.data.samplers import sample_budget, temperature_probabilities
from bitext_hf.errors import DataValidationError

if TYPE_CHECKING:
    from bitext_hf.families.musr.arguments import ScriptArguments

__all__ = [
    "ManyToOneData",
    "check_vocabulary",
    "english_copies",
    "language_probabilities",
    "load_data",
    "load_many_to_one",
    "multiway_held_out",
    "sample_stage",
]


def _to_english(pairs: PairSet) -> PairSet:
    """The pairs with English as the target; refused when neither side is English."""
    if is_english(pairs.tgt_lang) and not is_english(pairs.src_lang):
        return pairs
    if is_english(pairs.src_lang) and not is_english(pairs.tgt_lang):
        return PairSet(pairs.tgt_lang, pairs.src_lang, pairs.source, pairs.tgt, pairs.src, spec=pairs.spec)
    raise DataValidationError(
        f"{pairs.spec or pairs.name}: MuSR trains many-to-one into English, but this spec has "
        f"{'no' if not is_english(pairs.src_lang) else 'only an'} English side ({pairs.src_lang}-{pairs.tgt_lang}); "
        "give xx=... or en-xx=..."
    )


def load_many_to_one(specs: Sequence[str]) -> list[PairSet]:
    """Load every spec (``bitext_hf.data.load_pairs``), English as the target, one spec per language."""
    pairsets = [_to_english(load_pairs(spec)) for spec in specs]
    seen: dict[str, str] = {}
    for pairs in pairsets:
        if pairs.src_lang in seen:
            raise DataValidationError(
                f"{pairs.spec}: language {pairs.src_lang!r} is also given by {seen[pairs.src_lang]}; "
                "concatenate its data into one spec"
            )
        seen[pairs.src_lang] = pairs.spec
    return pairsets


@dataclass
class ManyToOneData:
    """Training pairs per language and the multi-way held-out pairs (row i of every language translates the same
    English sentence ``english[i]``)."""

    train: list[PairSet]
    held_out: dict[str, PairSet]

    @property
    def english(self) -> list[str]:
        return next(iter(self.held_out.values())).tgt if self.held_out else []


def multiway_held_out(pairsets: Sequence[PairSet], n: int, seed: int) -> ManyToOneData:
    """Hold out ``n`` English sentences present in every language, with their translations (see the module
    docstring). ``n = 0`` holds out nothing.

    Raises:
        DataValidationError: fewer than ``n`` English sentences are shared by all the languages.
    """
    if not n:
        return ManyToOneData(list(pairsets), {})
    shared = set(pairsets[0].tgt).intersection(*(pairs.tgt for pairs in pairsets[1:]))
    if len(shared) < n:
        languages = ", ".join(pairs.src_lang for pairs in pairsets)
        raise DataValidationError(
            f"only {len(shared)} English sentences are shared by all training languages ({languages}), not enough "
            f"to hold out {n}: lower --held_out"
        )
    _, first = split_held_out(
        pairsets[0], n, seed, eligible=lambda source, english: english in shared, drop_leaked=False
    )
    english = first.tgt
    train, held_out = [], {}
    for pairs in pairsets:
        row_of = {}
        for row, text in enumerate(pairs.tgt):
            row_of.setdefault(text, row)  # the first translation of a repeated English sentence
        held = pairs.select([row_of[text] for text in english])
        held_out[pairs.src_lang] = held
        train.append(drop_overlap(pairs, [*english, *held.src]))
        if not len(train[-1]):
            raise DataValidationError(f"{pairs.spec}: no training pair left after holding out {n}")
    return ManyToOneData(train, held_out)


def load_data(script_args: ScriptArguments, seed: int) -> ManyToOneData:
    """The recipe's data: ``--train_pairs`` many-to-one into English (:func:`load_many_to_one`), with ``--held_out``
    multi-way sentences held out of training (:func:`multiway_held_out`, drawn with ``seed``)."""
    return multiway_held_out(load_many_to_one(script_args.train_pairs), script_args.held_out, seed)


def sample_stage(pairsets: Sequence[PairSet], examples: int, temperature: float, seed: int) -> list[PairSet]:
    """``examples`` pairs drawn with replacement across languages by temperature (``p_l`` as in the module
    docstring), one PairSet per language."""
    return sample_budget(list(pairsets), examples, temperature=temperature, replacement=True, seed=seed)


def english_copies(pairsets: Sequence[PairSet]) -> PairSet:
    """Every English target of ``pairsets`` (repeats kept, in order) as an English -> English pair: the English sentence
    is also the source. Tokenized like any other pair (``<s> text </s>`` on both sides; MuSR has no language tags),
    these examples make the encoder read English, which the many-to-one pairs never do. A control, not the paper."""
    english = [text for pairs in pairsets for text in pairs.tgt]
    return PairSet("en", "en", "english-copies", list(english), list(english))


def language_probabilities(pairsets: Sequence[PairSet], temperature: float) -> dict[str, float]:
    """The sampling probability of each language (logged and written to the results)."""
    probabilities = temperature_probabilities([len(pairs) for pairs in pairsets], temperature)
    return {pairs.src_lang: float(p) for pairs, p in zip(pairsets, probabilities)}


def check_vocabulary(tokenizer: Any, texts: Mapping[str, Sequence[str]], max_unknown: float) -> dict[str, float]:
    """The share of ``<unk>`` tokens in each language's texts; a language above ``max_unknown`` is refused (its
    script is absent from the vocabulary, e.g. a tokenizer trained on other languages)."""
    rates = {}
    for language, sample in texts.items():
        ids = tokenizer(list(sample), add_special_tokens=False)["input_ids"]
        total = sum(len(row) for row in ids)
        unknown = sum(row.count(tokenizer.unk_token_id) for row in ids)
        rates[language] = unknown / total if total else 1.0
        if rates[language] > max_unknown:
            raise DataValidationError(
                f"language {language!r}: {100 * rates[language]:.0f}% of its tokens are {tokenizer.unk_token} "
                f"(limit {100 * max_unknown:.0f}%): it is absent from the vocabulary; train the tokenizer on data "
                "that includes it (leave --tokenizer unset)"
            )
    return rates
