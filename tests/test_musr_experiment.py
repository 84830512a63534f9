"""The real offline MuSR experiment (slow; issue 11): a small MuSR trained on six languages into English from this
machine's gettext catalogs, stage 1 (cross-entropy) against stage 2 (CrossConST), over seeds (mean +- std through
``bitext_hf.evaluation.run_over_seeds``), on the multi-way held-out set of each seed: xsim and bidirectional accuracy
against English and against the pivot (zh_CN, the paper's zh column). Also T = 1 against T = 5 language sampling on
the smallest language (ar), and the offline USE encoder on the same held-out sets (its training data is not ours, so
it is a reference, not a baseline of the same budget).

Settings: ``recipes/configs/musr-gettext.yaml``. Every run after the first uses the first run's vocabulary (the
same data, so the same kind of vocabulary, and one tokenizer training less per run).

    OMP_NUM_THREADS=1 python -m pytest -m slow tests/test_musr_experiment.py -s

Knobs (environment): MUSR_EXPERIMENT_DIR (default /tmp/musr_experiment), MUSR_SEEDS ("13,42,87"; "" runs only the
T = 1 seeds, the MUSR_CONTROL controls and the MUSR_USE_SEEDS USE evaluations, and reports nothing: a process beside
the T = 5 one), MUSR_T1_SEEDS (the T = 1 runs; default MUSR_SEEDS, "" for none), MUSR_T1_STAGES ("1": stage 1 only,
its stage 2 is cut to one step and not reported; "2": both stages), MUSR_STAGE1_STEPS / MUSR_STAGE2_STEPS (default:
the config's), MUSR_CONTROL (the seeds of the control, default MUSR_SEEDS, "" for none: stage 2 with alpha 0 from the
same T = 5 stage-1 model, the same steps and data, since stage 2 also trains longer), MUSR_REUSE_RUNS=1 (take the
results of runs already finished in the folder instead of training them again; the USE metrics of a seed are always
kept in ``use-seed<N>.json``), MUSR_TOKENIZER (a tokenizer folder for every run, e.g. the first run's ``tokenizer/``
once it is trained: a second process can then run the T = 1 seeds beside the T = 5 ones with the same vocabulary).

The folder receives ``experiment_results.json`` (every run's metrics, mean and std), ``table.md``,
``musr_gettext_xsim.png`` (xsim per language, stage 1 vs stage 2 vs USE) and ``model_card.md`` (the card of the
first T = 5 run with the multi-seed table and that figure).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
CONFIG = REPO / "recipes" / "configs" / "musr-gettext.yaml"
SMALLEST = "ar"


def _recipe() -> Any:
    spec = importlib.util.spec_from_file_location("train_musr", REPO / "recipes" / "train_musr.py")
    recipe = importlib.util.module_from_spec(spec)
    sys.modules["train_musr"] = recipe
    spec.loader.exec_module(recipe)
    return recipe


def _flat(results: dict[str, Any], stages: tuple[str, ...]) -> dict[str, float]:
    """``stage1/xsim_fr-en``-style keys from a run's eval_results.json."""
    return {f"{stage}/{key}": float(value) for stage in stages for key, value in results[stage]["final"].items()}


def _use_metrics(recipe: Any, seed: int, folder: Path) -> dict[str, float]:
    """The offline USE on the held-out set that the runs of ``seed`` held out (same split function, same seed);
    kept in ``folder/use-seed<N>.json`` (it depends only on the seed and the config's data)."""
    cached = folder / f"use-seed{seed}.json"
    if cached.exists():
        return json.loads(cached.read_text(encoding="utf-8"))
    from bitext_hf.encoders import USEEncoder
    from bitext_hf.training import parse_args
    from bitext_hf.training.musr import MuSREvaluator, load_many_to_one, multiway_held_out

    script_args, _, _ = parse_args(recipe.ScriptArguments, recipe.TrainingArguments, recipe.ModelArguments,
                                   args=["--config", str(CONFIG)])  # fmt: skip
    data = multiway_held_out(load_many_to_one(script_args.train_pairs), script_args.held_out, seed)
    evaluator = MuSREvaluator(None, data.held_out, script_args.pivot, batch_size=script_args.eval_batch_size)
    metrics = {f"use/{key}": value for key, value in evaluator.evaluate_encoder(USEEncoder(threads=1)).items()}
    cached.write_text(json.dumps(metrics), encoding="utf-8")
    return metrics


