"""Ctrl-C held over the imports that cannot take it.

torch's import runs Python code from C++ (``torch._C._autograd_init`` calls back into Python through pybind11). A
``KeyboardInterrupt`` raised by Python's SIGINT handler inside such a callback is thrown through pybind11 as
``error_already_set`` where nothing catches it, and the process aborts ("terminate called after throwing an instance
of 'pybind11::error_already_set'", SIGABRT) instead of ending as an interrupted command: exit 130, one line, no
partial output. :func:`interrupts_held` notes a Ctrl-C that comes during such an import and delivers it when the
import is done.

:mod:`bitext_hf.io.temporary_files` holds SIGINT and SIGTERM while an output set is renamed, through its own handler
(it must also keep what another thread receives, and remove temporaries on SIGTERM); this one holds only SIGINT, at
an import, and only in the main thread (the only one where Python raises ``KeyboardInterrupt``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["interrupts_held"]


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Within the block, a SIGINT is noted instead of handled; when the block ends, one that came is delivered to
    the handler that was there before (Python's: ``KeyboardInterrupt``, raised where the block ends).

    Only in the main thread and where SIGINT has a Python handler: in another thread, or when SIGINT is ignored, has
    its default disposition or a handler set outside Python, the block runs as it is (none of them raises inside an
    import)."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(previous):
        yield
        return
    received: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)  # handled before this call returns: by default it raises here
