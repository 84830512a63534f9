"""What both review pages share: how an error reads on the page, and which exports the browser may download."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bitext_hf.io.terminal import escape_controls

__all__ = ["downloadable", "error_line", "review_folder"]


def error_line(error: BaseException | str) -> str:
    """One line of Markdown for the page's message (control characters escaped: a message may quote data)."""
    return f"**error:** {escape_controls(str(error))}"


def review_folder(path: str | os.PathLike) -> str:
    """The folder of a review's input, which :func:`bitext_hf.app.launch` lets Gradio serve exports from."""
    return os.path.dirname(os.path.realpath(path))


def downloadable(path: Path, served: list[str]) -> str | None:
    """``path`` when Gradio will serve it for download (under the working folder, the temporary folder or a folder
    the app was launched with, ``served``), else None: the file is written all the same, and the message names it.
    (Gradio refuses, with an error for the whole event, any other file a function returns.)"""
    real = os.path.realpath(path)
    for folder in (os.getcwd(), tempfile.gettempdir(), *served):
        folder = os.path.realpath(folder)
        if real == folder or real.startswith(folder.rstrip(os.sep) + os.sep):
            return str(path)
    return None
