"""The default encoder's vectors of runs of consecutive sentences joined by a space (the alignment's overlaps), made
from each token's work done once, as encoding every joined text would give them.

USE v3 pools its tokens: a text's vector is the head applied to the sum of its tokens' features and their count
(:class:`~bitext_hf.encoders.use.UseTorchForward`), and a token's features depend only on the ids from
``RECEPTIVE_LEFT`` before it to ``RECEPTIVE_RIGHT`` after it. Its vocabulary never puts a piece across a space, so the
ids of ``"A B"`` are those of ``A`` then those of ``B`` between one ``BOS_ID`` and one ``EOS_ID``. A run's tokens
whose reach stays inside the run therefore have the features they have in the whole document read as one text;
only the first and last few tokens of a run (those that reach its ``BOS_ID`` or ``EOS_ID``) differ, and those depend
on the run's first or last ``RECEPTIVE_LEFT + RECEPTIVE_RIGHT`` ids alone. So the document's features are computed
once, summed between cut points, and each run's sum is the sums of the segments between its edges plus its two
edges' (shared by every run that starts or ends at the same sentence). Every overlap then costs about what encoding
each sentence once or twice costs, instead of about ten times as much at ``max_align`` 5 (benchmarks/README.md,
"Encoding: every overlap composed from one pass").

A run is encoded as its own text wherever that reasoning does not hold: fewer ids than the edges need, or ids that
differ from its sentences' ids joined. Every run of several sentences is tokenized to check that: by the C++ library,
or, where ``encode`` would use the port (a sentence the port reads, a word repeated across a joint:
:class:`~bitext_hf.encoders.use.UseTokenizer`), as ``encode`` does, from the port's ids of its sentences, each read
once (``UseTokenizer.encode_joined`` says why that is exact). The vectors agree with
encoding the joined texts to float32 rounding (the sums are taken in another order; tests/test_use_runs.py).

Written here: no library composes a pooled CNN's sentence vectors from spans of one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bitext_hf.encoders.base import check_runs, l2_normalize
from bitext_hf.encoders.use import BOS_ID, EOS_ID, RECEPTIVE_LEFT, RECEPTIVE_RIGHT, UseTokenizer, UseTorchForward

__all__ = ["encode_runs"]

# Ids a run needs for its two edges to depend on nothing else: its first (or last) token reaching this far.
EDGE_CONTEXT = RECEPTIVE_LEFT + RECEPTIVE_RIGHT
# Document tokens per piece of the one pass over the document (the forward's flat batches are 2,048 tokens).
PIECE_TOKENS = 2048
# Runs whose sums are added up and sent through the head together.
RUNS_PER_BLOCK = 4096


def encode_runs(
    tokenizer: UseTokenizer,
    forward: UseTorchForward,
    sentences: Sequence[str],
    runs: Sequence[tuple[int, int]],
    joiner: str = " ",
    show_progress: bool = False,
) -> np.ndarray:
    """The vectors of ``joiner.join(sentences[start:end])`` for each ``(start, end)`` of ``runs``: float32
    (len(runs), 512), L2-normalized (the module docstring). ``sentences`` may be several documents one after
    another: a run never needs what lies outside it."""
    if joiner != " ":
        raise ValueError(f"runs are composed for sentences joined by a space, not {joiner!r}")
    runs = check_runs(runs, len(sentences))
    ids, ported, normalized = tokenizer.encode_marked(sentences)
    sizes = np.fromiter((len(row) - 2 for row in ids), np.int64, len(ids))
    positions = np.concatenate([[0], np.cumsum(sizes)])  # each sentence's first id in the document's ids
    document_ids = [i for row in ids for i in row[1:-1]]
    document = np.array(document_ids, dtype=np.int64)
    composed, tokenized = _composable(tokenizer, sentences, runs, ported, normalized, document_ids, positions)

    sequences: list[list[int]] = []
    spans: list[list[tuple[int, int]]] = []

    next_row = [0]

    def add(sequence: list[int], sequence_spans: list[tuple[int, int]]) -> range:
        """A sequence for the network, and the rows its spans' sums will have."""
        sequences.append(sequence)
        spans.append(sequence_spans)
        rows = range(next_row[0], next_row[0] + len(sequence_spans))
        next_row[0] = rows.stop
        return rows

    direct = {}  # run number: (row, ids)
    whole = [number for number, kept in enumerate(composed) if not kept]
    untokenized = [number for number in whole if number not in tokenized]
    texts = [joiner.join(sentences[runs[number][0] : runs[number][1]]) for number in untokenized]
    tokenized.update(zip(untokenized, tokenizer.encode(texts)))
    for number in whole:
        text_ids = tokenized[number]
        direct[number] = (add(text_ids, [(0, len(text_ids))])[0], len(text_ids))
    bounds = [(int(positions[start]), int(positions[end])) for start, end in runs]
    firsts = {bounds[number][0] for number in range(len(runs)) if composed[number]}
    lasts = {bounds[number][1] for number in range(len(runs)) if composed[number]}
    # Each edge's row. A sentence with enough ids for its edges and at most two edges' worth gives both from its own
    # ids, fewer tokens than two edges read apart; the others' edges are read from the document's ids.
    left_edge, right_edge = {}, {}
    for sentence, size in enumerate(sizes.tolist()):
        first, last = int(positions[sentence]), int(positions[sentence + 1])
        if EDGE_CONTEXT <= size <= 2 * EDGE_CONTEXT and (first in firsts or last in lasts):
            left_edge[first], right_edge[last] = add(
                ids[sentence], [(0, 1 + RECEPTIVE_LEFT), (size + 1 - RECEPTIVE_RIGHT, size + 2)]
            )
    for first in sorted(firsts - left_edge.keys()):
        start_ids = [BOS_ID, *document[first : first + EDGE_CONTEXT].tolist()]
        left_edge[first] = add(start_ids, [(0, 1 + RECEPTIVE_LEFT)])[0]
    for last in sorted(lasts - right_edge.keys()):
        right_edge[last] = add(
            [*document[last - EDGE_CONTEXT : last].tolist(), EOS_ID],
            [(EDGE_CONTEXT - RECEPTIVE_RIGHT, EDGE_CONTEXT + 1)],
        )[0]
    # The document's features between consecutive cut points (each composed run's interior starts and ends at one),
    # read in pieces of about PIECE_TOKENS ids with the context their tokens reach.
    cuts = sorted({first + RECEPTIVE_LEFT for first in firsts} | {last - RECEPTIVE_RIGHT for last in lasts})
    segment_of = {cut: number for number, cut in enumerate(cuts)}
    pieces = []  # (rows, segments) of each piece
    segment = 0
    while segment < len(cuts) - 1:
        first = segment
        while segment < len(cuts) - 1 and (segment == first or cuts[segment + 1] - cuts[first] <= PIECE_TOKENS):
            segment += 1
        low = max(cuts[first] - RECEPTIVE_LEFT, 0)
        high = min(cuts[segment] + RECEPTIVE_RIGHT, len(document))
        rows = add(document[low:high].tolist(), [(cuts[k] - low, cuts[k + 1] - low) for k in range(first, segment)])
        pieces.append((rows, range(first, segment)))
    sums = forward.span_sums(sequences, spans, show_progress=show_progress)
    segment_rows = np.zeros(max(len(cuts) - 1, 0), dtype=np.int64)  # each segment's row of sums
    for rows, segments in pieces:
        segment_rows[segments.start : segments.stop] = rows
    vectors = np.zeros((len(runs), sums.shape[1]), dtype=np.float32)
    # A few thousand runs at a time: their sums are as large as their vectors.
    for block in range(0, len(runs), RUNS_PER_BLOCK):
        numbers = range(block, min(block + RUNS_PER_BLOCK, len(runs)))
        vectors[numbers.start : numbers.stop] = _block_vectors(
            forward, sums, numbers, bounds, direct, left_edge, right_edge, segment_of, segment_rows
        )
    return l2_normalize(vectors)


