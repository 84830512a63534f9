"""The review app's page for an alignment, on Gradio: both documents bead by bead (source and target side by side),
the weak beads marked, a bead split, merged with the next or rejected, the edited alignment exported. Every event
calls :class:`~bitext_hf.app.alignment.AlignmentReview`; the browser receives one page of beads at a time.
"""

from __future__ import annotations

import math
import os
from typing import Any

import gradio as gr  # this module is a page: imported only where the app extra is installed
import numpy as np

from bitext_hf.app.alignment import BEAD_KINDS, AlignmentReview
from bitext_hf.app.page_parts import downloadable, error_line, paged_table, review_folder
from bitext_hf.app.review import reviewed_path
from bitext_hf.errors import BitextError
from bitext_hf.io.terminal import escape_controls

__all__ = ["PAGE_SIZE", "alignment_view", "build_alignment_app"]

PAGE_SIZE = 50
COLUMNS = ["bead", "score", "kind", "source", "target", "mark"]
FORMATS = ["same as input", "vecalign", "tsv", "jsonl", "parquet", "tmx"]


def _summary(review: AlignmentReview) -> str:
    facts = review.summary()
    return (
        f"**{facts['beads']:,}** beads: {facts['links']:,} links, {facts['without_counterpart']:,} without "
        f"counterpart, {facts['edited']:,} edited by hand ({len(review.src):,} source and {len(review.tgt):,} target "
        "sentences)"
    )


def build_alignment_app(review: AlignmentReview) -> Any:
    """The Gradio ``Blocks`` of a review of an alignment (not launched)."""
    with gr.Blocks(title="bitext-hf review", analytics_enabled=False) as app:
        alignment_view(review)
    return app


def alignment_view(review: AlignmentReview) -> None:
    """The review's components and events, made inside the current Gradio context (a ``Blocks``, or the opener's
    ``gr.render``), filled with the first page."""
    finite = [score for score in review.scores if not math.isnan(score)]
    low, high = (min(finite), max(finite)) if finite else (0.0, 1.0)
    high = high if high > low else low + 1.0
    # Weak by score out of the box: the lowest tenth of the links (a starting point; the slider moves it).
    links = [score for (xs, ys), score in zip(review.beads, review.scores) if xs and ys and not math.isnan(score)]
    start = float(np.quantile(links, 0.1)) if links else low
    title = escape_controls(os.fspath(review.paths["alignment"]))

    def render(page_number, kind, below):
        rows = review.rows(kind, below)
        pages = max(1, -(-len(rows) // PAGE_SIZE))
        page_number = min(max(1, int(page_number or 1)), pages)
        table = [
            [
                bead["bead"],
                None if math.isnan(bead["score"]) else round(bead["score"], 6),
                bead["kind"],
                bead["src"],
                bead["tgt"],
                "edited" if bead["edited"] else ("weak" if bead["weak"] else ""),
            ]
            for bead in review.page(rows, page_number, PAGE_SIZE, below=below)
        ]
        info = f"page {page_number} of {pages} ({len(rows):,} beads shown)"
        return table, gr.update(value=page_number, maximum=pages), info, _summary(review), ""

    def edit(action, bead_text, page_number, kind, below):
        try:
            number = int(str(bead_text).strip())
        except ValueError:
            return (
                *render(page_number, kind, below)[:-1],
                error_line(f"{bead_text!r} is not a bead"),
            )
        try:
            getattr(review, action)(number)
        except BitextError as error:
            return (*render(page_number, kind, below)[:-1], error_line(error))
        return render(page_number, kind, below)

    def export(format):
        chosen = None if format == "same as input" else format
        path = reviewed_path(review.paths["alignment"], None if chosen in (None, "vecalign") else chosen)
        if chosen == "vecalign":
            path = path.with_suffix(".align")
        try:
            written, beads = review.export(path, chosen)
        except (BitextError, OSError) as error:
            return None, error_line(error)
        served = [review_folder(review.paths["alignment"])]
        return downloadable(written, served), f"wrote {beads:,} beads to `{escape_controls(str(written))}`"

    def select(event: gr.SelectData):
        return str(event.row_value[0]) if event.row_value else ""

    first = render(1, BEAD_KINDS[0], start)
    gr.Markdown(f"## Reviewing the alignment `{title}`")
    with gr.Row():
        with gr.Column(scale=1, min_width=280):
            kind = gr.Radio(list(BEAD_KINDS), value=BEAD_KINDS[0], label="show", elem_id="kind")
            below = gr.Slider(
                low,
                high,
                value=start,
                step=max((high - low) / 1000, 1e-6),
                label="weak below score",
                elem_id="below",
            )
            gr.Markdown("### Edit a bead")
            bead = gr.Textbox(label="bead (click one)", elem_id="bead")
            with gr.Row():
                split = gr.Button("Split", elem_id="split")
                merge = gr.Button("Merge with next", elem_id="merge")
            reject = gr.Button("Reject", variant="stop", elem_id="reject")
            gr.Markdown("### Export the alignment")
            format = gr.Dropdown(FORMATS, value=FORMATS[0], label="format")
            export_button = gr.Button("Export", variant="primary", elem_id="export")
            exported = gr.File(label="exported file", interactive=False)
        with gr.Column(scale=3):
            summary = gr.Markdown(first[3], elem_id="summary")
            message = gr.Markdown(elem_id="message")
            page, page_info, beads = paged_table(first, COLUMNS, "beads", ["6%", "10%", "6%", "35%", "35%", "8%"])
    outputs = [beads, page, page_info, summary, message]
    view = [page, kind, below]
    for control in (kind, below):
        control.change(lambda k, b: render(1, k, b), [kind, below], outputs, trigger_mode="always_last")
    page.submit(render, view, outputs)
    beads.select(select, None, bead)
    for button, action in ((split, "split"), (merge, "merge"), (reject, "reject")):
        button.click(lambda b, p, k, w, action=action: edit(action, b, p, k, w), [bead, *view], outputs)
    export_button.click(export, format, [exported, message])
