"""The real offline experiment (slow): distil students for languages the offline teacher (USE v3, 16 languages)
never saw, on real translation pairs from this machine's gettext catalogs, and compare xsim on held-out pairs for
the teacher zero-shot, distillation only, + MLM, + MLM + curriculum (the paper's Tables 1 and 3 on real data).

Low-resource set-up after the paper's Wolof (21k bitexts + 94k monolingual sentences): per language a few thousand
training pairs, the remaining translations (their English dropped) as monolingual text for MLM, 1000 held-out pairs
(English side of at least three words) for xsim; no held-out sentence appears in any training file.

    OMP_NUM_THREADS=1 python -m pytest -m slow tests/test_distill_experiment.py -s

Knobs (environment): LASER3_EXPERIMENT_DIR (default /tmp/laser3_experiment), LASER3_LANGUAGES ("ka,el"),
LASER3_TRAIN_PAIRS (4000), LASER3_EVAL_PAIRS (1000), LASER3_STEPS (1500), LASER3_VARIANTS (all four students),
LASER3_GROUP_BY_LENGTH ("true"; "false" samples batches uniformly), LASER3_SEEDS ("42"; e.g. "42,43": every
variant once per seed, the table gives the mean and each seed), LASER3_REUSE_RUNS=1 (take the results of runs already finished in the folder instead of training them again).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

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


def _prepare(folder: Path, languages: list[str], train_pairs: int, eval_pairs: int) -> dict[str, dict[str, int]]:
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

        def write(name: str, lines: list[str]) -> None:
            (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")

        write(f"{language}-train.tsv", [f"{english}\t{translation}" for english, translation in train])
        write(f"{language}-eval.tsv", [f"{english}\t{translation}" for english, translation in evaluation])
        write(f"{language}-mono.txt", monolingual)
        sizes[language] = {"train": len(train), "monolingual": len(monolingual), "eval": len(evaluation)}
    return sizes


@pytest.mark.slow
def test_students_beat_the_teacher_on_unseen_languages():
    from transformers import TrainingArguments

    from bitext_hf.training import parse_args

    folder = Path(os.environ.get("LASER3_EXPERIMENT_DIR", "/tmp/laser3_experiment"))
    folder.mkdir(parents=True, exist_ok=True)
    languages = os.environ.get("LASER3_LANGUAGES", "ka,el").split(",")
    steps = os.environ.get("LASER3_STEPS", "1500")
    variants = os.environ.get("LASER3_VARIANTS", ",".join(VARIANTS)).split(",")
    seeds = os.environ.get("LASER3_SEEDS", "42").split(",")
    sizes = _prepare(
        folder,
        languages,
        int(os.environ.get("LASER3_TRAIN_PAIRS", "4000")),
        int(os.environ.get("LASER3_EVAL_PAIRS", "1000")),
    )
    spec = importlib.util.spec_from_file_location("distill_wolof", REPO / "recipes" / "distill_wolof.py")
    recipe = importlib.util.module_from_spec(spec)
    sys.modules["distill_wolof"] = recipe
    spec.loader.exec_module(recipe)

    config = folder / "experiment.yaml"
    config.write_text("eval_bitexts: []\n", encoding="utf-8")
    common = [
        "--config", str(config),
        "--bitexts", *(f"{lang}={folder / f'{lang}-train.tsv'}" for lang in languages),
        "--monolingual", *(f"{lang}={folder / f'{lang}-mono.txt'}" for lang in languages),
        "--eval_bitexts", *(f"{lang}={folder / f'{lang}-eval.tsv'}" for lang in languages),
        "--mlm_languages", *languages, "--curriculum_languages", *languages,
        "--cache_dir", str(folder / "teacher_cache"), "--max_length", "64",
        "--vocab_size", "8000", "--hidden_size", "256", "--num_hidden_layers", "2", "--num_attention_heads", "4",
        "--intermediate_size", "512", "--dropout", "0.1",
        "--per_device_train_batch_size", "64", "--learning_rate", "1e-3", "--warmup_steps", "200",
        "--max_steps", steps, "--logging_steps", "100", "--save_strategy", "no",
        "--disable_tqdm", "true", "--report_to", "none",
        "--group_by_length", os.environ.get("LASER3_GROUP_BY_LENGTH", "true"),
    ]  # fmt: skip
    runs: dict[str, dict[str, dict[str, float]]] = {}  # variant -> seed -> {language: xsim, "train minutes": ...}
    teacher: dict[str, float] = {}
    first_output: Path | None = None
    for seed in seeds:
        for variant in variants:
            started = time.perf_counter()
            name = variant.replace(" ", "").replace("+", "plus_").replace("(", "-").replace(")", "")
            output_dir = folder / f"run-{name}-seed{seed}"
            results_file = output_dir / recipe.RESULTS_FILE
            if results_file.exists() and os.environ.get("LASER3_REUSE_RUNS") == "1":
                # A finished run of an earlier invocation (same folder, same settings): the experiment resumes.
                results = json.loads(results_file.read_text(encoding="utf-8"))
            else:
                # Every run uses the vocabulary of the first finished run (same data, so the same vocabulary).
                reuse = ["--tokenizer_name", str(first_output)] if first_output else []
                arguments = [*common, "--output_dir", str(output_dir), "--seed", seed, *VARIANTS[variant], *reuse]
                results = recipe.main(*parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments,
                                                  args=arguments))  # fmt: skip
            first_output = first_output or output_dir
            teacher = teacher or {k: v["xsim"] for k, v in results["teacher_zero_shot"].items()}
            row = {k: v["xsim"] for k, v in results["student_after"].items()}
            row["train minutes"] = results["train_seconds"] / 60
            row["minutes"] = (time.perf_counter() - started) / 60
            runs.setdefault(variant, {})[seed] = row
            print(variant, "seed", seed, row, flush=True)
    mean = {
        variant: {key: float(np.mean([row[key] for row in by_seed.values()])) for key in next(iter(by_seed.values()))}
        for variant, by_seed in runs.items()
    }
    report = {"sizes": sizes, "steps": int(steps), "seeds": seeds, "teacher zero-shot": teacher, "mean": mean}
    report["runs"] = runs
    (folder / "experiment_results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    print(json.dumps(report, indent=2))
    checked = ASSERTED if ASSERTED in mean else variants[-1]
    for language in languages:
        assert mean[checked][language] < teacher[language], (language, report)
