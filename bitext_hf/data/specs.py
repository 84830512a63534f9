"""Data specs understood by every training recipe: ``load_pairs(spec)`` and ``load_monolingual(spec)``.

A pair spec is ``LANGS=SOURCE``. ``LANGS`` is either ``xx`` (xx paired with English: ``src`` is xx, ``tgt`` is
English) or ``xx-yy`` (two named languages, ``src`` is xx). Language codes use ``_`` inside a code (``pt_BR``,
``eng_Latn``) because ``-`` separates the two languages. ``SOURCE`` is one of

* ``gettext``: this machine's translation catalogs (``bitext_hf.data.gettext_pairs``). A pair with English on one
  side uses the catalogs directly; a pair of two non-English languages is pivoted through the shared English
  message (non-English-centred data);
* ``hub:DATASET[:CONFIG][:SPLIT]``: a Hugging Face dataset (or a local dataset folder), split ``train`` unless
  given; ``hub:DATASET:CONFIG@SPLIT`` is accepted too (the form of older configs). The two sides are found as: a
  ``translation`` dict column or plain string columns, named after the two languages, or ``sentence1`` (src) and
  ``sentence2`` (tgt), or, when one language is English, the one English-named column (``en``, ``eng_Latn``,
  ``sentence_eng_Latn``...) and the other language's column;
* ``a.xx,b.yy``: two line-aligned text files, src file first;
* ``pairs.tsv``: a tab-separated file: ``English<TAB>xx`` for an ``xx=`` spec, ``xx<TAB>yy`` for an ``xx-yy=`` spec.

Every sentence is stripped. Empty sentences: files are refused by their readers with the file and line named (line
numbers are sentence ids there, and the user can fix the file); rows of a hub dataset with an empty or missing side
are dropped and counted in one warning (a published dataset cannot be fixed by the user). A spec that yields no pair
at all is refused. Every problem is one ``DataValidationError`` line that names the spec.

A monolingual spec is ``xx=SOURCE`` with ``path.txt`` (one sentence a line), ``hub:...`` (a ``text`` column) or
``gettext`` (the translated side of the catalogs).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bitext_hf.data.gettext import gettext_pairs
from bitext_hf.data.readers import read_lines, read_moses, read_tsv_pairs
from bitext_hf.errors import DataValidationError, UsageError

__all__ = [
    "DataSpec",
    "PairSet",
    "is_english",
    "load_monolingual",
    "load_pairs",
    "parse_spec",
]

logger = logging.getLogger(__name__)

ENGLISH = "en"
_ENGLISH_NAMES = frozenset({"en", "eng", "english"})
_DEFAULT_SPLIT = "train"
_SPEC_EXAMPLES = "e.g. fr=gettext, fr=hub:org/name:config:train, fr=a.fr,a.en, fr=pairs.tsv, fr-de=gettext"


def _name_parts(name: str) -> list[str]:
    return name.lower().replace("-", "_").split("_")


def is_english(name: str) -> bool:
    """Whether a language code or column name means English: ``en``, ``eng``, ``english``, ``en_US``,
    ``eng_Latn``, ``sentence_eng_Latn``, ``text_en`` (case-insensitive)."""
    return any(part in _ENGLISH_NAMES for part in _name_parts(name))


@dataclass(frozen=True)
class DataSpec:
    """A parsed spec. ``kind`` is ``gettext``, ``hub``, ``moses`` (two files), ``tsv`` or ``text`` (monolingual);
    ``tgt_lang`` is None for a monolingual spec."""

    spec: str
    src_lang: str
    tgt_lang: str | None
    kind: str
    source: str
    paths: tuple[str, ...] = ()
    dataset: str | None = None
    config: str | None = None
    split: str | None = None
    two_languages: bool = False

    @property
    def name(self) -> str:
        """Short display name: ``SRC-TGT:SOURCE`` with files reduced to their names (``fr-en:gettext``)."""
        source = self.source if self.kind in ("gettext", "hub") else ",".join(Path(p).name for p in self.paths)
        languages = self.src_lang if self.tgt_lang is None else f"{self.src_lang}-{self.tgt_lang}"
        return f"{languages}:{source}"


def _check_language(code: str, spec: str) -> str:
    code = code.strip()
    if not code or any(character.isspace() for character in code) or "=" in code:
        raise DataValidationError(f"data spec {spec!r}: bad language code {code!r} ({_SPEC_EXAMPLES})")
    return code


def _parse_hub(reference: str, spec: str) -> tuple[str, str | None, str]:
    """``DATASET[:CONFIG][:SPLIT]`` or ``DATASET[:CONFIG]@SPLIT`` -> (dataset, config, split).

    The split may itself hold a colon (``train[:1000]``), so at most two colons are cut."""
    reference, at, at_split = reference.partition("@")
    dataset, _, rest = reference.partition(":")
    config, colon, split = rest.partition(":")
    if at and colon:
        raise DataValidationError(f"data spec {spec!r}: give the split once, as hub:DATASET:CONFIG:SPLIT")
    split = (at_split if at else split).strip()
    dataset = dataset.strip()
    if not dataset:
        raise DataValidationError(f"data spec {spec!r}: no dataset after 'hub:' (hub:org/name[:config][:split])")
    return dataset, config.strip() or None, split or _DEFAULT_SPLIT


def parse_spec(spec: str, *, monolingual: bool = False) -> DataSpec:
    """Parse (and check the syntax of) a pair spec or, with ``monolingual=True``, a monolingual spec.

    Cheap: nothing is read, so recipes can check every spec before any expensive work."""
    if not isinstance(spec, str):
        raise DataValidationError(f"data spec {spec!r}: expected a string LANG=SOURCE ({_SPEC_EXAMPLES})")
    languages, separator, source = spec.partition("=")
    source = source.strip()
    if not separator or not languages.strip() or not source:
        raise DataValidationError(f"data spec {spec!r} is not LANG=SOURCE ({_SPEC_EXAMPLES})")
    src, dash, tgt = languages.strip().partition("-")
    src = _check_language(src, spec)
    if dash:
        if monolingual:
            raise DataValidationError(f"monolingual data spec {spec!r} names two languages; expected xx=SOURCE")
        tgt = _check_language(tgt, spec)
        if src == tgt:
            raise DataValidationError(f"data spec {spec!r} pairs a language with itself")
    else:
        tgt = None if monolingual else ENGLISH
        if not monolingual and is_english(src):
            raise DataValidationError(f"data spec {spec!r}: 'xx=' pairs xx with English; name the other language")
    common = {"spec": spec, "src_lang": src, "tgt_lang": tgt, "source": source, "two_languages": bool(dash)}
    if source == "gettext":
        return DataSpec(kind="gettext", **common)
    if source.startswith("hub:"):
        dataset, config, split = _parse_hub(source[len("hub:") :], spec)
        return DataSpec(kind="hub", dataset=dataset, config=config, split=split, **common)
    if "," in source:
        paths = tuple(part.strip() for part in source.split(","))
        if monolingual:
            raise DataValidationError(f"monolingual data spec {spec!r}: expected one text file, got {len(paths)}")
        if len(paths) != 2 or not all(paths):
            raise DataValidationError(f"data spec {spec!r}: expected two line-aligned files, SRC_FILE,TGT_FILE")
        return DataSpec(kind="moses", paths=paths, **common)
    return DataSpec(kind="text" if monolingual else "tsv", paths=(source,), **common)


@dataclass
class PairSet:
    """Translation pairs of one spec: ``src[i]`` translates ``tgt[i]``.

    ``to_dataset()`` / ``PairSet.from_dataset(...)`` convert to and from a ``datasets.Dataset`` with the hub's
    ``translation`` column, so ``filter``, ``map``, ``train_test_split`` and ``push_to_hub`` are one call away.
    """

    # Why a list-backed record and not a datasets.Dataset end to end: what the recipes do with pairs is not what
    # `train_test_split` and `interleave_datasets(probabilities=...)` do. The held-out split also drops training
    # pairs that share a sentence with a held-out one, budgets are exact per-set counts (largest remainder, with
    # repeats when a set is oversampled) rather than a stochastic interleave with a stopping strategy, and every
    # consumer (tokenizers, teachers, aligners) takes Python lists of strings. Datasets enter and leave at the edges:
    # `hub:` specs are loaded with `datasets`, and the two methods below convert.

    src_lang: str
    tgt_lang: str
    source: str
    src: list[str]
    tgt: list[str]
    name: str = ""
    spec: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise DataValidationError(
                f"{self.name or self.source}: {len(self.src)} source but {len(self.tgt)} target sentences"
            )
        if not self.name:
            self.name = f"{self.src_lang}-{self.tgt_lang}:{self.source}"

    def __len__(self) -> int:
        return len(self.src)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return zip(self.src, self.tgt)

    def select(self, indices: Sequence[int] | Any) -> PairSet:
        """A new PairSet of the pairs at ``indices`` (in that order; repeats allowed, for oversampling)."""
        indices = [int(index) for index in indices]
        return PairSet(
            self.src_lang,
            self.tgt_lang,
            self.source,
            [self.src[i] for i in indices],
            [self.tgt[i] for i in indices],
            name=self.name,
            spec=self.spec,
        )

    def to_dataset(self) -> Any:
        """The pairs as a ``datasets.Dataset`` with one ``translation`` column of
        ``{src_lang: src, tgt_lang: tgt}`` (``datasets.Translation``, the layout of the hub's translation data
        sets), in order; the spec's name, source and languages are in ``dataset.info.description``."""
        import datasets

        features = datasets.Features({"translation": datasets.Translation(languages=[self.src_lang, self.tgt_lang])})
        rows = [{self.src_lang: src, self.tgt_lang: tgt} for src, tgt in zip(self.src, self.tgt)]
        description = f"{self.name} ({self.src_lang}-{self.tgt_lang}, {self.source})"
        info = datasets.DatasetInfo(description=description, features=features)
        return datasets.Dataset.from_dict({"translation": rows}, features=features, info=info)

    @classmethod
    def from_dataset(cls, dataset: Any, src_lang: str, tgt_lang: str = ENGLISH, *, source: str = "dataset") -> PairSet:
        """Pairs from a ``datasets.Dataset``, its sides found as for a ``hub:`` spec (a ``translation`` column,
        columns named after the languages, ``sentence1`` / ``sentence2``, or one English column and one other);
        sentences stripped, rows with an empty or missing side dropped with one warning.

        Raises:
            DataValidationError: the sides cannot be told apart, or no pair is left.
        """
        spec = f"{src_lang}-{tgt_lang}={source}"
        parsed = DataSpec(spec=spec, src_lang=src_lang, tgt_lang=tgt_lang, kind="hub", source=source)
        sources, targets = _drop_empty(*_dataset_sides(dataset, parsed), spec)
        if not sources:
            raise DataValidationError(f"{spec}: no sentence pairs")
        return cls(src_lang, tgt_lang, source, sources, targets, name=f"{src_lang}-{tgt_lang}:{source}", spec=spec)


