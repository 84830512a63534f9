"""Publishing: model and dataset cards (huggingface_hub), card figures, Hub-ready export (with sentence-transformers
modules), upload."""

from __future__ import annotations

from bitext_hf.hub.dataset_card import prepare_dataset_folder, read_pairs_table, write_mining_metadata
from bitext_hf.hub.export import POOLING_MODES, HubExportError, push_recipe_output, push_to_hub, save_for_hub
from bitext_hf.hub.figures import (
    CardFigure,
    card_figures,
    margin_distribution,
    score_histogram,
    training_curve,
    xsim_heatmap,
)
from bitext_hf.hub.model_card import (
    MISSING_VALUE,
    ModelCardError,
    available_templates,
    eval_results_from_table,
    figures_markdown,
    load_template,
    markdown_table,
    render_model_card,
    template_fields,
)
from bitext_hf.hub.upload import HubAccessError, check_model_folder, upload

__all__ = [
    "MISSING_VALUE",
    "POOLING_MODES",
    "CardFigure",
    "HubAccessError",
    "HubExportError",
    "ModelCardError",
    "available_templates",
    "card_figures",
    "check_model_folder",
    "eval_results_from_table",
    "figures_markdown",
    "load_template",
    "margin_distribution",
    "markdown_table",
    "prepare_dataset_folder",
    "push_recipe_output",
    "push_to_hub",
    "read_pairs_table",
    "render_model_card",
    "save_for_hub",
    "score_histogram",
    "template_fields",
    "training_curve",
    "upload",
    "write_mining_metadata",
    "xsim_heatmap",
]
