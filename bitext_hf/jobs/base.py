"""What every job does the same way, once: :func:`job_run` is where a run happens (its thread limit, its inputs
protected from every file it writes) and gives the :class:`JobOutputs` it writes its files through: every output
declared and checked before any reading or encoding, written to temporary files beside their targets and committed
together at the end (:class:`bitext_hf.io.OutputSet`), or, for the one stream a user may name as ``--out`` (``-``, a
FIFO, a device), written directly. What a job reports when it ends is a list of :class:`ReportLine` (each job's
``*_report``), which the command line prints where each belongs. The options every job shares are in
:mod:`bitext_hf.jobs.options`.

>>> with job_run(config, inputs=config.inputs) as outputs:
...     if outputs.add_out(config.out):  # a file: what goes beside it too
...         outputs.add(sidecar_path, last=True)
...     # ... read, check, encode ...
...     with outputs.staged(config.out) as path:
...         write_pairs(pairs, path, format=fmt)
...     outputs.commit()
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
from collections.abc import Iterable, Iterator
from typing import IO, Any

from bitext_hf.errors import UsageError
from bitext_hf.io import (
    OutputSet,
    atomic_output,
    check_inputs_and_output,
    protect_inputs,
    writes_in_place,
)
from bitext_hf.io.outputs import check_named_output, own_descriptor

__all__ = [
    "REPORT_PLACES",
    "JobOutputs",
    "ReportLine",
    "job_run",
    "job_scope",
    "per_second",
    "plan_pairs_outputs",
    "results_on_stdout",
    "shown_path",
]

StrPath = str | os.PathLike

# Where a report line goes: "report" is the summary (stdout, or stderr when the job's results themselves go to stdout,
# ``--out -``); "stdout" and "stderr" as named; "timing" is stderr, left out under ``-q``.
REPORT_PLACES = ("report", "stdout", "stderr", "timing")


@dataclasses.dataclass(frozen=True)
class ReportLine:
    """One line a job reports when it ends (its module says which, in ``*_report``): ``text`` and where it goes
    (:data:`REPORT_PLACES`). The command line prints them; a Python caller has the result itself."""

    text: str
    place: str = "report"

    def __post_init__(self) -> None:
        if self.place not in REPORT_PLACES:
            raise ValueError(f"place={self.place!r}: choose one of {', '.join(REPORT_PLACES)}")


def results_on_stdout(out: str | None) -> bool:
    """Whether a job's results themselves go to stdout (``--out -``, ``/dev/stdout``, ``/dev/fd/1``,
    ``/proc/self/fd/1``: every path the writer writes to descriptor 1, :func:`bitext_hf.io.outputs.own_descriptor`):
    its "report" lines then go to stderr."""
    return out is not None and (out == "-" or own_descriptor(out) == 1)


def shown_path(out: str) -> str:
    """How a report names an output: ``stdout`` for ``-`` and the other names of this process's stdout, else the
    path as given."""
    return "stdout" if results_on_stdout(out) else out


def per_second(count: int, seconds: float) -> str:
    """``count / seconds`` as a report shows a rate: whole above 10 (``1,234``), two significant digits below."""
    rate = count / max(seconds, 1e-9)
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"


@contextlib.contextmanager
def job_scope(threads: int | None) -> Iterator[None]:
    """Where a job (mining, scoring, alignment, evaluation) runs: its encoders and search on ``threads`` CPU threads
    (:func:`bitext_hf.threads.limit_threads`; the caller's setting comes back after), and the inputs that
    :func:`bitext_hf.io.check_inputs_and_output` protects protected until it ends (a later job, or the caller's own
    writes, have their own)."""
    from bitext_hf.threads import limit_threads

    try:
        with limit_threads(threads):
            yield
    finally:
        protect_inputs(())


class JobOutputs(OutputSet):
    """The outputs of one job run: an :class:`~bitext_hf.io.OutputSet` (declare every file before the work, write
    each to its temporary with :meth:`open` or :meth:`staged`, :meth:`commit` them together) that also takes the one
    output a user names that is a stream (:meth:`add_out`: ``-``, a FIFO, a device, ``/dev/stdout``). A stream is
    written directly when the job writes it (:meth:`open` and :meth:`staged` give the stream itself), never
    replaced, and has nothing beside it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._streams: set[str] = set()

    def add_out(self, path: StrPath, *, option: str = "--out") -> bool:
        """Declare the output the user named (``--out``): a symbolic link there is followed, as always, and
        the path is checked as :meth:`add` checks it (``follow_symlinks=True``). Returns True for a file of the set
        (its companions, a sidecar or a report, may then be declared beside it), False for a stream."""
        text = check_named_output(path, option)  # not empty, no folder
        if writes_in_place(text):  # `-`, a FIFO, a device: taken as it is
            if _is_socket(text):  # not a stream: opening it fails, after the work
                raise UsageError(
                    f"{option} {text}: is a socket, which no file is written to; name a file, - (stdout), a FIFO or "
                    "a device"
                )
            self._streams.add(text)
            return False
        self._add_file(text, last=False, option=option, follow_symlinks=True)  # known to be no stream
        return True

    def is_stream(self, path: StrPath) -> bool:
        """Whether ``path`` was declared by :meth:`add_out` as a stream (written directly)."""
        return os.fspath(path) in self._streams

    @contextlib.contextmanager
    def open(self, path: StrPath, mode: str = "w") -> Iterator[IO]:
        if self.is_stream(path):
            with atomic_output(path, mode) as handle:  # a stream: written in place
                yield handle
            return
        with super().open(path, mode) as handle:
            yield handle

    @contextlib.contextmanager
    def staged(self, path: StrPath) -> Iterator[str]:
        if self.is_stream(path):
            yield os.fspath(path)  # the writer writes the stream itself
            return
        with super().staged(path) as temporary:
            yield temporary


@contextlib.contextmanager
def job_run(
    config: Any, *, inputs: Iterable[StrPath | None] = (), input_folders: Iterable[StrPath | None] = ()
) -> Iterator[JobOutputs]:
    """One run of a job over ``config``: its thread limit (:func:`job_scope` with ``config.threads``; a job without
    that field, which runs no thread pool of its own, keeps the caller's), at most one of ``inputs`` from stdin,
    every input protected from any file written until the run ends (:func:`bitext_hf.io.protect_inputs`), and the
    :class:`JobOutputs` the job declares its files in before any work (none of them an input or in one of the
    ``input_folders``). Leaving the block without :meth:`~JobOutputs.commit` (an error, Ctrl-C) removes every
    temporary file: the earlier outputs stay exactly as they were."""
    inputs = [path for path in inputs if path is not None]
    folders = [path for path in input_folders if path is not None]
    scope = job_scope(config.threads) if hasattr(config, "threads") else _protected()
    with scope:
        check_inputs_and_output(None, inputs)  # one stdin at most; the inputs protected from every write
        with JobOutputs(inputs=inputs, input_folders=folders) as outputs:
            yield outputs


def plan_pairs_outputs(
    outputs: JobOutputs,
    out: str | None,
    format: str | None,
    *,
    threshold_report: bool = False,
    sidecar: bool = False,
) -> str | None:
    """Declare the outputs of a job that writes a pairs table (``mine``, ``score``) before anything is read: ``out``
    (:meth:`JobOutputs.add_out`; an empty one is refused), with ``threshold_report`` its figure and sample beside it
    (:func:`bitext_hf.data.pair_files.threshold_report_paths`; refused for a stream ``out``, which has nothing
    beside it), with ``sidecar`` its ``<out>.meta.json``, committed last (a stream gets none). Returns the pairs'
    format (:func:`bitext_hf.data.pair_files.output_format`; None without ``out``).

    Raises:
        UsageError: an ``out`` that cannot be written, a threshold report beside a stream, a format that cannot be
            told.
    """
    from bitext_hf.data.pair_files import metadata_path, output_format, threshold_report_paths

    is_file = out is not None and outputs.add_out(out)
    if threshold_report:
        if not is_file:
            raise UsageError("--threshold-report writes a figure and a sample beside --out FILE: give a file --out")
        for path in threshold_report_paths(out):
            outputs.add(path)
    if sidecar and is_file:
        outputs.add(metadata_path(out), last=True)
    return output_format(out, format) if out else None


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _protected() -> Iterator[None]:
    """The inputs' protection of :func:`job_scope`, without a thread limit."""
    try:
        yield
    finally:
        protect_inputs(())
