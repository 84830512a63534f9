"""Sentence alignment of parallel documents (vecalign's and Bertalign's job): overlap embeddings of any encoder of the
package (:mod:`.overlaps`), a two-step search linear in the document length (:mod:`.search`), the in-memory call
:func:`align_sentences` and the job over files, :func:`run_alignment` (``bitext-hf align``)."""

from __future__ import annotations

from bitext_hf.lazy_imports import lazy_exports

# Each public name and the submodule that defines it, imported on first access (PEP 562): the configs import
# neither numba nor torch, so ``--help`` reads them without compiling the search.
_SUBMODULE_OF = {
    "AlignSettings": "settings",
    "Alignment": "search",
    "TextAlignment": "align",
    "align_sentences": "align",
    "align_texts": "align",
}

__all__ = sorted(_SUBMODULE_OF)


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
