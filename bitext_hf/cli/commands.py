"""The ``encode``, ``mine`` and ``score`` commands.

Each checks everything cheap first (options, the output path, every input file, the gold pairs, that the sentences
fit the output format) and only then loads an encoder and encodes: a bad input never costs an encoding run and
never leaves an output behind. ``mine`` writing its pairs to a file also writes ``<file>.meta.json``, the mining
parameters and the command, which ``bitext-hf push --pairs`` shows in the dataset card. ``encode`` and ``mine`` end
with their speed in sentences per second, one line on stderr (not with ``-q``).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shlex
import sys
import time

import numpy as np

from bitext_hf.cli.inputs import check_encoder_options, check_inputs_and_output, display, embed, pair_texts
from bitext_hf.errors import EXIT_OK, DataValidationError, UsageError

__all__ = ["cmd_align", "cmd_encode", "cmd_mine", "cmd_score"]

logger = logging.getLogger("bitext_hf")


def _report_stream(out: str | None):
    """Where the human-readable report goes: stderr when the results themselves go to stdout (``--out -``)."""
    return sys.stderr if out in ("-", "/dev/stdout") else sys.stdout


def _shown(out: str) -> str:
    return "stdout" if out == "-" else out


def _quiet(args) -> bool:
    """``-q`` without ``-v``: the closing rate line is left out."""
    return getattr(args, "quiet", False) and not getattr(args, "verbose", False)


def _rate(sentences: int, seconds: float) -> str:
    per_second = sentences / max(seconds, 1e-9)
    return f"{per_second:,.0f}" if per_second >= 10 else f"{per_second:.2g}"


def _report_rate(args, sentences: int, started: float, detail: str = "") -> None:
    """How fast the command went, as one line on stderr after its report (whose format stays as it was); ``-q``
    leaves it out. The time is the whole command's: reading, loading the encoder, encoding, searching, writing."""
    if _quiet(args):
        return
    seconds = time.perf_counter() - started
    rate = _rate(sentences, seconds)
    print(f"{args.command}: {sentences} sentences{detail} in {seconds:.1f} s, {rate} sentences/s", file=sys.stderr)


def cmd_encode(args) -> int:
    """Parse the options into an :class:`~bitext_hf.mining.encoding.EncodeConfig`, run the job, print the report."""
    from bitext_hf.mining.encoding import EncodeConfig, run_encoding

    started = time.perf_counter()
    options = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(EncodeConfig)
        if hasattr(args, field.name)
    }
    result = run_encoding(EncodeConfig(**options))
    if result.shards is None:
        print(
            f"wrote {result.count} x {result.dimension} {result.dtype} embeddings to {_shown(args.out)}",
            file=_report_stream(args.out),
        )
        _report_rate(args, result.count, started)
        return EXIT_OK
    print(
        f"wrote {result.count} x {result.dimension} {result.dtype} embeddings in {result.shards} "
        f"shard(s) and {os.path.join(args.out, 'manifest.json')} ({result.encoded} sentences encoded by this run)"
    )
    if result.encoded:  # a resumed run's rate is over what it encoded itself
        _report_rate(args, result.encoded, started, " encoded")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------- mine


def cmd_mine(args) -> int:
    """Parse the options into a :class:`~bitext_hf.mining.MiningConfig`, run the job, print the report."""
    from bitext_hf.mining.pipeline import DEMO_DIR, MiningConfig, run_mining

    started = time.perf_counter()
    report = _report_stream(args.out)
    if args.demo:
        if args.src or args.tgt:
            raise UsageError("--demo mines the bundled corpus; do not combine it with --src/--tgt")
        args.src, args.tgt = str(DEMO_DIR / "en.txt"), str(DEMO_DIR / "de.txt")
        args.gold = args.gold or str(DEMO_DIR / "gold.tsv")
        print(f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)", file=report)
    # The config's fields are the options' names (`args.command` is the sub-command, not the command line).
    options = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(MiningConfig)
        if field.name != "command" and hasattr(args, field.name)
    }
    command = shlex.join(["bitext-hf", *getattr(args, "argv", sys.argv[1:])])
    config = MiningConfig(**options, command=command)
    result = run_mining(config)

    pairs = result.pairs
    if args.out:
        print(f"wrote {len(pairs)} pairs to {_shown(args.out)}", file=report)
    _show_pairs(args, pairs, result.src_texts, result.tgt_texts)
    print(
        f"mined {len(pairs)} pairs from {result.src_sentences} source x {result.tgt_sentences} target sentences "
        f"(k={result.record.k}, margin={config.margin}, mode={config.mode}, threshold={config.threshold})",
        file=report,
    )
    if result.filter_counts is not None:
        from bitext_hf.mining.filters import format_counts

        print(format_counts(result.filter_counts), file=report)
    for line in (result.gold, result.recall):
        if line is not None:
            print(line, file=report)
    _report_threshold_report(result.threshold_report_files, report)
    _report_mining_time(args, result, started)
    return EXIT_OK


