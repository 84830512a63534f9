"""The review app: look at mined, scored or aligned pairs before publishing them (``bitext-hf app``).

:class:`PairsReview` holds a pairs file, its filters, the rejected rows and the export; :class:`AlignmentReview` two
documents and their beads, split, merged or rejected by hand; neither needs Gradio. :func:`build_app` and
:func:`launch` put either in a browser (the ``app`` extra: ``pip install "bitext-hf[app]"``).
"""

from __future__ import annotations

import os
import time
from typing import Any

from bitext_hf.app.alignment import AlignmentReview
from bitext_hf.app.review import PairsReview, ReviewFilters, decisions_path, reviewed_path
from bitext_hf.errors import UsageError

__all__ = ["AlignmentReview", "PairsReview", "ReviewFilters", "build_app", "decisions_path", "launch", "reviewed_path"]


def build_app(review: PairsReview | AlignmentReview) -> Any:
    """The Gradio ``Blocks`` of a review (:mod:`bitext_hf.app.pairs_page`, :mod:`bitext_hf.app.alignment_page`)."""
    _require_gradio()
    if isinstance(review, AlignmentReview):
        from bitext_hf.app.alignment_page import build_alignment_app

        return build_alignment_app(review)
    if not isinstance(review, PairsReview):
        raise UsageError(f"build_app takes a PairsReview or an AlignmentReview, not {type(review).__name__}")
    from bitext_hf.app.pairs_page import build_app as build

    return build(review)


def launch(
    review: PairsReview | AlignmentReview | str | os.PathLike | None = None,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    block: bool = True,
) -> Any:
    """Open a review (a pairs file's path, or a review made in Python; None: a page to open a file, by its path or
    uploaded, :mod:`bitext_hf.app.opener`) in a local Gradio server (``host``: 127.0.0.1, this machine only;
    ``port``: the first free from 7860). With ``block=False`` it returns the running app (``app.close()`` stops
    it)."""
    if port is not None and (type(port) is not int or not 0 < port < 65536):
        raise UsageError(f"port must be a number from 1 to 65535, not {port!r}")
    if not isinstance(host, str) or not host:
        raise UsageError(f"host must be a name or an address, not {host!r}")
    _require_gradio()
    if isinstance(review, str | os.PathLike):
        review = PairsReview(review)  # read and checked before a server starts
    served: list[str] = []
    if review is None:
        from bitext_hf.app.opener import build_opener

        app = build_opener()
    else:
        from bitext_hf.app.page_parts import review_folder

        app = build_app(review)
        # The exports are written beside the input: Gradio serves them for download from there.
        served.append(review_folder(review.path if isinstance(review, PairsReview) else review.paths["alignment"]))
    app.launch(
        server_name=host,
        server_port=port,
        inbrowser=False,
        prevent_thread_lock=True,
        quiet=True,
        allowed_paths=served,
    )
    if block:
        # Gradio's own wait (launch's thread lock) catches Ctrl-C and returns as if the app had ended by itself; the
        # command's exit 130 and its note on where the review is kept need the interrupt, so the wait is here.
        try:
            while app.is_running:
                time.sleep(0.1)
        except KeyboardInterrupt:
            app.close()
            raise
    return app


def _require_gradio() -> None:
    # Gradio reports usage to its servers unless told not to; nothing leaves this machine.
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    try:
        import gradio  # noqa: F401
    except ImportError as error:
        raise UsageError('the review app needs Gradio: pip install "bitext-hf[app]"') from error
