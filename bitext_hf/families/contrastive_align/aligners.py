"""Unsupervised word aligners: eflomal (the ``align`` extra) and a fallback needing nothing beyond the base encoder.

Both return directional alignments, forward and backward, each a list (one per pair) of ``(source word, target
word)`` links, for :func:`bitext_hf.families.contrastive_align.symmetrize.symmetrize` to combine.

* :class:`EflomalAligner`: eflomal (Östling & Tiedemann 2016), a fast Bayesian IBM-model aligner, in the role the
  paper gives fast_align; ``pip install 'bitext-hf[align]'`` (it compiles a small C program on install).
* :class:`SimilarityAligner`: each word's first-subword vector from the base encoder; forward links each source word
  to its most cosine-similar target word, backward each target word to its best source word, so the two directions'
  intersection is the mutual argmax (SimAlign's "argmax"). Written here: it is a few lines over the encoder, and the
  SimAlign package pulls networkx and its own model loading.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from bitext_hf.data.words import first_subword_vectors
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.contrastive_align.symmetrize import Link, check_links

__all__ = ["ALIGNERS", "Aligner", "EflomalAligner", "SimilarityAligner", "eflomal_available", "make_aligner"]

logger = logging.getLogger(__name__)

ALIGNERS: tuple[str, ...] = ("auto", "eflomal", "similarity")
Directional = list[list[Link]]
FALLBACK_HINT = "the fallback aligner 'similarity' (mutual argmax of the base encoder's embeddings) needs nothing more"


class Aligner(Protocol):
    """What the pipeline needs from an aligner."""

    name: str

    def cache_key(self) -> str: ...

    def align(
        self, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]]
    ) -> tuple[Directional, Directional]: ...


def eflomal_available() -> bool:
    """Whether eflomal can be imported (the ``align`` extra is installed)."""
    try:
        import eflomal  # noqa: F401
    except ImportError:
        return False
    return True


def _parse_pharaoh(
    path: Path, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]]
) -> Directional:
    """Read a links file: one line per pair of ``i-j`` links (source-target order)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) != len(source_words):
        raise DataValidationError(f"{path.name}: {len(lines)} lines of links for {len(source_words)} sentence pairs")
    links = []
    for number, (line, src, tgt) in enumerate(zip(lines, source_words, target_words), start=1):
        try:
            pairs = [tuple(int(value) for value in item.split("-")) for item in line.split()]
        except ValueError:
            raise DataValidationError(f"{path.name}:{number}: not Pharaoh links (i-j ...): {line[:80]!r}") from None
        links.append(check_links(pairs, len(src), len(tgt), f"{path.name}:{number}"))
    return links


class EflomalAligner:
    """eflomal in both directions (its own two runs: ``links_filename_fwd`` / ``links_filename_rev``).

    Words are lowercased for alignment (a common preprocessing for statistical aligners: fewer sparse types).
    """

    name = "eflomal"

    def __init__(self, **options: Any) -> None:
        if not eflomal_available():
            raise UsageError(
                "the eflomal aligner is not installed (pip install 'bitext-hf[align]'); "
                f"{FALLBACK_HINT}: pass --aligner similarity"
            )
        self.options = options

    def cache_key(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:  # eflomal has no __version__: ask the installed distribution
            installed = version("eflomal")
        except PackageNotFoundError:
            installed = "unknown"
        return f"eflomal-{installed}-{sorted(self.options.items())}"

    def align(
        self, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]]
    ) -> tuple[Directional, Directional]:
        import eflomal

        source_lines = [" ".join(words).lower() + "\n" for words in source_words]
        target_lines = [" ".join(words).lower() + "\n" for words in target_words]
        with tempfile.TemporaryDirectory(prefix="bitext-hf-eflomal-") as folder:
            forward, backward = Path(folder) / "forward.links", Path(folder) / "backward.links"
            eflomal.Aligner(**self.options).align(
                source_lines, target_lines, links_filename_fwd=str(forward), links_filename_rev=str(backward)
            )
            return (
                _parse_pharaoh(forward, source_words, target_words),
                _parse_pharaoh(backward, source_words, target_words),
            )


class SimilarityAligner:
    """Argmax cosine similarity of first-subword vectors in each direction (see the module docstring).

    Args:
        encoder: a transformers encoder (``forward(input_ids, attention_mask, output_hidden_states=True)``).
        tokenizer: its fast tokenizer.
        layer: hidden state used (0 = embeddings); default the last.
        max_length: tokens per sentence; words cut off have no vector and get no link.
        batch_size: sentences per forward pass.
    """

    name = "similarity"

    def __init__(
        self,
        encoder: torch.nn.Module,
        tokenizer: Any,
        *,
        layer: int | None = None,
        max_length: int = 96,
        batch_size: int = 64,
    ) -> None:
        self.encoder = encoder
        self.tokenizer = tokenizer
        self.layer = layer
        self.max_length = max_length
        self.batch_size = batch_size

    def cache_key(self) -> str:
        # The weights decide the links: hash them (about a second for a base-size encoder, far less than aligning).
        digest = hashlib.sha256()
        for name, value in self.encoder.state_dict().items():
            digest.update(name.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
        return f"similarity-{digest.hexdigest()[:24]}-layer{self.layer}-len{self.max_length}"

    def word_vectors(self, sentences: Sequence[Sequence[str]]) -> list[torch.Tensor]:
        """Per sentence, `(words, d)` L2-normalized first-subword vectors (zero rows: words cut off)."""
        return first_subword_vectors(
            self.encoder,
            self.tokenizer,
            sentences,
            layer=self.layer,
            max_length=self.max_length,
            batch_size=self.batch_size,
        )

    def align(
        self, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]]
    ) -> tuple[Directional, Directional]:
        forward: Directional = []
        backward: Directional = []
        for source, target in zip(self.word_vectors(source_words), self.word_vectors(target_words)):
            similarity = source @ target.T
            # Words without a vector (truncated: all-zero rows) take part in no link.
            source_ok, target_ok = source.abs().sum(-1) > 0, target.abs().sum(-1) > 0
            best_target, best_source = similarity.argmax(1).tolist(), similarity.argmax(0).tolist()
            forward.append([(i, j) for i, j in enumerate(best_target) if source_ok[i] and target_ok[j]])
            backward.append([(i, j) for j, i in enumerate(best_source) if source_ok[i] and target_ok[j]])
        return forward, backward


def make_aligner(name: str, encoder: torch.nn.Module | None = None, tokenizer: Any = None, **options: Any) -> Aligner:
    """``eflomal``, ``similarity`` or ``auto`` (eflomal when installed, else the fallback, with a warning).

    Raises:
        UsageError: an unknown name, eflomal asked for but missing (the message names the fallback), or the
            fallback without an encoder and tokenizer.
    """
    if name not in ALIGNERS:
        raise UsageError(f"aligner {name!r}: expected one of {', '.join(ALIGNERS)}")
    if name == "eflomal" or (name == "auto" and eflomal_available()):
        return EflomalAligner()
    if name == "auto":
        logger.warning("eflomal is not installed (pip install 'bitext-hf[align]'): using %s", FALLBACK_HINT)
    if encoder is None or tokenizer is None:
        raise UsageError("the 'similarity' aligner needs the base encoder and its tokenizer")
    return SimilarityAligner(encoder, tokenizer, **options)