def _report_mining_time(args, result, started: float) -> None:
    """``mine``'s closing line on stderr (``-q`` leaves it out): where the sentences came from, the time of each part,
    and the encoding rate over what was encoded only (a run served by the cache encodes nothing)."""
    if _quiet(args):
        return
    seconds = time.perf_counter() - started
    sources = [f"{result.src_sentences} source + {result.tgt_sentences} target"]
    if result.encoded:
        sources.append(f"{result.encoded} encoded")
    if result.from_cache:
        sources.append(f"{result.from_cache} from the cache")
    parts = ", ".join(f"{name} {value:.1f} s" for name, value in result.seconds.items())
    speed = (
        f"encoded {_rate(result.encoded, result.seconds['encode'])} sentences/s"
        if result.encoded
        else "nothing encoded"
    )
    total = result.src_sentences + result.tgt_sentences
    print(f"mine: {total} sentences ({'; '.join(sources)}) in {seconds:.1f} s ({parts}); {speed}", file=sys.stderr)


def _report_threshold_report(files, report) -> None:
    """The line saying where the job wrote the threshold report (``--threshold-report``), when it wrote one."""
    if files is not None:
        print(f"wrote the threshold report {files[0]} and {files[1]}", file=report)


def _write_threshold_report(out, candidates, src_texts, tgt_texts, threshold, margin, report) -> None:
    """``--threshold-report``: the figure and the sample beside ``out`` (bitext_hf.mining.threshold_report)."""
    if not len(candidates):
        logger.warning("--threshold-report: no candidate pairs, nothing to draw")
        return
    from bitext_hf.mining.threshold_report import write_threshold_report

    figure, sample = write_threshold_report(out, candidates, src_texts, tgt_texts, threshold=threshold, margin=margin)
    print(f"wrote the threshold report {figure} and {sample}", file=report)


def _show_pairs(args, pairs, src_texts, tgt_texts) -> None:
    if _report_stream(args.out) is sys.stderr:
        return  # stdout holds the pairs file itself
    shown = len(pairs) if args.show < 0 else min(args.show, len(pairs))
    if not shown:
        return
    print(f"{'score':>7}  {'src':>6}  {'tgt':>6}  sentences")
    for src, tgt, score in pairs.select(slice(shown)):
        src_text = src_texts[src] if src_texts else ""
        tgt_text = tgt_texts[tgt] if tgt_texts else ""
        print(f"{score:7.4f}  {src:6d}  {tgt:6d}  {src_text}  |||  {tgt_text}")
    if shown < len(pairs):
        print(f"... {len(pairs) - shown} more (--show -1 prints all, --out FILE writes them)")


# ----------------------------------------------------------------------------------------------------- align


def cmd_align(args) -> int:
    """Parse the options into an :class:`~bitext_hf.alignment.pipeline.AlignConfig`, run the job, print the report;
    without ``--out`` the beads are printed in vecalign format (each document's after a ``# name`` line, for
    many documents)."""
    from bitext_hf.alignment.pipeline import AlignConfig, run_alignment

    started = time.perf_counter()
    options = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(AlignConfig)
        if field.name != "command" and hasattr(args, field.name)
    }
    config = AlignConfig(**options, command=shlex.join(["bitext-hf", *getattr(args, "argv", sys.argv[1:])]))
    result = run_alignment(config)
    report = _report_stream(args.out)
    if not args.out:
        for name, alignment in zip(result.names, result.alignments):
            if config.many_documents:  # which document the beads that follow are of
                print(f"# {name}")
            for (xs, ys), score in zip(alignment.beads, alignment.scores.tolist()):
                print(f"{xs}:{ys}:{score:.6f}")
    beads = sum(len(alignment) for alignment in result.alignments)
    links = sum(bool(xs and ys) for alignment in result.alignments for xs, ys in alignment.beads)
    sentences = sum(map(len, result.src_documents)), sum(map(len, result.tgt_documents))
    where = f"; wrote {_shown(args.out)}" if args.out else ""
    print(
        f"aligned {len(result.names)} document pair(s), {sentences[0]} source x {sentences[1]} target sentences: "
        f"{beads} beads, {links} of them links (max-align {config.max_align}){where}",
        file=report if args.out else sys.stderr,
    )
    if not _quiet(args):
        parts = ", ".join(f"{name} {value:.1f} s" for name, value in result.seconds.items())
        cached = f", {result.from_cache} from the cache" if result.from_cache else ""
        print(
            f"align: {result.encoded} overlaps encoded{cached} in {time.perf_counter() - started:.1f} s ({parts})",
            file=sys.stderr,
        )
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------- score


