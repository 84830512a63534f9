"""Overlap embeddings: every run of up to ``layers`` consecutive sentences of a document, joined by a space, as one
text (vecalign's and Bertalign's overlaps), so that a bead of several sentences is scored by the embedding of its
joined text. Each distinct text is encoded once, whatever the number of runs, layers or documents that hold it.

Overlap ``o`` (0-based) ending at sentence ``i`` joins sentences ``i - o .. i``; :attr:`Overlaps.index` names the
row of its vector, and is -1 where the document has fewer than ``o + 1`` sentences up to ``i``, or where the run
would cross a paragraph boundary (documents read as running text: no bead joins sentences of two paragraphs, and
such a run is never encoded).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OverlapTexts", "Overlaps", "overlap_texts"]

# A space, as both peers join a run: the encoders read a run as one paragraph.
JOINER = " "


@dataclass
class OverlapTexts:
    """The overlaps of one or more documents before encoding.

    Attributes:
        texts (list[str]): the distinct overlap texts, in first-seen order.
        documents (list[tuple[np.ndarray, np.ndarray]]): per document, ``index`` (layers, n) into ``texts`` (-1
            where there is no such run) and ``lengths`` (layers, n), the UTF-8 bytes of each run's text.
        sentences (list[str]): every document's sentences, one document after another.
        runs (list[tuple[int, int]]): for each text, ``(start, end)`` such that it is
            ``JOINER.join(sentences[start:end])`` (the first run found to give it), for an encoder that makes the
            vectors of runs from their sentences (``Embedder.embed``'s ``runs``).
    """

    texts: list[str]
    documents: list[tuple[np.ndarray, np.ndarray]]
    sentences: list[str] = field(default_factory=list)
    runs: list[tuple[int, int]] = field(default_factory=list)

    def embed(self, encode: Callable[[list[str]], np.ndarray]) -> list[Overlaps]:
        """Each document's :class:`Overlaps`, from one call of ``encode`` over every distinct text."""
        from bitext_hf.data.embeddings import check_embeddings

        if self.texts:
            vectors = check_embeddings(np.asarray(encode(self.texts)), "overlap embeddings")
            if vectors.shape[0] != len(self.texts):
                raise ValueError(f"the encoder returned {vectors.shape[0]} vectors for {len(self.texts)} texts")
        else:
            vectors = np.zeros((0, 1), np.float32)
        return [Overlaps(vectors, index, lengths) for index, lengths in self.documents]


@dataclass
class Overlaps:
    """A document's overlap embeddings: ``vectors`` (rows L2-normalized, shared by the documents of a run), ``index``
    (layers, n) int64 and ``lengths`` (layers, n) float64, as :class:`OverlapTexts`."""

    vectors: np.ndarray
    index: np.ndarray
    lengths: np.ndarray

    @property
    def n(self) -> int:
        return int(self.index.shape[1])

    @property
    def layers(self) -> int:
        return int(self.index.shape[0])


def overlap_texts(
    documents: Sequence[Sequence[str]], layers: int, paragraphs: Sequence[Sequence[int] | None] | None = None
) -> OverlapTexts:
    """The overlaps of every document, up to ``layers`` sentences each, with every distinct text listed once.

    ``paragraphs``, one entry per document (None for a document without paragraphs), gives each sentence's
    paragraph number: a run whose first and last sentences are in different paragraphs has no overlap (index -1)."""
    if layers < 1:
        raise ValueError(f"layers must be at least 1, got {layers}")
    if paragraphs is None:
        paragraphs = [None] * len(documents)
    if len(paragraphs) != len(documents):
        raise ValueError(f"{len(paragraphs)} paragraph lists for {len(documents)} documents")
    rows: dict[str, int] = {}
    runs: list[tuple[int, int]] = []
    per_document = []
    offset = 0
    for sentences, paragraph in zip(documents, paragraphs):
        n = len(sentences)
        if paragraph is not None and len(paragraph) != n:
            raise ValueError(f"{len(paragraph)} paragraph numbers for {n} sentences")
        index = np.full((layers, n), -1, dtype=np.int64)
        lengths = np.zeros((layers, n), dtype=np.float64)
        # A run's length from the running total of its sentences' UTF-8 sizes (exact integers in float64).
        sizes = np.fromiter((len(sentence.encode("utf-8", "surrogatepass")) for sentence in sentences), np.float64, n)
        totals = np.concatenate([[0.0], np.cumsum(sizes)])
        previous = list(sentences)  # the runs of the layer before, ending at each sentence
        for layer in range(layers):
            ends = range(layer, n)
            if layer:
                previous = [None] * layer + [previous[end - 1] + JOINER + sentences[end] for end in ends]
            if paragraph is None:
                kept = ends
            else:
                kept = [end for end in ends if paragraph[end - layer] == paragraph[end]]
            numbers = []
            for end in kept:
                text = previous[end]
                if text not in rows:
                    rows[text] = len(rows)
                    runs.append((offset + end - layer, offset + end + 1))
                numbers.append(rows[text])
            index[layer, kept] = numbers
            stops = np.asarray(kept, dtype=np.int64)
            lengths[layer, stops] = totals[stops + 1] - totals[stops - layer] + layer * len(JOINER)
        per_document.append((index, lengths))
        offset += n
    return OverlapTexts(list(rows), per_document, [sentence for document in documents for sentence in document], runs)
