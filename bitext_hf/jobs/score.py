"""The scoring job: :func:`run_scoring` over a :class:`ScoreConfig` margin-scores the pairs of an existing parallel
corpus (row i of the source with row i of the target, neighbourhoods from the whole corpus on both sides), keeps
those above a threshold and writes them. ``bitext-hf score`` parses its options into the config and calls it;
Python users get the same job, the same files, in one call:

>>> from bitext_hf.jobs.score import ScoreConfig, run_scoring
>>> result = run_scoring(ScoreConfig(pairs="corpus.tsv", out="scored.tsv", threshold=1.05))
>>> len(result.pairs), result.quantiles[0.5]

The job, in order: every option checked (when the config is made); the output path and the threshold report's files
planned and checked (:func:`bitext_hf.jobs.base.job_run`: no link, FIFO, device or folder at a name the job gives,
none of them an input) and the inputs protected; the pairs read, checked to fit the output format and filtered
(:func:`bitext_hf.mining.filters.filter_aligned`: every filter runs before encoding); k checked against the corpus;
only then the encoder loaded and the sentences encoded (or taken from the encoding cache); the pairs scored, and the
pairs and the threshold report written to temporary files and committed together. A bad input never costs an
encoding run; a failure or a signal before the commit leaves the earlier files exactly as they were.

The config's module imports no torch: the job's heavy parts are imported when it runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bitext_hf.data.readers import check_aligned_inputs
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.jobs.base import ReportLine, plan_pairs_outputs, shown_path
from bitext_hf.jobs.option_fields import check_fields, option, probability
from bitext_hf.jobs.options import (
    FILTER_LENGTHS,
    QUIET,
    THREADS,
    EncoderOptions,
    FilterOptions,
    MarginOptions,
    ThresholdOptions,
    classifier_backend,
    pairs_format,
    refuse_classifier_backend_without_classifier,
    refuse_lid_options_without_lid,
)
from bitext_hf.mining.retrieval import MinedPairs

if TYPE_CHECKING:
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.jobs.base import JobOutputs

__all__ = [
    "QUANTILES",
    "ScoreConfig",
    "ScoringResult",
    "run_scoring",
    "scoring_report",
]

# The quantiles of the scores that the report gives.
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


@dataclasses.dataclass(kw_only=True)
class ScoreConfig(ThresholdOptions, MarginOptions, FilterOptions, EncoderOptions):
    """One scoring run; the fields are ``bitext-hf score``'s options (``--max-length-ratio`` is
    ``max_length_ratio``), and messages name them as the command line spells them. Checked when made
    (``UsageError``). Each field's ``metadata`` holds its command-line help, choices and metavar.

    The filters ``src_lang``, ``tgt_lang``, ``lid``, ``lid_min_prob``, ``min_chars``, ``max_chars``,
    ``max_length_ratio``, ``dedup`` and ``drop_same_text`` are all off by default and all run before encoding
    (:class:`~bitext_hf.mining.filters.FilterSettings`); ``lid_min_prob`` None is the filters' default. The encoder,
    its cache and the longest line accepted are :class:`~bitext_hf.jobs.options.EncoderOptions`' fields
    (``model``, ``pooling``, ``quantize``, ``backend``, ``batch_size``, ``max_line_chars``, ``cache_dir``,
    ``no_cache``).

    Args:
        out (str): the scored pairs (.tsv, .csv, .jsonl, .parquet or ``format``; ``-`` for stdout), one row per
            input pair above the threshold, in input order; written atomically, never over an input.
        pairs (str, optional): a pairs file (:func:`bitext_hf.data.readers.read_pairs`); or ``src`` and ``tgt``.
        src (str, optional): the source side of Moses-style parallel files.
        tgt (str, optional): the target side of Moses-style parallel files.
        format (str, optional): the output format whatever the extension.
        threshold (float, optional): keep only pairs with a score at least this.
        k (int, defaults to 4): neighbours of the margin, as :func:`bitext_hf.mining.score_pairs`.
        margin (str, defaults to "ratio"): the margin, as :func:`bitext_hf.mining.score_pairs`.
        threshold_report (bool, defaults to False): write ``OUT.threshold.png`` and ``OUT.threshold.md`` beside
            ``out`` (:mod:`bitext_hf.data.pair_files`).
        quiet (bool, defaults to False): no progress bars.
        threads (int, optional): CPU threads of the encoder and the search (:func:`bitext_hf.threads.limit_threads`,
            restored after the run).
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {
        "filters": (
            "filters (all off by default; what each removes is counted in the report)",
            FILTER_LENGTHS + "\nEvery filter runs before encoding; of duplicate pairs the first stays.",
        )
    }

    out: str = field(
        metadata=option(
            "write the pairs here, in the format of the extension: .tsv or .txt (TSV), .csv, .jsonl, .parquet or "
            ".pq; `-` for stdout (TSV unless --format); written atomically, never over an input",
            required=True,
        )
    )
    pairs: str | None = field(
        default=None,
        metadata=option(
            "pairs file: source<TAB>target per line (a header naming src/tgt, source/target or "
            "sentence1/sentence2 picks those columns), or the .tsv, .csv, .jsonl or .parquet output of `mine`, "
            "`score` or `data gettext`"
        ),
    )
    src: str | None = field(default=None, metadata=option("source side of Moses-style parallel files"))
    tgt: str | None = field(default=None, metadata=option("target side of Moses-style parallel files"))
    format: str | None = pairs_format()
    classifier: str = field(
        default="default",
        metadata=option(
            "the pair classifier whose probability that a pair is a translation becomes the `quality` column: "
            "`default` (shipped in the package, for the default encoder), a folder written by "
            "recipes/train_pair_quality.py (light: reads the run's encoder's cosine and margin, so its encoder must "
            "be the run's) or recipes/train_pair_quality_cross_encoder.py (reads the texts only), or a hub id; "
            "`none`: no quality column",
            metavar="MODEL",
        ),
    )
    classifier_backend: str = classifier_backend()
    min_quality: float | None = field(
        default=None,
        metadata=option(
            "keep only the pairs whose quality (the classifier's probability) is at least Q",
            type=probability,
            metavar="Q",
        ),
    )
    # The general options (`-q`, `--threads`), which every command takes before its name or after it.
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range, as the command line's refusal, before anything else
        # Then in the order the command has always checked them, so that its messages stay the same.
        self.check_encoder_options()
        # score records no languages: --src-lang / --tgt-lang act only through --lid.
        refuse_lid_options_without_lid(self.lid, self.lid_min_prob, self.src_lang, self.tgt_lang)
        _ = self.filters  # built and checked when the config is made, as every other option (FilterOptions)
        check_aligned_inputs(self.pairs, self.src, self.tgt)
        if not self.classifier.strip():
            raise UsageError("--classifier: empty; give `default`, a folder, a hub id or `none`")
        if self.min_quality is not None and self.classifier == "none":
            raise UsageError("--min-quality keeps pairs by the classifier's quality: --classifier none has none")
        refuse_classifier_backend_without_classifier(self.classifier_backend, self.wants_quality)

    @property
    def wants_quality(self) -> bool:
        """Whether the run computes the `quality` column."""
        return self.classifier != "none"

    @property
    def inputs(self) -> list[str | None]:
        """Every file the run reads (None for an input not given)."""
        return [self.pairs, self.src, self.tgt]


