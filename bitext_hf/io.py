"""File input and output shared by every part of the package: outputs appear complete or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["atomic_output"]


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w") -> Iterator:
    """Open a temporary file next to ``path``; on success rename it to ``path``, on error delete it."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"output folder does not exist: {path.parent}")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8", "newline": ""} if "b" not in mode else {})) as handle:
            yield handle
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