# -- gettext ----------------------------------------------------------------------------------------------------------


def _gettext(lang: str, spec: str) -> list[tuple[str, str]]:
    try:
        return gettext_pairs(lang)
    except DataValidationError as error:
        raise DataValidationError(f"{spec}: {error}") from None


def _gettext_pairs(parsed: DataSpec) -> tuple[list[str], list[str]]:
    src, tgt = parsed.src_lang, parsed.tgt_lang
    assert tgt is not None
    if is_english(src):
        pairs = _gettext(tgt, parsed.spec)
        return [english for english, _ in pairs], [translation for _, translation in pairs]
    if is_english(tgt):
        pairs = _gettext(src, parsed.spec)
        return [translation for _, translation in pairs], [english for english, _ in pairs]
    # Pivot through the shared English message. gettext_pairs makes each side unique within one language, so the
    # source side is unique here too; a target reached twice is kept once to stay a 1:1 gold alignment.
    source_by_english = dict(_gettext(src, parsed.spec))
    sources, targets, seen_target = [], [], set()
    for english, translation in _gettext(tgt, parsed.spec):
        source = source_by_english.get(english)
        if source is not None and source != translation and translation not in seen_target:
            seen_target.add(translation)
            sources.append(source)
            targets.append(translation)
    return sources, targets


