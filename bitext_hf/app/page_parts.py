"""What both review pages share: how an error reads on the page, and which exports the browser may download."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bitext_hf.io.terminal import escape_controls

__all__ = ["downloadable", "error_line", "paged_table", "review_folder"]


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


def paged_table(first: tuple, headers: list[str], elem_id: str, widths: list[str]) -> tuple:
    """The page number box, its line and the table of one page, filled with ``first`` (a page's render: the rows,
    the page box's update, the line), made in the current Gradio context; returns (page, page_info, table)."""
    import gradio as gr

    with gr.Row():
        page = gr.Number(value=1, precision=0, minimum=1, maximum=first[1]["maximum"], label="page", elem_id="page")
        page_info = gr.Markdown(first[2], elem_id="page-info")
    table = gr.Dataframe(
        first[0],
        headers=headers,
        interactive=False,
        wrap=True,
        elem_id=elem_id,
        column_widths=widths,
        max_height=900,
    )
    return page, page_info, table
