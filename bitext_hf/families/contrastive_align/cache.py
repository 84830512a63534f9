"""The word-alignment pipeline with its on-disk cache: align once per (aligner, corpus), reuse on every run.

:func:`align_words` runs the aligner in both directions (or reads its result from the cache), symmetrizes
(grow-diag-final-and), keeps one-to-one links and drops identical strings. The cache holds the directional links,
the expensive part, in ``<cache_dir>/alignments-<sha256>.json`` where the hash covers the aligner's key and every
word of the corpus; files are written through :func:`bitext_hf.io.atomic_output`, so an interrupted run leaves the
old file or none. A cache file that does not match the corpus (wrong count, links outside a sentence) is a data
error naming the file, never silently used.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from bitext_hf.data.hashing import text_sha256
from bitext_hf.errors import DataValidationError
from bitext_hf.families.contrastive_align.aligners import Aligner, Directional
from bitext_hf.families.contrastive_align.symmetrize import Link, check_links, drop_identical, one_to_one, symmetrize
from bitext_hf.io import atomic_output
from bitext_hf.training.distributed import main_process_first

__all__ = ["align_words", "cache_path", "directional_alignments"]

logger = logging.getLogger(__name__)


def cache_path(
    cache_dir: str | os.PathLike,
    aligner: Aligner,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
) -> Path:
    """Where the directional links of this aligner on this corpus are cached (content hash)."""
    # One text a sentence (its words joined by a separator no word contains), each side after its count.
    texts = [aligner.cache_key()]
    for side in (source_words, target_words):
        texts += [str(len(side)), *("\u241f".join(words) for words in side)]
    return Path(cache_dir) / f"alignments-{text_sha256(texts)[:32]}.json"


def _read_cache(path: Path, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]]) -> tuple:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
        forward, backward = content["forward"], content["backward"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as error:  # RecursionError: JSON nested too deep
        raise DataValidationError(f"{path}: not a word-alignment cache file ({error}); delete it to realign") from None
    if len(forward) != len(source_words) or len(backward) != len(source_words):
        raise DataValidationError(f"{path}: cached links for another corpus; delete it to realign")
    where = lambda number: f"{path} pair {number}"  # noqa: E731
    return tuple(
        [
            check_links(links, len(src), len(tgt), where(n))
            for n, (links, src, tgt) in enumerate(zip(side, source_words, target_words), start=1)
        ]
        for side in (forward, backward)
    )


def directional_alignments(
    aligner: Aligner,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
    cache_dir: str | os.PathLike | None = None,
) -> tuple[Directional, Directional]:
    """Forward and backward links of ``aligner``, from the cache when it holds them."""
    if cache_dir is None:
        return aligner.align(source_words, target_words)
    path = cache_path(cache_dir, aligner, source_words, target_words)
    # In a distributed job rank 0 aligns and writes the cache, the other ranks read it (never two writers).
    with main_process_first():
        if path.is_file():
            logger.info("word alignments read from %s", path)
            return _read_cache(path, source_words, target_words)
        forward, backward = aligner.align(source_words, target_words)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path, follow_symlinks=False) as handle:
            json.dump({"aligner": aligner.cache_key(), "forward": forward, "backward": backward}, handle)
        logger.info("word alignments cached in %s", path)
        return forward, backward


def align_words(
    aligner: Aligner,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
    *,
    cache_dir: str | os.PathLike | None = None,
    symmetrization: str = "grow-diag-final-and",
    keep_one_to_one: bool = True,
    keep_identical: bool = False,
) -> list[list[Link]]:
    """The paper's word alignments: both directions, symmetrized, one-to-one, identical strings dropped."""
    forward, backward = directional_alignments(aligner, source_words, target_words, cache_dir)
    result = []
    for fwd, bwd, src, tgt in zip(forward, backward, source_words, target_words):
        links = symmetrize(fwd, bwd, symmetrization)
        if keep_one_to_one:
            links = one_to_one(links)
        if not keep_identical:
            links = drop_identical(links, src, tgt)
        result.append(links)
    return result
