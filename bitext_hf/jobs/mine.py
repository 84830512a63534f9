"""The mining job (``bitext-hf mine``): its config (:class:`MiningConfig`, the command's options, checked when made),
:func:`run_mining` and its result (:class:`MiningResult`). Python users get the same job and the same files in one
call:

>>> from bitext_hf.jobs import MiningConfig, run_mining
>>> result = run_mining(MiningConfig("corpus.en", "corpus.de", out="pairs.tsv", threshold=1.05))
>>> len(result.pairs), result.record.index

The job, in order: every option checked (when the config is made); every output planned and checked
(:func:`bitext_hf.jobs.base.job_run`: the pairs file, with ``threshold_report`` its figure and sample, and its sidecar;
no link, FIFO, device or folder at a name the job gives, none of them an input) and the inputs protected from every
file the job writes; every input read and checked (sentences, embeddings, document ids, gold pairs, that the
sentences fit the output format, k and the index against the corpus sizes); the single-side filters run
(:mod:`bitext_hf.mining.filters`: length, duplicates, language); only then the encoders loaded and the sentences
encoded (or taken from the encoding cache); the neighbours searched, the pairs retrieved and filtered, and the pairs,
the threshold report and the sidecar (:mod:`bitext_hf.data.pair_files`) written to temporary files and committed
together, the sidecar last: all or none. A bad input never costs an encoding run; a failure or a signal before the
commit leaves the earlier files exactly as they were. This module imports neither torch nor FAISS at its top:
``--help`` reads the config.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from bitext_hf.data.pair_files import MiningRecord
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.jobs.base import (
    JobOutputs,
    ReportLine,
    job_run,
    per_second,
    plan_pairs_outputs,
    results_on_stdout,
    shown_path,
)
from bitext_hf.jobs.mine_quality import add_quality, mining_classifier, pairs_at_precision
from bitext_hf.jobs.mine_search import (
    check_filter_options,
    check_index_options,
    distributed_session,
    rows_to_mine,
    search_and_retrieve,
)
from bitext_hf.jobs.option_fields import check_fields, option, positive_int, probability
from bitext_hf.jobs.options import (
    FILTER_LENGTHS,
    QUIET,
    THREADS,
    EncoderOptions,
    FilterOptions,
    MarginOptions,
    RayOptions,
    ThresholdOptions,
    classifier_backend,
    pairs_format,
    refuse_classifier_backend_without_classifier,
    refuse_lid_options_without_lid,
)
from bitext_hf.jobs.sides import Side, display, is_embeddings, read_docs, read_gold, read_side
from bitext_hf.mining.filters import filter_mined, filter_sides
from bitext_hf.mining.margin import used_k
from bitext_hf.mining.retrieval import DEFAULT_MODE, MODES, MinedPairs

if TYPE_CHECKING:
    from bitext_hf.mining.index import RecallReport

__all__ = ["DEMO_DIR", "GoldScores", "MiningConfig", "MiningResult", "demo_inputs", "mining_report", "run_mining"]

logger = logging.getLogger("bitext_hf")


DEMO_DIR = Path(__file__).parent.parent / "demo"


def demo_inputs(gold: str | None = None) -> dict[str, str]:
    """The inputs of the bundled English-German demo (``bitext_hf/demo/README.md``): its two sides, and its gold
    pairs unless ``gold`` names others."""
    return {
        "src": str(DEMO_DIR / "en.txt"),
        "tgt": str(DEMO_DIR / "de.txt"),
        "gold": gold or str(DEMO_DIR / "gold.tsv"),
    }


@dataclasses.dataclass
class MiningConfig(ThresholdOptions, MarginOptions, FilterOptions, RayOptions, EncoderOptions):
    """Everything one mining run needs; the fields are ``bitext-hf mine``'s options (``--src-docs`` is
    ``src_docs``), and messages name them as the command line spells them. Checked when made (``UsageError``).

    The filters ``lid``, ``lid_min_prob``, ``min_chars``, ``max_chars``, ``max_length_ratio``, ``dedup`` and
    ``drop_same_text`` are all off by default (:class:`bitext_hf.mining.filters.FilterSettings`); what each removed is
    in the result and the sidecar. ``lid_min_prob`` None is the filters' default.

    Args:
        src (str): source sentences (text, one a line; compressed or ``-`` for stdin) or embeddings (.npy, or a
            folder of shards from ``bitext-hf encode``).
        tgt (str): target sentences or embeddings, as ``src``.
        src_text (str, optional): with an embeddings ``src``, the text file of its sentences.
        tgt_text (str, optional): with an embeddings ``tgt``, the text file of its sentences.
        out (str, optional): the pairs file (.tsv, .csv, .jsonl, .parquet or ``format``; ``-`` for stdout), written
            with its sidecar ``<out>.meta.json``; None writes nothing (the pairs are in the result).
        format (str, optional): the output format whatever the extension.
        k (int, defaults to 4): neighbours of the margin, as :func:`bitext_hf.mining.mine`.
        margin (str, defaults to "ratio"): the margin, as :func:`bitext_hf.mining.mine`.
        mode (str, defaults to "max"): the retrieval mode, as :func:`bitext_hf.mining.mine`.
        threshold (float, optional): keep pairs scoring at least this, in every mode.
        src_docs (str, optional): the document id of each source line: mine inside aligned documents.
        tgt_docs (str, optional): the document id of each target line.
        gold (str, optional): gold pairs ``src_line<TAB>tgt_line`` (0-based) to score the pairs against.
        keep_duplicates (bool, defaults to False): mine duplicate lines separately (default: once, at the first).
        model (str, optional): the encoder of both sides.
        src_model (str, optional): the encoder of the source side (default ``model``).
        tgt_model (str, optional): the encoder of the target side (default ``model``).
        pooling (str, optional): "mean", "max" or "cls" for Hugging Face models.
        quantize (str, optional): "auto" (the default), "none", "bf16" or "int8": the CPU arithmetic of Hugging Face
            and sentence-transformers encoders (:func:`bitext_hf.encoders.load_encoder`).
        backend (str, optional): "torch" (the default) or "onnx" (ONNX Runtime; :func:`bitext_hf.encoders.load_encoder`).
        batch_size (int, defaults to 128): sentences per encoder batch.
        max_line_chars (int, defaults to 10000): the longest line accepted.
        cache_dir (str, optional): the encoding cache's folder.
        no_cache (bool, defaults to False): neither read nor write the encoding cache.
        index (str, defaults to "exact"): the neighbour search (see :mod:`bitext_hf.mining.index`).
        nprobe (int, optional): inverted lists scanned by an IVF index.
        check_recall (int, optional): recall@k of an approximate index on that many sampled sources.
        distributed (str, optional): ``"ray"`` encodes and searches in Ray tasks.
        ray_address (str, optional): the Ray cluster to join (default: a local Ray instance).
        workers (int, optional): Ray tasks at a time.
        quiet (bool, defaults to False): no progress bars.
        threads (int, optional): CPU threads of the encoders and the search (:func:`bitext_hf.threads.limit_threads`,
            restored after the run); defaults to the count in force, else the CPUs this process may use.
        src_lang (str, optional): the source side's language code, recorded in the sidecar for the dataset card,
            and the language ``lid`` checks.
        tgt_lang (str, optional): the target side's language code, as ``src_lang``.
        threshold_report (bool, defaults to False): keep every candidate pair (before the threshold) in the result
            and write the threshold report beside ``out`` (:mod:`bitext_hf.data.pair_files`).
        command (str, optional): the command that reproduces the run, recorded in the sidecar.
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {
        "filters": (
            "filters (all off by default; what each removes is counted in the report, the sidecar and the dataset "
            "card)",
            FILTER_LENGTHS + "\nLength, duplicates, then language run on each side before encoding; the others on "
            "the mined pairs.",
        ),
        "sides": ("one encoder per side", None),
        "index": ("approximate search (FAISS; benchmarks/README.md has recall and time by size)", None),
        "quality": (
            "pair quality (the probability that a pair is a translation, and precision estimated without gold)",
            "The estimate holds as far as the classifier is calibrated on this data: benchmarks/README.md, "
            '"Pair quality", measures it.',
        ),
    }

    src: str | None = field(
        metadata=option(
            "source sentences (text, one a line; .gz/.xz/.bz2/.zst; - for stdin) or embeddings (.npy, or a folder "
            "of shards from `encode --out FOLDER/`, mined a block at a time)"
        )
    )
    tgt: str | None = field(metadata=option("target sentences or embeddings, as --src (only one side can be -)"))
    src_text: str | None = field(
        default=None,
        metadata=option("with a .npy or folder --src: the text file of its sentences (one line per row)"),
    )
    tgt_text: str | None = field(default=None, metadata=option("with a .npy --tgt: the text file of its sentences"))
    out: str | None = field(
        default=None,
        metadata=option(
            "write the pairs here, in the format of the extension: .tsv or .txt (TSV), .csv, .jsonl, .parquet or "
            ".pq; `-` for stdout (TSV unless --format); written atomically, never over an input"
        ),
    )
    format: str | None = pairs_format()
    mode: str | None = field(
        default=DEFAULT_MODE,
        metadata=option(
            "retrieval mode (default max, also for document-level mining)", choices=MODES, parser_default=None
        ),
    )
    src_docs: str | None = field(
        default=None, metadata=option("document id of each source line: mine inside aligned documents")
    )
    tgt_docs: str | None = field(default=None, metadata=option("document id of each target line"))
    gold: str | None = field(
        default=None,
        metadata=option(
            "gold pairs (`src_line<TAB>tgt_line`, 0-based) to report precision and recall; read before encoding"
        ),
    )
    keep_duplicates: bool = field(default=False, metadata=option("mine duplicate lines separately (default: once)"))
    src_model: str | None = field(
        default=None,
        metadata=option("encoder of the source side (default --model), e.g. a LASER3 student", group="sides"),
    )
    tgt_model: str | None = field(
        default=None, metadata=option("encoder of the target side (default --model), e.g. its teacher", group="sides")
    )
    index: str = field(
        default="exact",
        metadata=option(
            "exact (default): every similarity, one pass for both directions; auto: exact while the corpus is "
            "small (N x M <= 6.4e9 sentence pairs, 80k x 80k, where an index starts to pay on a busy machine), then "
            "IVF<n>,Flat (inverted lists of exact vectors, n ~ 4 sqrt(N) lists, nprobe: 64 of them and at least "
            "3/64), then OPQ64,IVF<n>,PQ64 once a side's vectors pass 8 GiB; or any FAISS factory string, e.g. "
            "IVF1024,Flat. An index is trained once on a seeded sample of both sides and built over each side; scores "
            "are always exact cosines of the candidates found, so an index can only miss pairs",
            metavar="exact|auto|FACTORY",
            group="index",
        ),
    )
    nprobe: int | None = field(
        default=None,
        metadata=option(
            "inverted lists each sentence scans with an IVF index (default 64, at most the lists): time grows about "
            "linearly with it, and so does recall until it nears exact; with IVF-Flat, nprobe = lists is exact search",
            type=positive_int,
            group="index",
        ),
    )
    check_recall: int | None = field(
        default=None,
        metadata=option(
            "after an approximate run, compare the neighbours of N sampled sources (seeded) with exact search and "
            "print recall@k (to stderr when the pairs go to stdout); costs one more index over the targets",
            type=positive_int,
            metavar="N",
            group="index",
        ),
    )
    classifier: str | None = field(
        default=None,
        metadata=option(
            "add a `quality` column, the probability that a pair is a translation by this pair classifier: `default` "
            "(shipped in the package, for the default encoder), a folder written by recipes/train_pair_quality.py "
            "(reads the run's encoder's ratio margin with k=4, so its encoder must be the run's) or "
            "recipes/train_pair_quality_cross_encoder.py (reads the texts only), or a hub id",
            metavar="MODEL",
            group="quality",
        ),
    )
    classifier_backend: str = classifier_backend(group="quality")
    min_precision: float | None = field(
        default=None,
        metadata=option(
            "choose the threshold: the lowest whose written pairs have an estimated precision (mean quality) of at "
            "least P; recorded in OUT.meta.json with the precision reached (the `default` classifier unless "
            "--classifier)",
            type=probability,
            metavar="P",
            group="quality",
        ),
    )
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)
    command: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range, as the command line's refusal, before anything else
        if not self.src or not self.tgt:
            raise UsageError("give --src and --tgt (text or .npy files), or --demo")
        if bool(self.src_docs) != bool(self.tgt_docs):
            raise UsageError("document-level mining needs both --src-docs and --tgt-docs")
        for side, model in (("src", self.src_model), ("tgt", self.tgt_model)):
            if model is not None and is_embeddings(getattr(self, side)):
                raise UsageError(f"--{side}-model has nothing to encode: --{side} holds embeddings (.npy or shards)")
        self.index = self.index or "exact"
        if self.distributed and self.src_docs:
            raise UsageError("--distributed ray mines whole corpora (no --src-docs)")
        if self.distributed and self.check_recall:
            raise UsageError("--check-recall searches in one process: leave it out with --distributed ray")
        self.check_ray_options()
        self.mode = self.mode or DEFAULT_MODE
        self.check_encoder_options()
        if self.dedup and self.keep_duplicates:
            raise UsageError("--dedup drops duplicate lines and --keep-duplicates mines them: choose one")
        self._refuse_options_that_cannot_act()
        _ = self.filters  # built and checked when the config is made, as every other option (FilterOptions)
        self._check_quality_options()

    def _check_quality_options(self) -> None:
        """``--min-precision`` needs a classifier (the default one unless named) and no threshold of its own; what the
        classifier reads (the light one: the ratio margin with k=4) is checked when it is loaded, before encoding."""
        if self.min_precision is not None:
            if self.threshold is not None:
                raise UsageError("--min-precision chooses the threshold: leave --threshold out")
            self.classifier = self.classifier or "default"
        refuse_classifier_backend_without_classifier(self.classifier_backend, self.classifier is not None)
        if self.classifier is None:
            return
        if not self.classifier.strip():
            raise UsageError("--classifier: empty; give `default`, a folder or a hub id")

    def _refuse_options_that_cannot_act(self) -> None:
        """An option given where it can do nothing is a usage error, not silently ignored: the user meant it to act."""
        from bitext_hf.io import writes_in_place

        sidecar = bool(self.out) and not writes_in_place(self.out)
        # The languages act through --lid, and are recorded in the sidecar (the dataset card's languages).
        refuse_lid_options_without_lid(
            self.lid, self.lid_min_prob, self.src_lang, self.tgt_lang, recorded=sidecar, where=" or --out FILE"
        )
        if self.format is not None and not self.out:
            raise UsageError(f"--format {self.format} is the format of --out; there is no --out")

    @classmethod
    def demo(cls, **options: Any) -> MiningConfig:
        """The bundled English-German demo (``bitext_hf/demo/README.md``) scored against its gold pairs."""
        return cls(**{**options, **demo_inputs(options.get("gold"))})

    @property
    def inputs(self) -> list[str | None]:
        """Every file the run reads (None for an input not given)."""
        return [self.src, self.tgt, self.src_text, self.tgt_text, self.src_docs, self.tgt_docs, self.gold]

    def record(self, src: Side, tgt: Side, src_rows: int, tgt_rows: int, dim: int) -> MiningRecord:
        """The sidecar's record of this run over the sides ``src`` and ``tgt`` as read (:func:`read_side`), of which
        ``src_rows`` x ``tgt_rows`` embeddings of dimension ``dim`` were mined."""
        src_model, tgt_model = self._side_encoder(src, "src"), self._side_encoder(tgt, "tgt")
        same = src_model == tgt_model
        return MiningRecord(
            encoder=src_model if same else None,
            src_model=None if same else src_model,
            tgt_model=None if same else tgt_model,
            margin=self.margin,
            mode=self.mode,
            k=used_k(self.k, src_rows, tgt_rows),  # what the margin averaged, not a k above the corpus
            threshold=self.threshold,
            # What an approximate run searched with: its pairs are not the exact engine's (see check_recall).
            index=self._index_description(src_rows, tgt_rows, dim),
            src=display(self.src),
            tgt=display(self.tgt),
            src_lang=self.src_lang,
            tgt_lang=self.tgt_lang,
            src_sentences=int(src_rows),
            tgt_sentences=int(tgt_rows),
            command=self.command,
        )

    def _side_encoder(self, side: Side, name: str) -> str | None:
        """The encoder that embedded ``side`` (``name`` "src" or "tgt"): for a folder of shards, the one its manifest
        records (read once, when the side was opened); None for a .npy side (not known here); else this run's."""
        if side.embeddings is not None:
            return side.manifest_encoder
        model = getattr(self, f"{name}_model") or self.model
        return self.encoder_spec(model).identity

    def _index_description(self, src_rows: int, tgt_rows: int, dim: int) -> str:
        if self.src_docs and self.index == "auto":  # resolved per document pair, by its sizes
            return "auto (chosen per document pair)"
        return str(self.index_spec(src_rows, tgt_rows, dim))

    def index_spec(self, src_rows: int, tgt_rows: int, dim: int | None):
        """The search that index / nprobe resolve to for this corpus (exact, or the factory string and nprobe)."""
        from bitext_hf.mining.index import resolve_index

        return resolve_index(self.index, src_rows, tgt_rows, dim, nprobe=self.nprobe)


