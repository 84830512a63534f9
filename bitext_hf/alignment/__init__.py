"""Sentence alignment of parallel documents (vecalign's and Bertalign's job): overlap embeddings of any encoder of the
package (:mod:`.overlaps`), a two-step search linear in the document length (:mod:`.search`), the in-memory call
:func:`align_sentences` and the job over files, :func:`run_alignment` (``bitext-hf align``)."""

from __future__ import annotations

from bitext_hf.alignment.align import AlignSettings, align_sentences
from bitext_hf.alignment.pipeline import AlignConfig, AlignResult, run_alignment
from bitext_hf.alignment.search import Alignment

__all__ = ["AlignConfig", "AlignResult", "AlignSettings", "Alignment", "align_sentences", "run_alignment"]