# -- hub --------------------------------------------------------------------------------------------------------------


def _load_hub(parsed: DataSpec) -> Any:
    """The ``datasets.Dataset`` of a hub spec (a ``save_to_disk`` folder is loaded with ``load_from_disk``)."""
    import datasets

    dataset_id, config, split = parsed.dataset, parsed.config, parsed.split
    assert dataset_id is not None and split is not None
    folder = Path(dataset_id)
    try:
        if folder.is_dir() and any((folder / name).is_file() for name in ("dataset_dict.json", "state.json")):
            loaded = datasets.load_from_disk(str(folder))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise DataValidationError(
                        f"{parsed.spec}: {folder} has no split {split!r}; available: {', '.join(loaded)}"
                    )
                loaded = loaded[split]
            return loaded
        return datasets.load_dataset(dataset_id, config, split=split)
    except DataValidationError:
        raise
    except Exception as error:  # datasets raises many types (ConnectionError, FileNotFoundError, ValueError...)
        message = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise DataValidationError(
            f"{parsed.spec}: cannot load hub dataset {dataset_id!r} (config {config!r}, split {split!r}): "
            f"{type(error).__name__}: {message}. Offline (HF_DATASETS_OFFLINE=1), only cached datasets load; pass "
            "local files instead (xx=pairs.tsv or xx=a.xx,a.en) or a save_to_disk folder (xx=hub:path/to/folder)"
        ) from None