def _score_filters(args):
    """The filters of ``score`` (every one off unless asked for), checked before anything is read; an option that
    cannot act (``--lid-min-prob``, ``--src-lang``, ``--tgt-lang`` without ``--lid``: score records no languages)
    is refused."""
    from bitext_hf.mining.config import filter_settings, refuse_lid_options_without_lid

    refuse_lid_options_without_lid(args.lid, args.lid_min_prob, args.src_lang, args.tgt_lang)
    return filter_settings(args)


def cmd_score(args) -> int:
    from bitext_hf.io import writes_in_place
    from bitext_hf.mining import MinedPairs, check_k, score_pairs, write_pairs
    from bitext_hf.mining.config import used_k
    from bitext_hf.mining.filters import filter_aligned, format_counts
    from bitext_hf.mining.output import check_representable, output_format
    from bitext_hf.mining.threshold_report import threshold_report_paths

    check_encoder_options(args)
    filters = _score_filters(args)
    inputs = [args.pairs, args.src, args.tgt]
    check_inputs_and_output(args.out, inputs)
    if args.threshold_report:
        if writes_in_place(args.out):
            raise UsageError("--threshold-report writes a figure and a sample beside --out FILE: give a file --out")
        for path in threshold_report_paths(args.out):
            check_inputs_and_output(str(path), inputs)
    fmt = output_format(args.out, args.format)
    sources, targets = pair_texts(args)
    # Before encoding: a Moses line, or a CSV / JSON Lines / Parquet cell, may hold a tab that TSV output cannot.
    check_representable(sources, display(args.pairs or args.src), fmt)
    check_representable(targets, display(args.pairs or args.tgt), fmt)
    rows, counts = np.arange(len(sources)), {}
    if filters.active:  # before encoding: a rejected pair costs nothing
        rows = filter_aligned(sources, targets, filters, counts)
        if not len(rows):
            raise DataValidationError(f"the filters removed every pair ({format_counts(counts)})")
    kept_sources, kept_targets = [sources[row] for row in rows], [targets[row] for row in rows]
    check_k(args.k, len(kept_sources), len(kept_targets))
    src_emb, tgt_emb = embed(args, kept_sources, "source"), embed(args, kept_targets, "target")
    scores = score_pairs(src_emb, tgt_emb, k=args.k, margin=args.margin)
    candidates = MinedPairs(rows, rows, scores, np.einsum("ij,ij->i", src_emb, tgt_emb))
    pairs = candidates
    if args.threshold is not None:
        pairs = pairs.select(pairs.scores >= args.threshold)
    write_pairs(pairs, args.out, src_texts=sources, tgt_texts=targets, format=fmt)
    report = _report_stream(args.out)
    print(
        f"scored {len(rows)} pairs (k={used_k(args.k, len(rows), len(rows))}, margin={args.margin}); wrote {len(pairs)} to {_shown(args.out)}"
        + (f" (threshold {args.threshold})" if args.threshold is not None else ""),
        file=report,
    )
    if filters.active:
        print(format_counts(counts), file=report)
    if args.threshold_report:
        _write_threshold_report(args.out, candidates, sources, targets, args.threshold, args.margin, report)
    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)
    values = np.quantile(scores, quantiles)
    print("score quantiles: " + "  ".join(f"{q:.0%} {v:.4f}" for q, v in zip(quantiles, values)), file=report)
    return EXIT_OK
