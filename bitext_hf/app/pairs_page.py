"""The review app's page, on Gradio: controls on the left, one page of pairs, what the filters keep and the score
histogram on the right. Every event calls :class:`~bitext_hf.app.review.PairsReview`, which holds the columns;
the browser receives one page of rows at a time.
"""

from __future__ import annotations

import os
from typing import Any

import gradio as gr  # this module is the page: imported only where the app extra is installed

from bitext_hf.app.page_parts import downloadable, error_line, paged_table, review_folder
from bitext_hf.app.review import SORTS, PairsReview, ReviewFilters
from bitext_hf.errors import BitextError
from bitext_hf.io.terminal import escape_controls

__all__ = ["PAGE_SIZE", "build_app", "pairs_view"]

PAGE_SIZE = 50
COLUMNS = ["row", "score", "quality", "src", "tgt", "status"]


def _summary_markdown(review: PairsReview) -> str:
    facts = review.summary()
    lines = [
        f"**{facts['kept']:,}** of {facts['pairs']:,} pairs kept "
        f"({facts['passing']:,} pass the filters, {facts['rejected']:,} rejected by hand)"
    ]
    if "estimated_precision" in facts:
        precision = facts["estimated_precision"]
        shown = "n/a" if precision != precision else f"{precision:.3f}"
        lines.append(
            f"estimated precision **{shown}**, expected correct pairs **{facts['expected_correct']:,.1f}** "
            "(mean and sum of the `quality` column)"
        )
    else:
        lines.append("no `quality` column: run `bitext-hf score --quality` for an estimated precision")
    return "  \n".join(lines)


def _histogram(review: PairsReview):
    """The scores' histogram as rows for Gradio's bar plot (drawn in the browser by Vega-Lite: the page receives 80
    numbers; a Matplotlib figure sent as a picture took most of a re-filter's time, see benchmarks/README.md)."""
    import pandas as pd

    edges, every, kept = review.histogram()
    centers = ((edges[:-1] + edges[1:]) / 2).round(6)
    return pd.DataFrame(
        {
            "score": [*centers, *centers],
            "pairs": [*kept.tolist(), *(every - kept).tolist()],
            "pairs are": ["kept"] * len(kept) + ["not kept"] * len(kept),
        }
    )


def build_app(review: PairsReview) -> Any:
    """The Gradio ``Blocks`` of a review of ``review``'s file (not launched)."""
    with gr.Blocks(title="bitext-hf review", analytics_enabled=False) as app:
        pairs_view(review)
    return app


