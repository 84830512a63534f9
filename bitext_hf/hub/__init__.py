"""Publishing: model and dataset cards (huggingface_hub), card figures, Hub-ready export (with sentence-transformers
modules) and upload (the job of ``bitext-hf push`` is :mod:`bitext_hf.jobs.push`).

The names below are imported on first access (PEP 562, :func:`bitext_hf.lazy_imports.lazy_exports`), as :mod:`bitext_hf.training`'s
are: importing a light submodule then imports no torch, which only the export and the dataset card need.
"""

from __future__ import annotations

# Imported now: the submodule ``upload`` would otherwise hide the function ``upload`` once anything imports it.
from bitext_hf.hub.upload import HubAccessError, check_model_folder, upload
from bitext_hf.lazy_imports import lazy_exports

# Each public name and the submodule that defines it.
_SUBMODULE_OF = {
    "prepare_dataset_folder": "dataset_card",
    "read_pairs_table": "dataset_card",
    "write_mining_metadata": "dataset_card",
    "POOLING_MODES": "export",
    "HubExportError": "export",
    "push_recipe_output": "export",
    "push_to_hub": "export",
    "save_for_hub": "export",
    "CardFigure": "figures",
    "card_figures": "figures",
    "margin_distribution": "figures",
    "score_histogram": "figures",
    "training_curve": "figures",
    "xsim_heatmap": "figures",
    "MISSING_VALUE": "model_card",
    "ModelCardError": "model_card",
    "available_templates": "model_card",
    "eval_results_from_table": "model_card",
    "figures_markdown": "model_card",
    "load_template": "model_card",
    "markdown_table": "model_card",
    "render_model_card": "model_card",
    "template_fields": "model_card",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _SUBMODULE_OF, globals())
