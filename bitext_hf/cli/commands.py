"""The handlers of ``encode``, ``mine``, ``align`` and ``score``: each builds its job's config from the parsed options
(:func:`~bitext_hf.cli.arguments.config_from_arguments`), runs the job and prints the lines its module reports
(``encoding_report``, ``mining_report``...: the jobs say what, :func:`print_report` says where).

Each job checks everything cheap first (options, the output path, every input file, the gold pairs, that the sentences
fit the output format) and only then loads an encoder and encodes: a bad input never costs an encoding run and
never leaves an output behind. ``mine`` writing its pairs to a file also writes ``<file>.meta.json``, the mining
parameters and the command, which ``bitext-hf push --pairs`` shows in the dataset card. ``encode`` and ``mine`` end
with their speed in sentences per second, one line on stderr (not with ``-q``).
"""

from __future__ import annotations

import sys
import time

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.errors import EXIT_OK, UsageError
from bitext_hf.jobs.base import ReportLine, results_on_stdout
from bitext_hf.jobs.option_fields import check_value, show_count

__all__ = ["cmd_align", "cmd_encode", "cmd_mine", "cmd_score", "print_report"]


def _quiet(args) -> bool:
    """``-q`` without ``-v``: the closing timing line is left out."""
    return getattr(args, "quiet", False) and not getattr(args, "verbose", False)


def print_report(lines: list[ReportLine], out: str | None, *, quiet: bool = False) -> None:
    """Print a job's report lines where each goes (:class:`~bitext_hf.jobs.base.ReportLine`): the summary on stdout,
    or on stderr when the results themselves went to stdout (``--out -``); timings on stderr unless ``quiet``."""
    summary = sys.stderr if results_on_stdout(out) else sys.stdout
    streams = {"report": summary, "stdout": sys.stdout, "stderr": sys.stderr, "timing": sys.stderr}
    for line in lines:
        if not (quiet and line.place == "timing"):
            print(line.text, file=streams[line.place])


def cmd_encode(args) -> int:
    """Parse the options into an :class:`~bitext_hf.jobs.encode.EncodeConfig`, run the job, print the report."""
    from bitext_hf.jobs.encode import EncodeConfig, encoding_report, run_encoding

    started = time.perf_counter()
    result = run_encoding(config_from_arguments(EncodeConfig, args))
    print_report(encoding_report(result, time.perf_counter() - started), args.out, quiet=_quiet(args))
    return EXIT_OK


def cmd_mine(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.mine.MiningConfig`, run the job, print the report."""
    from bitext_hf.jobs.mine import DEMO_DIR, MiningConfig, demo_inputs, mining_report, run_mining

    check_value("show", args.show, int, {"type": show_count, "flag": "--show"})  # the command line's own option
    started = time.perf_counter()
    values = {}
    if args.demo:
        if args.src or args.tgt:
            raise UsageError("--demo mines the bundled corpus; do not combine it with --src/--tgt")
        values.update(demo_inputs(args.gold))
        demo = f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)"
        print_report([ReportLine(demo)], args.out)
    config = config_from_arguments(MiningConfig, args, **values)
    result = run_mining(config)
    lines = mining_report(config, result, time.perf_counter() - started, show=args.show)
    print_report(lines, args.out, quiet=_quiet(args))
    return EXIT_OK


def cmd_align(args) -> int:
    """Parse the options into an :class:`~bitext_hf.jobs.align.AlignConfig`, run the job, print the report
    (without ``--out``, the beads themselves)."""
    from bitext_hf.jobs.align import AlignConfig, alignment_report, run_alignment

    started = time.perf_counter()
    config = config_from_arguments(AlignConfig, args)
    result = run_alignment(config)
    print_report(alignment_report(config, result, time.perf_counter() - started), args.out, quiet=_quiet(args))
    return EXIT_OK


def cmd_score(args) -> int:
    """Parse the options into a :class:`~bitext_hf.jobs.score.ScoreConfig`, run the job, print the report."""
    from bitext_hf.jobs.score import ScoreConfig, run_scoring, scoring_report

    config = config_from_arguments(ScoreConfig, args)
    print_report(scoring_report(config, run_scoring(config)), args.out)
    return EXIT_OK