def _block_vectors(forward, sums, numbers, bounds, direct, left_edge, right_edge, segment_of, segment_rows):
    """The vectors of the runs ``numbers``: each one's sum (read whole, or its edges and the segments between
    them; a run of four sentences spans at most eight segments) and its token count, through the head."""
    totals = np.zeros((len(numbers), sums.shape[1]), dtype=np.float32)
    counts = np.zeros(len(numbers), dtype=np.float32)
    composed = [i for i, number in enumerate(numbers) if number not in direct]
    for i, number in enumerate(numbers):
        if number in direct:
            totals[i], counts[i] = sums[direct[number][0]], direct[number][1]
    if composed:
        runs_bounds = np.array([bounds[numbers[i]] for i in composed], dtype=np.int64).reshape(-1, 2)
        first, last = runs_bounds[:, 0], runs_bounds[:, 1]
        part = sums[[left_edge[at] for at in first.tolist()]] + sums[[right_edge[at] for at in last.tolist()]]
        start = np.array([segment_of[at + RECEPTIVE_LEFT] for at in first.tolist()], dtype=np.int64)
        stop = np.array([segment_of[at - RECEPTIVE_RIGHT] for at in last.tolist()], dtype=np.int64)
        for step in range(int((stop - start).max(initial=0))):
            inside = start + step < stop
            part[inside] += sums[segment_rows[start[inside] + step]]
        totals[composed], counts[composed] = part, last - first + 2
    return forward.vectors_of_sums(totals, counts)


