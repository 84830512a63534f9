"""Model cards: a family's Jinja2 template rendered by ``huggingface_hub.ModelCard`` with a run's facts.

A template (shipped in ``bitext_hf.model_cards`` or given as a path or text) is Markdown with YAML front matter and
Jinja2 placeholders (``{{ field }}``, ``{% if field %}...{% endif %}``, ``{% raw %}`` around literal ``{{``). The
front matter holds the family's default metadata (``library_name``, ``pipeline_tag``, ``tags``); ``card_data``
adds to it (tags are merged, other keys replace) and ``huggingface_hub.ModelCardData`` validates and writes it,
with ``eval_results`` as the ``model-index`` the Hub shows as the evaluation table of the model page.

Values are converted before insertion: a dict becomes a bullet list (``- **key**: value``), a list of dicts a
Markdown table, anything else ``str()``. ``figures`` (see :mod:`bitext_hf.hub.figures`) become the ``figures``
field: one Markdown image with its caption each, linked by file name (``save_for_hub(..., figures=...)`` puts the
files next to README.md).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MISSING_VALUE",
    "OPTIONAL_FIELDS",
    "ModelCardError",
    "available_templates",
    "eval_results_from_table",
    "figures_markdown",
    "load_template",
    "markdown_table",
    "render_model_card",
    "template_fields",
]

logger = logging.getLogger(__name__)

MISSING_VALUE = "[More Information Needed]"  # the Hub's own placeholder for unknown card fields
_TEMPLATE_PACKAGE = "bitext_hf.model_cards"
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
# Names the renderer provides itself: the YAML block (huggingface_hub's convention) and the figures section.
_RESERVED = {"card_data", "figures"}
# Fields a card shows only when there is something to say (a warning, the note beside a placeholder repository id):
# left out, they are empty rather than "[More Information Needed]", and strict rendering does not ask for them.
OPTIONAL_FIELDS = frozenset({"warnings", "load_note"})
TASK_TYPE = "sentence-similarity"  # the Hub task id of every family (and their pipeline_tag)

# The results tables the recipes pass to the shipped templates, read into model-index entries when no
# ``eval_results`` are given: template -> (field, column naming the evaluation set, {column: (metric type, name)}).
# laser3's "teacher zero-shot" and "student before" columns are not this model's results and stay out.
_TABLE_METRICS: dict[str, tuple[str, str, dict[str, tuple[str, str]]]] = {
    "laser3": ("xsim_table", "language", {"student after": ("xsim", "xsim error rate (%)")}),
    "onealigner": (
        "results_table",
        "evaluation set",
        {"accuracy (%)": ("accuracy", "retrieval accuracy (%)"), "xsim (%)": ("xsim", "xsim error rate (%)")},
    ),
}


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


def _parse(template_text: str):
    import jinja2

    try:
        return jinja2.Environment().parse(template_text)
    except jinja2.TemplateSyntaxError as error:
        raise ModelCardError(f"model card template, line {error.lineno}: {error.message}") from error


def template_fields(template_text: str) -> list[str]:
    """The placeholder names used in the body of ``template_text`` (sorted), without the renderer's own."""
    from jinja2 import meta

    _, body = _split_front_matter(template_text)
    return sorted(set(meta.find_undeclared_variables(_parse(body))) - _RESERVED)


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


def figures_markdown(figures: Sequence[Any]) -> str:
    """Markdown for ``figures``: an image linked by file name and its caption in italics, for each.

    Each figure is a :class:`bitext_hf.hub.figures.CardFigure` (or anything with ``path`` and ``caption``), or a
    plain path (captioned with its file name).
    """
    blocks = []
    for figure in figures:
        path = Path(getattr(figure, "path", figure))
        caption = str(getattr(figure, "caption", path.stem.replace("_", " ")))
        # The alt text is the file's name in words ("xsim heatmap"); the caption below says what it shows.
        blocks.append(f"![{path.stem.replace('_', ' ')}]({path.name})\n\n*{caption}*")
    return "\n\n".join(blocks)


def _to_markdown(value: Any) -> Any:
    if isinstance(value, Mapping):
        return "\n".join(f"- **{key}**: {item}" for key, item in value.items()) or MISSING_VALUE
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, Mapping) for item in value):
        return markdown_table(value)
    return value  # Jinja2 writes it with str(), and filters (format, round) still see numbers as numbers


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is no result


def eval_results_from_table(
    rows: Sequence[Mapping[str, Any]],
    *,
    set_column: str,
    metrics: Mapping[str, tuple[str, str]],
    dataset_type: str = "held-out",
    dataset_name: str = "Held-out pairs",
    task_name: str = "Bitext mining",
) -> list[Any]:
    """``huggingface_hub.EvalResult`` entries (model-index) from the rows of a results table.

    Args:
        rows: one dict per evaluation set; ``set_column`` names the set (the result's ``dataset_config``).
        metrics: ``{column: (metric_type, metric_name)}`` for the columns that hold this model's numbers; cells that
            are missing or not numbers are skipped.
        dataset_type (str, defaults to "held-out"): the dataset id of the evaluation data.
        dataset_name (str, defaults to "Held-out pairs"): the display name of the evaluation data.
        task_name: the display name of the task (its type is ``sentence-similarity``).
    """
    from huggingface_hub import EvalResult

    results = []
    for row in rows:
        for column, (metric_type, metric_name) in metrics.items():
            value = _number(row.get(column))
            if value is None:
                continue
            results.append(
                EvalResult(
                    task_type=TASK_TYPE,
                    task_name=task_name,
                    dataset_type=dataset_type,
                    dataset_name=dataset_name,
                    dataset_config=str(row.get(set_column, "")) or None,
                    metric_type=metric_type,
                    metric_name=metric_name,
                    metric_value=round(value, 4),
                )
            )
    return results


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    try:
        metadata = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as error:
        raise ModelCardError(f"model card template: invalid YAML front matter ({error})") from error
    if not isinstance(metadata, dict):
        raise ModelCardError("model card template: the front matter must be a YAML mapping")
    return metadata, text[match.end() :]


