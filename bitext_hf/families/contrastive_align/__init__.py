"""Training side of the ContrastiveAlignedEncoder, in the files every family has: ``arguments``
(``ScriptArguments``), ``data`` (``load_data``: English-centred pairs; their word alignment into examples and held-out
sets, the collator), ``losses`` (``AlignmentLoss``), ``evaluation`` (word and sentence retrieval), ``export``
(``save_outputs``, ``model_card``, ``card_figures``, the plain encoders) and ``recipe`` (``check_arguments``, tokenizer,
model, Trainer); and what only this family needs: word aligners (``aligners``), symmetrization and filters (``symmetrize``), the cached alignment pipeline
(``cache``) and the Trainer callbacks (``callbacks``: orthogonal maps, the regularizer's theta_0)."""

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
from bitext_hf.families.contrastive_align.callbacks import OrthogonalizeCallback, ReferenceCallback
from bitext_hf.families.contrastive_align.data import AlignmentCollator, AlignmentEvalSet, build_examples
from bitext_hf.families.contrastive_align.evaluation import AlignmentRetrievalEvaluator
from bitext_hf.families.contrastive_align.export import card_figures, export_encoders, model_card, save_outputs
from bitext_hf.families.contrastive_align.losses import AlignmentLoss
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
    "AlignmentLoss",
    "AlignmentRetrievalEvaluator",
    "EflomalAligner",
    "OrthogonalizeCallback",
    "ReferenceCallback",
    "SimilarityAligner",
    "align_words",
    "build_examples",
    "cache_path",
    "card_figures",
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
    "save_outputs",
    "split_words",
    "symmetrize",
    "tokenize_words",
]
