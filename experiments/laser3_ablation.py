"""LASER3 (Heffernan et al., 2022) on languages the offline teacher never saw: distillation only, + MLM, + MLM +
curriculum (the paper's Tables 1 and 3), xsim against the teacher's zero-shot, mean +- sample std over seeds.

The offline teacher (USE v3, 16 languages) never saw the default languages, Georgian and Greek. Per language, real
translation pairs from this machine's gettext catalogs (or ``--pairs`` files): ``--eval_pairs`` held-out pairs
(English side of at least three words), ``--train_pairs`` training pairs, the remaining translations (their English
dropped) as monolingual MLM text, after the paper's low-resource Wolof set-up; no held-out sentence is in any
training file. One student for all languages (2 x 256, 4 heads, FFN 512, 8k Unigram vocabulary trained by the first
run and shared by every other one), batch 64, lr 1e-3, through ``recipes/distill_wolof.py``.

    OMP_NUM_THREADS=1 python experiments/laser3_ablation.py --steps 1500 --seeds 42,43

Writes ``<output_dir>/results.json`` (every run, mean and std, the teacher's zero-shot xsim, and what explains the
table without training: the share of batches per task, epochs over each data set, the curriculum's prefix lengths)
and ``<output_dir>/results.md``. Every seed trains every variant before the next seed starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    add_pairs_option,
    add_run_folder_options,
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

logger = logging.getLogger("laser3_ablation")

VARIANTS = {
    "distillation": ["--mask_weight", "0", "--curriculum_increment", "1.0"],
    "+ MLM": ["--curriculum_increment", "1.0"],
    # Prefix stages 10%..90% share the first half of the run, whole sentences the second half.
    "+ MLM + curriculum": ["--curriculum_increment", "0.1", "--curriculum_fraction", "0.5"],
    # The even split: each of the 10 stages gets a tenth of the run (whole sentences only in the last tenth).
    "+ MLM + curriculum (even split)": ["--curriculum_increment", "0.1"],
}
TASKS = ("distil", "self", "mask")
# The paper's Table 3 (Wolof, xsim against English on FLORES devtest): the ablation this script reproduces.
PAPER_WOLOF = {"distillation": 21.05, "+ MLM": 12.65, "+ MLM + curriculum": 5.93}
BATCH_SIZE = 64
MAX_LENGTH = 64


def run_name(variant: str) -> str:
    """The run folder's name part of a variant, e.g. ``plus_MLMplus_curriculum``."""
    return variant.replace(" ", "").replace("+", "plus_").replace("(", "-").replace(")", "")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="laser3_ablation", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    add_run_folder_options(parser, "/tmp/laser3_experiment")
    parser.add_argument("--languages", default="ka,el", help="Student languages, comma-separated (default: ka,el).")
    add_pairs_option(parser)
    parser.add_argument("--train_pairs", type=int, default=4000, help="Training pairs per language (default: 4000).")
    parser.add_argument(
        "--monolingual",
        type=int,
        default=None,
        help="Monolingual sentences per language (default: every translation left after the pairs).",
    )
    parser.add_argument("--eval_pairs", type=int, default=1000, help="Held-out pairs per language (default: 1000).")
    parser.add_argument(
        "--english_anchors",
        type=int,
        default=2000,
        help="English sentences beyond the training pairs for the self task (English -> teacher's English), the "
        "paper's anchor set; drawn from the English side of --anchor_language's catalogs (or --pairs file), no "
        "sentence of any student language's pairs among them; 0: the training pairs' English only (default: 2000).",
    )
    parser.add_argument(
        "--anchor_language",
        default="fr",
        help="Whose translation pairs give the English anchors: only their English side is used (default: fr).",
    )
    parser.add_argument("--steps", type=int, default=1500, help="Training steps per run (default: 1500).")
    parser.add_argument("--warmup", type=int, default=200, help="Warm-up steps (default: 200).")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"Students, comma-separated, among: {', '.join(VARIANTS)} (default: all).",
    )
    parser.add_argument(
        "--group_by_length",
        type=true_or_false,
        default=True,
        help="true: batches of sentences of similar length; false: sampled uniformly (default: true).",
    )
    parser.add_argument(
        "--seeds",
        type=seed_count_or_list,
        default=5,
        help="A count (the first of bitext_hf.evaluation.DEFAULT_SEEDS) or the seeds, e.g. 42,43; one seed: 42, "
        "(default: 5).",
    )
    parser.add_argument(
        "--curve_steps",
        type=int,
        default=0,
        help="N > 0: every N steps measure xsim and the distillation loss (1 - cos) on the training and on the "
        "held-out pairs, to see over-fitting; must divide --steps (default: 0, off).",
    )
    parser.add_argument(
        "--mlm_batch_blocks",
        type=int,
        default=16,
        help="Blocks of monolingual text (up to 64 subwords each) per MLM batch: about the tokens of a batch of 64 "
        "short sentences, as fairseq's token-based batches give (default: 16).",
    )
    parser.add_argument(
        "--vocab_size", type=int, default=8000, help="Student vocabulary size when trained (default: 8000)."
    )
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="A student tokenizer folder for every run (default: the one the first run trains).",
    )
    return parser


