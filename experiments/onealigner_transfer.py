"""OneAligner (Niu et al., 2022): the Table 1 scoring ablation without fine-tuning, and the transfer claim (trained on
one pair, as good on pairs never trained on as a model trained on all pairs under the same data budget), over seeds.

Per seed, from scratch:

1. a base: an XLM-R-style encoder (4 layers, width 128, its own Unigram vocabulary, the same for every seed)
   pre-trained by masked LM from the seed on monolingual text of every language, trained and never trained alike (as
   XLM-R saw all its 100 languages), every evaluation sentence removed (``common.gettext_mlm_base``);
2. Table 1 (unsupervised): that base scored four ways, no fine-tuning: mean pooling or BERTScore, each without and
   with the in-batch normalization (``recipes/train_onealigner.py``'s ablation before training);
3. transfer: from that base, OneAligner training on the single pair (default en-fr) and on all training pairs (default
   en-fr, en-de, en-es) with the same example budget, steps, batch and learning rate, both evaluated on pairs never
   trained on (default en-it, en-pt, en-nl, en-sv) and on held-out pairs of the single pair.

Data: English-centred pairs from this machine's gettext catalogs (or ``--pairs`` files); per evaluated language a
fixed draw of ``--eval_size`` pairs (English of 3 to 30 words, translation differing, each side unique), the same for
every seed; no sentence of any evaluation set is in any training or MLM text. Accuracy is the recipe's: top-1 retrieval
in both directions (their mean), normalization in blocks of 256 pairs as the paper evaluates; the order of an
evaluation set, hence its blocks, follows the seed.

    OMP_NUM_THREADS=1 python experiments/onealigner_transfer.py

Writes ``<output_dir>/results.json`` (every seed's numbers, mean and std, sizes and minutes), ``results.md`` (both
tables beside the paper's numbers, and every seed's) and ``model_card.md`` (the card of the first seed's all-pairs run
with those tables); every run's folder stays in ``work/runs/``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

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
    write_card_with_seeds,
    write_results,
)

logger = logging.getLogger("onealigner_transfer")

CONFIG = REPO / "recipes" / "configs" / "onealigner-gettext.yaml"
CARD = "model_card.md"
# Table 1's columns: (key in the recipe's ablation, label), in the paper's order.
VARIANTS = (
    ("mean_pool_no_norm", "mean pooling"),
    ("mean_pool_norm", "mean pooling + normalization"),
    ("bertscore_no_norm", "BERTScore"),
    ("bertscore_norm", "BERTScore + normalization"),
)
# The paper's Table 1: average Tatoeba-36 accuracy of each pretrained model, no fine-tuning, per scoring variant.
PAPER_TABLE1 = {
    "mBERT": (37.1, 45.1, 42.9, 55.1),
    "XLM-R-base": (54.7, 62.9, 48.6, 70.2),
    "XLM-R-large": (47.0, 42.6, 57.5, 72.1),
}
# The paper's transfer numbers (XLM-R-large, 1M-example budget, Tatoeba-36 accuracy): trained on en-fr alone
# (Table 9, per training pair) and on all OPUS-100 pairs (Tables 3 and 7, per language from Table 3; Swedish is not in
# Tatoeba-36).
PAPER_SINGLE = {"fr": 92.7, "de": 92.5, "es": 92.4, "pt": 92.3, "it": 92.3, "nl": 92.4, "sv": 91.8}
PAPER_ALL = {"average": 94.4, "it": 95.4, "pt": 95.6, "nl": 97.7, "fr": 96.3, "de": 99.6, "es": 98.9}
PAPER_GAP = 2.0  # the claim: one rich pair is within this many accuracy points of all pairs
AVERAGE = "unseen average"
# Longer messages (help texts) are paragraphs, not sentences: truncated to a few dozen tokens they would only slow the
# vocabulary down, and the pair readers refuse lines beyond a limit.
MAX_CHARS = 500
TOKENIZER_TEXTS = 100_000  # the vocabulary is learnt from a sample, as recipes/train_onealigner.py learns its own
EVAL_BLOCK = 256  # the paper's evaluation batch: the in-batch normalization's block at evaluation


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="onealigner_transfer", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    add_run_folder_options(parser, "/tmp/onealigner_experiment")
    parser.add_argument(
        "--seeds",
        type=seed_count_or_list,
        default=3,
        help="A count (the first of bitext_hf.evaluation.DEFAULT_SEEDS) or the seeds, e.g. 13,42 (default: 3).",
    )
    parser.add_argument(
        "--train_languages",
        default="fr,de,es",
        help="Languages paired with English in the all-pairs run, comma-separated (default: fr,de,es).",
    )
    parser.add_argument(
        "--single_language",
        default="fr",
        help="The one pair (with English) of the single-pair run, one of --train_languages; its held-out pairs are\n"
        "evaluated too (default: fr).",
    )
    parser.add_argument(
        "--unseen_languages",
        default="it,pt,nl,sv",
        help="Languages evaluated against English and never trained on, comma-separated (default: it,pt,nl,sv).",
    )
    add_pairs_option(parser)
    parser.add_argument(
        "--eval_size", type=int, default=500, help="Evaluation pairs per evaluated language (default: 500)."
    )
    parser.add_argument(
        "--example_budget",
        type=int,
        default=38400,
        help="Training examples drawn for either run, from the single pair or pooled over all pairs by size\n"
        "(the paper's same data budget; 38400 is 600 steps of 64: each example seen once; default: 38400).",
    )
    parser.add_argument("--steps", type=int, default=600, help="OneAligner training steps per run (default: 600).")
    parser.add_argument("--batch", type=int, default=64, help="OneAligner training batch size (default: 64).")
    parser.add_argument(
        "--learning_rate", type=float, default=3e-4, help="OneAligner learning rate, 10%% warm-up (default: 3e-4)."
    )
    parser.add_argument(
        "--mlm_steps",
        type=int,
        default=800,
        help="Masked-LM steps of each seed's base (batch 32, learning rate 5e-4; default: 800).",
    )
    parser.add_argument(
        "--vocab_size", type=int, default=4000, help="Unigram vocabulary size of the base (default: 4000)."
    )
    parser.add_argument(
        "--max_length", type=int, default=32, help="Tokens per sentence, MLM and OneAligner (default: 32)."
    )
    return parser


def languages_of(value: str) -> list[str]:
    return list(dict.fromkeys(language.strip() for language in value.split(",") if language.strip()))


def clean_pairs(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Distinct one-line (English, translation) pairs, both sides non-empty and at most ``MAX_CHARS`` long."""
    kept = (
        (english.strip(), translation.strip())
        for english, translation in pairs
        if not any(mark in english + translation for mark in ("\t", "\n", "\r"))
        and max(len(english), len(translation)) <= MAX_CHARS
    )
    return list(dict.fromkeys(pair for pair in kept if all(pair)))


