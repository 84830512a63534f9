"""The facts every model card states, in words a Hub reader understands, whatever the family.

* Where to load it from: the repository id when it is known, else :data:`REPO_ID_PLACEHOLDER`, a marked placeholder
  that :func:`fill_repo_id` replaces when the folder is pushed (``bitext-hf push --repo``, a recipe's
  ``--push_to_hub``), so a card written before its repository existed still loads as printed.
* What it was trained on (:func:`describe_data`): languages, pair counts, the source and the licence of the data,
  from the recipes' data specs (``fr=gettext``, ``wol=hub:org/name:config``, ``fr=a.fr,a.en``...).
* What it is not (:func:`quality_warnings`): a plain warning for a smoke run and for every number that is worse than
  the teacher's or the baseline's.

The smoke-run rule: a run of fewer than :data:`SMOKE_STEPS` optimizer steps, or one a caller marks as smoke (a smoke
configuration), is a smoke run. The papers' runs are tens of thousands of steps; a few hundred steps show that a
pipeline runs, not what a method achieves, even when a tiny evaluation set happens to score well.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_LICENSE",
    "LOAD_NOTE",
    "REPO_ID_PLACEHOLDER",
    "SMOKE_STEPS",
    "Comparison",
    "DataDescription",
    "describe_data",
    "describe_encoder",
    "fill_repo_id",
    "hub_model_id",
    "is_smoke_run",
    "language_codes",
    "load_fields",
    "quality_warnings",
]

REPO_ID_PLACEHOLDER = "<your-username>/<model-name>"
# The sentence shown above the load snippets while the id is not known; fill_repo_id removes it with the placeholder.
LOAD_NOTE = (
    f"Replace `{REPO_ID_PLACEHOLDER}` with the repository id of this model on the Hub, or with the path of its "
    "local folder (`bitext-hf push --repo` and the recipes' `--push_to_hub` fill it in when they upload the folder)."
)
SMOKE_STEPS = 1000
# The licence of the card's YAML: bitext-hf's own. The data's licences are stated in words beside it (see
# describe_data): a model trained on gettext catalogs may also be bound by the terms of their packages.
DEFAULT_LICENSE = "apache-2.0"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[\w.-]{1,96})?$")
_NOT_MODELS = {"random", "default", "none"}

_GETTEXT_WORDS = (
    "the gettext translation catalogs (`.mo` files) of the software installed on the training machine: user "
    "interface messages and their human translations, as in OPUS's GNOME, KDE and Ubuntu corpora"
)
_GETTEXT_LICENCE = (
    "each catalog carries the licence of its software package (mostly GPL, LGPL, BSD or MIT); this data is "
    "not published with this model, but its weights were trained on it"
)


def fill_repo_id(card: str, repo_id: str) -> str:
    """``card`` with the repository placeholder replaced by ``repo_id`` and its note removed (a card that names its
    repository already is returned as it is)."""
    return card.replace(LOAD_NOTE + "\n\n", "").replace(LOAD_NOTE, "").replace(REPO_ID_PLACEHOLDER, repo_id)


def load_fields(repo_id: str | None) -> dict[str, str]:
    """The ``model_id`` and ``load_note`` fields of the templates' load snippets."""
    if repo_id:
        return {"model_id": repo_id, "load_note": ""}
    return {"model_id": REPO_ID_PLACEHOLDER, "load_note": LOAD_NOTE}


def hub_model_id(name: str | None) -> str | None:
    """``name`` when it names a Hub model (``org/name`` or a legacy ``name``), not a local folder, a random
    initialization or the offline default: the card's ``base_model``."""
    if not name or name.lower() in _NOT_MODELS or Path(name).exists() or not _HUB_ID.match(name):
        return None
    return name


def describe_encoder(name: str) -> str:
    """The base encoder as a card's reader should see it: a Hub id as it is, ``random`` in words, and a local folder
    by its last part only (the full path says nothing on the Hub and tells where the trainer's files were)."""
    if name == "random":
        return "a randomly initialized XLM-R-like encoder"
    if hub_model_id(name) is None and (Path(name).exists() or "/" in name or "\\" in name):
        return f"a local encoder (`{Path(name).name or name}`)"
    return name


def language_codes(codes: Sequence[str]) -> list[str]:
    """The Hub's ``language`` values (ISO 639 codes) of data language codes: ``pt_BR`` -> ``pt``, ``wol_Latn`` ->
    ``wol``; sorted, without repeats."""
    return sorted({code.replace("-", "_").split("_")[0].lower() for code in codes if code})


@dataclass
class DataDescription:
    """Training or evaluation data in words (``markdown``, one bullet per source), with the card metadata it gives:
    ``languages`` (ISO codes) and ``datasets`` (Hub dataset ids; local sources by a short name in parentheses)."""

    markdown: str
    languages: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)


