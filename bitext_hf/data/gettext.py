"""Translation pairs from gettext message catalogs (``.po`` / ``.mo``).

Software localisation catalogs are genuine human translations of English interface messages, the same kind of data
as OPUS's GNOME / KDE / Ubuntu corpora. Every Linux machine and many Python packages carry thousands of them, in
close to two hundred languages, which makes them the offline source of real parallel data for this package. The
catalog a message comes from (its gettext domain: the application) is a label too: :func:`gettext_application_examples`
turns the catalogs into an offline multilingual classification task for zero-shot transfer.
"""

from __future__ import annotations

import logging
import os
import random
import re
import site
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bitext_hf.data.catalog_reader import CATALOG_SUFFIXES, read_catalog
from bitext_hf.data.readers import DEFAULT_MAX_LINE_CHARS, DataValidationError
from bitext_hf.errors import UsageError

__all__ = [
    "GettextPairs",
    "clean_message",
    "collect_gettext_pairs",
    "find_catalogs",
    "gettext_application_examples",
    "gettext_languages",
    "gettext_pairs",
    "locale_roots",
    "read_gettext",
]

logger = logging.getLogger(__name__)

DEFAULT_LOCALE_ROOTS = ("/usr/share/locale", "/usr/share/locale-langpack", "/usr/local/share/locale")

# Keyboard accelerators: GTK "_File", KDE/Qt "&File"; a literal "&&" / "__" stays a single character.
_ACCELERATOR = re.compile(r"(?<![_&\w])[_&](?=\w)")
_WHITESPACE = re.compile(r"\s+")
_LETTER = re.compile(r"[^\W\d_]")
# printf / Python / brace placeholders: not words, so they neither make a message long enough nor make it text.
_PLACEHOLDER = re.compile(r"%(?:\(\w+\))?[-+ #0]*\d*(?:\.\d+)?[hlLqjzt]*[a-zA-Z%]|\$?\{[^{}]*\}")


def clean_message(text: str) -> str:
    """One-line, accelerator-free form of a catalog message."""
    text = _ACCELERATOR.sub("", text.replace("&&", "&"))
    return _WHITESPACE.sub(" ", text).strip()


def read_gettext(path: str | os.PathLike, *, include_fuzzy: bool = False) -> list[tuple[str, str]]:
    """(English msgid, translation) pairs of a ``.po`` or ``.mo`` catalog: untranslated, obsolete and (by default)
    fuzzy entries are skipped; plural entries give their singular form; entries holding a NUL character are left
    out. A catalog that cannot be read (not a regular file, too large, truncated, corrupt, an unknown charset, a
    string left open) raises ``DataValidationError`` naming it (see :func:`bitext_hf.data.catalog_reader.read_catalog`,
    which also counts the entries left out)."""
    return read_catalog(path, include_fuzzy=include_fuzzy).pairs


def _python_locale_dirs() -> list[Path]:
    roots = []
    for base in {*site.getsitepackages(), site.getusersitepackages(), sys.prefix}:
        base_path = Path(base)
        if base_path.is_dir():
            roots.extend(p for pattern in ("*/locale", "*/*/locale", "*/*/*/locale") for p in base_path.glob(pattern))
    return roots


def find_catalogs(lang: str, roots: Iterable[str | os.PathLike] | None = None) -> list[Path]:
    """Catalog files (``.mo`` and ``.po``) for language folder ``lang`` (e.g. "fr", "pt_BR") under ``roots``
    (by default the system locale folders and the ``locale`` folders of installed Python packages), sorted."""
    folders = [Path(r) for r in roots] if roots is not None else [Path(r) for r in DEFAULT_LOCALE_ROOTS]
    if roots is None:
        folders += _python_locale_dirs()
    found = set()
    for folder in folders:
        messages = folder / lang / "LC_MESSAGES"
        if messages.is_dir():
            found.update(p for p in messages.iterdir() if p.suffix in CATALOG_SUFFIXES)
    return sorted(found)


