"""The handlers of ``encode``, ``mine``, ``align`` and ``score``: each builds its job's config from the parsed options
(:func:`~bitext_hf.cli.arguments.config_from_arguments`), runs the job and prints its report.

Each job checks everything cheap first (options, the output path, every input file, the gold pairs, that the sentences
fit the output format) and only then loads an encoder and encodes: a bad input never costs an encoding run and
never leaves an output behind. ``mine`` writing its pairs to a file also writes ``<file>.meta.json``, the mining
parameters and the command, which ``bitext-hf push --pairs`` shows in the dataset card. ``encode`` and ``mine`` end
with their speed in sentences per second, one line on stderr (not with ``-q``).
"""

from __future__ import annotations

import os
import sys
import time

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.errors import EXIT_OK, UsageError
from bitext_hf.jobs.fields import check_value, show_count

__all__ = ["cmd_align", "cmd_encode", "cmd_mine", "cmd_score"]


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
    """Parse the options into an :class:`~bitext_hf.jobs.encode.EncodeConfig`, run the job, print the report."""
    from bitext_hf.jobs.encode import EncodeConfig, run_encoding

    started = time.perf_counter()
    result = run_encoding(config_from_arguments(EncodeConfig, args))
    # What the encoder really computed in: bfloat16 or float32, and which runtime (a CPU without native bfloat16 never
    # runs it, and a converted graph may set a request aside).
    computed = f"; computed in {result.arithmetic}" if result.arithmetic else ""
    if result.shards is None:
        print(
            f"wrote {result.count} x {result.dimension} {result.dtype} embeddings to {_shown(args.out)}{computed}",
            file=_report_stream(args.out),
        )
        _report_rate(args, result.count, started)
        return EXIT_OK
    print(
        f"wrote {result.count} x {result.dimension} {result.dtype} embeddings in {result.shards} "
        f"shard(s) and {os.path.join(args.out, 'manifest.json')} ({result.encoded} sentences encoded by this run)"
        f"{computed}"
    )
    if result.encoded:  # a resumed run's rate is over what it encoded itself
        _report_rate(args, result.encoded, started, " encoded")
    return EXIT_OK


# ----------------------------------------------------------------------------------------------------- mine


def cmd_mine(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.mine.MiningConfig`, run the job, print the report."""
    from bitext_hf.jobs.mine import DEMO_DIR, MiningConfig, demo_inputs, run_mining

    check_value("show", args.show, int, {"type": show_count, "flag": "--show"})  # the command line's own option
    started = time.perf_counter()
    report = _report_stream(args.out)
    values = {}
    if args.demo:
        if args.src or args.tgt:
            raise UsageError("--demo mines the bundled corpus; do not combine it with --src/--tgt")
        values.update(demo_inputs(args.gold))
        print(f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)", file=report)
    config = config_from_arguments(MiningConfig, args, **values)
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
    """Parse the options into an :class:`~bitext_hf.jobs.align.AlignConfig`, run the job, print the report;
    without ``--out`` the beads are printed in vecalign format (each document's after a ``# name`` line, for
    many documents)."""
    from bitext_hf.data.alignment_files import SIDECAR_NAME
    from bitext_hf.jobs.align import AlignConfig, run_alignment

    started = time.perf_counter()
    config = config_from_arguments(AlignConfig, args)
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
    if args.out and config.many_documents:  # the folder may hold other files: which ones this run wrote
        where = f"; wrote {len(result.outputs)} file(s) and {SIDECAR_NAME} in {args.out}"
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


def cmd_score(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.score.ScoreConfig`, run the job, print the report."""
    from bitext_hf.jobs.score import ScoreConfig, run_scoring
    from bitext_hf.mining.filters import format_counts

    config = config_from_arguments(ScoreConfig, args)
    result = run_scoring(config)
    report = _report_stream(args.out)
    threshold = f" (threshold {config.threshold})" if config.threshold is not None else ""
    print(
        f"scored {len(result.candidates)} pairs (k={result.k}, margin={config.margin}); wrote {len(result.pairs)} "
        f"to {_shown(args.out)}{threshold}",
        file=report,
    )
    if result.filter_counts is not None:
        print(format_counts(result.filter_counts), file=report)
    _report_threshold_report(result.threshold_report_files, report)
    quantiles = "  ".join(f"{q:.0%} {v:.4f}" for q, v in result.quantiles.items())
    print(f"score quantiles: {quantiles}", file=report)
    return EXIT_OK
