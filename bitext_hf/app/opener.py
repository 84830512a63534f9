"""The review app started without a file (``bitext-hf app``): a page to open one, by its path on this machine or
uploaded, then the review of it below. A file that cannot be opened gets one line on the page, and nothing is
written (reading a review writes nothing; its decisions file is written on the first decision).
"""

from __future__ import annotations

from typing import Any

import gradio as gr  # this module is a page: imported only where the app extra is installed

from bitext_hf.app.alignment import AlignmentReview
from bitext_hf.app.alignment_page import alignment_view
from bitext_hf.app.pairs_page import pairs_view
from bitext_hf.app.review import PairsReview
from bitext_hf.errors import BitextError
from bitext_hf.io.terminal import escape_controls

__all__ = ["build_opener", "open_review"]


def open_review(pairs: str, src: str, tgt: str, alignment: str) -> PairsReview | AlignmentReview:
    """The review the form asks for: a pairs file, or two documents and their alignment.

    Raises:
        BitextError: what the command line would refuse (the same checks, the same messages).
    """
    from bitext_hf.errors import UsageError

    pairs, documents = (pairs or "").strip(), [(value or "").strip() for value in (src, tgt, alignment)]
    if pairs and any(documents):
        raise UsageError("open a pairs file, or a source, a target and an alignment; not both")
    if pairs:
        return PairsReview(pairs)
    if not all(documents):
        raise UsageError("give a pairs file, or all of a source document, a target document and their alignment")
    return AlignmentReview(*documents)


def build_opener() -> Any:
    """The Gradio ``Blocks`` of the opener (not launched)."""
    with gr.Blocks(title="bitext-hf review", analytics_enabled=False) as app:
        opened = gr.State(None)
        with gr.Accordion("Open pairs or an alignment", open=True, elem_id="opener"):
            with gr.Row():
                pairs = gr.Textbox(
                    label="pairs file on this machine (mine, score or align output: .tsv .csv .jsonl .parquet)",
                    elem_id="open-pairs",
                    scale=3,
                )
                upload = gr.File(label="or upload one", type="filepath", elem_id="upload", scale=1)
            with gr.Row():
                src = gr.Textbox(label="or a source document", elem_id="open-src")
                tgt = gr.Textbox(label="its target document", elem_id="open-tgt")
                alignment = gr.Textbox(label="and their alignment (align's output)", elem_id="open-alignment")
            open_button = gr.Button("Open", variant="primary", elem_id="open")
            message = gr.Markdown(elem_id="open-message")

        def open_files(pairs, src, tgt, alignment):
            try:
                review = open_review(pairs, src, tgt, alignment)
            except (BitextError, OSError) as error:
                return gr.skip(), f"**cannot open:** {escape_controls(str(error))}"
            return review, ""

        upload.upload(lambda path: path or "", upload, pairs)
        open_button.click(open_files, [pairs, src, tgt, alignment], [opened, message])

        @gr.render(inputs=opened)
        def review_of(review):
            if isinstance(review, AlignmentReview):
                alignment_view(review)
            elif isinstance(review, PairsReview):
                pairs_view(review)

    return app
