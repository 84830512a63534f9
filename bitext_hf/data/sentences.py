"""Running text into sentences: paragraphs (a blank line apart) split into sentences offline, for ``bitext-hf align
--split`` and :func:`bitext_hf.alignment.align_texts`.

A paragraph's lines are joined with a space (hard-wrapped text), then split by sentence-splitter (the Moses
splitter's rules and non-breaking prefixes; LGPL-3.0, plain Python, no download) with the prefixes of the language
when it has them (24 languages) and English's otherwise, then cut after the CJK full stops and marks (。！？), which
take no space after them; a list's number that the Moses rules cut off as a sentence ("2.") opens the next one.
Chosen by measurement (experiments/README.md, "Sentence splitting"): boundary F1 95 and 93 on Text+Berg German and
French (where the gold also cuts at ; and :, which no general splitter does), 97-100 on gettext messages in 13
languages including Japanese, Chinese, Korean and Arabic; pySBD and blingfire scored lower on running text, pySBD at
a fifteenth of the speed. Nothing installable splits Thai, which marks no sentence end. ``clauses`` also cuts after
; and : (CAT tools' option, Text+Berg's convention: F1 97 there), which costs text that keeps them inside its
sentences 3-11 points of precision: not the default.

A line that ends neither a sentence nor a clause (no final ``.!?…;:``, CJK, Arabic or Devanagari mark) and is short
of the document's width (``TITLE_WIDTH`` of the longest lines, their 90th percentile) is also a paragraph without a
blank line: a title, a heading, an author line or a caption, on its own line in text exported one paragraph a line
as much as in hard-wrapped text, where the lines a paragraph wraps fill the width and the short last line ends its
sentence (after a line cut mid-sentence, such a line is taken for that sentence's end: it ends the paragraph). Run on
into the next sentence, it would cost the splitter a boundary no punctuation marks, and the aligner a bead.

A document keeps, for each sentence, its paragraph's number (no bead of an alignment crosses a paragraph) and the
line it starts on (messages name it).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence

__all__ = [
    "SENTENCE_SPLITTER_LANGUAGES",
    "TITLE_WIDTH",
    "Document",
    "base_language",
    "sentence_splitter",
    "split_document",
]

# The languages of sentence-splitter's non-breaking prefix files (sentence_splitter/non_breaking_prefixes/*.txt).
SENTENCE_SPLITTER_LANGUAGES = frozenset(
    [
        "ca",
        "cs",
        "da",
        "de",
        "el",
        "en",
        "es",
        "fi",
        "fr",
        "hu",
        "is",
        "it",
        "lt",
        "lv",
        "nl",
        "no",
        "pl",
        "pt",
        "ro",
        "ru",
        "sk",
        "sl",
        "sv",
        "tr",
    ]
)
# A line that ends a sentence or a clause: its last mark (closing quotes and brackets after it allowed).
_ENDS_SENTENCE_OR_CLAUSE = re.compile(r"[.!?…;:。！？；：؟۔।][\"'»«“”‘’)\]」』）】〕〉》]*$")
# A line ending neither, shorter than this share of the document's width, is a paragraph of its own (a title).
TITLE_WIDTH = 0.6
# The document's width: this quantile of its line lengths (a few long lines do not make every other line short).
_WIDTH_QUANTILE = 0.9
# A list's number or letter ("2.", "(3)", "b)", "IV."): the Moses rules end a sentence after "2." and start one
# before the next capital, so an item's number stood alone, a sentence to align of its own.
_LIST_MARKER = re.compile(r"\(?(?:\d{1,3}|[a-z]|[IVXLC]{1,5})[.)]|\(\d{1,3}\)")
# A cut after CJK sentence-final marks (and the closing brackets and quotes after them): they take no space after them,
# which sentence-splitter needs to cut.
_CJK_MARKS = r"[。！？]+[」』）】〕〉》”’\"')]*"
_CJK_END = re.compile(rf"({_CJK_MARKS})\s*(?=\S)")
# The same, and a cut after a clause's end (; or : that a space follows, or their full-width forms).
_CLAUSE_END = re.compile(rf"({_CJK_MARKS}|[;:](?=\s)|[；：]+)\s*(?=\S)")


@dataclasses.dataclass
class Document:
    """A document split into sentences.

    Attributes:
        sentences (list of str): in order, each stripped and with its inner whitespace as in the text (a line break
            inside a paragraph becomes a space).
        paragraphs (list of int): each sentence's paragraph, numbered from 0.
        lines (list of int): the line (1-based) each sentence starts on.
    """

    sentences: list[str]
    paragraphs: list[int]
    lines: list[int]

    def __len__(self) -> int:
        return len(self.sentences)


def base_language(lang: str | None) -> str | None:
    """The language of a code without its region, script or encoding: ``pt_BR``, ``sr@latin``, ``zh-Hans``,
    ``de_DE.UTF-8`` and ``DE`` -> ``pt``, ``sr``, ``zh``, ``de``, ``de``; None for None or an empty code. Also what
    lid.176's labels are (:func:`bitext_hf.mining.filters.lid_code`)."""
    if lang is None:
        return None
    for separator in "_-@.":
        lang = lang.split(separator, 1)[0]
    return lang.strip().lower() or None