STAGES = (("stage1", "stage 1"), ("alpha0", "stage 2, alpha 0"), ("stage2", "stage 2 (CrossConST)"), ("use", "USE"))


def _table(report: dict[str, Any], languages: list[str], pivot: str) -> str:
    """Markdown: per target (English, the pivot) xsim and accuracy (%) per language and stage, mean ± std; then
    T = 1 vs T = 5 on the smallest language."""
    from bitext_hf.hub import markdown_table

    control = report.get("control") or {"mean": {}, "std": {}}
    mean, std = {**report["t5"]["mean"], **control["mean"]}, {**report["t5"]["std"], **control["std"]}

    def cell(key: str, source_mean: dict[str, float], source_std: dict[str, float], scale: float) -> str:
        return f"{source_mean[key] * scale:.1f} ± {source_std[key] * scale:.1f}" if key in source_mean else "-"

    seeds = f"Seeds: {', '.join(map(str, report['t5']['seeds']))}"
    if control["mean"]:
        seeds += f" (stage 2 with alpha 0: {', '.join(map(str, control['seeds']))})"
    blocks = [seeds + "; xsim in %, accuracy in % (mean of both directions), mean ± std over the seeds."]
    for target, label in (("en", "English"), ("pivot", pivot)):
        rows = []
        for language in [*languages, "average"]:
            if language == pivot and target == "pivot":
                continue
            suffix = target if language == "average" else f"{language}-{'en' if target == 'en' else pivot}"
            row: dict[str, str] = {"language": language}
            for metric, scale in (("xsim", 1.0), ("accuracy", 100.0)):
                for stage, name in STAGES:
                    row[f"{metric} {name}"] = cell(f"{stage}/{metric}_{suffix}", mean, std, scale)
            rows.append(row)
        blocks.append(f"Against {label} (xx → {'en' if target == 'en' else pivot}):\n\n" + markdown_table(rows))
    t1 = report.get("t1")
    if t1:
        comparison = []
        for key, scale in ((f"xsim_{SMALLEST}-en", 1.0), (f"accuracy_{SMALLEST}-en", 100.0),
                           (f"xsim_{SMALLEST}-{pivot}", 1.0), ("xsim_en", 1.0), ("accuracy_en", 100.0)):  # fmt: skip
            comparison.append({"stage 1": key, "T = 1": cell(f"stage1/{key}", t1["mean"], t1["std"], scale),
                               "T = 5": cell(f"stage1/{key}", mean, std, scale)})  # fmt: skip
        seeds = ", ".join(map(str, t1["seeds"]))
        blocks.append(f"T = 1 vs T = 5 (stage 1, seeds {seeds}):\n\n" + markdown_table(comparison))
    return "\n\n".join(blocks)