def _string_columns(dataset: Any) -> list[str]:
    import datasets

    return [
        name
        for name, feature in dataset.features.items()
        if isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")
    ]


def _translation_keys(dataset: Any, parsed: DataSpec) -> list[str]:
    """The languages of a ``translation`` column, from the features (not the first row, which may lack a side)."""
    import datasets

    feature = dataset.features["translation"]
    if isinstance(feature, datasets.Translation):
        return list(feature.languages)
    if isinstance(feature, dict):
        return list(feature)
    raise DataValidationError(
        f"{parsed.spec}: the 'translation' column is {type(feature).__name__}, expected a dict keyed by language"
    )


def _column_for(language: str, columns: Sequence[str]) -> str | None:
    """The one column named after ``language``: exactly, by a name part (``wol`` in ``sentence_wol_Latn``), or by
    substring (``wo`` in ``sentence_wol_Latn``); None when zero or several match."""
    for match in (
        lambda column: column == language,
        lambda column: language.lower() in _name_parts(column),
        lambda column: language.lower() in column.lower(),
    ):
        found = [column for column in columns if match(column)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            return None
    return None


def _resolve_columns(columns: Sequence[str], parsed: DataSpec, where: str) -> tuple[str, str]:
    """(src column, tgt column) among ``columns``, by the rules of the module docstring."""
    src, tgt = parsed.src_lang, parsed.tgt_lang
    assert tgt is not None
    if src in columns and tgt in columns:
        return src, tgt
    if "sentence1" in columns and "sentence2" in columns:
        return "sentence1", "sentence2"
    if is_english(src) or is_english(tgt):
        english = [column for column in columns if is_english(column)]
        others = [column for column in columns if column not in english]
        other_language = tgt if is_english(src) else src
        other = _column_for(other_language, others) or (others[0] if len(others) == 1 else None)
        if len(english) == 1 and other is not None:
            return (english[0], other) if is_english(src) else (other, english[0])
    else:
        src_column, tgt_column = _column_for(src, columns), _column_for(tgt, columns)
        if src_column and tgt_column and src_column != tgt_column:
            return src_column, tgt_column
    raise DataValidationError(
        f"{parsed.spec}: cannot tell the {src!r} and {tgt!r} sides among the {where} {list(columns)}; expected "
        f"columns named {src!r} and {tgt!r}, sentence1/sentence2, or one English column and one {src!r} column"
    )


def _hub_pairs(parsed: DataSpec, max_pairs: int | None) -> tuple[list[Any], list[Any]]:
    dataset = _load_hub(parsed)
    if max_pairs is not None and max_pairs < len(dataset):
        dataset = dataset.select(range(max_pairs))  # before materializing: a 1M-row dataset stays on disk
    return _dataset_sides(dataset, parsed)


def _dataset_sides(dataset: Any, parsed: DataSpec) -> tuple[list[Any], list[Any]]:
    """(sources, targets) of a ``datasets.Dataset``, unstripped, a missing side as None."""
    if "translation" in dataset.column_names:
        src_key, tgt_key = _resolve_columns(_translation_keys(dataset, parsed), parsed, "'translation' keys")
        rows = list(dataset["translation"])
        return [(row or {}).get(src_key) for row in rows], [(row or {}).get(tgt_key) for row in rows]
    src_column, tgt_column = _resolve_columns(_string_columns(dataset), parsed, "string columns")
    return list(dataset[src_column]), list(dataset[tgt_column])


def _drop_empty(sources: Sequence[Any], targets: Sequence[Any], spec: str) -> tuple[list[str], list[str]]:
    kept_sources, kept_targets = [], []
    for source, target in zip(sources, targets):
        if isinstance(source, str) and isinstance(target, str):
            source, target = source.strip(), target.strip()
            if source and target:
                kept_sources.append(source)
                kept_targets.append(target)
    dropped = len(sources) - len(kept_sources)
    if dropped:
        logger.warning("%s: dropped %d of %d rows with an empty or missing side", spec, dropped, len(sources))
    return kept_sources, kept_targets


# -- public API -------------------------------------------------------------------------------------------------------


def _check_limit(value: int | None, name: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"{name} must be a positive integer or None, got {value!r}")


def _read_files(reader: Any, parsed: DataSpec, *args: Any, **kwargs: Any) -> Any:
    try:
        return reader(*args, **kwargs)
    except DataValidationError as error:
        raise DataValidationError(f"{parsed.spec}: {error}") from None


def load_pairs(spec: str, *, max_pairs: int | None = None) -> PairSet:
    """Load the translation pairs of ``spec`` (see the module docstring); the first ``max_pairs`` when given.

    Raises:
        DataValidationError: a malformed spec, an unreadable or malformed file (file and line named), a hub dataset
            that cannot be loaded or whose sides cannot be told apart, or no pair at all.
    """
    _check_limit(max_pairs, "max_pairs")
    parsed = parse_spec(spec)
    if parsed.kind == "gettext":
        sources, targets = _gettext_pairs(parsed)
    elif parsed.kind == "hub":
        sources, targets = _drop_empty(*_hub_pairs(parsed, max_pairs), spec)
    elif parsed.kind == "moses":
        sources, targets = _read_files(read_moses, parsed, *parsed.paths)
        sources, targets = [text.strip() for text in sources], [text.strip() for text in targets]
    elif parsed.two_languages:  # xx<TAB>yy
        sources, targets = _read_files(read_tsv_pairs, parsed, parsed.paths[0])
    else:  # English<TAB>xx
        sources, targets = _read_files(read_tsv_pairs, parsed, parsed.paths[0], src_column=1, tgt_column=0)
    if max_pairs is not None:
        sources, targets = sources[:max_pairs], targets[:max_pairs]
    if not sources:
        raise DataValidationError(f"{spec}: no sentence pairs")
    assert parsed.tgt_lang is not None
    return PairSet(
        parsed.src_lang, parsed.tgt_lang, parsed.source, list(sources), list(targets), name=parsed.name, spec=spec
    )


def load_monolingual(spec: str, *, max_sentences: int | None = None) -> tuple[str, list[str]]:
    """Load the monolingual text of ``xx=path.txt``, ``xx=hub:...`` (a ``text`` column) or ``xx=gettext`` (the
    translated side of the catalogs); returns (language, sentences), the first ``max_sentences`` when given.

    Sentences are stripped; files with an empty line are refused (file and line named), empty hub rows dropped."""
    _check_limit(max_sentences, "max_sentences")
    parsed = parse_spec(spec, monolingual=True)
    if parsed.kind == "gettext":
        texts = [translation for _, translation in _gettext(parsed.src_lang, spec)]
    elif parsed.kind == "hub":
        dataset = _load_hub(parsed)
        if "text" not in dataset.column_names:
            raise DataValidationError(
                f"{spec}: monolingual hub data needs a 'text' column, got {dataset.column_names}"
            )
        if max_sentences is not None and max_sentences < len(dataset):
            dataset = dataset.select(range(max_sentences))
        rows = list(dataset["text"])
        texts = [text.strip() for text in rows if isinstance(text, str) and text.strip()]
        if len(texts) < len(rows):
            logger.warning("%s: dropped %d of %d empty rows", spec, len(rows) - len(texts), len(rows))
    else:
        texts = [text.strip() for text in _read_files(read_lines, parsed, parsed.paths[0])]
    if max_sentences is not None:
        texts = texts[:max_sentences]
    if not texts:
        raise DataValidationError(f"{spec}: no sentences")
    return parsed.src_lang, texts