def locale_roots(extra: Iterable[str | os.PathLike] = (), *, system: bool = True) -> list[Path]:
    """The folders searched for ``<lang>/LC_MESSAGES`` catalogs: the default ones of :func:`find_catalogs` (the
    system locale folders and the ``locale`` folders of installed Python packages) when ``system``, then ``extra``."""
    roots = [Path(root) for root in DEFAULT_LOCALE_ROOTS] + _python_locale_dirs() if system else []
    return roots + [Path(root) for root in extra]


def gettext_languages(roots: Iterable[str | os.PathLike] | None = None) -> list[str]:
    """The language folders (``fr``, ``pt_BR``, ``sr@latin``) holding at least one ``.mo`` or ``.po`` catalog under
    ``roots`` (default: as :func:`find_catalogs`), sorted; unreadable folders are skipped."""
    languages = set()
    for root in locale_roots() if roots is None else [Path(root) for root in roots]:
        try:
            children = list(root.iterdir()) if root.is_dir() else []
        except OSError:
            continue
        for child in children:
            messages = child / "LC_MESSAGES"
            try:
                if messages.is_dir() and any(path.suffix in CATALOG_SUFFIXES for path in messages.iterdir()):
                    languages.add(child.name)
            except OSError:
                continue
    return sorted(languages)


@dataclass
class GettextPairs:
    """What :func:`collect_gettext_pairs` read: the pairs, the catalogs they come from, and what was left out."""

    pairs: list[tuple[str, str]]
    catalogs: list[Path]  # every catalog found, the skipped ones included
    skipped_catalogs: list[str] = field(default_factory=list)  # one line each: the catalog and why
    unusable_entries: int = 0  # translated entries holding a NUL character or an unpaired surrogate
    too_long: int = 0  # pairs whose TSV line would be longer than the readers accept (DEFAULT_MAX_LINE_CHARS)


def _under(path: Path, roots: Sequence[Path]) -> bool:
    """Whether catalog ``path`` (``<root>/<lang>/LC_MESSAGES/<name>``) was found under one of ``roots``."""
    root = os.path.abspath(path.parent.parent.parent)
    return any(os.path.abspath(candidate) == root for candidate in roots)


def collect_gettext_pairs(
    lang: str,
    roots: Iterable[str | os.PathLike] | None = None,
    *,
    min_chars: int = 1,
    min_words: int = 1,
    strict_roots: Iterable[str | os.PathLike] = (),
    catalogs: Iterable[str | os.PathLike] | None = None,
) -> GettextPairs:
    """The pairs of :func:`gettext_pairs`, with what was read and left out.

    A catalog that cannot be read is skipped with one warning naming it and why, unless it was found under one of
    ``strict_roots`` (folders the user named: their catalogs are the user's data), where its
    ``DataValidationError`` is raised. Entries holding a NUL character, and pairs longer than a line the readers
    of pairs accept (:data:`bitext_hf.data.DEFAULT_MAX_LINE_CHARS`), are left out and counted, so that the pairs
    always read back into ``score`` and ``mine``.

    Args:
        catalogs (iterable of paths, optional): the catalogs to read, as :func:`find_catalogs` lists them (``lang``'s
            under ``roots``, sorted), when the caller has listed them already (``bitext-hf data gettext`` protects
            them as its inputs: the set read is the set protected); by default they are found under ``roots``.
    """
    catalogs = find_catalogs(lang, roots) if catalogs is None else [Path(catalog) for catalog in catalogs]
    if not catalogs:
        raise DataValidationError(
            f"no gettext catalogs found for language {lang!r} (looked for <root>/{lang}/LC_MESSAGES/*.mo); "
            "install translated packages or pass roots="
        )
    strict = [Path(root) for root in strict_roots]
    result = GettextPairs([], catalogs)
    seen_src, seen_tgt = set(), set()
    for catalog in catalogs:
        try:
            entries = read_catalog(catalog)
        except DataValidationError as error:
            if _under(catalog, strict):
                raise
            logger.warning("skipping %s", error)
            result.skipped_catalogs.append(str(error))
            continue
        result.unusable_entries += entries.unusable
        for msgid, msgstr in entries.pairs:
            src, tgt = clean_message(msgid), clean_message(msgstr)
            src_words = _PLACEHOLDER.sub(" ", src)
            if (
                len(src) < min_chars
                or len(src_words.split()) < min_words
                or not _LETTER.search(src_words)
                or not _LETTER.search(_PLACEHOLDER.sub(" ", tgt))
                or src == tgt
                or src in seen_src
                or tgt in seen_tgt
            ):
                continue
            if len(src) + 1 + len(tgt) > DEFAULT_MAX_LINE_CHARS:
                result.too_long += 1
                continue
            seen_src.add(src)
            seen_tgt.add(tgt)
            result.pairs.append((src, tgt))
    return result


