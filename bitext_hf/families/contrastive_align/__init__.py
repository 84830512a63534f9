"""Training side of the ContrastiveAlignedEncoder: words, word aligners, symmetrization and filters, the cached
alignment pipeline, examples / collator / loss / callback, and the export as a plain encoder with its model card."""

from __future__ import annotations

from bitext_hf.data.words import (
    first_subword_positions,
    first_subword_vectors,
    split_words,
    tokenize_words,
)
from bitext_hf.families.contrastive_align.aligners import (
    ALIGNERS,
    EflomalAligner,
    SimilarityAligner,
    eflomal_available,
    make_aligner,
)
from bitext_hf.families.contrastive_align.cache import align_words, cache_path, directional_alignments
from bitext_hf.families.contrastive_align.export import export_encoders, model_card
from bitext_hf.families.contrastive_align.objectives import (
    AlignmentCollator,
    AlignmentEvalSet,
    AlignmentRetrievalEvaluator,
    OrthogonalizeCallback,
    alignment_loss,
    build_examples,
    unwrap,
)
from bitext_hf.families.contrastive_align.symmetrize import (
    SYMMETRIZATIONS,
    check_links,
    drop_identical,
    grow_diag_final_and,
    intersect,
    one_to_one,
    symmetrize,
)

__all__ = [
    "ALIGNERS",
    "SYMMETRIZATIONS",
    "AlignmentCollator",
    "AlignmentEvalSet",
    "AlignmentRetrievalEvaluator",
    "EflomalAligner",
    "OrthogonalizeCallback",
    "SimilarityAligner",
    "align_words",
    "alignment_loss",
    "build_examples",
    "cache_path",
    "check_links",
    "directional_alignments",
    "drop_identical",
    "eflomal_available",
    "export_encoders",
    "first_subword_positions",
    "first_subword_vectors",
    "grow_diag_final_and",
    "intersect",
    "make_aligner",
    "model_card",
    "one_to_one",
    "split_words",
    "symmetrize",
    "tokenize_words",
    "unwrap",
]