def evaluation_sample(pairs: list[tuple[str, str]], size: int) -> list[tuple[str, str]]:
    """A fixed draw of sentence-like pairs whose sides are unique in the set: a repeated side would make retrieval
    ambiguous, not wrong."""
    seen: set[str] = set()
    candidates = []
    for english, translation in pairs:
        if 3 <= len(english.split()) <= 30 and english != translation and not {english, translation} & seen:
            seen.update((english, translation))
            candidates.append((english, translation))
    return random.Random(0).sample(candidates, min(size, len(candidates)))


def prepare_data(
    folder: Path, train: list[str], unseen: list[str], single: str, files: dict[str, Path], eval_size: int
) -> tuple[dict[str, dict[str, int]], list[str]]:
    """``eval-xx.tsv`` for the single pair and every unseen language, ``train-xx.tsv`` for every training language
    (English<TAB>xx), none holding an evaluation sentence; returns their sizes and the MLM text: every sentence of
    every language but those of the evaluation sets."""
    from bitext_hf.errors import DataValidationError

    pools = {language: clean_pairs(translation_pairs(language, files)) for language in dict.fromkeys(train + unseen)}
    evaluation = {language: evaluation_sample(pools[language], eval_size) for language in [single, *unseen]}
    held = {text for pairs in evaluation.values() for pair in pairs for text in pair}
    sizes: dict[str, dict[str, int]] = {language: {"available": len(pairs)} for language, pairs in pools.items()}
    for language, pairs in evaluation.items():
        if len(pairs) < 2:
            raise DataValidationError(f"{language}: {len(pairs)} evaluation pair(s) of 3 to 30 English words; need 2")
        write_pairs(folder / f"eval-{language}.tsv", pairs)
        sizes[language]["eval"] = len(pairs)
    for language in train:
        pairs = [pair for pair in pools[language] if not set(pair) & held]
        if not pairs:
            raise DataValidationError(f"{language}: no training pair left once the evaluation sentences are removed")
        write_pairs(folder / f"train-{language}.tsv", pairs)
        sizes[language]["train"] = len(pairs)
    texts = dict.fromkeys(text for pairs in pools.values() for pair in pairs for text in pair if text not in held)
    return sizes, list(texts)


