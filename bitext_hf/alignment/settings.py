"""The settings of the alignment search (:class:`AlignSettings`), checked when made: what
:func:`bitext_hf.alignment.search.search` and :func:`bitext_hf.alignment.align.align_sentences` take. The command
line's options for them are declared by the alignment job (:mod:`bitext_hf.jobs.align`). Imports neither numba nor
torch."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

from bitext_hf.errors import UsageError

__all__ = ["MAX_BEAD_SIZE", "MAX_SKIP", "MAX_TOP_K", "AlignSettings"]

# The engine's limits (AlignSettings.check_engine_limits): beyond them a search crashes, overflows or cannot finish.
MAX_SKIP = 1000
MAX_TOP_K = 1000
# The bead types are numbered in the back pointers' int16, and a run of more sentences than this is a paragraph.
MAX_BEAD_SIZE = 64


@dataclasses.dataclass(kw_only=True)
class AlignSettings:
    """The search's settings (:func:`bitext_hf.alignment.search.search`); defaults are Bertalign's but for the margin.

    Args:
        max_align (int, defaults to 5): the most sentences in a bead, both sides together (a 2-3 bead has 5);
            overlaps of up to ``max_align - 1`` sentences are encoded.
        top_k (int, defaults to 3): target neighbours of each source sentence that the anchor pass may link.
        window (int, defaults to 5): target sentences searched on either side of the anchor path.
        anchor_window (int, defaults to 250): the least half-width of the anchor pass's band (it grows with the
            documents, a share of the longer one's sentences, up to :data:`~bitext_hf.alignment.search.MAX_ANCHOR_WINDOW`).
        skip (float, defaults to -0.1): the score of a 1-0 or 0-1 bead.
        margin (bool, defaults to False): subtract the bead's mean cosine to its neighbouring sentences, as
            Bertalign does by default (see the search's scoring for why it is off here).
        length_prior (bool, defaults to True): weigh a bead by how alike its two sides' lengths are.
    """

    max_align: int = 5
    top_k: int = 3
    window: int = 5
    anchor_window: int = 250
    skip: float = -0.1
    margin: bool = False
    length_prior: bool = True

    def __post_init__(self) -> None:
        # The job's config checks the same fields from its options' metadata before it makes these; a caller of the
        # engine (align_sentences) gets the same refusals here.
        for name, least in (("max_align", 2), ("top_k", 1), ("window", 1), ("anchor_window", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
                raise UsageError(f"{name}={value!r}: must be an integer >= {least}")
        if self.max_align > MAX_BEAD_SIZE:
            raise UsageError(f"max_align={self.max_align!r}: must be an integer from 2 to {MAX_BEAD_SIZE}")
        if isinstance(self.skip, bool) or not isinstance(self.skip, numbers.Real) or not math.isfinite(self.skip):
            raise UsageError(f"skip={self.skip!r}: must be a finite number")
        for name in ("margin", "length_prior"):
            if not isinstance(getattr(self, name), bool):
                raise UsageError(f"{name}={getattr(self, name)!r}: must be True or False")
        self.check_engine_limits()

    def check_engine_limits(self) -> None:
        """Refuse what no search can honour (``UsageError``, before anything is read): a ``skip`` so large that the
        search's sums overflow (a huge negative one crashed the search) or swamp the beads' scores, and a ``top_k``
        whose neighbour lists outgrow memory and time. A ``top_k`` above a document's target sentences, and a
        ``window`` or ``anchor_window`` wider than the documents, are capped by the search (nothing changes)."""
        if abs(self.skip) > MAX_SKIP:
            raise UsageError(
                f"skip={self.skip!r} (--skip): must be between -{MAX_SKIP} and {MAX_SKIP}: a linked bead scores "
                f"between -2 and 2, so beyond these a skip changes nothing in practice but the rounding of the "
                "search's sums, which overflow at the extremes"
            )
        if self.top_k > MAX_TOP_K:
            raise UsageError(
                f"top_k={self.top_k!r} (--top-k): must be at most {MAX_TOP_K}: the anchors keep each source "
                "sentence's k nearest targets and read them all at every cell of a band about 2000 targets wide at "
                "most, so memory and time grow with k (Bertalign uses 3)"
            )

    def as_dict(self) -> dict[str, Any]:
        """The search's settings alone (a config's other fields left out): the keywords of the search."""
        return {name.name: getattr(self, name.name) for name in dataclasses.fields(AlignSettings)}