def sentence_splitter(lang: str | None, clauses: bool = False) -> Callable[[str], list[str]]:
    """The function that splits one paragraph of ``lang`` (a code such as ``de``, ``pt_BR``, ``zh-Hans``; None for
    unknown) into sentences (see the module docstring for which splitter); ``clauses``: also after each ``;`` and
    ``:`` that a space follows (and their full-width forms, whatever follows), as CAT tools' segmentation rules can
    and corpora such as Text+Berg do."""
    if not isinstance(clauses, bool):  # before the cache, where 1 is True
        raise TypeError(f"clauses must be True or False, not {clauses!r}")
    return _sentence_splitter(lang, clauses)


@functools.lru_cache(maxsize=64)
def _sentence_splitter(lang: str | None, clauses: bool) -> Callable[[str], list[str]]:
    from sentence_splitter import SentenceSplitter

    base = base_language(lang)
    splitter = SentenceSplitter(language=base if base in SENTENCE_SPLITTER_LANGUAGES else "en")
    cut = _CLAUSE_END if clauses else _CJK_END

    def split(text: str) -> list[str]:
        sentences: list[str] = []
        marker = ""  # a list's number the Moses rules cut off as a sentence of its own: it opens the next one
        for sentence in splitter.split(text):
            for part in cut.sub("\\1\n", sentence).split("\n"):
                if _LIST_MARKER.fullmatch(part.strip()):
                    marker += part.strip() + " "
                    continue
                sentences.append(marker + part)
                marker = ""
        if marker:
            sentences.append(marker.strip())
        return sentences

    return split


def _paragraphs(lines: Sequence[str]) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of each paragraph: a run of non-blank lines, ended early by a title line (see the
    module docstring)."""
    lengths = sorted(len(line.strip()) for line in lines if line.strip())
    shortest_text_line = TITLE_WIDTH * lengths[int(_WIDTH_QUANTILE * (len(lengths) - 1))] if lengths else 0
    paragraphs: list[tuple[int, list[str]]] = []
    current: list[str] = []
    after_an_end = False  # the line before (in this paragraph) ended a sentence or a clause
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line:
            current = []
            continue
        ends = bool(_ENDS_SENTENCE_OR_CLAUSE.search(line))
        title = len(line) < shortest_text_line and not ends
        if title and after_an_end:
            current = []  # a title after a sentence: its own paragraph (after a line cut mid-sentence, its end)
        if not current:
            paragraphs.append((number, current))
        current.append(line)
        after_an_end = ends
        if title:
            current = []  # the next line starts a paragraph
    return paragraphs


def split_document(lines: Sequence[str], lang: str | None = None, clauses: bool = False) -> Document:
    """Split a document given as its lines (blank lines between paragraphs) into sentences, paragraph by paragraph
    (``clauses``: also at clauses' ends, :func:`sentence_splitter`).

    Each sentence is placed on the line where it starts: the line holding its first characters, found by walking the
    paragraph's lines as the splitter's sentences consume them (the splitters keep the text's characters but may
    change the spaces between sentences)."""
    split = sentence_splitter(lang, clauses)
    sentences: list[str] = []
    paragraph_numbers: list[int] = []
    line_numbers: list[int] = []
    for paragraph, (first_line, paragraph_lines) in enumerate(_paragraphs(lines)):
        text = " ".join(paragraph_lines)
        # The offset in ``text`` at which each line starts, to name the line of a sentence.
        starts, offset = [], 0
        for line in paragraph_lines:
            starts.append(offset)
            offset += len(line) + 1
        position = 0
        for sentence in split(text):
            sentence = sentence.strip()
            if not sentence:
                continue
            found = text.find(sentence[:20], position)
            if found >= 0:
                position = found
            line = first_line + max(index for index, start in enumerate(starts) if start <= position)
            sentences.append(sentence)
            paragraph_numbers.append(paragraph)
            line_numbers.append(line)
            position += len(sentence) if found >= 0 else 0
    return Document(sentences, paragraph_numbers, line_numbers)