def write_pairs(path: Path, pairs: list[tuple[str, str]]) -> None:
    path.write_text("".join(f"{english}\t{translation}\n" for english, translation in pairs), encoding="utf-8")


def percent(report: dict[str, Any], key: str) -> str:
    return f"{100 * report['mean'][key]:.1f} +- {100 * report['std'][key]:.1f}"


def markdown(report: dict[str, Any], columns: list[str], single: str, train: list[str], regime: str) -> str:
    """Table 1, the transfer table, then every seed's averages; the paper's numbers beside ours."""
    from bitext_hf.hub import markdown_table

    unseen = [column for column in columns if column not in (AVERAGE, f"{single} held-out")]
    table1 = []
    for position, (key, label) in enumerate(VARIANTS):
        row = {"scoring (no fine-tuning)": label}
        row.update({column: percent(report, f"table1/{key}/{column}") for column in columns})
        row.update({f"paper {model}": f"{values[position]:.1f}" for model, values in PAPER_TABLE1.items()})
        table1.append(row)
    names = {"single": f"en-{single} only", "all": "+".join(f"en-{language}" for language in train)}
    transfer = []
    for run, label in (("single", names["single"]), ("all", names["all"]), ("difference", "all - one")):
        transfer.append({"trained on": label, **{column: percent(report, f"{run}/{column}") for column in columns}})
    paper_single = {"trained on": f"paper: en-{single} only"}
    paper_all = {"trained on": "paper: all OPUS-100 pairs"}
    for column in columns:
        language = "average" if column == AVERAGE else column.split(" ")[0]
        paper_single[column] = f"{PAPER_SINGLE[single]:.1f}" if column == AVERAGE and single in PAPER_SINGLE else "-"
        paper_all[column] = f"{PAPER_ALL[language]:.1f}" if language in PAPER_ALL else "-"
    transfer += [paper_single, paper_all]
    seeds = []
    for seed, run in zip(report["seeds"], report["runs"], strict=True):
        row = {"seed": str(seed)}
        row.update({label: f"{100 * run[f'table1/{key}/{AVERAGE}']:.1f}" for key, label in VARIANTS})
        row.update({f"{names[name]} (transfer)": f"{100 * run[f'{name}/{AVERAGE}']:.1f}" for name in names})
        row.update({"all - one": f"{100 * run[f'difference/{AVERAGE}']:+.1f}"})
        row.update({f"{language} all - one": f"{100 * run[f'difference/{language}']:+.1f}" for language in unseen})
        seeds.append(row)
    gaps = [100 * run[f"difference/{AVERAGE}"] for run in report["runs"]]
    within = all(abs(gap) <= PAPER_GAP for gap in gaps)
    paper_gap = PAPER_ALL["average"] - PAPER_SINGLE.get(single, float("nan"))
    claim = (
        f"The claim (paper: one rich pair within {PAPER_GAP} points of all pairs; en-{single} {paper_gap:+.1f}): "
        f"all - one on the unseen average is {percent(report, f'difference/{AVERAGE}')} points here, per seed "
        f"{', '.join(f'{gap:+.1f}' for gap in gaps)}: "
        f"{'within' if within else 'NOT within'} {PAPER_GAP} in every seed."
    )
    return "\n\n".join(
        [
            regime,
            "### Table 1 (unsupervised): retrieval accuracy (%) of each seed's base, no fine-tuning "
            "(paper: Tatoeba-36 average)",
            markdown_table(table1),
            "### Transfer: trained on one pair vs all pairs, same budget; accuracy (%) on pairs never trained on "
            "(paper: Tatoeba-36)",
            markdown_table(transfer),
            claim,
            "### Every seed (unseen average, %)",
            markdown_table(seeds),
        ]
    )


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Per seed: the base, its four scorings, the single-pair and all-pairs runs; write tables, results and card."""
    from transformers import TrainingArguments

    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.training import parse_args
    from bitext_hf.training.tokenizer import train_tokenizer

    train, unseen = languages_of(args.train_languages), languages_of(args.unseen_languages)
    single = args.single_language.strip()
    if not train or not unseen:
        raise UsageError("--train_languages and --unseen_languages: give at least one language each")
    if single not in train:
        raise UsageError(f"--single_language {single}: must be one of --train_languages ({', '.join(train)})")
    if overlap := sorted(set(train) & set(unseen)):
        raise UsageError(f"--unseen_languages: {overlap[0]} is a training language")
    for name in ("eval_size", "example_budget", "steps", "batch", "mlm_steps", "vocab_size", "max_length"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not args.learning_rate > 0:
        raise UsageError(f"--learning_rate must be > 0, got {args.learning_rate}")
    files = pair_files(args.pairs)
    folder = prepare_run_folder(
        args.output_dir, args.overwrite, (CARD,), script=Path(__file__).stem, inputs=files.values()
    )
    recipe = load_recipe("train_onealigner")
    started = time.perf_counter()
    sizes, texts = prepare_data(folder, train, unseen, single, files, args.eval_size)
    # One vocabulary for every seed (its training is deterministic): the bases differ by their MLM run only.
    sample = random.Random(0).sample(texts, min(len(texts), TOKENIZER_TEXTS))
    tokenizer = train_tokenizer(sample, vocab_size=args.vocab_size, model_max_length=args.max_length)
    evaluated = {language: f"en-{language}:eval-{language}.tsv" for language in [*unseen, single]}
    columns = [*unseen, AVERAGE, f"{single} held-out"]
    minutes: dict[str, dict[str, float]] = {}
    data_stats: dict[str, dict[str, Any]] = {}

    def per_column(results: dict[str, float], metric: str) -> dict[str, float]:
        values = {language: results[f"{evaluated[language]}/{metric}"] for language in unseen}
        values[AVERAGE] = sum(values.values()) / len(values)
        values[f"{single} held-out"] = results[f"{evaluated[single]}/{metric}"]
        return values

    def run(name: str, seed: int, base: Path, languages: list[str], initial: bool) -> dict[str, Any]:
        arguments = [
            "--config",
            str(CONFIG),
            "--train_pairs",
            *(f"en-{language}={folder / f'train-{language}.tsv'}" for language in languages),
            "--eval_pairs",
            *(f"en-{language}={folder / f'eval-{language}.tsv'}" for language in evaluated),
            "--held_out",
            "0",
            "--eval_size",
            str(args.eval_size),
            "--eval_batch_size",
            str(EVAL_BLOCK),
            "--eval_before_training",
            str(initial).lower(),
            "--ablation",
            "true",
            "--encoder",
            str(base),
            "--mlm_steps",
            "0",
            "--max_seq_length",
            str(args.max_length),
            "--example_budget",
            str(args.example_budget),
            "--output_dir",
            str(folder / "runs" / f"{name}-seed{seed}"),
            "--seed",
            str(seed),
            "--max_steps",
            str(args.steps),
            "--warmup_steps",
            str(max(1, args.steps // 10)),
            "--learning_rate",
            str(args.learning_rate),
            "--per_device_train_batch_size",
            str(args.batch),
            "--logging_steps",
            str(max(1, args.steps // 10)),
            "--eval_strategy",
            "no",
            "--save_strategy",
            "no",
            "--disable_tqdm",
            "true",
        ]
        results = recipe.main(
            *parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments, args=arguments)
        )
        data_stats[f"{name}-seed{seed}"] = results["data"]
        return json.loads(json.dumps(results))  # the JSON form, as saved

    def evaluate(seed: int) -> dict[str, float]:
        tick = time.perf_counter()
        base = gettext_mlm_base(
            folder,
            texts,
            args.mlm_steps,
            args.vocab_size,
            args.max_length,
            seed=seed,
            tokenizer=tokenizer,
            name=f"base-seed{seed}",
        )
        timing = {"base": (time.perf_counter() - tick) / 60}
        metrics: dict[str, float] = {}
        finals: dict[str, dict[str, float]] = {}
        for name, languages in (("single", [single]), ("all", train)):
            tick = time.perf_counter()
            results = run(name, seed, base, languages, initial=name == "single")
            timing[name] = (time.perf_counter() - tick) / 60
            if name == "single":  # the base before any fine-tuning: Table 1
                for key, _ in VARIANTS:
                    values = per_column(results["initial"], f"ablation_{key}_accuracy")
                    metrics.update({f"table1/{key}/{column}": value for column, value in values.items()})
            finals[name] = per_column(results["final"], "accuracy")
            metrics.update({f"{name}/{column}": value for column, value in finals[name].items()})
        metrics.update(
            {f"difference/{column}": finals["all"][column] - finals["single"][column] for column in columns}
        )
        minutes[str(seed)] = timing
        logger.info("seed %s: %s", seed, {key: round(value, 4) for key, value in metrics.items() if AVERAGE in key})
        return metrics

    report = run_over_seeds(evaluate, args.seeds).to_dict()
    first = report["seeds"][0]
    examples = {name: stats["train_examples"] for name, stats in data_stats.items()}
    source = "gettext UI messages" if not files else f"--pairs files for {', '.join(files)}, else gettext"
    regime = (
        f"Ours: a {args.vocab_size}-piece, 4-layer x 128 XLM-R-style encoder, masked-LM pre-trained for "
        f"{args.mlm_steps} steps (batch 32) per seed on {len(texts):,} sentences ({source}) of "
        f"{', '.join(['en', *dict.fromkeys(train + unseen)])}; hidden state 3 of 4; retrieval accuracy (mean of both "
        f"directions) on {args.eval_size} pairs per language, normalization in blocks of {EVAL_BLOCK}; mean +- "
        f"sample std over seeds {', '.join(map(str, report['seeds']))}. Transfer: {args.steps} steps, batch "
        f"{args.batch}, lr {args.learning_rate}, {args.example_budget:,}-example budget for both runs (examples "
        f"after the token filter, seed {first}: one pair {examples[f'single-seed{first}']:,}, all pairs "
        f"{examples[f'all-seed{first}']:,}); unseen: {', '.join(unseen)}, never trained on. Paper: mBERT / XLM-R "
        "pre-trained on CC-100 (100 languages, TBs), layer 8 of 12 (17 of 24); Tatoeba-36 average (36 languages, 1000 "
        "pairs each); transfer with XLM-R-large, 1M examples, 3 epochs, lr 3e-6, and Tatoeba-36 includes the trained "
        "language."
    )
    table = markdown(report, columns, single, train, regime)
    summary = {
        "experiment": "onealigner_transfer",
        "languages": {"train": train, "single": single, "unseen": unseen},
        "pairs per language": sizes,
        "mlm sentences": len(texts),
        "settings": {name: getattr(args, name) for name in ("eval_size", "example_budget", "steps", "batch")}
        | {"learning_rate": args.learning_rate, "mlm_steps": args.mlm_steps, "vocab_size": args.vocab_size}
        | {"max_length": args.max_length},
        "data per run": data_stats,
        "minutes per seed": minutes,
        "total minutes": (time.perf_counter() - started) / 60,
        "report": report,
    }
    write_card_with_seeds(
        folder / "runs" / f"all-seed{first}",
        args.output_dir,
        table,
        "Over seeds (experiments/onealigner_transfer.py): Table 1 and the transfer claim beside the paper",
    )
    write_results(args.output_dir, summary, table)
    return summary


if __name__ == "__main__":
    run_script(main, build_parser())
