"""The settings of the alignment search (:class:`AlignSettings`) and of one alignment job over files
(:class:`AlignConfig`, what ``bitext-hf align`` parses its options into), each checked when made. Both import
neither numba nor torch: ``--help`` reads their fields' options."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import field
from typing import Any, ClassVar

from bitext_hf.alignment.output import ALIGN_FORMATS, alignment_format
from bitext_hf.encoding.embedder import EncoderOptions
from bitext_hf.errors import UsageError
from bitext_hf.mining.filters import LanguageOptions
from bitext_hf.options import QUIET, THREADS, ValueType, check_fields, checked, finite_float, option, positive_int

__all__ = ["AlignConfig", "AlignSettings"]

_SEARCH = "search"
# The engine's limits (AlignSettings.check_engine_limits): beyond them a search crashes, overflows or cannot finish.
MAX_SKIP = 1000
MAX_TOP_K = 1000
# The bead types are numbered in the back pointers' int16, and a run of more sentences than this is a paragraph.
_BEAD_SIZE = ValueType("integer", int, "an integer from 2 to 64", lambda value: 2 <= value <= 64)


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

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {_SEARCH: ("search (defaults: Bertalign's)", None)}

    max_align: int = field(
        default=5,
        metadata=option(
            "most sentences in a bead, both sides together (default 5: up to 1-4, 2-3, 3-2, 4-1); overlaps of up to "
            "N-1 sentences are encoded, so encoding grows with it",
            type=_BEAD_SIZE,
            group=_SEARCH,
        ),
    )
    top_k: int = field(
        default=3,
        metadata=option(
            "targets of each source sentence the anchors may link (default 3)", type=positive_int, group=_SEARCH
        ),
    )
    window: int = field(
        default=5,
        metadata=option(
            "target sentences searched on either side of the anchor path (default 5)", type=positive_int, group=_SEARCH
        ),
    )
    anchor_window: int = field(default=250, metadata=checked(type=positive_int))
    skip: float = field(
        default=-0.1,
        metadata=option("score of a 1-0 or 0-1 bead (default -0.1; lower: fewer)", type=finite_float, group=_SEARCH),
    )
    margin: bool = field(
        default=False,
        metadata=option(
            "subtract a bead's mean cosine to its neighbouring sentences (Bertalign's default; off by default: it "
            "merges neighbouring sentences that look alike into too few beads, and made little difference on prose)",
            group=_SEARCH,
        ),
    )
    length_prior: bool = field(
        default=True,
        metadata=option(
            "score beads by cosine alone, not weighed by how alike their two sides' lengths are",
            negative_flag="--no-length-prior",
            group=_SEARCH,
        ),
    )

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range: the whole check of the search's settings
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


@dataclasses.dataclass
class AlignConfig(AlignSettings, LanguageOptions, EncoderOptions):
    """Everything one alignment run needs; the fields are ``bitext-hf align``'s options. Checked when made.

    The search's fields (``max_align``, ``top_k``, ``window``, ``skip``, ``margin``, ``length_prior``) are
    :class:`AlignSettings`', which the config inherits; the encoder, its cache and the longest line accepted are
    :class:`~bitext_hf.encoding.embedder.EncoderOptions`' (``model``, ``pooling``, ``quantize``, ``backend``,
    ``batch_size``, ``max_line_chars``, ``cache_dir``, ``no_cache``), as for ``mine``.

    Args:
        src (str, optional): the source document, one sentence a line (``-`` for stdin, compressed files too), or a
            folder of documents.
        tgt (str, optional): the target document, or a folder of documents of the same file names as ``src``'s.
        src_docs (str, optional): instead of ``src``, a list of source documents, one path a line (relative to the
            list's folder).
        tgt_docs (str, optional): instead of ``tgt``, the list of their target documents, paired line by line.
        out (str, optional): the output file (a folder for many documents; ``-`` for stdout); None writes nothing.
        format (str, optional): "vecalign", "tsv", "jsonl" or "parquet"; by default from the extension of ``out``
            (.tsv, .jsonl, .parquet), else vecalign.
        src_lang (str, optional): the source side's language code, recorded in the sidecar for the dataset card.
        tgt_lang (str, optional): the target side's language code, likewise.
        quiet (bool): no progress bars, as ``mine``.
        threads (int, optional): CPU threads, as ``mine``.
        command (str, optional): the command that reproduces the run, recorded in the sidecar, as ``mine``.
    """

    src: str | None = field(
        default=None,
        metadata=option(
            "source document, one sentence a line (.gz/.xz/.bz2/.zst; - for stdin), or a folder of documents"
        ),
    )
    tgt: str | None = field(
        default=None, metadata=option("target document, or a folder of documents of the same file names")
    )
    out: str | None = field(
        default=None,
        metadata=option(
            "write the alignment here (a folder for folders or lists of documents; - for stdout); written "
            "atomically, never over an input. Without --out the alignment is printed"
        ),
    )
    format: str | None = field(
        default=None,
        metadata=option(
            "output format (default: by the extension of --out, .tsv .jsonl .parquet, else vecalign)",
            choices=ALIGN_FORMATS,
        ),
    )
    src_docs: str | None = field(
        default=None,
        metadata=option(
            "instead of --src: a list of source documents, one path a line (relative to the list's folder)"
        ),
    )
    tgt_docs: str | None = field(
        default=None,
        metadata=option("instead of --tgt: the list of their target documents, in the same order"),
    )
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)
    command: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range, as the command line's refusal, before anything else
        self.check_engine_limits()
        lists = bool(self.src_docs) or bool(self.tgt_docs)
        if lists and (self.src or self.tgt):
            raise UsageError("give either --src and --tgt, or --src-docs and --tgt-docs (lists of documents)")
        if lists and not (self.src_docs and self.tgt_docs):
            raise UsageError("give both --src-docs and --tgt-docs (lists of documents, paired line by line)")
        if not lists and not (self.src and self.tgt):
            raise UsageError("give --src and --tgt (documents, one sentence a line, or folders of them)")
        if self.format is not None and not self.out:
            raise UsageError(f"--format {self.format} is the format of --out; there is no --out")
        self.check_encoder_options()
        folders = [os.path.isdir(path) for path in (self.src, self.tgt) if path]
        if len(set(folders)) > 1:
            raise UsageError("--src and --tgt must both be files or both be folders of documents")
        if self.many_documents and self.out is not None and (self.out == "-" or os.path.isfile(self.out)):
            raise UsageError(f"--out {self.out}: many documents align into a folder, one file each; name a folder")

    @property
    def many_documents(self) -> bool:
        """Folders or lists of documents (``out`` is a folder), not one pair of files."""
        return bool(self.src_docs) or os.path.isdir(self.src)

    @property
    def settings(self) -> AlignSettings:
        """The search's settings of this run, checked."""
        return AlignSettings(**AlignSettings.as_dict(self))

    @property
    def output_format(self) -> str:
        return alignment_format(None if self.many_documents else self.out, self.format)
