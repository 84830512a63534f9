"""What only MuSR's training needs: the CrossConST loss, the many-to-one data, evaluation, the encoder export."""

from __future__ import annotations

from bitext_hf.families.musr.data import (
    ManyToOneData,
    check_vocabulary,
    language_probabilities,
    load_many_to_one,
    multiway_held_out,
    sample_stage,
)
from bitext_hf.families.musr.evaluation import MuSREvaluator, bucc_style_f1
from bitext_hf.families.musr.export import encoder_only, save_sentence_transformers
from bitext_hf.families.musr.losses import Branches, CrossConSTLoss, crossconst_kl, split_target
from bitext_hf.families.musr.plateau import PlateauCallback, held_out_cross_entropy, reached_plateau

__all__ = [
    "Branches",
    "CrossConSTLoss",
    "ManyToOneData",
    "MuSREvaluator",
    "PlateauCallback",
    "bucc_style_f1",
    "check_vocabulary",
    "crossconst_kl",
    "encoder_only",
    "held_out_cross_entropy",
    "language_probabilities",
    "load_many_to_one",
    "multiway_held_out",
    "reached_plateau",
    "sample_stage",
    "save_sentence_transformers",
    "split_target",
]