@dataclasses.dataclass
class ScoringResult:
    """What a run scored and wrote.

    Attributes:
        pairs (MinedPairs): the pairs written to ``out`` (those at or above the threshold), in input order; their
            indices are the input's rows (0-based).
        candidates (MinedPairs): every pair scored (the pairs the filters kept), before the threshold.
        src_texts, tgt_texts (list of str): the sentences of every input row.
        k (int): the neighbours the margin averaged (``k`` capped at the corpus).
        filter_counts (dict, optional): the rows each filter removed (None when no filter ran).
        quantiles (dict): the score at each of :data:`QUANTILES` (over the candidates).
        threshold_report_files (tuple of Path, optional): the figure and the sample written beside ``out``.
        encoded, from_cache (int): sentences encoded, and sentences whose embeddings came from the encoding cache.
        quality_note (str, optional): why the pairs have no ``quality`` although the run asked for it.
    """

    pairs: MinedPairs
    candidates: MinedPairs
    src_texts: list[str]
    tgt_texts: list[str]
    k: int
    filter_counts: dict[str, int] | None
    quantiles: dict[float, float]
    threshold_report_files: tuple[Path, Path] | None = None
    encoded: int = 0
    from_cache: int = 0
    quality_note: str | None = None


def scoring_report(config: ScoreConfig, result: ScoringResult) -> list[ReportLine]:
    """What ``bitext-hf score`` prints when it ends: the pairs scored and written, the filters' counts, the threshold
    report's files and the quantiles of the scores (on stderr when the pairs themselves went to stdout)."""
    from bitext_hf.mining.filters import format_counts

    threshold = f" (threshold {config.threshold})" if config.threshold is not None else ""
    lines = [
        ReportLine(
            f"scored {len(result.candidates)} pairs (k={result.k}, margin={config.margin}); wrote "
            f"{len(result.pairs)} to {shown_path(config.out)}{threshold}"
        )
    ]
    if result.filter_counts is not None:
        lines.append(ReportLine(format_counts(result.filter_counts)))
    if result.threshold_report_files is not None:
        figure, sample = result.threshold_report_files
        lines.append(ReportLine(f"wrote the threshold report {figure} and {sample}"))
    if result.candidates.quality is not None:
        written = result.pairs.quality
        estimate = f"{float(written.mean()):.3f}" if len(written) else "-"
        lines.append(
            ReportLine(
                f"quality: {int((result.candidates.quality >= 0.5).sum())} of {len(result.candidates)} pairs at or "
                f"above 0.5; estimated precision of the {len(written)} written {estimate} (expected correct "
                f"{float(written.sum()):.0f})"
            )
        )
    if result.quality_note:
        lines.append(ReportLine(result.quality_note))
    quantiles = "  ".join(f"{q:.0%} {v:.4f}" for q, v in result.quantiles.items())
    return [*lines, ReportLine(f"score quantiles: {quantiles}")]


