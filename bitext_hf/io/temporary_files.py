"""Temporary files of the outputs being written: their names beside their targets, the registry that removes them
(and the folders made for them) when SIGTERM or SIGINT ends the process, the leftovers of killed runs, and the
signals held while a set of files is committed. One file (:mod:`bitext_hf.io.outputs`) and a set of files
(:mod:`bitext_hf.io.output_set`) are written through these, so that one signal handler knows every temporary."""

from __future__ import annotations

import collections
import contextlib
import os
import re
import secrets
import signal
import threading

__all__ = [
    "TEMP_MARK",
    "hold_signals",
    "register_folder",
    "register_temp",
    "release_signals",
    "remove_leftovers",
    "temp_path",
    "unregister_folder",
    "unregister_temp",
]

TEMP_MARK = ".bitext-hf-"
# A temp name must stay under the usual 255-byte name limit; the rest of it is the marker, pid and token.
_MAX_NAME_BYTES = 180
# A temporary file's name: its prefix (up to the last marker; "." and the target's name before it), pid, token.
_LEFTOVER = re.compile(r"(\..*" + re.escape(TEMP_MARK) + r")(\d+)-[0-9a-f]+\.tmp")
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _temp_prefix(name: str) -> str:
    short = os.fsdecode(os.fsencode(name)[:_MAX_NAME_BYTES])
    return f".{short}{TEMP_MARK}"


def temp_path(folder: str, name: str) -> str:
    """A new temporary file's path beside ``folder/name``: hidden, marked, with this process's id (so that a later
    run knows whether its writer is gone) and a random token."""
    return os.path.join(folder, f"{_temp_prefix(name)}{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def remove_leftovers(folder: str, names: set[str] | str) -> None:
    """Delete what killed runs (SIGKILL, a crash) left of the outputs ``names`` in ``folder``: their temporaries, and
    those of writers that were given a temporary's path (a temporary of a temporary), in one listing."""
    prefixes = {_temp_prefix(names)} if isinstance(names, str) else {_temp_prefix(name) for name in names}
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        match = _LEFTOVER.fullmatch(entry)
        if match is None or int(match.group(2)) == os.getpid() or _pid_alive(int(match.group(2))):
            continue
        start = match.group(1)
        if start in prefixes or any(start.startswith("." + prefix) for prefix in prefixes):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


# Temp files being written now (with the pid that writes each: a forked child must not delete its parent's),
# removed by the signal handler before the process dies of SIGTERM/SIGINT.
_ACTIVE: dict[str, int] = {}
# Folders an OutputSet made for its files (removed with them, when still empty).
_ACTIVE_FOLDERS: dict[str, int] = {}
_ACTIVE_LOCK = threading.Lock()
_PREVIOUS_HANDLERS: dict[int, object] = {}
# Non-empty while an OutputSet commits (a marker a commit); the signals that came meanwhile, delivered after it.
_COMMITTING: list[int] = []
_RECEIVED: collections.deque[int] = collections.deque()


def _on_signal(signum: int, frame) -> None:
    if _COMMITTING:
        # A commit is renaming files (this thread blocks the signals; another thread received it): after it.
        _RECEIVED.append(signum)
        return
    previous = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(previous):
        # Python's own SIGINT handler (KeyboardInterrupt) or the application's: an exception unwinds through
        # atomic_output, which removes its temp file; a handler that returns lets the write go on.
        previous(signum, frame)
        return
    for name, pid in list(_ACTIVE.items()):
        if pid == os.getpid():
            with contextlib.suppress(OSError):
                os.unlink(name)
    for name, pid in sorted(_ACTIVE_FOLDERS.items(), reverse=True):
        if pid == os.getpid():
            with contextlib.suppress(OSError):
                os.rmdir(name)  # only when empty: what is in it is not this run's
    # Die of the signal as the default disposition would, so the parent sees the conventional status (143 / -15).
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _register(temp: str, registry: dict[str, int] = _ACTIVE) -> None:
    """Remember a temp file (or, in ``_ACTIVE_FOLDERS``, a folder made for temp files); in the main thread (the only
    one that may set handlers), handle SIGTERM/SIGINT."""
    with _ACTIVE_LOCK:
        registry[temp] = os.getpid()
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(signum)
            # Ignored (nohup), set outside Python, or already ours: leave it.
            if previous in (signal.SIG_IGN, None) or previous is _on_signal:
                continue
            _PREVIOUS_HANDLERS[signum] = previous
            signal.signal(signum, _on_signal)


def _unregister(temp: str, registry: dict[str, int] = _ACTIVE) -> None:
    """Forget a temp file (or a folder); when none is left, give the signals back to their previous handlers."""
    with _ACTIVE_LOCK:
        registry.pop(temp, None)
        if _ACTIVE or _ACTIVE_FOLDERS or threading.current_thread() is not threading.main_thread():
            return  # a handler left installed by another thread's write is harmless: it defers to the previous
        for signum, previous in list(_PREVIOUS_HANDLERS.items()):
            if signal.getsignal(signum) is _on_signal:
                signal.signal(signum, previous)
            del _PREVIOUS_HANDLERS[signum]


def register_temp(temp: str) -> None:
    """Have SIGTERM and SIGINT remove the temporary file ``temp`` before the process dies."""
    _register(temp)


def unregister_temp(temp: str) -> None:
    """Forget ``temp`` (written and renamed, or removed)."""
    _unregister(temp)


def register_folder(folder: str) -> None:
    """Have SIGTERM and SIGINT remove ``folder`` (made for temporaries) when it is empty, before the process dies."""
    _register(folder, _ACTIVE_FOLDERS)


def unregister_folder(folder: str) -> None:
    _unregister(folder, _ACTIVE_FOLDERS)


def hold_signals() -> set | None:
    """Block SIGINT and SIGTERM in this thread, and have the handler of this module hold them for the others."""
    _COMMITTING.append(0)  # the marker: from here on the handler appends what it receives
    if hasattr(signal, "pthread_sigmask"):
        return signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    return None


def release_signals(held: set | None, committed: bool) -> None:
    """Unblock the signals and deliver those that came meanwhile (Ctrl-C: ``KeyboardInterrupt``, noted)."""
    # CPython runs a Python handler between any two bytecodes of the main thread, whatever this thread's mask (another
    # thread can receive the signal). So the mask is restored first, while the handler still keeps what comes (a
    # handler that raises, once the marker is gone, must not leave SIGINT and SIGTERM blocked in this thread and in
    # every child it starts), then what was kept is taken, then the marker goes.
    try:
        try:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a pending signal comes to the handler: kept
        finally:
            received = _take_received()
            _COMMITTING.pop()
        received += _take_received()  # kept between the last take and the marker's removal
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)
    except KeyboardInterrupt as interrupt:
        if committed:
            interrupt.add_note("it came as the outputs were committed: they were all written")
        raise


def _take_received() -> list[int]:
    received = []
    while _RECEIVED:
        received.append(_RECEIVED.popleft())  # atomic: a handler appending meanwhile loses nothing
    return received
