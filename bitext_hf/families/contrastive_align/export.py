"""The ContrastiveAlignedEncoder as it ships: its model card (the ``contrastive_align`` template) and the trained
encoder as plain transformers + sentence-transformers folders, through the shared ``save_for_hub``.

* :func:`model_card`: the card of the run (objective, base encoder, languages, held-out retrieval), and of each
  per-language export of ``linear`` (``mapped_language``).
* :func:`export_encoders`: the inner encoder without the projector; for ``linear``, one more folder per language
  whose sentence-transformers stack ends with a bias-free Dense layer holding that language's W (mean pooling
  commutes with a linear map, so this equals pooling the mapped token vectors).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from bitext_hf.families.contrastive_align.objectives import unwrap
from bitext_hf.hub import markdown_table, render_model_card, save_for_hub

__all__ = ["export_encoders", "model_card"]

logger = logging.getLogger(__name__)


def model_card(
    objective: str,
    encoder: str,
    languages: Sequence[str],
    results: Mapping[str, float],
    mapped_language: str | None = None,
) -> str:
    """The README.md of an exported encoder: what it is, how it was aligned, the final retrieval numbers (the means
    over languages; per-language keys ``<lang>/<metric>`` stay in ``eval_results.json``). ``mapped_language``: the
    language whose W the export applies (the per-language folders of ``linear``)."""
    rows = [{"metric": key, "value": float(value)} for key, value in sorted(results.items()) if "/" not in key]
    return render_model_card(
        "contrastive_align",
        strict=True,
        encoder=encoder,
        objective=objective,
        languages=", ".join(languages),
        mapped_language=mapped_language,
        results_table=markdown_table(rows or [{"metric": "(no held-out set)", "value": None}], float_format=".4f"),
    )


def export_encoders(
    model: torch.nn.Module,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    model_card: str | Callable[[str | None], str],
) -> dict[str, Path]:
    """Write the trained encoder without the projector: ``<output_dir>`` for English (and every language for the
    fine-tuning objectives), plus ``<output_dir>-<lang>`` per language for ``linear`` (its W as a Dense layer).

    Each folder loads with ``AutoModel.from_pretrained`` (a plain BERT / XLM-R model, no remote code) and with
    ``SentenceTransformer`` (mean pooling, L2-normalized). ``model_card``: the README.md text of every folder, or a
    function of the mapped language (``None`` for ``<output_dir>``) that renders each folder's card, e.g.
    ``functools.partial(model_card, objective, encoder, languages, results)``. Returns {language or "en": folder}.
    """
    card = model_card if callable(model_card) else lambda language: model_card
    aligned = unwrap(model)
    encoder = aligned.encoder
    if aligned.config.layer != encoder.config.num_hidden_layers:
        logger.warning(
            "the exported encoder pools its last layer, but training aligned hidden state %d of %d: use the "
            "full checkpoint's encode() for the aligned layer",
            aligned.config.layer,
            encoder.config.num_hidden_layers,
        )
    options = {"pooling": "mean", "normalize": True, "verify": True}
    output_dir = Path(output_dir)
    folders = {
        "en": save_for_hub(
            encoder, tokenizer, output_dir, model_card=card(None), sentence_transformers=options, remote_code=False
        )
    }
    if aligned.config.objective == "linear":
        for language in aligned.config.languages:
            weight = aligned.linear_map(language).detach().cpu()
            dense = torch.nn.Linear(weight.shape[0], weight.shape[1], bias=False)
            with torch.no_grad():
                dense.weight.copy_(weight.T)  # Linear computes x A^T: A = W^T gives x W
            folders[language] = save_for_hub(
                encoder,
                tokenizer,
                output_dir.with_name(f"{output_dir.name}-{language}"),
                model_card=card(language),
                remote_code=False,
                sentence_transformers={**options, "dense": dense},
            )
    return folders
