"""Sentence alignment of two documents in memory: :func:`align_sentences`.

>>> from bitext_hf.encoders import load_encoder
>>> alignment = align_sentences(german_sentences, french_sentences, load_encoder())
>>> alignment.beads[:2], alignment.scores[:2]
([([0], [0, 1]), ([1], [2])], array([0.61, 0.58]))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import Alignment, search
from bitext_hf.errors import UsageError

__all__ = ["AlignSettings", "align_sentences", "encode_function"]


@dataclass(frozen=True)
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
        for name, least in (("max_align", 2), ("top_k", 1), ("window", 0), ("anchor_window", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < least:
                raise UsageError(f"{name} must be an integer >= {least}, got {value!r}")
        # A bead type index must fit the back pointers (int16), and a run of this many sentences is a paragraph.
        if self.max_align > 64:
            raise UsageError(f"max_align must be at most 64, got {self.max_align}")
        if not np.isfinite(self.skip):
            raise UsageError(f"skip must be a finite number, got {self.skip!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    **options: Any,
) -> Alignment:
    """Align two documents given as lists of sentences (translations of each other, in order).

    Args:
        encoder: an encoder of the package (:func:`bitext_hf.encoders.load_encoder`) or a callable ``texts -> (n, d)``.
        settings (AlignSettings, optional): the search's settings; or give them as keywords (``max_align=4``).

    Returns:
        The :class:`~bitext_hf.alignment.search.Alignment`: beads covering every sentence of both sides in order.
    """
    if settings is None:
        settings = AlignSettings(**options)
    elif options:
        raise TypeError("give settings or keyword options, not both")
    for name, side in (("src", src), ("tgt", tgt)):
        if isinstance(side, str) or not all(isinstance(sentence, str) for sentence in side):
            raise TypeError(f"{name} must be a list of sentences (str)")
    overlaps = overlap_texts([list(src), list(tgt)], settings.max_align - 1)
    src_overlaps, tgt_overlaps = overlaps.embed(encode_function(encoder, batch_size))
    return search(src_overlaps, tgt_overlaps, **settings.as_dict())