def gettext_pairs(
    lang: str,
    roots: Iterable[str | os.PathLike] | None = None,
    *,
    min_chars: int = 1,
    min_words: int = 1,
    strict_roots: Iterable[str | os.PathLike] = (),
) -> list[tuple[str, str]]:
    """All (English, ``lang``) pairs from the installed catalogs, cleaned and deduplicated.

    Messages are made one-line and accelerator-free; pairs without letters, shorter than ``min_chars`` or
    ``min_words`` (English side), or left untranslated (translation == English) are dropped. Each English message
    and each translation appears at most once (the first catalog in path order wins), so the result is a 1:1 gold
    alignment usable for retrieval evaluation. Catalogs that cannot be read are skipped with a warning (raised,
    under ``strict_roots``), and messages no text file of pairs can hold are left out: see
    :func:`collect_gettext_pairs`, which also says what was left out.
    """
    return collect_gettext_pairs(
        lang, roots, min_chars=min_chars, min_words=min_words, strict_roots=strict_roots
    ).pairs


def _word_count(text: str) -> int:
    return len(_PLACEHOLDER.sub(" ", text).split())


def _has_letters(text: str) -> bool:
    return bool(_LETTER.search(_PLACEHOLDER.sub(" ", text)))


def _read_domains(
    lang: str, roots: Iterable[str | os.PathLike] | None
) -> tuple[dict[str, dict[str, str]], dict[str, set[str]], dict[str, set[str]]]:
    """({domain: {English: translation}}, {English: domains}, {translation: domains}) over ``lang``'s catalogs.

    The two indexes count every translated entry, before any filter: a message is ambiguous as soon as two
    applications carry it, whether or not the other one's entry would have been kept.
    """
    messages: dict[str, dict[str, str]] = defaultdict(dict)
    english_domains: dict[str, set[str]] = defaultdict(set)
    translation_domains: dict[str, set[str]] = defaultdict(set)
    for catalog in find_catalogs(lang, roots):
        try:
            entries = read_gettext(catalog)
        except DataValidationError as error:
            logger.warning("skipping %s", error)
            continue
        domain = catalog.stem  # the gettext domain: one application (its .mo and .po are the same catalog)
        for msgid, msgstr in entries:
            english, translation = clean_message(msgid), clean_message(msgstr)
            english_domains[english].add(domain)
            translation_domains[translation].add(domain)
            messages[domain].setdefault(english, translation)  # sorted catalog paths: the first one wins
    return messages, english_domains, translation_domains


