"""The real offline experiment (slow): distil students for languages the offline teacher (USE v3, 16 languages)
never saw, on real translation pairs from this machine's gettext catalogs, and compare xsim on held-out pairs for
the teacher zero-shot, distillation only, + MLM, + MLM + curriculum (the paper's Tables 1 and 3 on real data), as
mean +- sample std over seeds (``bitext_hf.evaluation.run_over_seeds``; by default the 5 ``DEFAULT_SEEDS``).

Low-resource set-up after the paper's Wolof (21k bitexts + 94k monolingual sentences, 4.5x as many): per language
a few thousand (or, in the paper's ratio and below, 1000) training pairs, the remaining translations (their English
dropped) as monolingual text for MLM, 1000 held-out pairs (English side of at least three words) for xsim; no
held-out sentence appears in any training file.

    OMP_NUM_THREADS=1 python -m pytest -m slow tests/test_distill_experiment.py -s

Knobs (environment): LASER3_EXPERIMENT_DIR (default /tmp/laser3_experiment), LASER3_LANGUAGES ("ka,el"),
LASER3_TRAIN_PAIRS (4000), LASER3_MONOLINGUAL (monolingual sentences per language; default all the rest, ~14k at
1000 pairs), LASER3_EVAL_PAIRS (1000), LASER3_STEPS (1500), LASER3_WARMUP (warm-up steps, 200), LASER3_VARIANTS
(all four students), LASER3_GROUP_BY_LENGTH ("true"; "false" samples batches uniformly), LASER3_SEEDS ("5": the first
five DEFAULT_SEEDS; or the seeds, e.g. "42,43", one seed as "42,"), LASER3_CURVE_STEPS (0; N > 0: every N steps
log xsim and the distillation loss 1 - cos on the training pairs and on the held-out pairs, to see over-fitting),
LASER3_TOKENIZER (a student tokenizer folder for every run; default: the one the first run trains),
LASER3_REUSE_RUNS=1 (take the results of runs already finished in the folder instead of training them again).
Every seed trains every variant before the next seed starts, so an experiment stopped early (or split over several
invocations with the same folder and tokenizer, then summarized with LASER3_REUSE_RUNS=1) keeps whole seeds.

Besides the table, ``experiment_results.json`` holds what explains it without training: the share of batches each
task gets and how often each training pair / monolingual sentence is seen, and the prefix lengths in subwords of the
curriculum stages.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent

VARIANTS = {
    "distillation": ["--mask_weight", "0", "--curriculum_increment", "1.0"],
    "+ MLM": ["--curriculum_increment", "1.0"],
    # Prefix stages 10%..90% share the first half of the run, whole sentences the second half.
    "+ MLM + curriculum": ["--curriculum_increment", "0.1", "--curriculum_fraction", "0.5"],
    # The even split: each of the 10 stages gets a tenth of the run (whole sentences only in the last tenth).
    "+ MLM + curriculum (even split)": ["--curriculum_increment", "0.1"],
}
ASSERTED = "+ MLM + curriculum"
BATCH_SIZE = 64
MAX_LENGTH = 64


def _prepare(
    folder: Path, languages: list[str], train_pairs: int, eval_pairs: int, monolingual_cap: int | None = None
) -> dict[str, dict[str, int]]:
    from bitext_hf.data import gettext_pairs

    sizes = {}
    for language in languages:
        pairs = gettext_pairs(language)
        rng = np.random.default_rng(0)
        candidates = [index for index, (english, _) in enumerate(pairs) if len(english.split()) >= 3]
        held = set(rng.choice(candidates, size=eval_pairs, replace=False).tolist())
        evaluation = [pairs[index] for index in sorted(held)]
        held_texts = {text for pair in evaluation for text in pair}
        rest = [
            pairs[i] for i in rng.permutation(len(pairs)) if i not in held and not held_texts.intersection(pairs[i])
        ]
        train, monolingual = rest[:train_pairs], [translation for _, translation in rest[train_pairs:]]
        monolingual = monolingual[:monolingual_cap] if monolingual_cap is not None else monolingual

        def write(name: str, lines: list[str]) -> None:
            # Unchanged files are left alone: parallel invocations on one folder never read a half-written file.
            path, text = folder / name, "".join(line + "\n" for line in lines)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")

        write(f"{language}-train.tsv", [f"{english}\t{translation}" for english, translation in train])
        write(f"{language}-eval.tsv", [f"{english}\t{translation}" for english, translation in evaluation])
        write(f"{language}-mono.txt", monolingual)
        sizes[language] = {"train": len(train), "monolingual": len(monolingual), "eval": len(evaluation)}
        sizes[language]["monolingual per pair"] = round(len(monolingual) / max(1, len(train)), 2)
    return sizes


def _seeds(value: str) -> int | list[int]:
    """LASER3_SEEDS: a count (``run_over_seeds`` takes the first DEFAULT_SEEDS) or comma-separated seeds ("42,")."""
    return [int(seed) for seed in value.split(",") if seed.strip()] if "," in value else int(value)


def _curve_evaluator(base: type, train_pairs: list[Any], eval_pairs: int, curves: list[dict[str, float]]) -> Any:
    """A drop-in for the recipe's XsimEvaluator whose periodic (Trainer) calls also measure over-fitting: xsim and the
    distillation loss (mean 1 - cos of student(xx) and teacher(English), the training loss without dropout) on the
    training pairs and on the held-out pairs; each call appends its values to ``curves``."""
    from bitext_hf.metrics.functional import xsim, xsim_micro_average
    from bitext_hf.training.distillation.evaluation import StudentEncoder

    # As many training pairs as held-out pairs, so both xsim search among the same number of candidates.
    train_sample = [dataclasses.replace(pairs, src=pairs.src[:eval_pairs], tgt=pairs.tgt[:eval_pairs])
                    for pairs in train_pairs]  # fmt: skip

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
                    cosine = np.sum(student * teacher, axis=1) / (
                        np.linalg.norm(student, axis=1) * np.linalg.norm(teacher, axis=1)
                    )
                    point[f"loss_{split}_{pairs.src_lang}"] = float(np.mean(1.0 - cosine))
            curves.append(point)
            metrics = {f"xsim_{language}": float(scores["xsim"]) for language, scores in held_out}
            metrics["xsim_all"] = float(xsim_micro_average([scores for _, scores in held_out])["xsim"])
            return metrics

    return CurveEvaluator


def _diagnostics(
    tokenizer_dir: Path, folder: Path, languages: list[str], steps: int, seeds: list[int]
) -> dict[str, Any]:
    """What the data and the schedule give each variant, measured without training: per task the share of batches
    (over the run's steps and seeds), how many times a training pair and a monolingual sentence are seen on average,
    and the curriculum's prefix lengths in student subwords per stage."""
    from transformers import PreTrainedTokenizerFast

    from bitext_hf.data import load_pairs, read_lines
    from bitext_hf.training.distillation.curriculum import curriculum_ratios, prefix_cuts
    from bitext_hf.training.distillation.sampling import DEFAULT_TASK_WEIGHTS, Stream, TaskSampler

    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    train = {lang: load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}") for lang in languages}
    mono = {lang: len(read_lines(folder / f"{lang}-mono.txt")) for lang in languages}
    english = len({text for pairs in train.values() for text in pairs.tgt})
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
        views = {f"distil epochs ({lang})": counts.get(("distil", lang), 0) * BATCH_SIZE / len(seeds) / len(train[lang])
                 for lang in languages}  # fmt: skip
        if mlm:
            views.update({f"mask epochs ({lang})": counts.get(("mask", lang), 0) * BATCH_SIZE / len(seeds) / mono[lang]
                          for lang in languages})  # fmt: skip
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


@pytest.mark.slow
def test_students_beat_the_teacher_on_unseen_languages(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import TrainingArguments

    from bitext_hf.data import load_pairs
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.training import parse_args

    folder = Path(os.environ.get("LASER3_EXPERIMENT_DIR", "/tmp/laser3_experiment"))
    folder.mkdir(parents=True, exist_ok=True)
    languages = os.environ.get("LASER3_LANGUAGES", "ka,el").split(",")
    steps = os.environ.get("LASER3_STEPS", "1500")
    variants = os.environ.get("LASER3_VARIANTS", ",".join(VARIANTS)).split(",")
    seeds = _seeds(os.environ.get("LASER3_SEEDS", "5"))
    curve_steps = int(os.environ.get("LASER3_CURVE_STEPS", "0"))
    # The last curve point must be the end of the run (the Trainer evaluates at multiples of eval_steps).
    assert curve_steps <= 0 or int(steps) % curve_steps == 0, "LASER3_CURVE_STEPS must divide LASER3_STEPS"
    eval_pairs = int(os.environ.get("LASER3_EVAL_PAIRS", "1000"))
    monolingual_cap = os.environ.get("LASER3_MONOLINGUAL")
    sizes = _prepare(
        folder,
        languages,
        int(os.environ.get("LASER3_TRAIN_PAIRS", "4000")),
        eval_pairs,
        int(monolingual_cap) if monolingual_cap else None,
    )
    spec = importlib.util.spec_from_file_location("distill_wolof", REPO / "recipes" / "distill_wolof.py")
    recipe = importlib.util.module_from_spec(spec)
    sys.modules["distill_wolof"] = recipe
    spec.loader.exec_module(recipe)
    # The teacher's zero-shot xsim is the same in every run (same teacher, same held-out pairs): computed once.
    teacher_scores: dict[str, Any] = {}
    compute_xsim = recipe.evaluate_xsim

    def teacher_once(*args: Any, **kwargs: Any) -> dict[str, dict[str, float]]:
        if "scores" not in teacher_scores:
            teacher_scores["scores"] = compute_xsim(*args, **kwargs)
        return teacher_scores["scores"]

    monkeypatch.setattr(recipe, "evaluate_xsim", teacher_once)
    curves: dict[str, dict[int, list[dict[str, float]]]] = {}  # variant -> seed -> one point per curve_steps
    if curve_steps > 0:
        train_pairs = [load_pairs(f"{lang}={folder / f'{lang}-train.tsv'}") for lang in languages]
        current: list[dict[str, float]] = []
        monkeypatch.setattr(recipe, "XsimEvaluator", _curve_evaluator(recipe.XsimEvaluator, train_pairs, eval_pairs,
                                                                      current))  # fmt: skip

    config = folder / "experiment.yaml"
    if not config.is_file():
        config.write_text("eval_bitexts: []\n", encoding="utf-8")
    common = [
        "--config", str(config),
        "--bitexts", *(f"{lang}={folder / f'{lang}-train.tsv'}" for lang in languages),
        "--monolingual", *(f"{lang}={folder / f'{lang}-mono.txt'}" for lang in languages),
        "--eval_bitexts", *(f"{lang}={folder / f'{lang}-eval.tsv'}" for lang in languages),
        "--mlm_languages", *languages, "--curriculum_languages", *languages,
        "--cache_dir", str(folder / "teacher_cache"), "--max_length", str(MAX_LENGTH),
        "--vocab_size", "8000", "--hidden_size", "256", "--num_hidden_layers", "2", "--num_attention_heads", "4",
        "--intermediate_size", "512", "--dropout", "0.1",
        "--per_device_train_batch_size", str(BATCH_SIZE), "--learning_rate", "1e-3",
        "--warmup_steps", os.environ.get("LASER3_WARMUP", "200"),
        "--max_steps", steps, "--logging_steps", "100", "--save_strategy", "no",
        "--disable_tqdm", "true", "--report_to", "none",
        "--group_by_length", os.environ.get("LASER3_GROUP_BY_LENGTH", "true"),
        *(["--eval_strategy", "steps", "--eval_steps", str(curve_steps)] if curve_steps > 0 else []),
    ]  # fmt: skip
    teacher: dict[str, float] = {}
    # Every run uses one vocabulary: LASER3_TOKENIZER (a tokenizer folder, e.g. shared by parallel invocations), else
    # the one the first run trains (same data, so the same vocabulary).
    tokenizer_dir = Path(os.environ["LASER3_TOKENIZER"]) if os.environ.get("LASER3_TOKENIZER") else None

    def train(variant: str, seed: int) -> dict[str, float]:
        nonlocal teacher, tokenizer_dir
        started = time.perf_counter()
        name = variant.replace(" ", "").replace("+", "plus_").replace("(", "-").replace(")", "")
        output_dir = folder / f"run-{name}-seed{seed}"
        results_file = output_dir / recipe.RESULTS_FILE
        if curve_steps > 0:
            current.clear()
        if results_file.exists() and os.environ.get("LASER3_REUSE_RUNS") == "1":
            # A finished run of an earlier invocation (same folder, same settings): the experiment resumes.
            results = json.loads(results_file.read_text(encoding="utf-8"))
        else:
            reuse = ["--tokenizer_name", str(tokenizer_dir)] if tokenizer_dir else []
            arguments = [*common, "--output_dir", str(output_dir), "--seed", str(seed), *VARIANTS[variant], *reuse]
            results = recipe.main(*parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments,
                                              args=arguments))  # fmt: skip
            if curve_steps > 0:
                results["curve"] = [{"step": (i + 1) * curve_steps, **point} for i, point in enumerate(current)]
                results_file.write_text(json.dumps(results, indent=2), encoding="utf-8")
        tokenizer_dir = tokenizer_dir or output_dir / "tokenizer"
        teacher = teacher or {k: v["xsim"] for k, v in results["teacher_zero_shot"].items()}
        if results.get("curve"):
            curves.setdefault(variant, {})[seed] = results["curve"]
        row = {k: v["xsim"] for k, v in results["student_after"].items()}
        if results.get("curve"):
            # The last curve point is the end of the run: the final gap between training and held-out pairs.
            row.update({k: v for k, v in results["curve"][-1].items() if k != "step"})
        row["train minutes"] = results["train_seconds"] / 60
        row["minutes"] = (time.perf_counter() - started) / 60
        print(variant, "seed", seed, row, flush=True)
        return row

    def every_variant(seed: int) -> dict[str, float]:
        # Seeds outer, variants inner: an experiment stopped early still holds every variant for the seeds it did.
        return {f"{variant} | {key}": value for variant in variants for key, value in train(variant, seed).items()}

    summary = run_over_seeds(every_variant, seeds, seed_everything=False)  # the recipe seeds every run itself
    formatted = summary.format()

    def by_variant(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
        split = {variant: {} for variant in variants}
        for key, value in values.items():
            variant, _, metric = key.partition(" | ")
            split[variant][metric] = value
        return split

    report: dict[str, Any] = {
        "sizes": sizes,
        "steps": int(steps),
        "seeds": summary.seeds,
        "teacher zero-shot": teacher,
    }
    report["mean +- std"] = by_variant(formatted)
    report["mean"], report["std"] = by_variant(summary.mean), by_variant(summary.std)
    report["runs"] = {str(seed): by_variant(run) for seed, run in zip(summary.seeds, summary.runs)}
    report["diagnostics"] = _diagnostics(tokenizer_dir, folder, languages, int(steps), summary.seeds)
    if curves:
        report["curves"] = curves
    (folder / "experiment_results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k not in ("runs", "curves")}, indent=2))
    checked = ASSERTED if ASSERTED in variants else variants[-1]
    for language in languages:
        assert report["mean"][checked][language] < teacher[language], (language, report["mean +- std"])