def _count(counts: Mapping[str, Any] | None, *keys: str) -> str:
    for key in keys:
        value = (counts or {}).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return f"{int(value):,} "
    return ""


def describe_data(
    specs: Sequence[str], counts: Mapping[str, Any] | None = None, *, monolingual: Sequence[str] = ()
) -> DataDescription:
    """``specs`` (the recipes' ``LANGS=SOURCE`` pair specs) and ``monolingual`` (``xx=SOURCE`` text specs) in words.

    ``counts``: pairs used, by spec, by display name (``fr-en:gettext``) or by language; a bullet says the count when
    one of these keys has it. A spec that does not parse is quoted as it is.
    """
    from bitext_hf.data.specs import parse_spec

    lines, languages, datasets = [], [], []
    for spec, is_text in [*((s, False) for s in specs), *((s, True) for s in monolingual)]:
        try:
            parsed = parse_spec(spec, monolingual=is_text)
        except ValueError:
            lines.append(f"- `{spec}`")
            continue
        sides = [parsed.src_lang] + ([parsed.tgt_lang] if parsed.tgt_lang else [])
        languages += sides
        what = f"monolingual `{parsed.src_lang}` sentences" if is_text else "`" + "`-`".join(sides) + "` pairs"
        # Counts by language are pairs: a monolingual corpus of the same language has its own count, by spec only.
        number = _count(counts, spec) if is_text else _count(counts, spec, parsed.name, parsed.src_lang)
        if parsed.kind == "gettext":
            lines.append(f"- {number}{what} from {_GETTEXT_WORDS}. Licence: {_GETTEXT_LICENCE}.")
            datasets.append("(gettext translation catalogs)")
        elif parsed.kind == "hub":
            where = ", ".join(part for part in (parsed.config, f"split `{parsed.split}`") if part)
            lines.append(
                f"- {number}{what} from the Hub dataset [`{parsed.dataset}`](https://huggingface.co/datasets/"
                f"{parsed.dataset}) ({where}). Licence: that of the dataset (see its card)."
            )
            datasets.append(parsed.dataset)
        else:
            files = ", ".join(f"`{Path(path).name}`" for path in parsed.paths)
            lines.append(f"- {number}{what} from local files ({files}). Licence: that of their source.")
            datasets.append(f"(local files: {', '.join(Path(path).name for path in parsed.paths)})")
    return DataDescription(
        "\n".join(lines) or "- (not recorded)", language_codes(languages), list(dict.fromkeys(datasets))
    )


def is_smoke_run(steps: int | None, *, smoke: bool = False) -> bool:
    """Whether a run is a smoke run: marked so, or fewer than :data:`SMOKE_STEPS` optimizer steps (when known)."""
    return smoke or (steps is not None and 0 <= int(steps) < SMOKE_STEPS)


@dataclass(frozen=True)
class Comparison:
    """One number of this model beside a reference's (the teacher, the model before training, a baseline)."""

    metric: str
    value: float | None
    reference: str
    reference_value: float | None
    lower_is_better: bool

    @property
    def worse(self) -> bool:
        if self.value is None or self.reference_value is None:
            return False
        return self.value > self.reference_value if self.lower_is_better else self.value < self.reference_value


def quality_warnings(
    *,
    steps: int | None = None,
    smoke: bool = False,
    comparisons: Sequence[Comparison] = (),
    notes: Sequence[str] = (),
) -> list[str]:
    """Plain warnings for the card's limitations: ``notes`` first (what the run itself says of its configuration,
    such as ``bitext_hf.training``'s note that an offline configuration ran in place of the paper's setup), a smoke
    run (see :func:`is_smoke_run`), and each comparison in which this model is worse than its reference. Empty when
    there is nothing to warn about."""
    warnings = list(notes)
    if is_smoke_run(steps, smoke=smoke):
        how = f"{steps} optimizer steps" if steps is not None else "a smoke configuration"
        rule = f" (fewer than {SMOKE_STEPS} steps: bitext-hf's smoke-run rule)" if steps is not None else ""
        warnings.append(
            f"**Smoke run, not a usable model.** It was trained for {how}{rule} to check that the pipeline runs. "
            "Its numbers say nothing about what the method achieves, even where a tiny evaluation set scores well; "
            "do not use it to mine or filter data."
        )
    for item in comparisons:
        if item.worse:
            better = "lower" if item.lower_is_better else "higher"
            warnings.append(
                f"**Worse than {item.reference}:** {item.metric} {item.value:.2f} against {item.reference_value:.2f} "
                f"for {item.reference} ({better} is better)."
            )
    return warnings