def pairs_view(review: PairsReview) -> None:
    """The review's components and events, made inside the current Gradio context (a ``Blocks``, or the opener's
    ``gr.render`` once a file is opened), filled with the first page."""
    lows, highs = float(review.scores.min()), float(review.scores.max())
    filters = review.filters
    title = escape_controls(os.fspath(review.path))

    def current_filters(threshold, min_quality, max_ratio, lid, src_lang, tgt_lang, search, sort) -> ReviewFilters:
        return ReviewFilters(
            threshold=None if threshold is None or threshold <= lows else float(threshold),
            min_quality=None if review.quality is None or not min_quality else float(min_quality),
            max_length_ratio=None if not max_ratio else float(max_ratio),
            lid=bool(lid),
            src_lang=src_lang or None,
            tgt_lang=tgt_lang or None,
            search=search or "",
            sort=sort,
        )

    def render(page_number):
        rows = review.view()
        pages = max(1, -(-len(rows) // PAGE_SIZE))
        page_number = min(max(1, int(page_number or 1)), pages)
        table = [
            [
                row["row"],
                round(row["score"], 6),
                None if row["quality"] is None else round(row["quality"], 4),
                row["src"],
                row["tgt"],
                "rejected" if row["rejected"] else "",
            ]
            for row in review.page(rows, page_number, PAGE_SIZE)
        ]
        return (
            table,
            gr.update(value=page_number, maximum=pages),
            f"page {page_number} of {pages} ({len(rows):,} pairs shown)",
            _summary_markdown(review),
            _histogram(review),
            "",
        )

    def refilter(
        threshold,
        min_quality,
        max_ratio,
        lid,
        src_lang,
        tgt_lang,
        search,
        sort,
        progress=gr.Progress(),  # noqa: B008 (Gradio's way to ask for a progress bar: a default it replaces)
    ):
        try:
            filters = current_filters(threshold, min_quality, max_ratio, lid, src_lang, tgt_lang, search, sort)
            if filters.lid and (filters.src_lang or filters.tgt_lang):
                # Once per pair of languages, and long on large files: a bar, not a silent wait.
                review.identify_languages(
                    filters.src_lang, filters.tgt_lang, lambda share: progress(share, desc="language ID")
                )
            review.set_filters(filters)
        except BitextError as error:
            return (*render(1)[:-1], error_line(error))
        return render(1)

    def decide(row_text, page_number, rejected: bool):
        try:
            row = int(str(row_text).strip())
        except ValueError:
            return (*render(page_number)[:-1], error_line(f"{row_text!r} is not a row number"))
        try:
            review.reject([row], rejected)
        except BitextError as error:
            return (*render(page_number)[:-1], error_line(error))
        return render(page_number)

    def export(format):
        try:
            path, count = review.export(format=None if format == "same as input" else format)
        except (BitextError, OSError) as error:
            return None, error_line(error)
        return downloadable(
            path, [review_folder(review.path)]
        ), f"wrote {count:,} pairs to `{escape_controls(str(path))}`"

    def select(event: gr.SelectData):
        return str(event.row_value[0]) if event.row_value else ""

    first = render(1)
    gr.Markdown(f"## Reviewing `{title}`")
    with gr.Row():
        with gr.Column(scale=1, min_width=280):
            threshold = gr.Slider(
                lows,
                highs,
                value=filters.threshold if filters.threshold is not None else lows,
                step=max((highs - lows) / 1000, 1e-6),
                label="score threshold",
                elem_id="threshold",
            )
            min_quality = gr.Slider(
                0.0,
                1.0,
                value=filters.min_quality or 0.0,
                step=0.01,
                label="minimum quality",
                visible=review.quality is not None,
                elem_id="min-quality",
            )
            max_ratio = gr.Number(
                value=filters.max_length_ratio or 0,
                minimum=0,
                label="max length ratio (0: none)",
                elem_id="max-ratio",
            )
            lid = gr.Checkbox(value=filters.lid, label="language ID (fastText lid.176)", elem_id="lid")
            with gr.Row():
                src_lang = gr.Textbox(value=filters.src_lang or "", label="source language", elem_id="src-lang")
                tgt_lang = gr.Textbox(value=filters.tgt_lang or "", label="target language", elem_id="tgt-lang")
            search = gr.Textbox(value=filters.search, label="search both sides", elem_id="search")
            sort = gr.Dropdown(list(SORTS), value=filters.sort, label="sort", elem_id="sort")
            gr.Markdown("### Reject a pair")
            row = gr.Textbox(label="row (click a pair)", elem_id="row")
            with gr.Row():
                reject = gr.Button("Reject", variant="stop", elem_id="reject")
                restore = gr.Button("Restore", elem_id="restore")
            gr.Markdown("### Export the kept pairs")
            format = gr.Dropdown(
                ["same as input", "tsv", "csv", "jsonl", "parquet", "tmx"], value="same as input", label="format"
            )
            export_button = gr.Button("Export", variant="primary", elem_id="export")
            exported = gr.File(label="exported file", interactive=False)
        with gr.Column(scale=3):
            summary = gr.Markdown(first[3], elem_id="summary")
            message = gr.Markdown(elem_id="message")
            edges = review.histogram()[0]
            plot = gr.BarPlot(
                first[4],
                x="score",
                y="pairs",
                color="pairs are",
                x_bin=float(edges[1] - edges[0]),
                y_aggregate="sum",
                color_map={"kept": "#2b7bb9", "not kept": "#d0d0d0"},
                label="scores",
                height=220,
                elem_id="histogram",
            )
            page, page_info, pairs = paged_table(first, COLUMNS, "pairs", ["6%", "10%", "8%", "34%", "34%", "8%"])
    outputs = [pairs, page, page_info, summary, plot, message]
    controls = [threshold, min_quality, max_ratio, lid, src_lang, tgt_lang, search, sort]
    for control in (threshold, min_quality):
        # As the slider moves: the last position wins when the server is behind (a million pairs re-filter in
        # tens of milliseconds, the histogram is drawn again).
        control.change(refilter, controls, outputs, trigger_mode="always_last", show_progress="hidden")
    for control in (max_ratio, search, src_lang, tgt_lang):
        control.submit(refilter, controls, outputs)
    for control in (lid, sort):
        control.change(refilter, controls, outputs)
    page.submit(render, page, outputs)
    pairs.select(select, None, row)
    reject.click(lambda row, page: decide(row, page, True), [row, page], outputs)
    restore.click(lambda row, page: decide(row, page, False), [row, page], outputs)
    export_button.click(export, format, [exported, message])