@dataclasses.dataclass(frozen=True)
class GoldScores:
    """The mined pairs against gold pairs: precision, recall and F1 over ``gold_pairs`` pairs."""

    gold_pairs: int
    precision: float
    recall: float
    f1: float

    @classmethod
    def of(cls, pairs: MinedPairs, gold: set[tuple[int, int]]) -> GoldScores:
        found = pairs.as_set()
        true_positives = len(found & gold)
        precision = true_positives / len(found) if found else 0.0
        recall = true_positives / len(gold)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(len(gold), precision, recall, f1)

    def __str__(self) -> str:
        return (
            f"against {self.gold_pairs} gold pairs: precision {self.precision:.3f}  recall {self.recall:.3f}  "
            f"F1 {self.f1:.3f}"
        )


@dataclasses.dataclass
class MiningResult:
    """What a run found: the pairs (line numbers of the inputs), the sentences of each side (None for an embeddings
    side without its text), the rows searched, the recall@k report (with ``check_recall``), the scores against
    the gold pairs (with ``gold``) and the sidecar record (written beside ``out``); with filters, the count each
    removed (``filter_counts``), and with ``threshold_report`` every candidate pair before the threshold and the
    report's files written beside ``out`` (``threshold_report_files``: the figure and the sample; None when there was
    no candidate to draw)."""

    pairs: MinedPairs
    src_texts: list[str] | None
    tgt_texts: list[str] | None
    src_sentences: int
    tgt_sentences: int
    record: MiningRecord
    recall: RecallReport | None = None
    gold: GoldScores | None = None
    filter_counts: dict[str, int] | None = None
    candidates: MinedPairs | None = None
    threshold_report_files: tuple[Path, Path] | None = None
    # Sentences encoded and sentences served by the encoding cache, and the seconds of each part of the run:
    # "read" (reading and checking the inputs, the single-side filters), "encode" (loading the encoders and
    # encoding), "search" (the kNN search, margins and retrieval) and "write" (the pairs and their sidecar).
    encoded: int = 0
    from_cache: int = 0
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)


