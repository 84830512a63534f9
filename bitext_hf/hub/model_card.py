"""Model cards: fill a Markdown template (shipped in ``bitext_hf.model_cards`` or given) with a run's facts.

Templates are Markdown with YAML front matter and ``{field}`` placeholders (``{field:.2f}`` takes a format spec;
``{{`` and ``}}`` are literal braces, as in ``str.format``). Unlike ``str.format``, braces that do not enclose an
identifier are left alone, so code examples with dicts need no escaping. Values are converted before insertion:
a dict becomes a bullet list (``- **key**: value``), a list of dicts a Markdown table, anything else ``str()``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = [
    "MISSING_VALUE",
    "ModelCardError",
    "available_templates",
    "load_template",
    "markdown_table",
    "render_model_card",
    "template_fields",
]

logger = logging.getLogger(__name__)

MISSING_VALUE = "[More Information Needed]"  # the Hub's own placeholder for unknown card fields
_TEMPLATE_PACKAGE = "bitext_hf.model_cards"
# One pass, left to right: an escaped brace ({{ or }}) or a placeholder {name} / {name:spec}.
_TOKEN = re.compile(r"(\{\{)|(\}\})|\{([A-Za-z_]\w*)(?::([^{}]*))?\}")


class ModelCardError(ValueError):
    """A template cannot be found or rendered with the given fields."""


def available_templates() -> list[str]:
    """Names of the templates shipped with the package (``generic``, ``onealigner``, ``laser3``, ...)."""
    folder = resources.files(_TEMPLATE_PACKAGE)
    return sorted(entry.name[: -len(".md")] for entry in folder.iterdir() if entry.name.endswith(".md"))


def load_template(template: str | os.PathLike) -> str:
    """The text of ``template``: a shipped template name, a path to a Markdown file, or the template text itself.

    Text is recognised by containing a newline; a single line is a name or a path.
    """
    if isinstance(template, str) and "\n" in template:
        return template
    name = str(template)
    shipped = resources.files(_TEMPLATE_PACKAGE) / f"{name}.md"
    if "/" not in name and os.sep not in name and shipped.is_file():
        return shipped.read_text(encoding="utf-8")
    path = Path(template)
    if path.is_file():
        return path.read_text(encoding="utf-8")
    raise ModelCardError(
        f"model card template {name!r} is neither a shipped template ({', '.join(available_templates())}) "
        f"nor an existing file"
    )


def template_fields(template_text: str) -> list[str]:
    """The placeholder names used in ``template_text``, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(template_text):
        if match.group(3):
            seen.setdefault(match.group(3), None)
    return list(seen)


def markdown_table(rows: Sequence[Mapping[str, Any]], float_format: str = ".2f") -> str:
    """A Markdown table from a list of dicts (columns in order of first appearance; floats formatted)."""
    if not rows:
        return MISSING_VALUE
    columns: dict[str, None] = {}
    for row in rows:
        for key in row:
            columns.setdefault(str(key), None)

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, float):
            return format(value, float_format)
        return str(value).replace("|", "\\|").replace("\n", " ")

    header = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(cell(row.get(column)) for column in columns) + " |" for row in rows]
    return "\n".join([header, rule, *body])


def _to_markdown(value: Any) -> str:
    if isinstance(value, Mapping):
        return "\n".join(f"- **{key}**: {item}" for key, item in value.items()) or MISSING_VALUE
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, Mapping) for item in value):
        return markdown_table(value)
    return str(value)


def render_model_card(
    template: str | os.PathLike,
    *,
    card_data: Mapping[str, Any] | None = None,
    strict: bool = False,
    **fields: Any,
) -> str:
    """Fill ``template`` with ``fields`` and return the model card text (Markdown with YAML front matter).

    Args:
        template: a shipped template name (see :func:`available_templates`), a path, or the template text.
        card_data: metadata merged into the YAML front matter (``language``, ``license``, ``datasets``,
            ``base_model``, ``tags``, ...), validated by ``huggingface_hub.ModelCard``.
        strict: raise when the template uses a field that was not given; by default it is filled with
            ``[More Information Needed]`` (the Hub's convention) and a warning is logged.
        **fields: the placeholder values.

    Raises:
        ModelCardError: the template is not found, a field is given that the template does not use (a typo would
            otherwise vanish silently), a field is missing with ``strict=True``, or a format spec does not fit.
    """
    text = load_template(template)
    used = template_fields(text)
    unknown = sorted(set(fields) - set(used))
    if unknown:
        raise ModelCardError(f"model card fields {unknown} are not used by the template (it uses: {', '.join(used)})")
    missing = [name for name in used if name not in fields]
    if missing and strict:
        raise ModelCardError(f"model card template needs the fields {missing}")
    if missing:
        logger.warning("Model card fields not given, filled with %s: %s", MISSING_VALUE, ", ".join(missing))

    def substitute(match: re.Match) -> str:
        if match.group(1) or match.group(2):
            return match.group(0)[0]
        name, spec = match.group(3), match.group(4)
        if name not in fields:
            return MISSING_VALUE
        value = fields[name]
        if spec:
            try:
                return format(value, spec)
            except (TypeError, ValueError) as error:
                raise ModelCardError(f"model card field {name!r}={value!r} does not fit format {spec!r}") from error
        return _to_markdown(value)

    rendered = _TOKEN.sub(substitute, text)
    if card_data:
        from huggingface_hub import ModelCard

        card = ModelCard(rendered, ignore_metadata_errors=False)
        for key, value in card_data.items():
            card.data[key] = value
        rendered = str(card)
    return rendered
