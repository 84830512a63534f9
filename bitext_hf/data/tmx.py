"""Translation memories: TMX 1.4b files (the LISA/GALA exchange format that CAT tools, translate-toolkit and OPUS
read), written from aligned pairs, and read back (:func:`read_tmx`: the review app opens them).

One ``<tu>`` a pair with one ``<tuv xml:lang>`` a side, the source language in the header's ``srclang``; a pair's
numbers (the alignment's score, a classifier's quality) go in ``<prop type="x-...">`` elements, the form TMX 1.4b
gives to a tool's own properties. Written with the standard library's escaping: the format is a few fixed elements,
and the one thing a library would add, the refusal of characters XML 1.0 cannot hold, is :func:`check_xml_text`,
which the jobs call before any encoding.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import atomic_output

__all__ = ["TMX_VERSION", "TranslationMemory", "check_xml_text", "read_tmx", "tmx_language", "write_tmx"]

TMX_VERSION = "1.4"
# What XML 1.0 cannot hold, even escaped: control characters other than tab, line feed and carriage return, lone
# surrogates and the two non-characters U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# A language code as RFC 5646 (what xml:lang takes) writes it: letters and digits in subtags joined by hyphens.
_TAG = re.compile(r"[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*")


def tmx_language(lang: str | None, option: str = "language") -> str:
    """``lang`` as an ``xml:lang`` value: gettext's and POSIX's ``pt_BR``, ``sr@latin`` or ``de_DE.UTF-8`` become
    ``pt-BR``, ``sr`` and ``de-DE``; anything that is still no language tag is a ``UsageError`` naming ``option``."""
    if lang is None or not lang.strip():
        raise UsageError(f"{option}: a TMX file names the language of each side: give it (e.g. en, de, pt-BR)")
    code = lang.strip().split("@", 1)[0].split(".", 1)[0].replace("_", "-")
    if not _TAG.fullmatch(code):
        raise UsageError(f"{option} {lang!r}: not a language code (e.g. en, de, pt-BR) that TMX's xml:lang can hold")
    return code


def check_xml_text(texts: Iterable[str], name: str, lines: Sequence[int] | None = None) -> None:
    """Refuse (``DataValidationError`` naming ``name`` and the line) a text holding a character XML 1.0 cannot hold,
    even escaped (a control character such as form feed or ESC). ``lines``: each text's line in the file, when the
    texts are not one a line."""
    for number, text in enumerate(texts):
        found = _NOT_XML.search(text)
        if found:
            line = lines[number] if lines is not None else number + 1
            raise DataValidationError(
                f"{name}:{line}: holds the control character U+{ord(found.group()):04X}, which a TMX (XML) file "
                "cannot hold; remove it, or write .tsv, .jsonl or .parquet instead"
            )


def write_tmx(
    path: str | os.PathLike,
    sources: Sequence[str],
    targets: Sequence[str],
    src_lang: str,
    tgt_lang: str,
    properties: Mapping[str, Sequence[float]] | None = None,
    *,
    creation_tool_version: str | None = None,
) -> None:
    """Write the pairs ``(sources[i], targets[i])`` as a TMX 1.4b file at ``path`` (atomically; ``-``: stdout).

    Args:
        src_lang, tgt_lang (str): the two sides' languages (:func:`tmx_language` makes them tags).
        properties (mapping of str to sequences of float, optional): per pair numbers, each written as
            ``<prop type="x-NAME">`` with six decimals (``{"score": scores, "quality": qualities}``).
        creation_tool_version (str, optional): the header's ``creationtoolversion``; by default the installed
            bitext-hf's (read from its metadata: the data layer imports nothing above it).
    """
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} sources for {len(targets)} targets")
    properties = dict(properties or {})
    for key, values in properties.items():
        if len(values) != len(sources):
            raise ValueError(f"{len(values)} values of {key!r} for {len(sources)} pairs")
    if creation_tool_version is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            creation_tool_version = version("bitext-hf")
        except PackageNotFoundError:
            creation_tool_version = ""
    src_tag, tgt_tag = tmx_language(src_lang, "the source language"), tmx_language(tgt_lang, "the target language")
    header = {
        "creationtool": "bitext-hf",
        "creationtoolversion": creation_tool_version or "unknown",
        "segtype": "sentence",
        "o-tmf": "bitext-hf",
        "adminlang": "en",
        "srclang": src_tag,
        "datatype": "plaintext",
    }
    with atomic_output(path) as handle:
        handle.write('<?xml version="1.0" encoding="UTF-8"?>\n')
        handle.write(f'<tmx version="{TMX_VERSION}">\n')
        handle.write("  <header " + " ".join(f"{key}={quoteattr(value)}" for key, value in header.items()) + "/>\n")
        handle.write("  <body>\n")
        for number, (source, target) in enumerate(zip(sources, targets)):
            handle.write("    <tu>\n")
            for key, values in properties.items():
                handle.write(f'      <prop type="x-{key}">{float(values[number]):.6f}</prop>\n')
            for tag, text in ((src_tag, source), (tgt_tag, target)):
                handle.write(f'      <tuv xml:lang="{tag}"><seg>{escape(text)}</seg></tuv>\n')
            handle.write("    </tu>\n")
        handle.write("  </body>\n</tmx>\n")


@dataclasses.dataclass
class TranslationMemory:
    """The pairs of a TMX file: each unit's source and target text, the header's languages, and each unit's numeric
    properties by name (``x-score`` is ``"score"``)."""

    src_lang: str
    tgt_lang: str
    sources: list[str]
    targets: list[str]
    properties: dict[str, list[float]]


def read_tmx(path: str | os.PathLike, *, max_bytes: int | None = None) -> TranslationMemory:
    """The units of a two-language TMX file (bounded as every input; a FIFO or a device is refused unopened). A
    segment's text is all its text, inline tags (``bpt``, ``ph``...) left out.

    Raises:
        DataValidationError: naming the file (and the unit): not XML, an entity declaration (refused rather than
            expanded), no ``srclang``, a unit without exactly one source and one target variant, a property
            ``x-NAME`` that is not a finite number or missing from some units.
    """
    import io
    import math
    import xml.etree.ElementTree as ElementTree

    from bitext_hf.io import read_input_bytes
    from bitext_hf.io.terminal import escape_controls

    shown = escape_controls(os.fspath(path))
    data = read_input_bytes(path, max_bytes=max_bytes)
    if b"<!ENTITY" in data:
        raise DataValidationError(f"{shown}: declares XML entities, which a translation memory does not need; refused")
    lang_attribute = "{http://www.w3.org/XML/1998/namespace}lang"
    src_lang = tgt_lang = None
    sources, targets, properties = [], [], {}
    try:
        for _, element in ElementTree.iterparse(io.BytesIO(data), events=("end",)):
            if element.tag == "header":
                src_lang = element.get("srclang")
            elif element.tag == "tu":
                number = len(sources) + 1
                if not src_lang or src_lang == "*all*":
                    raise DataValidationError(f"{shown}: its header names no source language (srclang)")
                variants = {(tuv.get(lang_attribute) or tuv.get("lang") or ""): tuv for tuv in element.iter("tuv")}
                source = next((tuv for lang, tuv in variants.items() if lang.lower() == src_lang.lower()), None)
                others = [(lang, tuv) for lang, tuv in variants.items() if lang.lower() != src_lang.lower()]
                if source is None or len(others) != 1:
                    raise DataValidationError(
                        f"{shown}: unit {number}: needs one variant in {src_lang} and one in another language "
                        f"(it has {', '.join(variants) or 'none'})"
                    )
                tgt_lang = tgt_lang or others[0][0]
                texts = [
                    "".join(tuv.find("seg").itertext()) if tuv.find("seg") is not None else ""
                    for tuv in (source, others[0][1])
                ]
                sources.append(texts[0])
                targets.append(texts[1])
                for prop in element.findall("prop"):
                    kind = prop.get("type") or ""
                    if kind.startswith("x-"):
                        try:
                            value = float(prop.text or "")
                        except ValueError:
                            value = math.nan
                        if not math.isfinite(value):
                            raise DataValidationError(f"{shown}: unit {number}: {kind} is not a finite number")
                        properties.setdefault(kind[2:], {})[len(sources) - 1] = value
                element.clear()
    except ElementTree.ParseError as error:
        raise DataValidationError(f"{shown}: not a TMX file ({error})") from None
    for name, values in properties.items():
        if len(values) != len(sources):
            raise DataValidationError(f"{shown}: x-{name} is missing from {len(sources) - len(values)} units")
    return TranslationMemory(
        src_lang or "",
        tgt_lang or "",
        sources,
        targets,
        {name: [values[index] for index in range(len(sources))] for name, values in properties.items()},
    )