def mining_report(config: MiningConfig, result: MiningResult, seconds: float, *, show: int = 0) -> list[ReportLine]:
    """What ``bitext-hf mine`` prints when it ends: where the pairs went, the first ``show`` of them (-1: all; not
    when the pairs themselves go to stdout), what was mined with which settings, the filters' counts, the gold and
    recall lines, the threshold report's files; then where the sentences came from, the time of each part and the
    encoding rate over what was encoded only (a run served by the cache encodes nothing), over the whole command's
    ``seconds``."""
    from bitext_hf.mining.filters import format_counts

    pairs = result.pairs
    lines = [ReportLine(f"wrote {len(pairs)} pairs to {shown_path(config.out)}")] if config.out else []
    if not results_on_stdout(config.out):
        lines += [ReportLine(text, "stdout") for text in _pairs_preview(result, show)]
    lines.append(
        ReportLine(
            f"mined {len(pairs)} pairs from {result.src_sentences} source x {result.tgt_sentences} target sentences "
            f"(k={result.record.k}, margin={config.margin}, mode={config.mode}, threshold={_shown(result.record.threshold)})"
        )
    )
    if result.record.estimated_precision is not None or result.record.classifier is not None:
        chosen = f" (the threshold chosen for --min-precision {config.min_precision})" if config.min_precision else ""
        estimate = result.record.estimated_precision
        lines.append(
            ReportLine(
                f"estimated precision of the written pairs {'-' if estimate is None else f'{estimate:.3f}'}, expected "
                f"correct {float(pairs.quality.sum()) if pairs.quality is not None else 0:.0f}{chosen}"
            )
        )
    if result.filter_counts is not None:
        lines.append(ReportLine(format_counts(result.filter_counts)))
    lines += [ReportLine(str(line)) for line in (result.gold, result.recall) if line is not None]
    if result.threshold_report_files is not None:
        figure, sample = result.threshold_report_files
        lines.append(ReportLine(f"wrote the threshold report {figure} and {sample}"))
    sources = [f"{result.src_sentences} source + {result.tgt_sentences} target"]
    if result.encoded:
        sources.append(f"{result.encoded} encoded")
    if result.from_cache:
        sources.append(f"{result.from_cache} from the cache")
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in result.seconds.items())
    speed = (
        f"encoded {per_second(result.encoded, result.seconds['encode'])} sentences/s"
        if result.encoded
        else "nothing encoded"
    )
    total = result.src_sentences + result.tgt_sentences
    timing = f"mine: {total} sentences ({'; '.join(sources)}) in {seconds:.1f} s ({parts}); {speed}"
    return [*lines, ReportLine(timing, "timing")]


