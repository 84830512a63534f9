"""Translation memories: TMX 1.4b files (the LISA/GALA exchange format that CAT tools, translate-toolkit and OPUS
read), written from aligned pairs.

One ``<tu>`` a pair with one ``<tuv xml:lang>`` a side, the source language in the header's ``srclang``; a pair's
numbers (the alignment's score, a classifier's quality) go in ``<prop type="x-...">`` elements, the form TMX 1.4b
gives to a tool's own properties. Written with the standard library's escaping: the format is a few fixed elements,
and the one thing a library would add, the refusal of characters XML 1.0 cannot hold, is :func:`check_xml_text`,
which the jobs call before any encoding.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from xml.sax.saxutils import escape, quoteattr

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io import atomic_output

__all__ = ["TMX_VERSION", "check_xml_text", "tmx_language", "write_tmx"]

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
