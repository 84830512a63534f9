"""Sentence alignment of two documents in memory: :func:`align_sentences` (lists of sentences) and
:func:`align_texts` (running text, split into sentences, paragraphs kept apart).

>>> from bitext_hf.encoders import load_encoder
>>> alignment = align_sentences(german_sentences, french_sentences, load_encoder())
>>> alignment.beads[:2], alignment.scores[:2]
([([0], [0, 1]), ([1], [2])], array([0.61, 0.58]))
>>> aligned = align_texts(german_text, french_text, load_encoder(), src_lang="de", tgt_lang="fr")
>>> aligned.pairs()[:1]
[('Guten Tag.', 'Bonjour.')]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import Alignment, search
from bitext_hf.alignment.settings import AlignSettings
from bitext_hf.data.sentences import Document, split_document

__all__ = ["TextAlignment", "align_sentences", "align_texts", "encode_function"]


def encode_function(encoder: Any, batch_size: int = 128):
    """``texts -> (n, d) float32`` from an encoder of the package (``encode(texts, batch_size=...,
    show_progress=...)``) or a plain callable."""
    if hasattr(encoder, "encode"):
        return lambda texts: encoder.encode(texts, batch_size=batch_size, show_progress=False)
    if callable(encoder):
        return encoder
    raise TypeError(f"expected an encoder with encode(texts) or a callable, got {type(encoder).__name__}")


def align_sentences(
    src: Sequence[str],
    tgt: Sequence[str],
    encoder: Any,
    settings: AlignSettings | None = None,
    *,
    batch_size: int = 128,
    src_paragraphs: Sequence[int] | None = None,
    tgt_paragraphs: Sequence[int] | None = None,
    **options: Any,
) -> Alignment:
    """Align two documents given as lists of sentences (translations of each other, in order).

    Args:
        src (sequence of str): the source document's sentences, in order (any iterable of str; read once).
        tgt (sequence of str): the target document's sentences, in order, likewise.
        encoder: an encoder of the package (:func:`bitext_hf.encoders.load_encoder`) or a callable ``texts -> (n, d)``
            returning L2-normalized vectors.
        settings (AlignSettings, optional): the search's settings; or give them as keywords (``max_align=4``).
        batch_size (int): sentences per encoder batch.
        src_paragraphs (sequence of int, optional): each source sentence's paragraph number: no bead joins
            sentences of two paragraphs (those runs are not even encoded).
        tgt_paragraphs (sequence of int, optional): the same for the target sentences.

    Returns:
        Alignment: ``beads``, a list of ``(source indices, target indices)`` in document order covering every
        sentence of both sides once (``([0, 1], [2])``: source sentences 0 and 1 together translate target sentence
        2; ``([3], [])``: source sentence 3 has no translation), and ``scores``, one float per bead (cosine of the
        two sides times the length prior; at most 1 without ``margin``, not a probability; 0.0 for 1-0 and 0-1 beads).

    Raises:
        TypeError: a side that is a single string or holds anything but strings.
    """
    if settings is None:
        settings = AlignSettings(**options)
    elif options:
        raise TypeError("give settings or keyword options, not both")
    sides = []
    for name, side in (("src", src), ("tgt", tgt)):
        if isinstance(side, str | bytes):
            raise TypeError(f"{name} must be a list of sentences (str), not one {type(side).__name__}")
        side = list(side)  # once: an iterator checked first would reach the search empty
        if not all(isinstance(sentence, str) for sentence in side):
            raise TypeError(f"{name} must be a list of sentences (str)")
        sides.append(side)
    overlaps = overlap_texts(sides, settings.max_align - 1, [src_paragraphs, tgt_paragraphs])
    src_overlaps, tgt_overlaps = overlaps.embed(encode_function(encoder, batch_size))
    return search(src_overlaps, tgt_overlaps, **settings.as_dict())


@dataclasses.dataclass(repr=False)
class TextAlignment:
    """Two documents of running text, split, and their alignment.

    Attributes:
        src, tgt (Document): each side's sentences, their paragraphs and lines
            (:class:`bitext_hf.data.sentences.Document`).
        alignment (Alignment): the beads over those sentences and their scores.
    """

    src: Document
    tgt: Document
    alignment: Alignment

    def pairs(self) -> list[tuple[str, str]]:
        """Each link's (source, target) text, a bead's sentences joined by a space; 1-0 and 0-1 beads left out."""
        return [
            (" ".join(self.src.sentences[x] for x in xs), " ".join(self.tgt.sentences[y] for y in ys))
            for xs, ys in self.alignment.beads
            if xs and ys
        ]

    def __repr__(self) -> str:
        return f"TextAlignment({len(self.src)} x {len(self.tgt)} sentences, {self.alignment!r})"


def align_texts(
    src: str,
    tgt: str,
    encoder: Any,
    settings: AlignSettings | None = None,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    clauses: bool = False,
    batch_size: int = 128,
    **options: Any,
) -> TextAlignment:
    """Align two documents of running text: paragraphs are runs of lines between blank lines (and title lines),
    each split into sentences offline by the splitter of its language
    (:func:`bitext_hf.data.sentences.sentence_splitter`; None: the English rules; ``clauses``: also at each ``;`` and
    ``:`` that a space follows); no bead joins sentences of two paragraphs. Settings as :func:`align_sentences`.

    Raises:
        TypeError: a side that is not a str, ``clauses`` not a bool.
    """
    documents = []  # a clauses that is no bool: sentence_splitter's TypeError, before any text is split
    for name, text, lang in (("src", src, src_lang), ("tgt", tgt, tgt_lang)):
        if not isinstance(text, str):
            raise TypeError(f"{name} must be the document's text (str), not {type(text).__name__}")
        documents.append(split_document(text.splitlines(), lang, clauses))
    source, target = documents
    alignment = align_sentences(
        source.sentences,
        target.sentences,
        encoder,
        settings,
        batch_size=batch_size,
        src_paragraphs=source.paragraphs,
        tgt_paragraphs=target.paragraphs,
        **options,
    )
    return TextAlignment(source, target, alignment)
