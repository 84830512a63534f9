"""LASER3 (Heffernan et al., 2022) on languages the offline teacher never saw: distillation only, + MLM, + MLM +
curriculum (the paper's Tables 1 and 3), xsim against the teacher's zero-shot, mean +- sample std over seeds.

The offline teacher (USE v3, 16 languages) never saw the default languages, Georgian and Greek. Per language, real
translation pairs from this machine's gettext catalogs (or ``--pairs`` files): ``--eval_pairs`` held-out pairs
(English side of at least three words), ``--train_pairs`` training pairs, the remaining translations (their English
dropped) as monolingual MLM text, after the paper's low-resource Wolof set-up; no held-out sentence is in any
training file. One student for all languages (2 x 256, 4 heads, FFN 512, 8k Unigram vocabulary trained by the first
run and shared by every other one), batch 64, through ``recipes/distill_wolof.py``.

The paper's protocol (``--epochs E``, the default; issue 36): every arm trains for E epochs over the bitexts, so
adding MLM adds updates; arms: distillation, distillation for the MLM arm's steps (the compute control), + MLM,
+ MLM + curriculum with the prefix stages prepended (English cut with the teacher's tokenizer); lr 5e-4, dropout
0.3, clipping 5 (fairseq's laser_distillation README). The verdict rule (:data:`VERDICT_RULE`) is printed before the
first run and applied to the results, beside the unigram entropy of the MLM text. ``--epochs 0``: the earlier
fixed-step protocol (``--steps``, :data:`VARIANTS`, lr 1e-3, dropout 0.1, clipping 1).

    OMP_NUM_THREADS=1 python experiments/laser3_ablation.py --output_dir /tmp/laser3_epochs

Writes ``<output_dir>/results.json`` (every run, mean and std, the teacher's zero-shot xsim, and what explains the
table without training: the share of batches per task, epochs over each data set, the curriculum's prefix lengths;
with ``--epochs`` the plan per arm, the entropy, the final MLM losses and the verdict) and
``<output_dir>/results.md``. Every seed trains every variant before the next seed starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    CARD_MAX_BYTES,
    MODEL_CARD,
    RESULTS_JSON,
    add_pairs_option,
    add_run_folder_options,
    load_recipe,
    pair_files,
    prepare_run_folder,
    read_run_file,
    read_run_json,
    rebase_links,
    run_script,
    seed_count_or_list,
    translation_pairs,
    true_or_false,
    write_card_with_seeds,
    write_file,
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
# The paper's protocol (issue 36): every arm trains for --epochs epochs over the bitexts (the distil task's pairs),
# so adding MLM adds updates; the compute control trains distillation alone for the MLM arm's steps; the curriculum
# prepends its prefix stages to the MLM arm's whole-sentence training. Steps and curriculum fraction come from
# epoch_plan; the English side's prefixes are cut with the teacher's own tokenizer.
ARMS = {
    "distillation": ["--mask_weight", "0", "--curriculum_increment", "1.0"],
    "distillation at MLM steps": ["--mask_weight", "0", "--curriculum_increment", "1.0"],
    "+ MLM": ["--curriculum_increment", "1.0"],
    "+ MLM + curriculum": ["--curriculum_increment", "0.1", "--curriculum_english_cut", "teacher"],
}
# Written before any number of this protocol (experiments/README.md): what the tables must show to credit MLM.
XSIM_MARGIN = 2.0  # points of xsim (both languages) by which MLM must beat both distillation arms
# Nats by which the final MLM loss must end below the unigram entropy of the MLM text; the recipe's warning
# (bitext_hf.families.laser3.MLM_CONTEXT_MARGIN) uses the same rule.
ENTROPY_MARGIN = 0.5
VERDICT_RULE = (
    f"+ MLM is credited when its xsim (mean of the languages) is more than {XSIM_MARGIN:g} points below both "
    f"distillation arms' (E epochs, and the MLM arm's steps) and its final MLM loss ends at least {ENTROPY_MARGIN:g} "
    "nats below the unigram entropy of its MLM text (the loss of a head that ignores the context); with the loss "
    "not that low the verdict is 'regime not reached' whatever the xsim; the curriculum is credited when + MLM + "
    f"curriculum is more than {XSIM_MARGIN:g} points below + MLM, under the same condition on the MLM loss."
)
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
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="Train nothing: merge the results.json of runs of this script over different seeds (one process per "
        "seed, e.g. one per core, each with --seeds N,) into one table over all their seeds, with the verdict, in "
        "--output_dir. The runs must share every setting but the seed. Everything is read (each results.json and "
        "the first run's model_card.md: regular files, bounded, a FIFO or device refused unopened) and checked "
        "before --output_dir is touched: a refused merge creates nothing (exit 2: not a run's file, runs of "
        "different settings; 3: a file too large, not JSON, or holding a NaN, naming it).",
    )
    parser.add_argument("--languages", default="ka,el", help="Student languages, comma-separated (default: ka,el).")
    add_pairs_option(parser)
    parser.add_argument(
        "--epochs",
        type=float,
        default=10.0,
        help="E > 0: the paper's protocol (arms: " + "; ".join(ARMS) + "): every arm trains for E epochs over the "
        "bitexts (expected, from the task sampler's probabilities), MLM adding updates; 0: the earlier fixed-step "
        "protocol (--steps, variants: " + "; ".join(VARIANTS) + ") (default: 10).",
    )
    parser.add_argument(
        "--stage_epochs",
        type=float,
        default=0.5,
        help="Epochs over the bitexts per prefix stage (10%%..90%%) the curriculum arm prepends to the + MLM arm's "
        "training (default: 0.5).",
    )
    # Unset: fairseq's laser_distillation README with --epochs, the earlier settings with --epochs 0 (main).
    for option, description in (
        (
            "--learning_rate",
            "Peak learning rate (default: fairseq's README, 5e-4, with --epochs; 1e-3 with --epochs 0).",
        ),
        ("--dropout", "Student dropout (default: fairseq's README, 0.3, with --epochs; 0.1 with --epochs 0)."),
        ("--max_grad_norm", "Gradient clipping (default: fairseq's README, 5, with --epochs; 1 with --epochs 0)."),
    ):
        parser.add_argument(option, type=float, default=None, help=description)
    parser.add_argument("--train_pairs", type=int, default=1000, help="Training pairs per language (default: 1000).")
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
        default=20000,
        help="English sentences beyond the training pairs for the self task (English -> teacher's English), the "
        "paper's anchor set; drawn from the English side of --anchor_language's catalogs (or --pairs files), no "
        "sentence of any student language's pairs among them; its size sets the task shares (printed); 0: the "
        "training pairs' English only (default: 20000).",
    )
    parser.add_argument(
        "--anchor_language",
        default="fr",
        help="Whose translation pairs give the English anchors, comma-separated: only their English side is used "
        "(default: fr).",
    )
    parser.add_argument(
        "--steps", type=int, default=1500, help="With --epochs 0: training steps per run (default: 1500)."
    )
    parser.add_argument("--warmup", type=int, default=150, help="Warm-up steps (default: 150).")
    parser.add_argument(
        "--variants",
        default=None,
        help="Students, comma-separated, among the protocol's arms (--epochs) or variants (--epochs 0) (default: "
        "all of them).",
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
        default=3,
        help="A count (the first of bitext_hf.evaluation.DEFAULT_SEEDS) or the seeds, e.g. 42,43; one seed: 42, "
        "(default: 3).",
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
        default=64,
        help="Blocks of monolingual text (up to 64 subwords each) per MLM batch. Batches are drawn by examples, so "
        "64 (as many blocks as sentences per batch) reads each block once per epoch, as fairseq's epochs read every "
        "example once; 16 gives MLM batches about the tokens of a batch of 64 short sentences, but then an epoch "
        "reads a quarter of the text (default: 64).",
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
        sources = [language for language in anchor_language.split(",") if language]
        english = sorted({english for source in sources for english, _ in translation_pairs(source, files)} - seen)
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
    tokenizer_dir: Path,
    folder: Path,
    languages: list[str],
    steps: int,
    seeds: list[int],
    mlm_batch: int = BATCH_SIZE,
    english_tokenizer: Any | None = None,
) -> dict[str, Any]:
    """What the data and the schedule give each variant, measured without training: per task the share of batches
    (over the run's steps and seeds; with ``steps`` 0, left to the epoch plan), how many times a training pair and
    the monolingual text (packed into MLM blocks as the recipe packs it) are seen on average, and the curriculum's
    prefix lengths in subwords per stage (the English side's with ``english_tokenizer``, the teacher's, when
    given, else the student's)."""
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
    sampled = (("distillation", {**DEFAULT_TASK_WEIGHTS, "mask": 0.0}), ("+ MLM", DEFAULT_TASK_WEIGHTS))
    for name, weights in sampled if steps > 0 else ():
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
            side_tokenizer = english_tokenizer if side == "en" and english_tokenizer is not None else tokenizer
            cuts = prefix_cuts(texts, side_tokenizer, ratios, MAX_LENGTH - 2)
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


def mlm_blocks(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """The MLM examples the recipe makes of ``texts``: blocks of consecutive sentences, as the recipe packs them."""
    from bitext_hf.families.laser3.curriculum import prefix_texts_and_ids
    from bitext_hf.families.laser3.masking import pack_blocks

    ids = prefix_texts_and_ids(texts, tokenizer, 1.0, MAX_LENGTH - 2)[1]
    return pack_blocks(ids, MAX_LENGTH - 1, tokenizer.eos_token_id)


def unigram_entropy(tokenizer_dir: Path, folder: Path, languages: list[str]) -> dict[str, float]:
    """Per language the unigram entropy (nats) of its MLM text's maskable tokens under the student tokenizer: the
    loss of an MLM head that ignores the context. "mean": the languages' entropies weighted by their tokens (a
    head that knows the language, which a block's context gives at once)."""
    from transformers import PreTrainedTokenizerFast

    from bitext_hf.data import read_lines
    from bitext_hf.families.laser3 import unigram_entropy

    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    entropies, tokens = {}, {}
    for lang in languages:
        blocks = mlm_blocks(tokenizer, read_lines(folder / f"{lang}-mono.txt"))
        entropy, tokens[lang] = unigram_entropy(blocks, [tokenizer.eos_token_id])  # separators are never masked
        entropies[lang] = round(entropy, 3)
    entropies["mean"] = round(sum(entropies[lang] * tokens[lang] for lang in languages) / sum(tokens.values()), 3)
    return entropies


def epoch_plan(
    folder: Path,
    languages: list[str],
    epochs: float,
    stage_epochs: float,
    mlm_batch: int,
    tokenizer_dir: Path | None,
) -> dict[str, dict[str, Any]]:
    """Per arm of :data:`ARMS` its steps for ``epochs`` expected epochs over the bitexts (from the task sampler's
    probabilities, over the same streams the recipe builds), its expected share of batches per task and epochs over
    each data set, and for the curriculum arm the fraction of its steps in the prepended prefix stages (nine stages
    of ``stage_epochs`` each). Without ``tokenizer_dir`` (no vocabulary yet) only the distillation arm, whose
    streams need no tokenizer."""
    from bitext_hf.data import load_pairs, read_lines
    from bitext_hf.families.laser3.sampling import DEFAULT_TASK_WEIGHTS, Stream, TaskSampler

    train = {lang: len(load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}")) for lang in languages}
    anchors = folder / "english-anchors.txt"
    pairs_english = {text for lang in languages for text in load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}").tgt}
    english = len({*(read_lines(anchors) if anchors.exists() else []), *pairs_english})
    streams = [Stream("distil", lang, size) for lang, size in train.items()] + [Stream("self", "eng", english)]
    blocks: dict[str, int] = {}
    if tokenizer_dir is not None:
        from transformers import PreTrainedTokenizerFast

        tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
        blocks = {lang: len(mlm_blocks(tokenizer, read_lines(folder / f"{lang}-mono.txt"))) for lang in languages}

    def per_step(with_mlm: bool) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
        """Examples of each stream an average step reads (its probability times its batch, at most its pool), and
        each task's share of the batches."""
        weights = DEFAULT_TASK_WEIGHTS if with_mlm else {**DEFAULT_TASK_WEIGHTS, "mask": 0.0}
        mlm = [Stream("mask", lang, blocks[lang]) for lang in languages] if with_mlm else []
        sampler = TaskSampler([*streams, *mlm], task_weights=weights)
        examples = {
            (s.task, s.name): float(p) * min(mlm_batch if s.task == "mask" else BATCH_SIZE, s.size)
            for s, p in zip(sampler.streams, sampler.probabilities)
        }
        return examples, sampler.task_probabilities()

    def describe(with_mlm: bool, steps: int) -> dict[str, Any]:
        examples, shares = per_step(with_mlm)
        described: dict[str, Any] = {
            "steps": steps,
            "batch share": {task: round(share, 4) for task, share in sorted(shares.items())},
        }
        for lang in languages:
            described[f"distil epochs ({lang})"] = round(steps * examples["distil", lang] / train[lang], 2)
            if with_mlm:
                described[f"mask epochs ({lang})"] = round(steps * examples["mask", lang] / blocks[lang], 2)
        described["self epochs (English)"] = round(steps * examples["self", "eng"] / english, 2)
        return described

    def steps_for(with_mlm: bool, epochs_over_pairs: float) -> int:
        # That many epochs over all pairs, over the pairs an average step reads.
        pairs_per_step = sum(per_step(with_mlm)[0]["distil", lang] for lang in languages)
        return max(1, round(epochs_over_pairs * sum(train.values()) / pairs_per_step))

    plan = {"distillation": describe(False, steps_for(False, epochs))}
    if not blocks:
        return plan
    mlm_steps = steps_for(True, epochs)
    plan["distillation at MLM steps"] = describe(False, mlm_steps)
    plan["+ MLM"] = describe(True, mlm_steps)
    prefix_steps = steps_for(True, 9 * stage_epochs)
    curriculum = describe(True, mlm_steps + prefix_steps)
    # The recipe gives the stages below 100% the first round(fraction * steps) steps: exactly prefix_steps.
    curriculum["curriculum fraction"] = prefix_steps / (mlm_steps + prefix_steps)
    curriculum["prefix stage steps"] = prefix_steps
    plan["+ MLM + curriculum"] = curriculum
    return plan


def verdict(means: dict[str, float], mlm_losses: dict[str, float], entropy: float) -> list[str]:
    """:data:`VERDICT_RULE` applied: one line per claim (MLM, the curriculum), from the arms' mean xsim over the
    languages and their final MLM losses (mean over seeds)."""
    lines = []
    if "+ MLM" not in means or not {"distillation", "distillation at MLM steps"} <= set(means):
        return ["not decided: the verdict needs both distillation arms and + MLM"]
    learned = {arm: loss <= entropy - ENTROPY_MARGIN for arm, loss in mlm_losses.items()}
    best_distillation = min(means["distillation"], means["distillation at MLM steps"])
    gain = best_distillation - means["+ MLM"]
    if not learned.get("+ MLM", False):
        lines.append(
            f"MLM: regime not reached (final MLM loss {mlm_losses.get('+ MLM', float('nan')):.3f} nats, not "
            f"{ENTROPY_MARGIN:g} below the unigram entropy {entropy:.3f}); xsim gain over the better distillation "
            f"arm {gain:+.2f} points, not counted"
        )
    else:
        holds = "holds" if gain > XSIM_MARGIN else "does not hold"
        lines.append(f"MLM: the gain {holds} ({gain:+.2f} points over the better distillation arm)")
    if "+ MLM + curriculum" in means:
        gain = means["+ MLM"] - means["+ MLM + curriculum"]
        if not learned.get("+ MLM + curriculum", False):
            lines.append(f"curriculum: regime not reached (its MLM loss is not below the entropy); {gain:+.2f} points")
        else:
            holds = "holds" if gain > XSIM_MARGIN else "does not hold"
            lines.append(f"curriculum: the gain {holds} ({gain:+.2f} points over + MLM)")
    return lines


def verdict_fields(report: dict[str, Any], variants: list[str], entropy: dict[str, float]) -> dict[str, Any]:
    """What the verdict reads and says, from a report's means and task losses over its seeds: each arm's xsim
    averaged over the languages, each MLM arm's final MLM loss, and the verdict against ``entropy["mean"]``."""
    languages = report["regime"]["languages"]
    means = {arm: float(np.mean([report["mean"][arm][lang] for lang in languages])) for arm in variants}
    losses = report["task losses"]
    mlm_losses = {arm: float(np.mean(last)) for arm in variants if (last := last_losses(losses[arm], "mask"))}
    return {
        "final MLM loss": mlm_losses,
        "xsim, mean of the languages": means,
        "verdict": verdict(means, mlm_losses, entropy["mean"]),
    }


def last_losses(runs: dict[int, list[dict[str, float]]], task: str) -> list[float]:
    """The task's last logged loss of each run (seed) that logged it."""
    return [
        values[-1]
        for values in ([e[f"loss_{task}"] for e in h if f"loss_{task}" in e] for h in runs.values())
        if values
    ]


def final_losses(task_losses: dict[str, dict[int, list[dict[str, float]]]]) -> dict[str, dict[str, str]]:
    """Per variant and task, the task's last logged loss of each seed as mean +- sample std over the seeds that
    logged it (a short run may not draw every task), with the count when some seed did not."""
    table: dict[str, dict[str, str]] = {}
    for variant, runs in task_losses.items():
        for task in TASKS:
            last = last_losses(runs, task)
            if last:
                spread = f" +- {np.std(last, ddof=1):.3f}" if len(last) > 1 else ""
                count = f" ({len(last)} of {len(runs)} seeds)" if len(last) < len(runs) else ""
                table.setdefault(variant, {})[task] = f"{np.mean(last):.3f}{spread}{count}"
    return table


def markdown(report: dict[str, Any], variants: list[str], languages: list[str]) -> str:
    """The regime, then one row per student: xsim per language as mean +- std over the seeds."""
    from bitext_hf.hub import markdown_table

    sizes = report["sizes"]
    plan = report.get("epoch plan")
    length = (
        f"{report['regime']['epochs over the bitexts']:g} epochs over the bitexts per arm (steps in the plan below), "
        f"lr {report['regime']['learning rate']:g}, dropout {report['regime']['dropout']:g}, clipping "
        f"{report['regime']['max grad norm']:g}, batches"
        if plan
        else f"{report['steps']} steps"
    )
    regime = (
        f"LASER3 students, xsim (%) on the held-out pairs (ratio margin, k = 4, xx -> English; lower is better), mean "
        f"+- sample std over seeds {', '.join(map(str, report['seeds']))}; {length} of {BATCH_SIZE} "
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
    text = f"{regime}\n\n{markdown_table(rows)}"
    if plan:
        text += "\n\n" + plan_markdown(report, variants, languages)
    return text


def plan_markdown(report: dict[str, Any], variants: list[str], languages: list[str]) -> str:
    """The epoch protocol's schedule per arm (steps, task shares, epochs over each data set, expected from the
    sampler), the unigram entropy beside the final MLM losses, what the curriculum's stages hold, and the verdict
    under the rule stated before the run."""
    from bitext_hf.hub import markdown_table

    plan, entropy = report["epoch plan"], report["unigram entropy of the MLM text (nats)"]
    rows = []
    for arm in variants:
        described = plan[arm]
        shares = described["batch share"]
        rows.append(
            {
                "arm": arm,
                "steps": str(described["steps"]),
                **{f"share {task}": f"{shares.get(task, 0.0):.3f}" for task in TASKS},
                **{
                    f"epochs {kind} {lang}": f"{described.get(f'{kind} epochs ({lang})', 0.0):.2f}"
                    for kind in ("distil", "mask")
                    for lang in languages
                },
                "prefix stage steps": str(described.get("prefix stage steps", "-")),
                "final MLM loss": f"{report['final MLM loss'][arm]:.3f}" if arm in report["final MLM loss"] else "-",
            }
        )
    entropies = ", ".join(f"{lang} {entropy[lang]:.3f}" for lang in languages)
    prefixes = report["diagnostics"]["curriculum prefixes"]
    stages = "; ".join(
        f"{side}: {values['share of 1-subword prefixes at 10%']:.0%} of the 10% prefixes one subword, "
        f"{values['share of 10% prefixes equal to 20%']:.0%} equal to the 20% ones"
        for side, values in prefixes.items()
    )
    return (
        "Schedule per arm (expected from the task sampler; epochs over each language's pairs and MLM blocks):\n\n"
        f"{markdown_table(rows)}\n\n"
        f"Unigram entropy of the MLM text under the student tokenizer (nats): {entropies}; token-weighted "
        f"{entropy['mean']:.3f}. Curriculum stages (English cut with the teacher's tokenizer): {stages}.\n\n"
        f"Verdict rule (stated before the run): {report['verdict rule']}\n\n"
        + "\n".join(f"- Verdict: {line}" for line in report["verdict"])
    )


def split_by_variant(values: dict[str, Any], variants: list[str]) -> dict[str, dict[str, Any]]:
    """``{"variant | metric": value}`` (one seed's row, as run_over_seeds summarizes it) as
    ``{variant: {metric: value}}``."""
    split: dict[str, dict[str, Any]] = {variant: {} for variant in variants}
    for key, value in values.items():
        variant, _, metric = key.partition(" | ")
        split[variant][metric] = value
    return split


CARD_TITLE = "Ablation over seeds (experiments/laser3_ablation.py)"
# What the merged runs must share: everything that is not a per-seed result.
SHARED_REPORT_KEYS = ("experiment", "regime", "sizes", "steps", "teacher zero-shot", "epoch plan", "verdict rule")


def merge_reports(reports: dict[Path, dict[str, Any]]) -> dict[str, Any]:
    """One report over the seeds of ``reports`` (results.json of runs that differ only in their seeds): runs,
    mean +- std, the task losses and, under the epoch protocol, the final MLM losses and the verdict, recomputed over
    every seed; the rest (regime, sizes, plan, diagnostics) from the first run."""
    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds

    (first_dir, first), *others = reports.items()
    for folder, report in others:
        for key in SHARED_REPORT_KEYS:
            if report.get(key) != first.get(key):
                raise UsageError(
                    f"--merge {folder}: its {key!r} differs from {first_dir}'s; merge runs of one setting"
                )
    runs: dict[int, dict[str, dict[str, float]]] = {}
    for folder, report in reports.items():
        for seed, run in report["runs"].items():
            if int(seed) in runs:
                raise UsageError(f"--merge {folder}: seed {seed} is in two of the runs")
            runs[int(seed)] = run
    variants = list(first["runs"][next(iter(first["runs"]))])
    flat = {
        seed: {f"{v} | {k}": value for v, metrics in run.items() for k, value in metrics.items()}
        for seed, run in runs.items()
    }
    summary = run_over_seeds(flat.__getitem__, list(runs), seed_everything=False)

    task_losses = {
        variant: {seed: report["task losses"][variant][seed] for report in reports.values() for seed in report["runs"]}
        for variant in variants
    }
    merged = {
        **first,
        "seeds": summary.seeds,
        "mean +- std": split_by_variant(summary.format(), variants),
        "mean": split_by_variant(summary.mean, variants),
        "std": split_by_variant(summary.std, variants),
        "runs": {str(seed): run for seed, run in runs.items()},
        "task losses": task_losses,
        "merged from": [str(folder) for folder in reports],
    }
    if "epoch plan" in first:
        merged |= verdict_fields(merged, variants, first["unigram entropy of the MLM text (nats)"])
    return merged


def _check_report(path: Path, report: Any) -> None:
    """Refuse, naming ``path``, a results.json that is not one of this script (exit 2) or lacks what a merge reads
    (exit 3): the runs (seed -> variant -> metric -> finite number, every seed with the same variants), the task
    losses of every variant and seed, the regime's languages."""
    import math

    from bitext_hf.errors import DataValidationError, UsageError

    if not isinstance(report, dict) or report.get("experiment") != "laser3_ablation" or "runs" not in report:
        raise UsageError(f"--merge {path}: not a results file of this script")

    def malformed(why: str) -> DataValidationError:
        return DataValidationError(f"--merge {path}: {why}; not a results file this script wrote, or one edited since")

    runs = report["runs"]
    if not isinstance(runs, dict) or not runs:
        raise malformed("'runs' holds no run")
    variants = None
    for seed, run in runs.items():
        if not seed.lstrip("-").isdigit():
            raise malformed(f"run {seed!r} is not named by its seed")
        if not isinstance(run, dict) or not run or not all(isinstance(metrics, dict) for metrics in run.values()):
            raise malformed(f"seed {seed}: no metrics by variant")
        if variants is None:
            variants = list(run)
        elif list(run) != variants:
            raise malformed(f"seed {seed}: variants {list(run)}, not {variants} as the first seed's")
        for variant, metrics in run.items():
            for metric, value in metrics.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise malformed(f"seed {seed}, {variant!r}, {metric!r}: {value!r} is not a number")
                if not math.isfinite(value):
                    raise DataValidationError(
                        f"--merge {path}: seed {seed}, {variant!r}, {metric!r} is {value}; a mean over seeds needs "
                        "finite numbers"
                    )
    losses = report.get("task losses")
    for variant in variants or ():
        if not isinstance(losses, dict) or not isinstance(losses.get(variant), dict):
            raise malformed(f"no 'task losses' of {variant!r}")
        if set(losses[variant]) != set(runs):
            raise malformed(f"the 'task losses' of {variant!r} are not those of its seeds")
    regime = report.get("regime")
    if not isinstance(regime, dict) or not isinstance(regime.get("languages"), list):
        raise malformed("no 'regime' with its 'languages'")


def merge_runs(args: argparse.Namespace) -> dict[str, Any]:
    """``--merge``: read every run's results.json and the first run's card (each a regular file, read once and
    bounded: a FIFO, a device or a folder is refused unopened), merge them and render the table and the card; only
    then, everything checked, prepare ``--output_dir`` and write the merged report, table and card there. A refused
    merge creates nothing."""
    from bitext_hf.errors import BitextError, DataValidationError, UsageError

    reports: dict[Path, dict[str, Any]] = {}
    for folder in args.merge:
        if not folder.is_dir():
            what = "no such folder" if not os.path.lexists(folder) else "not a folder"
            raise UsageError(f"--merge {folder}: {what}; give the --output_dir of a run of this script")
        if any(folder.resolve() == known.resolve() for known in reports):
            raise UsageError(f"--merge {folder}: given twice")
        path = folder / RESULTS_JSON
        report = read_run_json(path, "--merge")
        _check_report(path, report)
        if reports:
            first_path, first = next(iter(reports.items()))
            if list(report["runs"][next(iter(report["runs"]))]) != list(first["runs"][next(iter(first["runs"]))]):
                raise UsageError(
                    f"--merge {path}: its variants differ from {first_path / RESULTS_JSON}'s; merge runs of one setting"
                )
        reports[folder] = report
    try:
        merged = merge_reports(reports)
        table = markdown(merged, list(merged["mean"]), merged["regime"]["languages"])
    except BitextError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        shown = ", ".join(str(folder / RESULTS_JSON) for folder in reports)
        raise DataValidationError(
            f"--merge: the results cannot be merged ({type(error).__name__}: {error} missing or malformed in one of "
            f"{shown})"
        ) from None
    # The first run's card (a model of its first seed) with the merged table in place of its own one-seed table.
    first = args.merge[0]
    card = None
    if os.path.lexists(first / MODEL_CARD):
        card = read_run_file(first / MODEL_CARD, "--merge", CARD_MAX_BYTES).split(f"\n\n## {CARD_TITLE}\n", 1)[0]
        card = f"{rebase_links(card, first, args.output_dir)}\n\n## {CARD_TITLE}\n\n{table.rstrip()}\n"
    prepare_run_folder(args.output_dir, args.overwrite, script=Path(__file__).stem, inputs=list(args.merge))
    if card is not None:
        write_file(args.output_dir / MODEL_CARD, card)
    write_results(args.output_dir, merged, table)
    for line in merged.get("verdict", []):
        print(f"Verdict: {line}", flush=True)
    return merged


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Train every variant for every seed from scratch (or merge runs, ``--merge``); write and return the report."""
    if args.merge:
        return merge_runs(args)
    from transformers import TrainingArguments

    from bitext_hf.data import load_pairs
    from bitext_hf.encoders.use import UseTokenizer
    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.training import parse_args

    by_epochs = args.epochs > 0
    known = ARMS if by_epochs else VARIANTS
    languages = [language for language in args.languages.split(",") if language]
    variants = [variant for variant in (args.variants or ",".join(known)).split(",") if variant]
    unknown = [variant for variant in variants if variant not in known]
    if not languages or not variants or unknown:
        raise UsageError(f"--languages and --variants: give at least one each; variants among {', '.join(known)}")
    if by_epochs:
        # Arms train in ARMS' order: the first (distillation, whose steps need no vocabulary) trains the vocabulary
        # the others' MLM blocks are counted with.
        variants = [arm for arm in ARMS if arm in variants]
        if args.tokenizer is None and variants[0] != "distillation":
            raise UsageError("--variants without distillation: give --tokenizer (the MLM arms' steps need one)")
        if args.curve_steps > 0:
            raise UsageError("--curve_steps needs --epochs 0 (fixed steps): the arms' steps differ")
    # The last curve point must be the end of the run (the Trainer evaluates at multiples of eval_steps).
    elif args.curve_steps > 0 and args.steps % args.curve_steps:
        raise UsageError(f"--curve_steps {args.curve_steps} must divide --steps {args.steps}")
    # fairseq's laser_distillation README with --epochs, the earlier settings with the fixed-step protocol.
    learning_rate = args.learning_rate or (5e-4 if by_epochs else 1e-3)
    dropout = args.dropout if args.dropout is not None else (0.3 if by_epochs else 0.1)
    max_grad_norm = args.max_grad_norm or (5.0 if by_epochs else 1.0)
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
    from bitext_hf.families.laser3 import XsimEvaluator, evaluate_xsim
    from bitext_hf.families.laser3.arguments import ScriptArguments, StudentArguments

    recipe = load_recipe("distill_wolof")
    # The teacher's zero-shot xsim is the same in every run (same teacher, same held-out pairs): computed once.
    teacher_scores: dict[str, Any] = {}
    compute_xsim = evaluate_xsim

    def teacher_once(*arguments: Any, **kwargs: Any) -> dict[str, dict[str, float]]:
        if "scores" not in teacher_scores:
            teacher_scores["scores"] = compute_xsim(*arguments, **kwargs)
        return teacher_scores["scores"]

    current: list[dict[str, float]] = []
    evaluator_class = XsimEvaluator
    if args.curve_steps > 0:
        train_sets = [load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}") for lang in languages]
        evaluator_class = curve_evaluator(XsimEvaluator, train_sets, args.eval_pairs, current)

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
        str(dropout),
        "--per_device_train_batch_size",
        str(BATCH_SIZE),
        "--mlm_batch_blocks",
        str(args.mlm_batch_blocks),
        "--learning_rate",
        str(learning_rate),
        "--max_grad_norm",
        str(max_grad_norm),
        "--warmup_steps",
        str(args.warmup),
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

    plan: dict[str, dict[str, Any]] = {}  # arm -> its steps, task shares and epochs (the epoch protocol)
    if by_epochs:
        print(f"Verdict rule (fixed before the run): {VERDICT_RULE}", flush=True)

    def schedule(variant: str) -> list[str]:
        """The run's length (and the curriculum's prefix share) as options: from the plan, or --steps."""
        if not by_epochs:
            steps = args.steps
            return ["--max_steps", str(steps), "--logging_steps", str(max(1, min(100, steps // 10)))]
        if variant not in plan:
            new = epoch_plan(folder, languages, args.epochs, args.stage_epochs, args.mlm_batch_blocks, tokenizer_dir)
            for arm, described in new.items():
                if arm not in plan:
                    print(f"{arm}: {json.dumps(described)}", flush=True)
            plan.update(new)
        arm = plan[variant]
        steps = arm["steps"]
        fraction = ["--curriculum_fraction", repr(arm["curriculum fraction"])] if "curriculum fraction" in arm else []
        # At least ten points of each task's loss curve.
        return ["--max_steps", str(steps), "--logging_steps", str(max(1, min(100, steps // 10))), *fraction]

    def train(variant: str, seed: int) -> dict[str, float]:
        nonlocal teacher, tokenizer_dir
        started = time.perf_counter()
        output_dir = folder / f"run-{run_name(variant)}-seed{seed}"
        current.clear()
        vocabulary = ["--tokenizer_name", str(tokenizer_dir)] if tokenizer_dir else []
        options = ARMS[variant] if by_epochs else VARIANTS[variant]
        arguments = [
            *common,
            "--output_dir",
            str(output_dir),
            "--seed",
            str(seed),
            *options,
            *schedule(variant),
            *vocabulary,
        ]
        parsed = parse_args(ScriptArguments, TrainingArguments, StudentArguments, args=arguments)
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
        "mean +- std": split_by_variant(summary.format(), variants),
        "mean": split_by_variant(summary.mean, variants),
        "std": split_by_variant(summary.std, variants),
        "runs": {
            str(seed): split_by_variant(run, variants) for seed, run in zip(summary.seeds, summary.runs, strict=True)
        },
        "diagnostics": diagnostics(
            tokenizer_dir,
            folder,
            languages,
            0 if by_epochs else args.steps,
            summary.seeds,
            mlm_batch=args.mlm_batch_blocks,
            english_tokenizer=UseTokenizer() if by_epochs else None,
        ),
    }
    report["task losses"] = task_losses
    if by_epochs:
        report["regime"].update(
            {
                "epochs over the bitexts": args.epochs,
                "epochs per prefix stage": args.stage_epochs,
                "learning rate": learning_rate,
                "dropout": dropout,
                "max grad norm": max_grad_norm,
            }
        )
        report["epoch plan"] = plan
        report["unigram entropy of the MLM text (nats)"] = entropy = unigram_entropy(tokenizer_dir, folder, languages)
        report["verdict rule"] = VERDICT_RULE
        report |= verdict_fields(report, variants, entropy)
        for line in report["verdict"]:
            print(f"Verdict: {line}", flush=True)
    if curves:
        report["curves"] = curves
    table = markdown(report, variants, languages)
    # The card of the first seed's run of the last variant (the paper's full method by default) carries the table.
    card_run = folder / f"run-{run_name(variants[-1])}-seed{summary.seeds[0]}"
    write_card_with_seeds(card_run, args.output_dir, table, CARD_TITLE)
    write_results(args.output_dir, report, table)
    logger.info("results: %s", json.dumps(report["mean +- std"]))
    return report


if __name__ == "__main__":
    run_script(main, build_parser())