def _shown(threshold: float | None) -> str:
    return "None" if threshold is None else f"{threshold:g}"


def _pairs_preview(result: MiningResult, show: int) -> list[str]:
    """The first ``show`` pairs (-1: all) as a table of score, line numbers and sentences."""
    pairs, src_texts, tgt_texts = result.pairs, result.src_texts, result.tgt_texts
    shown = len(pairs) if show < 0 else min(show, len(pairs))
    if not shown:
        return []
    lines = [f"{'score':>7}  {'src':>6}  {'tgt':>6}  sentences"]
    for src, tgt, score in pairs.select(slice(shown)):
        src_text = src_texts[src] if src_texts else ""
        tgt_text = tgt_texts[tgt] if tgt_texts else ""
        lines.append(f"{score:7.4f}  {src:6d}  {tgt:6d}  {src_text}  |||  {tgt_text}")
    if shown < len(pairs):
        lines.append(f"... {len(pairs) - shown} more (--show -1 prints all, --out FILE writes them)")
    return lines


def run_mining(config: MiningConfig, *, load_encoder: Callable[..., Any] | None = None) -> MiningResult:
    """Run the mining job of ``config`` (see the module docstring).

    Args:
        load_encoder (callable, optional): ``load_encoder(spec, pooling=...)`` returning an encoder (an object with
            ``encode(texts, batch_size=..., show_progress=...) -> (n, d) float32``); defaults to
            :func:`bitext_hf.encoders.load_encoder`. Called once per model, and only when something is encoded.

    Raises:
        UsageError: options, output path or index that cannot work; DataValidationError: a bad input (naming the
            file and line); OutputWriteError: the pairs could not be written (nothing is left behind).
    """
    if config.distributed:  # Ray installed, the address answering: before anything is read
        from bitext_hf.encoding.ray import check_ray

        check_ray(config.ray_address)
    # A side that is a folder of shards is an input folder: no output goes into it (its next reader would take it
    # for a shard that does not belong).
    folders = [path for path in (config.src, config.tgt) if os.path.isdir(path)]
    with job_run(config, inputs=config.inputs, input_folders=folders) as outputs:
        return _run(config, load_encoder, outputs)