def run_scoring(config: ScoreConfig, *, load_encoder: Callable[..., Any] | None = None) -> ScoringResult:
    """Run the scoring job of ``config`` (see the module docstring).

    Args:
        load_encoder (callable, optional): ``load_encoder(spec, pooling=...)`` returning an encoder; defaults to
            :func:`bitext_hf.encoders.load_encoder`. Called once, and only when something is encoded.

    Raises:
        UsageError: an output path that cannot be written or names an input, k above the corpus; DataValidationError:
            a bad input (naming the file and line), filters that removed every pair; OutputWriteError: the pairs
            could not be written (nothing is left behind).
    """
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.jobs.base import job_run

    with job_run(config, inputs=config.inputs) as outputs:
        return _score(config, Embedder.from_options(config, load_encoder), outputs)


def _plan_outputs(config: ScoreConfig, outputs: JobOutputs) -> str:
    """Declare the run's outputs before anything is read (:func:`bitext_hf.jobs.base.plan_pairs_outputs`): the scored
    pairs ``out`` and, with ``threshold_report``, its figure and sample beside it (a stream ``out``, ``-`` or a FIFO,
    gets the pairs alone). Returns their format."""
    return plan_pairs_outputs(outputs, config.out, config.format, threshold_report=config.threshold_report)


