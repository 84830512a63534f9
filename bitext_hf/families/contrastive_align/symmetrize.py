"""Word-alignment post-processing of the explicit-alignment paper: grow-diag-final-and, one-to-one, identical strings.

A link is a pair ``(i, j)``: word i of the source (English) sentence with word j of the target sentence. Directional
alignments come from an aligner run both ways (both in source-target order, as fast_align / eflomal write them).

grow-diag-final-and is written here from its definition (Koehn et al. 2003; Moses' ``symal``, fast_align's
``atools``): those are command-line C++ tools over files, and no maintained Python library exposes it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from bitext_hf.errors import DataValidationError

__all__ = [
    "SYMMETRIZATIONS",
    "Link",
    "check_links",
    "drop_identical",
    "grow_diag_final_and",
    "intersect",
    "one_to_one",
    "symmetrize",
]

Link = tuple[int, int]

# The 8-neighbourhood (diagonals included: the "diag" of grow-diag).
_NEIGHBOURS: tuple[Link, ...] = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))
SYMMETRIZATIONS: tuple[str, ...] = ("grow-diag-final-and", "intersect", "union")


def grow_diag_final_and(forward: Iterable[Link], backward: Iterable[Link]) -> list[Link]:
    """Symmetrize two directional alignments (both as (source, target) links).

    1. Start from the intersection.
    2. grow-diag: repeat until nothing changes: for every current link, add each of its 8 neighbours that is in the
       union and whose source word or target word is still unaligned.
    3. final-and, for the forward then the backward alignment: add each of its links whose source word and target
       word are both still unaligned.

    Returns the links sorted.
    """
    forward, backward = set(forward), set(backward)
    union = forward | backward
    alignment = forward & backward
    aligned_source = {i for i, _ in alignment}
    aligned_target = {j for _, j in alignment}

    def add(link: Link) -> None:
        alignment.add(link)
        aligned_source.add(link[0])
        aligned_target.add(link[1])

    grew = True
    while grew:
        grew = False
        for i, j in sorted(alignment):  # a sorted snapshot: the order of the definition's loops over e and f
            for di, dj in _NEIGHBOURS:
                candidate = (i + di, j + dj)
                if (
                    candidate in union
                    and candidate not in alignment
                    and (candidate[0] not in aligned_source or candidate[1] not in aligned_target)
                ):
                    add(candidate)
                    grew = True
    for directional in (forward, backward):
        for i, j in sorted(directional):
            if i not in aligned_source and j not in aligned_target:
                add((i, j))
    return sorted(alignment)


def intersect(forward: Iterable[Link], backward: Iterable[Link]) -> list[Link]:
    """Links in both directions (for argmax aligners: the mutual best matches)."""
    return sorted(set(forward) & set(backward))


def symmetrize(forward: Iterable[Link], backward: Iterable[Link], method: str = "grow-diag-final-and") -> list[Link]:
    """``grow-diag-final-and`` (the paper's), ``intersect`` or ``union``."""
    if method == "grow-diag-final-and":
        return grow_diag_final_and(forward, backward)
    if method == "intersect":
        return intersect(forward, backward)
    if method == "union":
        return sorted(set(forward) | set(backward))
    raise ValueError(f"symmetrization {method!r}: expected one of {', '.join(SYMMETRIZATIONS)}")


def one_to_one(links: Iterable[Link]) -> list[Link]:
    """Keep the links whose source word and target word each take part in no other link (the paper keeps only
    one-to-one alignments)."""
    links = list(links)
    source_count = Counter(i for i, _ in links)
    target_count = Counter(j for _, j in links)
    return sorted((i, j) for i, j in links if source_count[i] == 1 and target_count[j] == 1)


def drop_identical(links: Iterable[Link], source_words: Sequence[str], target_words: Sequence[str]) -> list[Link]:
    """Drop trivial links whose source and target words are the same string (numbers, names, punctuation)."""
    return sorted((i, j) for i, j in links if source_words[i] != target_words[j])


def check_links(links: Iterable[Link], source_length: int, target_length: int, where: str) -> list[Link]:
    """The links as sorted tuples, after checking that each points inside both sentences.

    Raises:
        DataValidationError: a link outside a sentence, naming ``where`` (e.g. the pair's line).
    """
    checked = []
    for link in links:
        i, j = (int(value) for value in link)
        if not (0 <= i < source_length and 0 <= j < target_length):
            raise DataValidationError(
                f"{where}: alignment {i}-{j} points outside the sentence pair ({source_length} source words, "
                f"{target_length} target words)"
            )
        checked.append((i, j))
    return sorted(checked)