def _plan_outputs(config: MiningConfig, outputs: JobOutputs) -> str | None:
    """Declare the run's outputs before anything is read (:func:`bitext_hf.jobs.base.plan_pairs_outputs`): the pairs
    file ``out``, with ``threshold_report`` its figure and sample beside it, and its sidecar ``<out>.meta.json``
    (committed last, as it vouches for the rest); a stream ``out`` (``-``, a FIFO, a device) gets the pairs alone.
    Returns the pairs' format (None without ``out``)."""
    return plan_pairs_outputs(
        outputs, config.out, config.format, threshold_report=config.threshold_report, sidecar=True
    )


def _run(config: MiningConfig, load_encoder: Callable[..., Any] | None, outputs: JobOutputs) -> MiningResult:
    from bitext_hf.data.pair_files import check_representable
    from bitext_hf.mining.documents import mine_documents

    started = time.perf_counter()
    fmt = _plan_outputs(config, outputs)
    # Every input is read and checked before any encoder is loaded.
    src = read_side(config.src, config.src_text, "src", max_line_chars=config.max_line_chars)
    tgt = read_side(config.tgt, config.tgt_text, "tgt", max_line_chars=config.max_line_chars)
    if src.embeddings is not None and tgt.embeddings is not None:
        _check_dimensions(config, src.embeddings, tgt.embeddings)
    docs = (read_docs(config.src_docs, src), read_docs(config.tgt_docs, tgt)) if config.src_docs else None
    gold = read_gold(config.gold, src.n_rows, tgt.n_rows) if config.gold else None
    if fmt is not None:
        for side in (src, tgt):
            if side.texts is not None:
                check_representable(side.texts, display(side.text_path), fmt)
        if docs is not None:
            check_representable(list(docs[0]), display(config.src_docs), fmt)
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.mining.knn import check_k

    check_k(config.k, src.n_rows, tgt.n_rows)
    check_index_options(config, src, tgt, docs is not None)
    check_filter_options(config, src, tgt)
    # The single-side filters, before any encoder is loaded: a rejected sentence costs no encoding.
    filters, counts = config.filters, {}
    kept = filter_sides(src.texts, tgt.texts, filters, counts, names=(src.text_path, tgt.text_path), docs=docs)
    if docs is not None and kept[0] is not None:
        docs = (docs[0][kept[0]], docs[1][kept[1]])

    classifier = mining_classifier(config, src, tgt)  # loaded and checked before any encoding
    read_seconds = time.perf_counter() - started
    embedder = Embedder.from_options(config, load_encoder)
    with distributed_session(config):  # started after every input was read and checked
        per_document = docs is not None
        src_emb, src_lines, src_keys = rows_to_mine(
            config, embedder, src, "source", config.src_model, per_document, kept[0]
        )
        tgt_emb, tgt_lines, tgt_keys = rows_to_mine(
            config, embedder, tgt, "target", config.tgt_model, per_document, kept[1]
        )
        search_started = time.perf_counter()
        _check_dimensions(config, src_emb, tgt_emb)  # an encoder's against the other side's .npy or encoder
        for path, other in ((config.src, tgt_emb.shape[0]), (config.tgt, src_emb.shape[0])):
            if config.k > other:
                logger.warning(
                    "k=%d is larger than the other side (%d rows): using k=%d for %s", config.k, other, other, path
                )
        recall = None
        # With the threshold report, every candidate is kept and the threshold applied after: the same pairs (the
        # threshold only ever drops pairs, in every mode: see bitext_hf.mining.retrieval).
        threshold = None if config.threshold_report or config.min_precision is not None else config.threshold
        if docs is not None:
            settings = dict(k=config.k, margin=config.margin, mode=config.mode, threshold=threshold)
            pairs = mine_documents(
                src_emb,
                tgt_emb,
                docs[0],
                docs[1],
                src_keys=src_keys,
                tgt_keys=tgt_keys,
                index=config.index,
                nprobe=config.nprobe,
                **settings,
            )
        else:
            pairs, recall = search_and_retrieve(config, src_emb, tgt_emb, threshold)
        # Rows of what was mined -> lines of the inputs (the filters and the de-duplication dropped rows).
        pairs = dataclasses.replace(
            pairs, src_indices=src_lines[pairs.src_indices], tgt_indices=tgt_lines[pairs.tgt_indices]
        )

    search_seconds = time.perf_counter() - search_started
    if classifier is not None:
        add_quality(classifier, pairs, src, tgt)
    candidates = None
    if config.threshold_report:
        candidates = pairs
        if config.threshold is not None:
            pairs = pairs.select(pairs.scores >= config.threshold)
    if filters.pairwise:  # counted over the pairs above the threshold: what the filters took out of the output
        pairs = pairs.select(filter_mined(pairs, src.texts, tgt.texts, filters, counts))
        if candidates is not None:
            candidates = candidates.select(filter_mined(candidates, src.texts, tgt.texts, filters, {}))
    record = config.record(src, tgt, src_emb.shape[0], tgt_emb.shape[0], src_emb.shape[1])
    if filters.active:
        record.filters = {"settings": filters.describe(), "removed": counts}
    if config.min_precision is not None:  # over the pairs the filters kept: the precision of what is written
        pairs, record.threshold = pairs_at_precision(pairs, config.min_precision)
    if classifier is not None:
        record.classifier, record.min_precision = config.classifier, config.min_precision
        record.estimated_precision = float(pairs.quality.mean()) if len(pairs) else None
    write_started = time.perf_counter()
    if config.out:
        _write_pairs_and_sidecar(outputs, config.out, pairs, src, tgt, fmt, record)
    write_seconds = time.perf_counter() - write_started
    report_files = None
    if config.threshold_report:
        from bitext_hf.data.pair_files import write_threshold_report
        from bitext_hf.mining.quality import report_precision

        report_files = write_threshold_report(
            outputs,
            config.out,
            candidates,
            src.texts,
            tgt.texts,
            threshold=record.threshold,
            margin=config.margin,
            precision_rows=report_precision(candidates, record.threshold),
        )
    commit_started = time.perf_counter()
    outputs.commit()  # the pairs, the report and the sidecar (last) together, or none of them
    write_seconds += time.perf_counter() - commit_started
    if config.check_recall and recall is None:  # document-level runs keep no global neighbours
        from bitext_hf.mining.index import check_recall

        recall = check_recall(
            np.asarray(src_emb),
            np.asarray(tgt_emb),
            k=config.k,
            index=config.index,
            nprobe=config.nprobe,
            queries=config.check_recall,
        )
    return MiningResult(
        filter_counts=counts if filters.active else None,
        candidates=candidates,
        threshold_report_files=report_files,
        pairs=pairs,
        src_texts=src.texts,
        tgt_texts=tgt.texts,
        src_sentences=int(src_emb.shape[0]),
        tgt_sentences=int(tgt_emb.shape[0]),
        record=record,
        recall=recall,
        gold=GoldScores.of(pairs, gold) if gold is not None else None,
        encoded=embedder.encoded,
        from_cache=embedder.from_cache,
        seconds={
            "read": read_seconds,
            "encode": embedder.encode_seconds,
            "search": search_seconds,
            "write": write_seconds,
        },
    )


