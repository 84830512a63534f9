"""The alignment search: Bertalign's two steps (Liu & Zhu 2022) over overlap embeddings, in time and memory linear in
the document length for a fixed window.

1. Anchors: every source sentence's top-k target sentences by cosine, searched only inside a band around the
   diagonal (the package's exact kNN, one block of rows at a time); a dynamic programme over 1-1, 1-0 and 0-1 beads
   through the band scores a 1-1 bead by its cosine when the target is among the source's top-k, else 0. Its 1-1
   beads are the anchors.
2. The beads: a second dynamic programme over every bead type up to ``max_align`` sentences (``a + b <= max_align``,
   plus 1-0 and 0-1), searched only within ``window`` target sentences of the anchor path. A bead of ``a`` source
   and ``b`` target sentences scores the cosine of their overlap embeddings, less (with ``margin``) the mean cosine
   of each side's vector to the single sentences just before and after the other side's run, times (with
   ``length_prior``) ``log2(1 + min / max)`` of the two runs' UTF-8 lengths (the target's scaled by the documents'
   length ratio); 1-0 and 0-1 beads score ``skip``. Bertalign subtracts the margin by default; here it is off by
   default: where neighbouring sentences resemble each other (lists, interface strings, repeated lines) it favours
   merging them into fewer, larger beads, and on prose it made little difference (benchmarks/README.md, "Sentence
   alignment", has both development sets and the bead counts).

Cells are numbered as the peers do: cell (i, j) is the state after ``i`` source and ``j`` target sentences; row ``i``
of a band holds the columns ``lo[i] .. hi[i]``.

The dynamic programmes are written here, in numba: no library runs a banded alignment DP over bead types.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from bitext_hf.alignment.overlaps import Overlaps

__all__ = [
    "Alignment",
    "alignment_types",
    "anchor_band",
    "bead_band",
    "bead_score",
    "search",
    "sides_of",
]

_NO_CELL = -1


@dataclass(repr=False)
class Alignment:
    """The beads of two documents, in document order.

    Attributes:
        beads (list of (list of int, list of int)): each bead's source and target sentence indices (0-based,
            consecutive, one side empty for a 1-0 or 0-1 bead); together they cover every sentence of both
            documents once, in order. ``([0, 1], [2])`` joins source sentences 0 and 1 to target sentence 2.
        scores (numpy.ndarray): float, one per bead: the cosine of the two sides' overlap embeddings, times the
            length prior when it is on, less the neighbours' similarity with ``margin`` (the module docstring). At
            most 1 without ``margin``; it ranks beads within one alignment and is not a probability. 0.0 for a 1-0
            or 0-1 bead, as vecalign reports them.

    ``len(alignment)`` is the number of beads; ``repr`` summarises (the beads themselves can be many thousands).
    """

    beads: list[tuple[list[int], list[int]]]
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.beads)

    def __repr__(self) -> str:
        links = sum(1 for src, tgt in self.beads if src and tgt)
        sources = sum(len(src) for src, _ in self.beads)
        targets = sum(len(tgt) for _, tgt in self.beads)
        return (
            f"Alignment({len(self.beads)} beads, {links} links, {sources} source x {targets} target sentences, "
            f"first beads {self.beads[:3]})"
        )


def alignment_types(max_align: int) -> np.ndarray:
    """Every bead type ``(a, b)``: 0-1, 1-0, then ``a, b >= 1`` with ``a + b <= max_align`` (the peers' set)."""
    types = [(0, 1), (1, 0)]
    types += [(a, b) for a in range(1, max_align) for b in range(1, max_align) if a + b <= max_align]
    return np.asarray(types, dtype=np.int64)


@nb.njit(cache=True)
def _neighbour_similarity(vector, vectors, index, start, end):
    """Mean cosine of ``vector`` to the single sentences just before ``start`` and at ``end`` (those that exist)."""
    total, count = 0.0, 0
    if start > 0:
        total += np.dot(vector, vectors[index[0, start - 1]])
        count += 1
    if end < index.shape[1]:
        total += np.dot(vector, vectors[index[0, end]])
        count += 1
    return total / count if count else 0.0


@nb.njit(cache=True)
def bead_score(sides, i, j, a, b, ratio, margin, length_prior):
    """The score of the bead of source sentences ``i - a .. i - 1`` and target sentences ``j - b .. j - 1`` (``a``,
    ``b`` >= 1; see the module docstring). ``sides``: each side's vectors, index and lengths (:func:`sides_of`)."""
    src_vectors, src_index, src_lengths, tgt_vectors, tgt_index, tgt_lengths = sides
    x = src_vectors[src_index[a - 1, i - 1]]
    y = tgt_vectors[tgt_index[b - 1, j - 1]]
    score = np.dot(x, y)
    if margin:
        neighbours = _neighbour_similarity(x, tgt_vectors, tgt_index, j - b, j)
        neighbours += _neighbour_similarity(y, src_vectors, src_index, i - a, i)
        score -= neighbours / 2
    if length_prior:
        src_length = src_lengths[a - 1, i - 1]
        tgt_length = tgt_lengths[b - 1, j - 1] * ratio
        longer = max(src_length, tgt_length)
        if longer > 0:
            score *= np.log2(1.0 + min(src_length, tgt_length) / longer)
    return score


@nb.njit(cache=True)
def _anchor_pass(lo, hi, width, top_sims, top_targets):
    """The first programme's back pointers (0: 0-1, 1: 1-0, 2: 1-1; -1 unreachable). Only two rows of costs are
    kept: every bead of this pass comes from the row above or the same row."""
    n = lo.shape[0] - 1
    pointers = np.full((n + 1, width), _NO_CELL, dtype=np.int8)
    previous = np.full(width, -np.inf)
    current = np.full(width, -np.inf)
    k = top_targets.shape[1]
    for i in range(n + 1):
        current[:] = -np.inf
        for j in range(lo[i], hi[i] + 1):
            if i == 0 and j == 0:
                current[0] = 0.0
                continue
            best, best_type = -np.inf, _NO_CELL
            if j - 1 >= lo[i]:  # 0-1
                value = current[j - 1 - lo[i]]
                if value > best:
                    best, best_type = value, 0
            if i > 0 and lo[i - 1] <= j <= hi[i - 1]:  # 1-0
                value = previous[j - lo[i - 1]]
                if value > best:
                    best, best_type = value, 1
            if i > 0 and j > 0 and lo[i - 1] <= j - 1 <= hi[i - 1]:  # 1-1
                value = previous[j - 1 - lo[i - 1]]
                if value > -np.inf:
                    for neighbour in range(k):
                        if top_targets[i - 1, neighbour] == j - 1:
                            value += top_sims[i - 1, neighbour]
                            break
                    if value > best:
                        best, best_type = value, 2
            current[j - lo[i]] = best
            pointers[i, j - lo[i]] = best_type
        previous, current = current, previous
    return pointers


@nb.njit(cache=True)
def _bead_pass(sides, lo, hi, offsets, types, ratio, skip, margin, length_prior):
    """The second programme's back pointers (a row of ``types``; -1 unreachable), row ``i`` of the band stored at
    ``offsets[i]``: the rows are as wide as their band, so one wide row does not widen the others."""
    n = lo.shape[0] - 1
    cost = np.full(offsets[-1], -np.inf)
    pointers = np.full(offsets[-1], _NO_CELL, dtype=np.int16)
    for i in range(n + 1):
        for j in range(lo[i], hi[i] + 1):
            if i == 0 and j == 0:
                cost[0] = 0.0
                continue
            best, best_type = -np.inf, _NO_CELL
            for t in range(types.shape[0]):
                a, b = types[t, 0], types[t, 1]
                pi, pj = i - a, j - b
                if pi < 0 or pj < lo[pi] or pj > hi[pi]:
                    continue
                value = cost[offsets[pi] + pj - lo[pi]]
                if value == -np.inf:
                    continue
                if a == 0 or b == 0:
                    value += skip
                elif sides[1][a - 1, i - 1] < 0 or sides[4][b - 1, j - 1] < 0:
                    continue  # no such run: it would cross a paragraph boundary (Overlaps.index is -1 there)
                else:
                    value += bead_score(sides, i, j, a, b, ratio, margin, length_prior)
                if value > best:
                    best, best_type = value, t
            cost[offsets[i] + j - lo[i]] = best
            pointers[offsets[i] + j - lo[i]] = best_type
    return pointers


def sides_of(src: Overlaps, tgt: Overlaps) -> tuple:
    """The arrays :func:`bead_score` reads, in its order."""
    return (src.vectors, src.index, src.lengths, tgt.vectors, tgt.index, tgt.lengths)


def _connected(lo: np.ndarray, hi: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """A band every cell of which the programmes reach from (0, 0) and that reaches (n, m): both bounds never go
    back, each row starts no later than the row above ends, the first row starts at 0 and the last ends at ``m``."""
    lo = np.maximum.accumulate(np.clip(lo, 0, m))
    hi = np.maximum.accumulate(np.clip(hi, 0, m))
    lo[0], hi[-1] = 0, m
    lo[1:] = np.minimum(lo[1:], hi[:-1])
    hi = np.maximum(hi, lo)
    return lo.astype(np.int64), hi.astype(np.int64)


# The anchor band grows with the documents as Bertalign's does, up to this half-width: beyond it the band (and the
# anchor pass's back pointers, a byte per cell) would grow with the square of the length instead of linearly.
MAX_ANCHOR_WINDOW = 1000


def anchor_band(
    n: int, m: int, min_window: int = 250, window_share: float = 0.06, max_window: int = MAX_ANCHOR_WINDOW
) -> tuple[np.ndarray, np.ndarray]:
    """Bertalign's first-pass band: within ``max(min_window, window_share * max(n, m))`` target sentences of the
    diagonal scaled to the documents' sizes, that share capped at ``max_window`` (time and memory stay linear)."""
    half = max(int(min_window), min(int(max(n, m) * window_share), int(max_window)))
    center = (np.arange(n + 1) * (m / max(n, 1))).astype(np.int64)
    return center - half, center + half


def _band_top_k(src: Overlaps, tgt: Overlaps, lo: np.ndarray, hi: np.ndarray, k: int, block: int = 1024):
    """Each source sentence's ``k`` nearest target sentences inside the band (a block of rows searches the targets
    of its rows' bands together, so a row may also see a few targets just outside its own band, which the programme
    never reads). Only one block's sentence vectors are gathered at a time."""
    from bitext_hf.mining.knn import knn_search

    n = src.n
    sims = np.full((n, k), -np.inf, dtype=np.float32)
    targets = np.full((n, k), _NO_CELL, dtype=np.int64)
    for start in range(0, n, block):
        stop = min(start + block, n)
        # Row i + 1 of the band ends at source sentence i; a 1-1 bead into column j holds target sentence j - 1.
        first, last = max(int(lo[start + 1]) - 1, 0), int(hi[stop])
        if last <= first:
            continue
        queries = src.vectors[src.index[0, start:stop]]
        found_sims, found = knn_search(queries, tgt.vectors[tgt.index[0, first:last]], k, normalize=False)
        width = found.shape[1]
        sims[start:stop, :width] = found_sims
        targets[start:stop, :width] = found + first
    return sims, targets


def _anchors(src: Overlaps, tgt: Overlaps, top_k: int, min_window: int) -> list[tuple[int, int]]:
    n, m = src.n, tgt.n
    lo, hi = _connected(*anchor_band(n, m, min_window), m)
    width = int((hi - lo).max()) + 1
    sims, targets = _band_top_k(src, tgt, lo, hi, top_k)
    pointers = _anchor_pass(lo, hi, width, sims.astype(np.float64), targets)
    anchors, i, j = [], n, m
    while i or j:
        step = pointers[i, j - lo[i]]
        if step == _NO_CELL:
            raise _unreachable()
        if step == 2:
            anchors.append((i, j))
        i, j = (i, j - 1) if step == 0 else (i - 1, j) if step == 1 else (i - 1, j - 1)
    return anchors[::-1]


def bead_band(anchors: list[tuple[int, int]], n: int, m: int, window: int, stretch_window: int):
    """Bertalign's second-pass band: the rows up to each anchor search from ``window`` before the previous anchor's
    target to ``window`` after this one's; the path ends at (n, m). A stretch between two anchors is searched no
    further than ``stretch_window`` from the straight line between them: a long stretch without anchors (text
    missing on one side, or documents that do not translate each other) costs cells in proportion to its length,
    not to its area."""
    kept = [anchor for anchor in anchors if anchor[0] < n and anchor[1] < m]
    points = np.asarray([(0, 0), *kept, (n, m)], dtype=np.int64)
    lo = np.zeros(n + 1, dtype=np.int64)
    hi = np.zeros(n + 1, dtype=np.int64)
    if n:
        # Row r lies between the anchor before it and the first anchor at or after it (rows up to an anchor, its own
        # included, belong to the stretch it ends).
        rows = np.arange(1, n + 1)
        following = np.searchsorted(points[:, 0], rows, side="left")
        (previous_i, previous_j), (i, j) = points[following - 1].T, points[following].T
        line = previous_j + (rows - previous_i) * ((j - previous_j) / (i - previous_i))
        lo[1:] = np.maximum(previous_j - window, np.floor(line) - stretch_window)
        hi[1:] = np.minimum(j + window, np.ceil(line) + stretch_window)
    lo[0], hi[0] = 0, hi[1] if n else m
    return _connected(lo, hi, m)


def _unreachable() -> ValueError:
    return ValueError(
        "the alignment search found no path through the documents (its scores overflowed: is --skip far outside "
        "[-1000, 1000]?)"
    )


def search(
    src: Overlaps,
    tgt: Overlaps,
    *,
    max_align: int = 5,
    top_k: int = 3,
    window: int = 5,
    anchor_window: int = 250,
    skip: float = -0.1,
    margin: bool = False,
    length_prior: bool = True,
) -> Alignment:
    """Align two documents from their overlap embeddings (see the module docstring). A document without sentences
    aligns as 1-0 or 0-1 beads only."""
    n, m = src.n, tgt.n
    if n == 0 or m == 0:
        beads = [([i], []) for i in range(n)] + [([], [j]) for j in range(m)]
        return Alignment(beads, np.zeros(len(beads)))
    # Wider than the documents changes nothing: capped there, every count stays a machine integer, and no more
    # neighbours are kept than the target has sentences.
    top_k, window, anchor_window = (min(int(value), max(n, m) + 1) for value in (top_k, window, anchor_window))
    top_k = min(top_k, m)
    layers = max_align - 1
    if src.layers < layers or tgt.layers < layers:
        raise ValueError(f"max_align={max_align} needs overlaps of up to {layers} sentences")
    # The documents' overall length ratio scales the target's lengths in the prior, as Bertalign does.
    ratio = float(src.lengths[0].sum() / max(tgt.lengths[0].sum(), 1.0))
    anchors = _anchors(src, tgt, top_k, anchor_window)
    lo, hi = bead_band(anchors, n, m, window, anchor_window)
    offsets = np.concatenate([[0], np.cumsum(hi - lo + 1)]).astype(np.int64)
    types = alignment_types(max_align)
    sides = sides_of(src, tgt)
    pointers = _bead_pass(sides, lo, hi, offsets, types, ratio, float(skip), bool(margin), bool(length_prior))
    ends, steps, scores = _back_track(sides, pointers, lo, offsets, types, ratio, bool(margin), bool(length_prior))
    if (
        steps.shape[0] and steps[-1] == _NO_CELL
    ):  # numba reads without bounds checks: never follow a pointer that is not one
        raise _unreachable()
    beads = [
        (list(range(i - a, i)), list(range(j - b, j)))
        for (i, j), (a, b) in zip(ends[::-1].tolist(), types[steps[::-1]].tolist())
    ]
    return Alignment(beads, scores[::-1].copy())


@nb.njit(cache=True)
def _back_track(sides, pointers, lo, offsets, types, ratio, margin, length_prior):
    """The second programme's path from (n, m) back to (0, 0): each bead's end cell, type and score (0.0 for 1-0 and
    0-1), last bead first; a step of -1 last where a cell has no pointer (the caller raises). In numba: a Python
    loop calling the compiled score once per bead cost a third of a second on 6,000 sentences."""
    n = lo.shape[0] - 1
    m = sides[4].shape[1]  # the target index's columns
    size = n + m
    ends = np.zeros((size, 2), dtype=np.int64)
    steps = np.zeros(size, dtype=np.int64)
    scores = np.zeros(size, dtype=np.float64)
    i, j, count = n, m, 0
    while i > 0 or j > 0:
        step = pointers[offsets[i] + j - lo[i]]
        ends[count, 0], ends[count, 1], steps[count] = i, j, step
        count += 1
        if step == _NO_CELL:
            break
        a, b = types[step, 0], types[step, 1]
        if a > 0 and b > 0:
            scores[count - 1] = bead_score(sides, i, j, a, b, ratio, margin, length_prior)
        i, j = i - a, j - b
    return ends[:count], steps[:count], scores[:count]