def _composable(tokenizer, sentences, runs, ported, normalized, document_ids, positions) -> tuple[list[bool], dict]:
    """Which runs the composition gives exactly (the module docstring), and ``encode``'s ids of those of the others
    whose text it already tokenized that way (``{run number: ids}``); the others are encoded as texts."""
    positions = positions.tolist()
    composed = [positions[end] - positions[start] >= EDGE_CONTEXT for start, end in runs]
    # The port reads a text with a word repeated three times in a row; one across a joint is found within the
    # pattern's longest match on either side of it. A normalized text starts with the piece's space mark ("▁"), so
    # the run's normalized text is its sentences' joined as they are.
    reach = tokenizer.repeated_reach
    joint_repeats = {
        i
        for i in range(len(sentences) - 1)
        if tokenizer.repeated.search(normalized[i][-reach:] + normalized[i + 1][:reach])
    }
    # A run the port reads (one of its sentences, or a repeat across a joint) is tokenized as ``encode`` would; the
    # others by the C++ library alone, which is what ``encode`` gives them.
    several = [n for n, (start, end) in enumerate(runs) if composed[n] and end - start > 1]
    by_port = [
        n
        for n in several
        if any(ported[runs[n][0] : runs[n][1]]) or any(i in joint_repeats for i in range(runs[n][0], runs[n][1] - 1))
    ]
    by_library = sorted(set(several) - set(by_port))
    # The port reads each sentence once (the ported ones already).
    port_ids = {
        k: [BOS_ID, *document_ids[positions[k] : positions[k + 1]], EOS_ID] for k, reads in enumerate(ported) if reads
    }
    tokenized = {}  # the port's ids of the runs found not to compose: what the network then reads
    for numbers in (by_port, by_library):
        # In blocks: the ids of every run at once would hold about ten times the document's ids.
        for block in range(0, len(numbers), RUNS_PER_BLOCK):
            part = numbers[block : block + RUNS_PER_BLOCK]
            if numbers is by_port:
                part_ids = tokenizer.encode_joined(sentences, [runs[n] for n in part], port_ids)
            else:
                part_ids = tokenizer.pieces([" ".join(sentences[runs[n][0] : runs[n][1]]) for n in part])
            for n, run_ids in zip(part, part_ids):
                start, end = runs[n]
                if run_ids != [BOS_ID, *document_ids[positions[start] : positions[end]], EOS_ID]:
                    composed[n] = False
                    if numbers is by_port:
                        tokenized[n] = run_ids
    return composed, tokenized
