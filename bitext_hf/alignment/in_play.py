"""Encoding only the overlaps in play: every sentence once, then only the runs of sentences the search's path uses.

Encoding every overlap (every run of up to ``max_align - 1`` sentences, as Bertalign and vecalign do) reads about
ten times the characters of each sentence encoded once at ``max_align`` 5 (runs of 1 to 4 sentences; 10.0 on
Text+Berg), while nearly all beads of real documents are 1-1. So: each sentence is encoded; a run of several sentences starts with an estimate,
the sum of its sentences' vectors normalized (a cosine search over estimates finds where merges may be); the search
runs, and every run its path uses that is still an estimate is encoded; the search runs again on those exact
vectors, and so on until the path uses exact vectors only (a few rounds: each round only encodes runs the last path
used), and, after the first search, the runs of two sentences around each bead that is not 1-1. The beads written are therefore scored on exact vectors, as with every overlap encoded; what the estimates
can change is which merges the search considers. benchmarks/README.md ("Encoding: every overlap composed ...")
measures both F1 and time against encoding every overlap. It is for encoders that encode each joined text: the
default encoder makes every overlap from one pass over the sentences (:mod:`bitext_hf.encoders.use_runs`), at about
the same cost and a better F1.

Written here: no library estimates overlap embeddings or drives a search this way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from bitext_hf.alignment.overlaps import Overlaps, OverlapTexts
from bitext_hf.alignment.search import Alignment, search

__all__ = ["InPlayResult", "align_in_play"]

# Rounds after the first before the search stops asking for exact vectors (each round encodes only runs the last
# path used; on real documents it settles in two or three).
MAX_ROUNDS = 10
# After the first search, around each bead that is not 1-1 (a merge, or a sentence left unlinked: where estimates
# may have hidden a better merge), the runs of two sentences ending within this many sentences of it are encoded
# too. Chosen on Text+Berg's dev document and checked on its test documents (benchmarks/README.md, "Encoding in
# play"): runs of three and more or a wider neighbourhood cost two to four times the encoding for at most 0.005 F1.
NEAR = 1


@dataclasses.dataclass
class InPlayResult:
    """Each document pair's alignment and overlaps (exact where encoded, estimates elsewhere), and how many texts of
    each side were encoded, and in how many rounds of the search."""

    alignments: list[Alignment]
    src_overlaps: list[Overlaps]
    tgt_overlaps: list[Overlaps]
    encoded: tuple[int, int]
    rounds: int


class _Side:
    """One side's overlap texts, their vectors so far, and which are exact."""

    def __init__(self, texts: OverlapTexts, encode: Callable[[list[str]], np.ndarray]) -> None:
        from bitext_hf.data.embeddings import check_embeddings

        self.texts, self.encode, self._check = texts, encode, check_embeddings
        size = len(texts.texts)
        self.parts: list[np.ndarray | None] = [None] * size  # a run's sentence rows
        for index, _ in texts.documents:
            for layer in range(index.shape[0]):
                for end in np.flatnonzero(index[layer] >= 0):
                    row = index[layer, end]
                    if self.parts[row] is None:
                        self.parts[row] = index[0, end - layer : end + 1]
        self.sentences = sorted({int(row) for index, _ in texts.documents for row in index[0]})
        self.exact = np.zeros(size, dtype=bool)
        self.vectors: np.ndarray | None = None
        self.encoded = 0

    def encode_rows(self, rows: Sequence[int]) -> None:
        rows = sorted({int(row) for row in rows if not self.exact[row]})
        if not rows:
            return
        vectors = self._check(np.asarray(self.encode([self.texts.texts[row] for row in rows])), "overlap embeddings")
        if vectors.shape[0] != len(rows):
            raise ValueError(f"the encoder returned {vectors.shape[0]} vectors for {len(rows)} texts")
        if self.vectors is None:
            self.vectors = np.zeros((len(self.texts.texts), vectors.shape[1]), dtype=np.float32)
        self.vectors[rows] = vectors
        self.exact[rows] = True
        self.encoded += len(rows)

    def estimate(self) -> None:
        """Each run not yet encoded: the sum of its sentences' vectors, normalized."""
        for row in np.flatnonzero(~self.exact):
            total = self.vectors[self.parts[row]].sum(axis=0)
            self.vectors[row] = total / max(float(np.linalg.norm(total)), 1e-12)

    def overlaps(self) -> list[Overlaps]:
        vectors = self.vectors if self.vectors is not None else np.zeros((0, 1), np.float32)
        return [Overlaps(vectors, index, lengths) for index, lengths in self.texts.documents]


def align_in_play(
    src_texts: OverlapTexts,
    tgt_texts: OverlapTexts,
    encode_src: Callable[[list[str]], np.ndarray],
    encode_tgt: Callable[[list[str]], np.ndarray],
    **settings,
) -> InPlayResult:
    """Align each document pair of ``src_texts`` and ``tgt_texts`` (the same number of documents, in pairs),
    encoding only the overlaps in play (the module docstring). ``settings``: the search's keywords."""
    if len(src_texts.documents) != len(tgt_texts.documents):
        raise ValueError(f"{len(src_texts.documents)} source documents for {len(tgt_texts.documents)} targets")
    sides = [_Side(src_texts, encode_src), _Side(tgt_texts, encode_tgt)]
    for side in sides:
        side.encode_rows(side.sentences)
        if side.vectors is not None:
            side.estimate()  # once: a run's estimate reads only sentence vectors, which no later round changes
    rounds = 0
    while True:
        src_overlaps, tgt_overlaps = sides[0].overlaps(), sides[1].overlaps()
        alignments = [search(src, tgt, **settings) for src, tgt in zip(src_overlaps, tgt_overlaps)]
        rounds += 1
        wanted: list[list[int]] = [[], []]
        for alignment, *documents in zip(alignments, src_overlaps, tgt_overlaps):
            for xs, ys in alignment.beads:
                if xs and ys:
                    for number, run in enumerate((xs, ys)):
                        row = int(documents[number].index[len(run) - 1, run[-1]])
                        if not sides[number].exact[row]:
                            wanted[number].append(row)
                if rounds == 1 and (len(xs) != 1 or len(ys) != 1):
                    for number, run in enumerate((xs, ys)):
                        index = documents[number].index
                        if not run or index.shape[0] < 2:
                            continue
                        ends = range(max(run[0] - NEAR, 0), min(run[-1] + NEAR + 1, index.shape[1]))
                        wanted[number].extend(int(row) for row in index[1, list(ends)] if row >= 0)
        if not (wanted[0] or wanted[1]) or rounds > MAX_ROUNDS:
            break
        for side, rows in zip(sides, wanted):
            side.encode_rows(rows)
    return InPlayResult(alignments, src_overlaps, tgt_overlaps, (sides[0].encoded, sides[1].encoded), rounds)
