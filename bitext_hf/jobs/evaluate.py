"""The evaluation job: :func:`run_evaluation` over an :class:`EvalConfig` measures an encoder on gold pairs: xsim
(LASER), retrieval accuracy (Tatoeba-style), MTEB's bitext-mining metrics or BUCC F1. ``bitext-hf eval`` parses its
options into the config, calls it and prints the results; Python users get the same numbers, and the same file, in
one call:

>>> from bitext_hf.jobs.evaluate import EvalConfig, run_evaluation
>>> result = run_evaluation(EvalConfig(src="test.en", tgt="test.de", out="results.json"))
>>> result.results["xsim"]["xsim"]

Units: xsim and xsim_text are error rates in percent (as LASER reports them); every other score is a fraction in
[0, 1]. An MTEB file with several subsets (a ``lang`` / ``subset`` column) is evaluated subset by subset, never as
one pooled candidate set; the top-level numbers are then the average: xsim micro-averaged over all pairs
(sum of errors / sum of pairs, as LASER), the fractions averaged over subsets (as MTEB averages a task's subsets).

The config's module imports no torch: the metrics and the encoders are imported when the job runs.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, Any

import numpy as np

from bitext_hf.data.readers import check_aligned_inputs
from bitext_hf.encoders.sources import DEFAULT_ENCODER
from bitext_hf.errors import UsageError
from bitext_hf.jobs.option_fields import check_fields, column_pair, option
from bitext_hf.jobs.options import QUIET, THREADS, EncoderOptions, MarginOptions
from bitext_hf.mining.retrieval import DEFAULT_MODE, MODES

if TYPE_CHECKING:
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.jobs.base import JobOutputs

__all__ = ["DEFAULT_K", "DEFAULT_MARGIN", "METRICS", "EvalConfig", "EvaluationResult", "run_evaluation"]

METRICS = ("xsim", "accuracy", "mteb")  # what --metrics chooses among; unset, all three

logger = logging.getLogger("bitext_hf")


# The margin's options as every command declares them; eval only leaves them unset by default.
_MARGIN_OPTIONS = {margin_field.name: margin_field for margin_field in dataclasses.fields(MarginOptions)}
# What an unset --k and --margin are: MarginOptions' defaults, which every other command has (and `--help` shows).
DEFAULT_K, DEFAULT_MARGIN = _MARGIN_OPTIONS["k"].default, _MARGIN_OPTIONS["margin"].default


@dataclasses.dataclass(kw_only=True)
class EvalConfig(MarginOptions, EncoderOptions):
    """One evaluation run; the fields are ``bitext-hf eval``'s options (``--bucc-train`` is ``bucc_train``), and
    messages name them as the command line spells them. Checked when made (``UsageError``): an option given where it
    cannot act is refused, not ignored. Each field's ``metadata`` holds its command-line help, choices and metavar.

    The gold pairs are exactly one of ``pairs``, ``src`` and ``tgt``, ``mteb`` or ``bucc``. The encoder, its cache
    and the longest line accepted are :class:`~bitext_hf.jobs.options.EncoderOptions`' fields (``model``,
    ``pooling``, ``quantize``, ``backend``, ``batch_size``, ``max_line_chars``, ``cache_dir``, ``no_cache``).

    Args:
        pairs (str, optional): a pairs file (any that ``score --pairs`` reads).
        src (str, optional): the source side of aligned Moses-style files.
        tgt (str, optional): the target side of aligned Moses-style files.
        mteb (str, optional): MTEB bitext-mining data (:func:`bitext_hf.data.read_mteb`).
        bucc (three str, optional): BUCC's source, target and gold files.
        split (str, optional): with ``mteb``, the split of a saved DatasetDict.
        subset (str, optional): with ``mteb``, the one ``lang`` / ``subset`` to evaluate.
        columns (two str, optional): with ``mteb``, the two sentence columns.
        bucc_train (three str, optional): with ``bucc``, the split whose F1-best threshold is applied to the test
            split (without it, the test split's own: an oracle).
        mode (str, optional): with ``bucc``, how the candidates are mined (default "max").
        metrics (list of str, optional): which of :data:`METRICS` to compute, at least one (None: all three);
            not with ``bucc``.
        out (str, optional): also write the results as JSON here (atomically, never over an input); ``-`` writes
            nothing (the command prints the results).
        k (int, optional): the neighbours of the margin of xsim and BUCC; None is 4, and a value given where no
            margin acts (``metrics`` without xsim) is refused. Resolved when the config is made.
        margin (str, optional): the margin of xsim and BUCC; None is "ratio", refused where no margin acts, as ``k``.
        quiet (bool, defaults to False): no progress bars.
        threads (int, optional): CPU threads of the encoder and the search (:func:`bitext_hf.threads.limit_threads`,
            restored after the run).
    """

    pairs: str | None = field(
        default=None,
        metadata=option("aligned pairs, any file `score --pairs` reads (TSV, CSV, JSON Lines, Parquet)"),
    )
    src: str | None = field(default=None, metadata=option("aligned source file"))
    tgt: str | None = field(default=None, metadata=option("aligned target file"))
    mteb: str | None = field(
        default=None,
        metadata=option("MTEB bitext-mining data: .jsonl/.parquet/.csv file or a saved datasets folder"),
    )
    split: str | None = field(default=None, metadata=option("split of a saved DatasetDict (default test)"))
    subset: str | None = field(
        default=None,
        metadata=option(
            "evaluate only this `lang`/`subset` value (default: every subset separately, then the average)"
        ),
    )
    columns: tuple[str, str] | None = field(
        default=None,
        metadata=option(
            "the two sentence columns as A,B when they are not sentence1,sentence2 (Flores: "
            "sentence_eng_Latn,sentence_deu_Latn)",
            type=column_pair,
        ),
    )
    bucc: list[str] | None = field(
        default=None,
        metadata=option("BUCC files (id<TAB>sentence, gold ids)", metavar=("SRC", "TGT", "GOLD"), nargs=3),
    )
    bucc_train: list[str] | None = field(
        default=None,
        metadata=option("BUCC split to optimise the threshold on", metavar=("SRC", "TGT", "GOLD"), nargs=3),
    )
    mode: str | None = field(
        default=None,
        metadata=option("with --bucc: how the candidates are mined (default max)", choices=MODES),
    )
    metrics: list[str] | None = field(
        default=None,
        metadata=option(
            "what to compute (default all three; see the keys below); not with --bucc", choices=METRICS, nargs="+"
        ),
    )
    out: str | None = field(default=None, metadata=option("also write the results as JSON here (never over an input)"))
    # Unset (None) until the config resolves them, so that a value given where it cannot act is told from the default.
    k: int | None = field(default=None, metadata=_MARGIN_OPTIONS["k"].metadata)
    margin: str | None = field(default=None, metadata=_MARGIN_OPTIONS["margin"].metadata)
    # The general options (`-q`, `--threads`), which every command takes before its name or after it.
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)

    def __post_init__(self) -> None:
        # Each field's type and range first (metrics at least one of METRICS, bucc three files, k >= 1...), as the
        # command line's refusal; then in the order the command has always checked them, so its messages stay.
        check_fields(self)
        sources_given = [bool(self.bucc), bool(self.mteb), bool(self.pairs or self.src or self.tgt)]
        if sum(sources_given) != 1:
            raise UsageError("give one of --pairs, --src/--tgt, --mteb or --bucc")
        for flag, value in (("--split", self.split), ("--subset", self.subset), ("--columns", self.columns)):
            if value is not None and not self.mteb:
                raise UsageError(f"{flag} is for --mteb data")
        if self.bucc_train and not self.bucc:
            raise UsageError("--bucc-train needs --bucc (the test split it picks the threshold for)")
        self._refuse_options_that_cannot_act()
        if not (self.bucc or self.mteb):
            check_aligned_inputs(self.pairs, self.src, self.tgt)

    def _refuse_options_that_cannot_act(self) -> None:
        """Options given where they do nothing are refused (exit 2), not ignored; ``metrics`` unset is all three,
        ``k`` and ``margin`` unset (None, so that a value given where it cannot act is told from the default) are
        4 and "ratio"."""
        self.check_encoder_options()
        if self.bucc:
            if self.metrics is not None:
                raise UsageError("--metrics chooses among xsim, accuracy and mteb; --bucc computes BUCC F1 only")
        elif self.mode is not None:
            raise UsageError("--mode picks the candidates of --bucc; xsim, accuracy and mteb search every target")
        if self.metrics is None:
            self.metrics = list(METRICS)
        elif "xsim" not in self.metrics and (self.k is not None or self.margin is not None):
            raise UsageError(
                "--k and --margin are xsim's; --metrics leaves xsim out (accuracy and mteb use plain cosine)"
            )
        self.k = DEFAULT_K if self.k is None else self.k
        self.margin = DEFAULT_MARGIN if self.margin is None else self.margin

    @property
    def inputs(self) -> list[str | None]:
        """Every file the run reads (None for an input not given)."""
        return [self.pairs, self.src, self.tgt, self.mteb, *(self.bucc or ()), *(self.bucc_train or ())]


@dataclasses.dataclass
class EvaluationResult:
    """What a run measured.

    Attributes:
        results (dict): the numbers, keyed as ``bitext-hf eval --help`` describes (``model``, ``k``, ``margin``,
            ``xsim``, ``xsim_text``, ``accuracy``, ``mteb``, ``n_pairs``, ``subsets``, ``bucc_f1``).
        path (str, optional): the JSON file written (None without ``out``, or with ``out="-"``).
        encoded, from_cache (int): sentences encoded, and sentences whose embeddings came from the encoding cache.
    """

    results: dict[str, Any]
    path: str | None = None
    encoded: int = 0
    from_cache: int = 0

    def to_json(self) -> str:
        """The results as the command prints them and writes them to ``out`` (indented, UTF-8 text kept)."""
        return json.dumps(self.results, indent=2, ensure_ascii=False)


def run_evaluation(config: EvalConfig, *, load_encoder: Callable[..., Any] | None = None) -> EvaluationResult:
    """Run the evaluation of ``config`` (see the module docstring): every input read and checked (k against each
    subset) before anything is encoded; the results written to ``out`` atomically.

    Args:
        load_encoder (callable, optional): ``load_encoder(spec, pooling=...)`` returning an encoder; defaults to
            :func:`bitext_hf.encoders.load_encoder`. Called once, and only when something is encoded.

    Raises:
        UsageError: an output path that cannot be written or names an input, k above a subset; DataValidationError:
            a bad input (naming the file and line); OutputWriteError: the results could not be written.
    """
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.jobs.base import job_run

    with job_run(config, inputs=config.inputs) as outputs:
        return _run(config, Embedder.from_options(config, load_encoder), outputs)


def _run(config: EvalConfig, embedder: Embedder, outputs: JobOutputs) -> EvaluationResult:
    from bitext_hf.data import read_mteb
    from bitext_hf.data.readers import read_aligned
    from bitext_hf.mining.knn import check_k

    # `-`: the command prints the results, which are the output; any other --out is declared before any reading.
    written = config.out is not None and config.out != "-"
    if written:
        outputs.add_out(config.out)
    results: dict[str, object] = {"model": config.model or DEFAULT_ENCODER}
    if config.bucc or "xsim" in config.metrics:  # k and the margin are reported only where they were used
        results.update(k=config.k, margin=config.margin)
    if config.bucc:
        results["bucc_f1"] = _bucc(config, embedder)
        results["k"] = results["bucc_f1"].pop("k")
    else:
        if config.mteb:
            tasks = read_mteb(config.mteb, split=config.split, subset=config.subset, columns=config.columns)
            inputs_by_name = {name: (t.sources, t.targets, t.gold, t.is_aligned) for name, t in tasks.items()}
        else:
            sources, targets = read_aligned(config.pairs, config.src, config.tgt, max_chars=config.max_line_chars)
            inputs_by_name = {"default": (sources, targets, [(i, i) for i in range(len(sources))], True)}
        for _, targets, gold, _ in inputs_by_name.values():  # every subset checked before any encoding
            check_k(config.k, len(gold), len(targets))
        per_subset = {name: _evaluate(config, embedder, *task) for name, task in inputs_by_name.items()}
        if len(per_subset) == 1:
            results.update(next(iter(per_subset.values())))
        else:
            results.update(_average(per_subset))
            results["subsets"] = per_subset
    result = EvaluationResult(results, encoded=embedder.encoded, from_cache=embedder.from_cache)
    if written:
        with outputs.open(config.out) as handle:
            handle.write(result.to_json() + "\n")
        outputs.commit()
        result.path = config.out
    return result


def _evaluate(
    config: EvalConfig,
    embedder: Embedder,
    sources: list[str],
    targets: list[str],
    gold: list[tuple[int, int]],
    aligned: bool,
) -> dict:
    from bitext_hf.evaluation.metrics import functional as F
    from bitext_hf.mining import bidirectional_knn
    from bitext_hf.mining.margin import used_k

    results: dict[str, object] = {}
    gold_tgt = [j for _, j in gold]
    # Only the sources of gold pairs are evaluated: the others are never encoded. When the data is aligned, they
    # are every source in order.
    src_sel = embedder.embed([sources[i] for i, _ in gold], "source")
    tgt_emb = embedder.embed(targets, "target")
    metrics = set(config.metrics)
    if "xsim" in metrics:
        results["k"] = used_k(config.k, len(gold), len(targets))  # what the margin averaged, not a k above the data
        # One kNN for both the index-based and the text-based error counts.
        knn = bidirectional_knn(src_sel, tgt_emb, config.k)
        results["xsim"] = F.xsim_from_knn(knn, margin=config.margin, gold=gold_tgt)
        results["xsim_text"] = F.xsim_from_knn(knn, margin=config.margin, gold=gold_tgt, target_texts=targets)
    if "accuracy" in metrics:
        if aligned:
            # With the texts, a retrieved sentence equal to the gold one is a hit, as TranslationEvaluator counts.
            source_texts = [sources[i] for i, _ in gold]
            results["accuracy"] = F.bitext_accuracy(src_sel, tgt_emb, source_texts=source_texts, target_texts=targets)
        else:
            logger.warning("accuracy needs row-aligned pairs; skipped for this data")
    if "mteb" in metrics:
        # src_sel holds the gold pairs' sources in gold order: gold pair number r is (r, j) in it.
        results["mteb"] = F.mteb_bitext_mining(src_sel, tgt_emb, gold=list(enumerate(gold_tgt)))
    results["n_pairs"] = len(gold)
    return results


def _average(per_subset: dict[str, dict]) -> dict:
    """xsim micro-averaged over all pairs (LASER); fractions averaged over subsets (MTEB)."""
    from bitext_hf.evaluation.metrics import functional as F

    parts = list(per_subset.values())
    average: dict[str, object] = {}
    if all("k" in part for part in parts):  # the largest neighbourhood a subset used (each subset reports its own)
        average["k"] = max(part["k"] for part in parts)
    for key in ("xsim", "xsim_text"):
        if all(key in part for part in parts):
            average[key] = F.xsim_micro_average(part[key] for part in parts)
    for key in ("accuracy", "mteb"):
        if all(key in part for part in parts):
            average[key] = {name: float(np.mean([part[key][name] for part in parts])) for name in parts[0][key]}
    average["n_pairs"] = sum(part["n_pairs"] for part in parts)
    return average


def _bucc(config: EvalConfig, embedder: Embedder) -> dict:
    from bitext_hf.data import read_bucc
    from bitext_hf.evaluation.metrics import functional as F
    from bitext_hf.mining import mine
    from bitext_hf.mining.margin import used_k

    task = read_bucc(*config.bucc, max_chars=config.max_line_chars)
    train = read_bucc(*config.bucc_train, max_chars=config.max_line_chars) if config.bucc_train else None

    used = []

    def candidates(t):
        used.append(used_k(config.k, len(t.sources), len(t.targets)))
        src_emb, tgt_emb = embedder.embed(t.sources, "source"), embedder.embed(t.targets, "target")
        pairs = mine(src_emb, tgt_emb, k=config.k, margin=config.margin, mode=config.mode or DEFAULT_MODE)
        labels, n_gold = F.bucc_labels(zip(pairs.src_indices.tolist(), pairs.tgt_indices.tolist()), t.gold)
        return pairs.scores, labels, n_gold

    test_scores, test_labels, test_gold = candidates(task)
    kwargs = {}
    if train is not None:
        kwargs = dict(zip(("train_scores", "train_labels", "n_gold_train"), candidates(train)))
    result = F.bucc_f1(test_scores, test_labels, n_gold_test=test_gold, **kwargs)
    result["threshold_from"] = "train" if train is not None else "test (oracle)"
    result["k"] = max(used)  # the largest neighbourhood either split used
    return result