def _score(config: ScoreConfig, embedder: Embedder, outputs: JobOutputs) -> ScoringResult:
    from bitext_hf.data.pair_files import check_representable, write_pairs, write_threshold_report
    from bitext_hf.data.readers import display_name as display
    from bitext_hf.data.readers import read_aligned
    from bitext_hf.mining import score_pairs  # at call time: the package imports this module
    from bitext_hf.mining.filters import filter_aligned, format_counts
    from bitext_hf.mining.knn import check_k
    from bitext_hf.mining.margin import used_k

    fmt = _plan_outputs(config, outputs)
    sources, targets = read_aligned(config.pairs, config.src, config.tgt, max_chars=config.max_line_chars)
    # Before encoding: a Moses line, or a CSV / JSON Lines / Parquet cell, may hold a tab that TSV output cannot.
    check_representable(sources, display(config.pairs or config.src), fmt)
    check_representable(targets, display(config.pairs or config.tgt), fmt)
    filters = config.filters
    rows, counts = np.arange(len(sources)), {}
    if filters.active:  # before encoding: a rejected pair costs nothing
        rows = filter_aligned(sources, targets, filters, counts)
        if not len(rows):
            raise DataValidationError(f"the filters removed every pair ({format_counts(counts)})")
    kept_sources, kept_targets = [sources[row] for row in rows], [targets[row] for row in rows]
    check_k(config.k, len(kept_sources), len(kept_targets))
    classifier, quality_note = _classifier(config)  # loaded and checked before any encoding
    src_emb, tgt_emb = embedder.embed(kept_sources, "source"), embedder.embed(kept_targets, "target")
    scores = score_pairs(src_emb, tgt_emb, k=config.k, margin=config.margin)
    candidates = MinedPairs(rows, rows, scores, np.einsum("ij,ij->i", src_emb, tgt_emb))
    if classifier is not None:
        candidates.quality = _quality(classifier, config, kept_sources, kept_targets, candidates, src_emb, tgt_emb)
    pairs = candidates
    if config.threshold is not None:
        pairs = pairs.select(pairs.scores >= config.threshold)
    if config.min_quality is not None:
        pairs = pairs.select(pairs.quality >= config.min_quality)
    with outputs.staged(config.out) as path:
        write_pairs(pairs, path, src_texts=sources, tgt_texts=targets, format=fmt)
    report_files = None
    if config.threshold_report:
        from bitext_hf.mining.quality import report_precision

        report_files = write_threshold_report(
            outputs,
            config.out,
            candidates,
            sources,
            targets,
            threshold=config.threshold,
            margin=config.margin,
            precision_rows=report_precision(candidates, config.threshold),
        )
    outputs.commit()  # the pairs and their threshold report together, or neither
    return ScoringResult(
        pairs=pairs,
        candidates=candidates,
        src_texts=sources,
        tgt_texts=targets,
        k=used_k(config.k, len(rows), len(rows)),
        filter_counts=counts if filters.active else None,
        quantiles=dict(zip(QUANTILES, np.quantile(scores, QUANTILES).tolist())),
        threshold_report_files=report_files,
        encoded=embedder.encoded,
        from_cache=embedder.from_cache,
        quality_note=quality_note,
    )


def _classifier(config: ScoreConfig) -> tuple[Any, str | None]:
    """The pair classifier of the run, or None with why: ``--classifier none``, or the default classifier with
    another encoder than its own (an explicit ``--classifier`` trained on another encoder is refused instead)."""
    from bitext_hf.mining.quality import classifier_for_run

    if not config.wants_quality:
        return None, None
    return classifier_for_run(
        config.classifier, [config.encoder_spec().name], backend=config.classifier_backend, default_steps_aside=True
    )


def _quality(classifier, config, sources, targets, candidates, src_emb, tgt_emb) -> np.ndarray:
    """The classifier's probability of every candidate; its margin feature is the ratio margin with its own k,
    computed again when the run's margin is another."""
    from bitext_hf.mining import score_pairs
    from bitext_hf.mining.quality import pair_quality

    k = min(classifier.config.margin_k, len(sources))
    margins = candidates.scores
    reads_scores = getattr(classifier.config, "reads_scores", True)  # a cross-encoder reads the texts only
    if reads_scores and (config.margin != classifier.config.margin or config.k != classifier.config.margin_k):
        margins = score_pairs(src_emb, tgt_emb, k=k, margin=classifier.config.margin)
    return pair_quality(classifier, sources, targets, candidates.cosines, margins)
