"""What every job does the same way: where it runs (:func:`job_scope`: its thread limit, and its inputs protected from
every file it writes until it ends). The outputs of a run are planned and committed together by
:class:`bitext_hf.io.OutputSet`; the options every job shares are in :mod:`bitext_hf.jobs.options`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from bitext_hf.io import protect_inputs

__all__ = ["job_scope"]


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