def _card_data(defaults: Mapping[str, Any], card_data: Mapping[str, Any], eval_results: list[Any], title: str):
    from huggingface_hub import EvalResult, ModelCardData

    metadata = dict(defaults)
    for key, value in card_data.items():
        if key == "tags":
            extra = [value] if isinstance(value, str) else list(value)
            metadata["tags"] = list(dict.fromkeys([*metadata.get("tags", []), *extra]))
        else:
            metadata[key] = value
    entries = []
    for entry in eval_results:
        entries.append(entry if isinstance(entry, EvalResult) else EvalResult(**entry))
    if entries:
        metadata["eval_results"] = entries
        if not metadata.get("model_name"):  # the model-index needs a name: the card's title
            metadata["model_name"] = title
    try:
        return ModelCardData(**metadata)
    except (TypeError, ValueError) as error:
        raise ModelCardError(f"model card metadata: {error}") from error


def render_model_card(
    template: str | os.PathLike,
    *,
    card_data: Mapping[str, Any] | None = None,
    eval_results: Sequence[Any] | None = None,
    figures: Sequence[Any] = (),
    strict: bool = False,
    **fields: Any,
) -> str:
    """Fill ``template`` with ``fields`` and return the model card text (Markdown with YAML front matter).

    Args:
        template: a shipped template name (see :func:`available_templates`), a path, or the template text.
        card_data: metadata for the YAML front matter (``language``, ``license``, ``datasets``, ``base_model``,
            ``tags``, ``model_name``, ...) on top of the template's own, validated by ``huggingface_hub``.
        eval_results: ``huggingface_hub.EvalResult`` objects (or dicts of their arguments), written as the
            ``model-index`` that the Hub shows on the model page. When not given, the shipped ``laser3`` and
            ``onealigner`` templates read them from their results table field (see :func:`eval_results_from_table`).
        figures: figures shown in the card's ``figures`` field (see :func:`figures_markdown`).
        strict: raise when the template uses a field that was not given; by default it is filled with
            ``[More Information Needed]`` (the Hub's convention) and a warning is logged.
        **fields: the placeholder values.

    Raises:
        ModelCardError: the template is not found or not valid Jinja2, a field is given that the template does not use
            (a typo would otherwise vanish silently), a field is missing with ``strict=True``, or invalid metadata.
    """
    from huggingface_hub import ModelCard

    text = load_template(template)
    defaults, body = _split_front_matter(text)
    used = template_fields(text)
    card_data = dict(card_data or {})
    unknown = sorted(set(fields) - set(used))
    if unknown:
        raise ModelCardError(f"model card fields {unknown} are not used by the template (it uses: {', '.join(used)})")
    optional = {name: "" for name in OPTIONAL_FIELDS & set(used) if name not in fields}
    missing = [name for name in used if name not in fields and name not in card_data and name not in optional]
    if missing and strict:
        raise ModelCardError(f"model card template needs the fields {missing}")
    if missing:
        logger.warning("Model card fields not given, filled with %s: %s", MISSING_VALUE, ", ".join(missing))

    if eval_results is None:
        eval_results = []
        field, set_column, metrics = _TABLE_METRICS.get(str(template), (None, "", {}))
        table = fields.get(field) if field else None
        if isinstance(table, (list, tuple)) and all(isinstance(row, Mapping) for row in table):
            eval_results = eval_results_from_table(table, set_column=set_column, metrics=metrics)
    values = {name: _to_markdown(value) for name, value in fields.items()}
    values.update({name: MISSING_VALUE for name in missing}, **optional)
    values["figures"] = figures_markdown(figures)
    import jinja2

    try:
        # The title (first "# " line of the rendered body) names the model in the model-index when card_data
        # has no model_name; ModelCard.from_template then renders the whole card with the metadata.
        heading = re.search(r"^# (.+)$", jinja2.Template(body).render({**card_data, **values}), re.MULTILINE)
        title = heading.group(1).strip() if heading else "bitext-hf model"
        data = _card_data(defaults, card_data, list(eval_results), title)
        card = ModelCard.from_template(data, template_str="---\n{{ card_data }}\n---\n" + body, **values)
    except (jinja2.TemplateError, TypeError, ValueError) as error:  # e.g. a format filter given text
        raise ModelCardError(f"model card template cannot be rendered: {error}") from error
    rendered = str(card)
    return rendered if rendered.endswith("\n") else rendered + "\n"