@pytest.mark.slow
def test_musr_stage1_stage2_over_seeds():
    from transformers import TrainingArguments

    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.hub.figures import xsim_by_series
    from bitext_hf.training import parse_args

    folder = Path(os.environ.get("MUSR_EXPERIMENT_DIR", "/tmp/musr_experiment"))
    folder.mkdir(parents=True, exist_ok=True)
    seeds = [int(seed) for seed in os.environ.get("MUSR_SEEDS", "13,42,87").split(",") if seed.strip()]
    t1_seeds = [int(s) for s in os.environ.get("MUSR_T1_SEEDS", ",".join(map(str, seeds))).split(",") if s.strip()]
    t1_stages = ("stage1",) if os.environ.get("MUSR_T1_STAGES", "1") == "1" else ("stage1", "stage2")
    steps: list[str] = []
    for name in ("stage1_steps", "stage2_steps"):
        if (knob := os.environ.get(f"MUSR_{name.upper()}")) is not None:
            steps += [f"--{name}", knob]
    reuse = os.environ.get("MUSR_REUSE_RUNS") == "1"
    control_env = os.environ.get("MUSR_CONTROL", ",".join(map(str, seeds)))
    control_seeds = [int(seed) for seed in control_env.split(",") if seed.strip()]
    use_seeds = [int(s) for s in os.environ.get("MUSR_USE_SEEDS", "").split(",") if s.strip()]
    recipe = _recipe()
    minutes: dict[str, dict[str, float]] = {}
    first_output: list[Path] = []
    results_by_run: dict[str, dict[str, Any]] = {}

    def run(name: str, seed: int, extra: list[str], stages: tuple[str, ...]) -> dict[str, float]:
        output_dir = folder / f"run-{name}-seed{seed}"
        results_file = output_dir / recipe.RESULTS_FILE
        started = time.perf_counter()
        if reuse and results_file.exists():
            results = json.loads(results_file.read_text(encoding="utf-8"))
        else:
            given = os.environ.get("MUSR_TOKENIZER")
            vocabulary = ["--tokenizer", given or str(first_output[0])] if given or first_output else []
            arguments = ["--config", str(CONFIG), "--output_dir", str(output_dir), "--seed", str(seed), *steps,
                         *extra, *vocabulary]  # fmt: skip
            results = recipe.main(*parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments,
                                              args=arguments))  # fmt: skip
        first_output[:] = first_output or [output_dir]
        histories = [results.get(stage, {}).get("log_history", []) for stage in ("stage1", "stage2")]
        minutes[f"{name}-seed{seed}"] = {
            "train": sum(entry.get("train_runtime", 0.0) for history in histories for entry in history) / 60,
            "this call": (time.perf_counter() - started) / 60,  # near 0 for a reused run
        }
        results_by_run[f"{name}-seed{seed}"] = results
        metrics = _flat(results, stages)
        print(
            name, "seed", seed, {key: metrics[key] for key in metrics if key.endswith(("_en", "_pivot"))}, flush=True
        )
        return metrics

    def control(seed: int) -> dict[str, float]:
        """Stage 2 without CrossConST (alpha 0, the same steps and data) from the same stage-1 model: what the
        stage-2 steps give without the KL term (stage 2 also trains longer)."""
        target = folder / f"run-T5-alpha0-seed{seed}" / "stage1"
        if not target.exists():
            shutil.copytree(folder / f"run-T5-seed{seed}" / "stage1", target)
        metrics = run("T5-alpha0", seed, ["--alpha", "0", "--resume_from_checkpoint", "auto"], ("stage2",))
        return {key.replace("stage2/", "alpha0/", 1): value for key, value in metrics.items()}

    def t5(seed: int) -> dict[str, float]:
        return {**run("T5", seed, [], ("stage1", "stage2")), **_use_metrics(recipe, seed, folder)}

    report: dict[str, Any] = {"config": str(CONFIG.relative_to(REPO)), "seeds": seeds}
    t1_extra = ["--temperature", "1"] + (["--stage2_steps", "1"] if t1_stages == ("stage1",) else [])
    if not seeds:  # only the T = 1 runs and controls (a process beside the T = 5 one); a later run with reuse reports
        for seed in use_seeds:
            _use_metrics(recipe, seed, folder)
        for seed in control_seeds:
            control(seed)
        if t1_seeds:
            run_over_seeds(lambda seed: run("T1", seed, t1_extra, t1_stages), t1_seeds)
        return
    report["t5"] = run_over_seeds(t5, seeds).to_dict()
    if control_seeds:
        report["control"] = run_over_seeds(control, control_seeds).to_dict()
    if t1_seeds:
        report["t1"] = run_over_seeds(lambda seed: run("T1", seed, t1_extra, t1_stages), t1_seeds).to_dict()
    first = results_by_run[f"T5-seed{seeds[0]}"]
    languages, pivot = first["data"]["languages"], first["data"]["pivot"]
    report["data"] = first["data"]
    report["minutes"] = minutes
    (folder / "experiment_results.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    table = _table(report, languages, pivot)
    (folder / "table.md").write_text(table + "\n", encoding="utf-8")
    print(table)

    runs = report["t5"]["runs"]
    runs_of = {stage: report["control" if stage == "alpha0" else "t5"]["runs"] for stage, _ in STAGES
               if stage != "alpha0" or control_seeds}  # fmt: skip
    series = {
        label: {lang: [run_[f"{stage}/xsim_{lang}-en"] for run_ in runs_of[stage]] for lang in languages}
        for stage, label in STAGES
        if stage in runs_of
    }
    figure = xsim_by_series(series, folder / "musr_gettext_xsim.png",
                            title=f"MuSR on gettext, xx→en xsim ({len(runs)} seeds; lower is better)")  # fmt: skip
    script_args, _, _ = parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments,
                                   args=["--config", str(CONFIG)])  # fmt: skip
    card = recipe.model_card(script_args, first, figures=[figure], seed_table=table)
    (folder / "model_card.md").write_text(card, encoding="utf-8")

    # What could fail: every language has finite stage-1, stage-2 and USE numbers in both directions, the T = 1
    # runs report the smallest language, and the card carries the multi-seed table and the figure.
    for language in languages:
        for stage in runs_of:
            for metric in ("xsim", "accuracy"):
                keys = [f"{stage}/{metric}_{language}-en"] + ([f"{stage}/{metric}_{language}-{pivot}"]
                                                                if language != pivot else [])  # fmt: skip
                for key in keys:
                    assert all(math.isfinite(run_[key]) for run_ in runs_of[stage]), key
    if t1_seeds:
        assert f"stage1/xsim_{SMALLEST}-en" in report["t1"]["mean"]
    assert figure.path.stat().st_size > 0
    assert "musr_gettext_xsim.png" in card and "stage 2 (CrossConST)" in card
    assert "T = 1 vs T = 5" in card or not t1_seeds