def _check_dimensions(config: MiningConfig, src_emb, tgt_emb) -> None:
    if src_emb.shape[1] != tgt_emb.shape[1]:
        raise DataValidationError(
            f"{display(config.src)} has dimension {src_emb.shape[1]} but {display(config.tgt)} has {tgt_emb.shape[1]}"
        )


def _write_pairs_and_sidecar(
    outputs: JobOutputs, out: str, pairs: MinedPairs, src: Side, tgt: Side, fmt: str, record: MiningRecord
) -> None:
    """The pairs file and its sidecar ``<out>.meta.json`` (serialized before anything is written), each to its
    temporary file, committed with the rest of the run's outputs (the sidecar last): both or neither, and a failure
    leaves the earlier ones as they were. A stream or a device (``-``, ``/dev/null``) gets the pairs alone, directly:
    there is no place for a sidecar beside it."""
    # At call time, write_pairs included: tests replace it to simulate a failed write.
    from bitext_hf.data.pair_files import metadata_path, write_pairs

    sidecar_text = None if outputs.is_stream(out) else record.to_json()
    with outputs.staged(out) as path:
        write_pairs(pairs, path, src_texts=src.texts, tgt_texts=tgt.texts, format=fmt)
    if sidecar_text is not None:
        with outputs.open(metadata_path(out)) as handle:
            handle.write(sidecar_text)
