"""MuSR's training side, in the files every family has: ``arguments`` (``ScriptArguments``, ``ArchitectureArguments``),
``data`` (``load_data``: the many-to-one data with its multi-way held-out set), ``losses`` (``CrossConSTLoss``),
``evaluation`` (``MuSREvaluator``), ``export`` (``save_outputs``, ``model_card``, ``card_figures``) and ``recipe``
(``check_arguments``, the vocabulary and both stages); and what only this family needs: stage 1's plateau
(``plateau``)."""

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
from bitext_hf.families.musr.export import (
    card_figures,
    encoder_only,
    model_card,
    save_outputs,
    save_sentence_transformers,
)
from bitext_hf.families.musr.losses import Branches, CrossConSTLoss, crossconst_kl, split_target
from bitext_hf.families.musr.plateau import PlateauCallback, held_out_cross_entropy, reached_plateau

__all__ = [
    "Branches",
    "CrossConSTLoss",
    "ManyToOneData",
    "MuSREvaluator",
    "PlateauCallback",
    "bucc_style_f1",
    "card_figures",
    "check_vocabulary",
    "crossconst_kl",
    "encoder_only",
    "held_out_cross_entropy",
    "language_probabilities",
    "load_many_to_one",
    "model_card",
    "multiway_held_out",
    "reached_plateau",
    "sample_stage",
    "save_outputs",
    "save_sentence_transformers",
    "split_target",
]