# Fast tests of what the experiment added: the figure, the card's figure and seed table, USE-style evaluation.


def test_xsim_by_series_means_and_caption(tmp_path):
    from bitext_hf.hub.figures import xsim_by_series

    figure = xsim_by_series(
        {"stage 1": {"fr": [10.0, 12.0, 14.0], "ar": [30.0, 32.0, 34.0]}, "stage 2": {"fr": [8.0, 9.0, 10.0]},
         "USE": {"fr": 5.0, "ar": 20.0}},
        tmp_path / "bars.png",
    )  # fmt: skip
    assert figure.path.stat().st_size > 1000
    # averages over languages of the per-language means; a language missing from a series is skipped there
    assert "stage 1 22.00%" in figure.caption and "stage 2 9.00%" in figure.caption and "USE 12.50%" in figure.caption
    assert "mean over 3 runs" in figure.caption
    single = xsim_by_series({"stage 1": {"fr": 10.0}}, tmp_path / "one.png")
    assert "runs" not in single.caption
    with pytest.raises(ValueError):
        xsim_by_series({"stage 1": {}}, tmp_path / "none.png")
    with pytest.raises(ValueError):
        xsim_by_series({"stage 1": {"fr": 1.0}}, tmp_path / "bars.jpg")


def _results() -> dict[str, Any]:
    final = {"xsim_fr-en": 40.0, "xsim_ar-en": 60.0, "accuracy_fr-en": 0.5, "xsim_en": 50.0, "accuracy_en": 0.5,
             "xsim_pivot": 70.0, "accuracy_pivot": 0.3, "bucc_f1_en": 0.4}  # fmt: skip
    return {"data": {"languages": ["fr", "ar"], "pivot": "fr", "train_examples": [10, 10]},
            "stage1": {"final": final}, "stage2": {"final": {**final, "xsim_fr-en": 30.0, "xsim_ar-en": 45.0}}}  # fmt: skip


def test_card_shows_the_stage_figure_and_the_seed_table(tmp_path):
    from transformers import TrainingArguments

    from bitext_hf.training import parse_args

    recipe = _recipe()
    script_args, _, _ = parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ModelArguments, args=[])
    figures = recipe.stage_figure(_results(), tmp_path)
    assert [figure.path.name for figure in figures] == ["xsim_by_stage.png"]
    assert "stage 1 50.00%" in figures[0].caption and "stage 2 (CrossConST) 37.50%" in figures[0].caption
    card = recipe.model_card(script_args, _results(), figures=figures, seed_table="| seeds | 3 |")
    assert "](xsim_by_stage.png)" in card and "| seeds | 3 |" in card and "Over seeds" in card
    assert "Over seeds" not in recipe.model_card(script_args, _results())
    no_held_out = {**_results(), "stage1": {"final": {}}, "stage2": {"final": {}}}
    assert recipe.stage_figure(no_held_out, tmp_path / "none") == []


def test_evaluate_encoder_scores_any_encoder(tiny_parallel_corpus_by_language):
    from bitext_hf.data import PairSet
    from bitext_hf.training.musr import MuSREvaluator

    english = [en for en, _ in tiny_parallel_corpus_by_language["fr"][:8]]
    held_out = {
        lang: PairSet(lang, "en", "test", [f"{lang}:{text}" for text in english], english) for lang in ("fr", "de")
    }

    class Lookup:
        """Each sentence's vector is its English sentence's one-hot: a perfect encoder."""

        def encode(self, texts, batch_size=32):
            rows = [english.index(text.split(":", 1)[-1]) for text in texts]
            return np.eye(len(english), dtype=np.float32)[rows]

    metrics = MuSREvaluator(None, held_out, "fr").evaluate_encoder(Lookup())
    assert metrics["xsim_fr-en"] == metrics["xsim_de-fr"] == 0.0
    assert metrics["accuracy_en"] == metrics["accuracy_pivot"] == 1.0
