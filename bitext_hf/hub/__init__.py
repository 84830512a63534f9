"""Publishing: model cards from templates, Hub-ready export (with sentence-transformers modules), upload."""

from __future__ import annotations

from bitext_hf.hub.export import POOLING_MODES, HubExportError, push_to_hub, save_for_hub
from bitext_hf.hub.model_card import (
    MISSING_VALUE,
    ModelCardError,
    available_templates,
    load_template,
    markdown_table,
    render_model_card,
    template_fields,
)

__all__ = [
    "MISSING_VALUE",
    "POOLING_MODES",
    "HubExportError",
    "ModelCardError",
    "available_templates",
    "load_template",
    "markdown_table",
    "push_to_hub",
    "render_model_card",
    "save_for_hub",
    "template_fields",
]