def prepare_data(
    folder: Path,
    languages: list[str],
    files: dict[str, Path],
    train_pairs: int,
    eval_pairs: int,
    monolingual_cap: int | None = None,
    anchors: int = 0,
    anchor_language: str = "fr",
) -> dict[str, dict[str, int]]:
    """Per language ``<xx>-train.tsv``, ``<xx>-eval.tsv`` and ``<xx>-mono.txt`` in ``folder``, and with ``anchors``
    ``english-anchors.txt``: English sentences of ``anchor_language``'s pairs that are in no pair of the student
    languages; their sizes."""
    from bitext_hf.errors import DataValidationError

    sizes: dict[str, dict[str, int]] = {}
    seen: set[str] = set()  # every text of the student languages' pairs: the anchors must be new English
    for language in languages:
        pairs = translation_pairs(language, files)
        rng = np.random.default_rng(0)
        candidates = [index for index, (english, _) in enumerate(pairs) if len(english.split()) >= 3]
        if len(candidates) < eval_pairs:
            raise DataValidationError(
                f"{language}: {len(candidates)} pairs with an English side of 3 words or more, --eval_pairs is "
                f"{eval_pairs}"
            )
        held = set(rng.choice(candidates, size=eval_pairs, replace=False).tolist())
        evaluation = [pairs[index] for index in sorted(held)]
        held_texts = {text for pair in evaluation for text in pair}
        seen.update(text for pair in pairs for text in pair)
        rest = [
            pairs[i] for i in rng.permutation(len(pairs)) if i not in held and not held_texts.intersection(pairs[i])
        ]
        train, monolingual = rest[:train_pairs], [translation for _, translation in rest[train_pairs:]]
        monolingual = monolingual[:monolingual_cap] if monolingual_cap is not None else monolingual
        for name, lines in (
            (f"{language}-train.tsv", [f"{english}\t{translation}" for english, translation in train]),
            (f"{language}-eval.tsv", [f"{english}\t{translation}" for english, translation in evaluation]),
            (f"{language}-mono.txt", monolingual),
        ):
            (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        sizes[language] = {"train": len(train), "monolingual": len(monolingual), "eval": len(evaluation)}
        sizes[language]["monolingual per pair"] = round(len(monolingual) / max(1, len(train)), 2)
    if anchors > 0:
        english = sorted({english for english, _ in translation_pairs(anchor_language, files)} - seen)
        if len(english) < anchors:
            raise DataValidationError(
                f"{anchor_language}: {len(english)} English sentences outside the student languages' pairs, "
                f"--english_anchors is {anchors}"
            )
        chosen = [english[i] for i in np.random.default_rng(0).choice(len(english), size=anchors, replace=False)]
        (folder / "english-anchors.txt").write_text("".join(line + "\n" for line in chosen), encoding="utf-8")
        sizes["english anchors"] = {"sentences": anchors, "from": anchor_language}  # type: ignore[dict-item]
    return sizes


def curve_evaluator(base: type, train_pairs: list[Any], eval_pairs: int, curves: list[dict[str, float]]) -> Any:
    """A drop-in for the recipe's XsimEvaluator whose periodic (Trainer) calls also measure over-fitting: xsim and the
    distillation loss (mean 1 - cos of student(xx) and teacher(English), the training loss without dropout) on the
    training pairs and on the held-out pairs; each call appends its values to ``curves``."""
    import torch

    from bitext_hf.evaluation.metrics.functional import xsim, xsim_micro_average
    from bitext_hf.families.laser3.evaluation import StudentEncoder
    from bitext_hf.modeling.laser3 import cosine_distillation_loss

    # As many training pairs as held-out pairs, so both xsim search among the same number of candidates.
    train_sample = [
        dataclasses.replace(pairs, src=pairs.src[:eval_pairs], tgt=pairs.tgt[:eval_pairs]) for pairs in train_pairs
    ]

    class CurveEvaluator(base):
        def __call__(self, model: Any) -> dict[str, float]:
            # One encoding per split gives both its xsim (as XsimEvaluator computes it) and its loss.
            encoder = StudentEncoder(model, self.tokenizer, max_length=self.max_length)
            point: dict[str, float] = {}
            held_out = []
            for split, bitexts in (("heldout", self.bitexts), ("train", train_sample)):
                for pairs in bitexts:
                    student = np.asarray(encoder.encode(pairs.src, batch_size=self.batch_size), dtype=np.float32)
                    teacher = np.asarray(self.cache.get(pairs.tgt, 1.0), dtype=np.float32)
                    scores = xsim(student, teacher, k=4, margin="ratio", target_texts=pairs.tgt)
                    held_out += [(pairs.src_lang, scores)] if split == "heldout" else []
                    point[f"xsim_{split}_{pairs.src_lang}"] = float(scores["xsim"])
                    loss = cosine_distillation_loss(torch.from_numpy(student), torch.from_numpy(teacher))
                    point[f"loss_{split}_{pairs.src_lang}"] = float(loss)
            curves.append(point)
            metrics = {f"xsim_{language}": float(scores["xsim"]) for language, scores in held_out}
            metrics["xsim_all"] = float(xsim_micro_average([scores for _, scores in held_out])["xsim"])
            return metrics

    return CurveEvaluator


def diagnostics(
    tokenizer_dir: Path, folder: Path, languages: list[str], steps: int, seeds: list[int], mlm_batch: int = BATCH_SIZE
) -> dict[str, Any]:
    """What the data and the schedule give each variant, measured without training: per task the share of batches
    (over the run's steps and seeds), how many times a training pair and the monolingual text (packed into MLM
    blocks as the recipe packs it) are seen on average, and the curriculum's prefix lengths in student subwords per
    stage."""
    from transformers import PreTrainedTokenizerFast

    from bitext_hf.data import load_pairs, read_lines
    from bitext_hf.families.laser3.curriculum import curriculum_ratios, prefix_cuts, prefix_texts_and_ids
    from bitext_hf.families.laser3.masking import pack_blocks
    from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, Stream, TaskSampler

    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    train = {lang: load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}") for lang in languages}
    # MLM examples are blocks of consecutive sentences (DistillationBatches' default): count blocks, not sentences.
    mono = {
        lang: len(
            pack_blocks(
                prefix_texts_and_ids(read_lines(folder / f"{lang}-mono.txt"), tokenizer, 1.0, MAX_LENGTH - 2)[1],
                MAX_LENGTH - 1,
                tokenizer.eos_token_id,
            )
        )
        for lang in languages
    }
    anchors = folder / "english-anchors.txt"
    # The self task's pool as the recipe builds it: the anchors and the training pairs' English, each text once.
    english = len({*(read_lines(anchors) if anchors.exists() else []), *(t for p in train.values() for t in p.tgt)})
    streams = [Stream("distil", lang, len(pairs)) for lang, pairs in train.items()] + [Stream("self", "eng", english)]
    report: dict[str, Any] = {}
    for name, weights in (("distillation", {**DEFAULT_TASK_WEIGHTS, "mask": 0.0}), ("+ MLM", DEFAULT_TASK_WEIGHTS)):
        mlm = [Stream("mask", lang, mono[lang]) for lang in languages] if weights["mask"] > 0 else []
        counts: dict[tuple[str, str], int] = {}
        for seed in seeds:
            sampler = TaskSampler([*streams, *mlm], task_weights=weights, seed=seed)
            for step in range(steps):
                stream = sampler.sample(step)
                counts[stream.task, stream.name] = counts.get((stream.task, stream.name), 0) + 1
        total = steps * len(seeds)
        shares = {task: sum(c for (t, _), c in counts.items() if t == task) / total for task in DEFAULT_TASK_WEIGHTS}
        # Sentences of a stream seen per run divided by the stream's size: epochs over that data.
        views = {
            f"distil epochs ({lang})": counts.get(("distil", lang), 0) * BATCH_SIZE / len(seeds) / len(train[lang])
            for lang in languages
        }
        if mlm:
            views.update(
                {
                    f"mask epochs ({lang})": counts.get(("mask", lang), 0)
                    * mlm_batch
                    / len(seeds)
                    / max(1, mono[lang])
                    for lang in languages
                }
            )
        views = {key: round(value, 3) for key, value in views.items()}
        report[name] = {"batch share": {k: round(v, 4) for k, v in shares.items()}, **views}
    ratios = curriculum_ratios(0.1)
    prefixes: dict[str, Any] = {}
    for lang, pairs in train.items():
        for side, texts in ((lang, pairs.src), ("en", pairs.tgt)):
            cuts = prefix_cuts(texts, tokenizer, ratios, MAX_LENGTH - 2)
            lengths = {ratio: np.array([len(ids) for ids in cuts[ratio][1]]) for ratio in ratios}
            prefixes[f"{lang} pairs, {side} side"] = {
                "mean subwords per stage": {str(r): round(float(v.mean()), 2) for r, v in lengths.items()},
                "share of 1-subword prefixes at 10%": round(float(np.mean(lengths[ratios[0]] == 1)), 3),
                "share of 10% prefixes equal to 20%": round(
                    float(np.mean(lengths[ratios[0]] == lengths[ratios[1]])), 3
                ),
            }
    report["curriculum prefixes"] = prefixes
    return report


def final_losses(task_losses: dict[str, dict[int, list[dict[str, float]]]]) -> dict[str, dict[str, str]]:
    """Per variant and task, the task's last logged loss of each seed as mean +- sample std over the seeds that
    logged it (a short run may not draw every task), with the count when some seed did not."""
    table: dict[str, dict[str, str]] = {}
    for variant, runs in task_losses.items():
        for task in TASKS:
            last = [
                values[-1]
                for values in ([e[f"loss_{task}"] for e in h if f"loss_{task}" in e] for h in runs.values())
                if values
            ]
            if last:
                spread = f" +- {np.std(last, ddof=1):.3f}" if len(last) > 1 else ""
                count = f" ({len(last)} of {len(runs)} seeds)" if len(last) < len(runs) else ""
                table.setdefault(variant, {})[task] = f"{np.mean(last):.3f}{spread}{count}"
    return table


def markdown(report: dict[str, Any], variants: list[str], languages: list[str]) -> str:
    """The regime, then one row per student: xsim per language as mean +- std over the seeds."""
    from bitext_hf.hub import markdown_table

    sizes = report["sizes"]
    regime = (
        f"LASER3 students, xsim (%) on the held-out pairs (ratio margin, k = 4, xx -> English; lower is better), mean "
        f"+- sample std over seeds {', '.join(map(str, report['seeds']))}; {report['steps']} steps of {BATCH_SIZE} "
        f"sentences (MLM: {report['regime']['MLM blocks per batch']} blocks of up to {MAX_LENGTH} subwords), "
        "per language "
        + "; ".join(
            f"{lang}: {sizes[lang]['train']} training pairs, {sizes[lang]['monolingual']} monolingual sentences, "
            f"{sizes[lang]['eval']} held-out pairs"
            for lang in languages
        )
        + "."
    )
    anchors = sizes.get("english anchors")
    regime += (
        f" Self task: the training pairs' English and {anchors['sentences']} more English sentences (the English "
        f"side of {anchors['from']} pairs) as the anchor set."
        if anchors
        else " Self task: the training pairs' English only (no anchor set)."
    )
    regime += (
        " Final loss: each task's unweighted loss at the last log (distil: 1 - cos, xx vs the teacher's English; "
        "self: 1 - cos, English; mask: MLM cross-entropy). Paper: Wolof, FLORES devtest, a 12 x 1024 student on 21k "
        "bitexts and 94k monolingual sentences (Table 3)."
    )
    rows = [
        {
            "model": "teacher zero-shot",
            **{f"xsim {lang}": f"{report['teacher zero-shot'][lang]:.2f}" for lang in languages},
            **{f"final loss {task}": "-" for task in TASKS},
            "train minutes": "-",
            "paper, Wolof xsim": "-",
        }
    ]
    losses = final_losses(report["task losses"])
    for variant in variants:
        cells = {
            **report["mean +- std"][variant],
            **{f"final loss {k}": v for k, v in losses.get(variant, {}).items()},
        }
        rows.append(
            {
                "model": f"student, {variant}",
                **{f"xsim {lang}": cells[lang] for lang in languages},
                **{f"final loss {task}": cells.get(f"final loss {task}", "-") for task in TASKS},
                "train minutes": cells["train minutes"],
                "paper, Wolof xsim": f"{PAPER_WOLOF[variant]:.2f}" if variant in PAPER_WOLOF else "-",
            }
        )
    return f"{regime}\n\n{markdown_table(rows)}"


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Train every variant for every seed from scratch; write and return the report."""
    from transformers import TrainingArguments

    from bitext_hf.data import load_pairs
    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.training import parse_args

    languages = [language for language in args.languages.split(",") if language]
    variants = [variant for variant in args.variants.split(",") if variant]
    unknown = [variant for variant in variants if variant not in VARIANTS]
    if not languages or not variants or unknown:
        raise UsageError(f"--languages and --variants: give at least one each; variants among {', '.join(VARIANTS)}")
    # The last curve point must be the end of the run (the Trainer evaluates at multiples of eval_steps).
    if args.curve_steps > 0 and args.steps % args.curve_steps:
        raise UsageError(f"--curve_steps {args.curve_steps} must divide --steps {args.steps}")
    files = pair_files(args.pairs)
    folder = prepare_run_folder(
        args.output_dir, args.overwrite, script=Path(__file__).stem, inputs=[*files.values(), args.tokenizer]
    )
    sizes = prepare_data(
        folder,
        languages,
        files,
        args.train_pairs,
        args.eval_pairs,
        args.monolingual,
        anchors=args.english_anchors,
        anchor_language=args.anchor_language,
    )
    recipe = load_recipe("distill_wolof")
    # The teacher's zero-shot xsim is the same in every run (same teacher, same held-out pairs): computed once.
    teacher_scores: dict[str, Any] = {}
    compute_xsim = recipe.evaluate_xsim

    def teacher_once(*arguments: Any, **kwargs: Any) -> dict[str, dict[str, float]]:
        if "scores" not in teacher_scores:
            teacher_scores["scores"] = compute_xsim(*arguments, **kwargs)
        return teacher_scores["scores"]

    current: list[dict[str, float]] = []
    evaluator_class = recipe.XsimEvaluator
    if args.curve_steps > 0:
        train_sets = [load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}") for lang in languages]
        evaluator_class = curve_evaluator(recipe.XsimEvaluator, train_sets, args.eval_pairs, current)

    config = folder / "experiment.yaml"
    config.write_text("eval_bitexts: []\n", encoding="utf-8")  # an empty list cannot be spelled as a flag
    common = [
        "--config",
        str(config),
        "--bitexts",
        *(f"{lang}={folder / f'{lang}-train.tsv'}" for lang in languages),
        "--monolingual",
        *(f"{lang}={folder / f'{lang}-mono.txt'}" for lang in languages),
        "--eval_bitexts",
        *(f"{lang}={folder / f'{lang}-eval.tsv'}" for lang in languages),
        *(["--english", str(folder / "english-anchors.txt")] if args.english_anchors > 0 else []),
        "--mlm_languages",
        *languages,
        "--curriculum_languages",
        *languages,
        "--cache_dir",
        str(folder / "teacher_cache"),
        "--max_length",
        str(MAX_LENGTH),
        "--vocab_size",
        str(args.vocab_size),
        "--hidden_size",
        "256",
        "--num_hidden_layers",
        "2",
        "--num_attention_heads",
        "4",
        "--intermediate_size",
        "512",
        "--dropout",
        "0.1",
        "--per_device_train_batch_size",
        str(BATCH_SIZE),
        "--mlm_batch_blocks",
        str(args.mlm_batch_blocks),
        "--learning_rate",
        "1e-3",
        "--warmup_steps",
        str(args.warmup),
        "--max_steps",
        str(args.steps),
        "--logging_steps",
        str(max(1, min(100, args.steps // 10))),  # at least ten points of each task's loss curve
        "--save_strategy",
        "no",
        "--disable_tqdm",
        "true",
        "--report_to",
        "none",
        "--group_by_length",
        str(args.group_by_length).lower(),
        *(["--eval_strategy", "steps", "--eval_steps", str(args.curve_steps)] if args.curve_steps > 0 else []),
    ]
    teacher: dict[str, float] = {}
    tokenizer_dir: Path | None = args.tokenizer
    curves: dict[str, dict[int, list[dict[str, float]]]] = {}  # variant -> seed -> one point per curve_steps
    task_losses: dict[str, dict[int, list[dict[str, float]]]] = {}  # variant -> seed -> one entry per log

    def train(variant: str, seed: int) -> dict[str, float]:
        nonlocal teacher, tokenizer_dir
        started = time.perf_counter()
        output_dir = folder / f"run-{run_name(variant)}-seed{seed}"
        current.clear()
        vocabulary = ["--tokenizer_name", str(tokenizer_dir)] if tokenizer_dir else []
        arguments = [*common, "--output_dir", str(output_dir), "--seed", str(seed), *VARIANTS[variant], *vocabulary]
        parsed = parse_args(recipe.ScriptArguments, TrainingArguments, recipe.StudentArguments, args=arguments)
        results = recipe.main(*parsed, evaluator_class=evaluator_class, teacher_xsim=teacher_once)
        # Every run uses one vocabulary: the one the first run trains (same data, so the same vocabulary).
        tokenizer_dir = tokenizer_dir or output_dir / "tokenizer"
        teacher = teacher or {k: v["xsim"] for k, v in results["teacher_zero_shot"].items()}
        row = {k: v["xsim"] for k, v in results["student_after"].items()}
        if args.curve_steps > 0:
            curve = [{"step": (i + 1) * args.curve_steps, **point} for i, point in enumerate(current)]
            curves.setdefault(variant, {})[seed] = curve
            # The last curve point is the end of the run: the final gap between training and held-out pairs.
            row.update({k: v for k, v in curve[-1].items() if k != "step"})
        # Each task's loss, unweighted, as logged: the series per run in the report (the table: final_losses).
        history = [
            {"step": entry["step"], **{k: v for k, v in entry.items() if k.startswith("loss_")}}
            for entry in results["log_history"]
        ]
        task_losses.setdefault(variant, {})[seed] = history
        row["train minutes"] = results["train_seconds"] / 60
        row["minutes"] = (time.perf_counter() - started) / 60
        logger.info("%s seed %s: %s", variant, seed, row)
        return row

    def every_variant(seed: int) -> dict[str, float]:
        # Seeds outer, variants inner: an experiment stopped early still holds every variant for the seeds it did.
        return {f"{variant} | {key}": value for variant in variants for key, value in train(variant, seed).items()}

    summary = run_over_seeds(every_variant, args.seeds, seed_everything=False)  # the recipe seeds every run

    def by_variant(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
        split: dict[str, dict[str, Any]] = {variant: {} for variant in variants}
        for key, value in values.items():
            variant, _, metric = key.partition(" | ")
            split[variant][metric] = value
        return split

    report: dict[str, Any] = {
        "experiment": "laser3_ablation",
        "regime": {
            "languages": languages,
            "steps": args.steps,
            "warmup": args.warmup,
            "batch size": BATCH_SIZE,
            "MLM blocks per batch": args.mlm_batch_blocks,
            "max length": MAX_LENGTH,
            "group by length": args.group_by_length,
            "curve steps": args.curve_steps,
            "student": f"2 layers x 256, 4 heads, FFN 512, Unigram vocabulary of {args.vocab_size}",
            "teacher": "offline USE v3",
        },
        "sizes": sizes,
        "steps": args.steps,
        "seeds": summary.seeds,
        "teacher zero-shot": teacher,
        "mean +- std": by_variant(summary.format()),
        "mean": by_variant(summary.mean),
        "std": by_variant(summary.std),
        "runs": {str(seed): by_variant(run) for seed, run in zip(summary.seeds, summary.runs, strict=True)},
        "diagnostics": diagnostics(
            tokenizer_dir, folder, languages, args.steps, summary.seeds, mlm_batch=args.mlm_batch_blocks
        ),
    }
    report["task losses"] = task_losses
    if curves:
        report["curves"] = curves
    table = markdown(report, variants, languages)
    # The card of the first seed's run of the last variant (the paper's full method by default) carries the table.
    card_run = folder / f"run-{run_name(variants[-1])}-seed{summary.seeds[0]}"
    write_card_with_seeds(card_run, args.output_dir, table, "Ablation over seeds (experiments/laser3_ablation.py)")
    write_results(args.output_dir, report, table)
    logger.info("results: %s", json.dumps(report["mean +- std"]))
    return report


if __name__ == "__main__":
    run_script(main, build_parser())