def gettext_application_examples(
    languages: Sequence[str],
    roots: Iterable[str | os.PathLike] | None = None,
    *,
    per_application: int = 100,
    min_per_application: int = 2,
    max_applications: int | None = None,
    min_words: int = 1,
    max_words: int | None = None,
    seed: int = 0,
) -> dict[str, list[tuple[str, str]]]:
    """Which application a message comes from: ``{"en": [(msgid, app), ...], lang: [(msgstr, app), ...]}``.

    The label is the gettext domain (the catalog's file name, e.g. ``coreutils``), the texts are the cleaned
    messages (:func:`clean_message`), English from the msgids and every language in ``languages`` from its
    translations. Only messages translated into every language are kept, so the lists are parallel: the i-th
    example of every language is the same message, ordered by application then at random. Dropped: messages whose
    English or one of whose translations appears in more than one application (the label would be ambiguous),
    translations equal to the English, texts without letters, English outside ``min_words`` .. ``max_words``
    words (placeholders not counted). Each application keeps at most ``per_application`` messages (a sample drawn
    with ``seed``, independent of which other applications are present); applications with fewer than
    ``min_per_application`` are left out, and ``max_applications`` keeps the ones with most messages.

    Args:
        languages: language folders such as ``"de"`` or ``"pt_BR"``; English is the msgid side, not one of them.
        roots: locale folders holding ``<lang>/LC_MESSAGES/*.mo`` (default: as :func:`find_catalogs`).

    Raises:
        UsageError: no language, English among them, or a count out of range.
        DataValidationError: fewer than two applications have enough messages in every language asked for.
    """
    languages = list(dict.fromkeys(languages))
    if not languages:
        raise UsageError("gettext_application_examples needs at least one language besides English")
    if "en" in languages:
        raise UsageError("gettext_application_examples: English is the msgid side; list only the other languages")
    if per_application < 1 or min_per_application < 1 or min_words < 0:
        raise UsageError("gettext_application_examples needs per_application >= 1, min_per_application >= 1")
    if max_applications is not None and max_applications < 2:
        raise UsageError("gettext_application_examples: max_applications must be at least 2 (or None)")
    roots = list(roots) if roots is not None else None
    read = {lang: _read_domains(lang, roots) for lang in languages}
    ambiguous = {
        text
        for _, english_domains, _ in read.values()
        for text, domains in english_domains.items()
        if len(domains) > 1
    }
    ambiguous_translations = {
        lang: {text for text, domains in translation_domains.items() if len(domains) > 1}
        for lang, (_, _, translation_domains) in read.items()
    }
    domains = set.intersection(*(set(messages) for messages, _, _ in read.values()))
    kept: dict[str, list[str]] = {}
    for domain in sorted(domains):
        candidates = []
        for english in sorted(set.intersection(*(set(read[lang][0][domain]) for lang in languages))):
            words = _word_count(english)
            if english in ambiguous or words < min_words or (max_words is not None and words > max_words):
                continue
            translations = [read[lang][0][domain][english] for lang in languages]
            if not _has_letters(english) or any(
                translation == english or not _has_letters(translation) or translation in ambiguous_translations[lang]
                for lang, translation in zip(languages, translations)
            ):
                continue
            candidates.append(english)
        if len(candidates) >= min_per_application:
            # Seeded by application too: adding or removing another catalog leaves this sample unchanged.
            kept[domain] = random.Random(f"{seed}/{domain}").sample(candidates, min(per_application, len(candidates)))
    ranked = sorted(kept, key=lambda domain: (-len(kept[domain]), domain))[:max_applications]
    if len(ranked) < 2:
        raise DataValidationError(
            f"gettext application data: {len(ranked)} application(s) with at least {min_per_application} "
            f"unambiguous message(s) translated into {', '.join(languages)} (need 2; found catalogs of "
            f"{len(domains)} application(s) in every one of these languages); install translated packages or pass "
            "roots="
        )
    examples: dict[str, list[tuple[str, str]]] = {"en": [], **{lang: [] for lang in languages}}
    for domain in sorted(ranked):
        for english in kept[domain]:
            examples["en"].append((english, domain))
            for lang in languages:
                examples[lang].append((read[lang][0][domain][english], domain))
    return examples
