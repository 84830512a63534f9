"""MuSR (Gao et al., 2023): stage 1 (cross-entropy) against stage 2 (CrossConST) over seeds, with two controls.

A small MuSR trained on six languages into English from this machine's gettext catalogs
(``recipes/configs/musr-gettext.yaml``), through ``recipes/train_musr.py``. On the multi-way held-out set of each
seed: xsim and bidirectional accuracy against English and against the pivot (zh_CN, the paper's zh column), as mean
+- sample std over the seeds (``bitext_hf.evaluation.run_over_seeds``). Each seed's stage-1 model also starts two
controls, both stage 2 with alpha 0 for the compute of the CrossConST stage (its steps times --control_cost_factor,
the cost of a CrossConST step in cross-entropy steps, measured by ``benchmarks/bench_musr.py``):

* A, same compute: the same stage-2 pairs; what more training gives without the KL term.
* B, same compute + English -> English: the stage-2 pairs plus an English -> English copy of each (the English
  target as the source too; ``--stage2_english_copies``). In stage 1 English never enters the encoder, so part of
  the held-out English vocabulary is untrained; CrossConST's target-as-input pass encodes each pair's English once
  per pass over its source. A 1:1 mix, shuffled with the pairs, gives the encoder the same share of English at the
  same batch size and cost per step (holding each pair and its copy in one batch would need its own sampler and
  changes the proportion only within batches, not over the stage); it sees fewer translation pairs than A, as
  CrossConST spends part of its compute on English too. CrossConST is credited only with what it adds over B: the
  report has the difference per seed.

Then the offline USE on the same held-out sets (its training data is not ours: a reference, not a baseline of the
same budget), and, optionally, T = 1 against T = 5 language sampling on the smallest language (measured before:
off by default). Every run after the first uses the first run's vocabulary (the same data, so the same kind of
vocabulary, and one tokenizer training less per run).

    OMP_NUM_THREADS=1 python experiments/musr_crossconst.py

Writes ``<output_dir>/results.json`` (every run's metrics, mean and std), ``<output_dir>/results.md`` (the tables),
``musr_gettext_xsim.png`` (xsim per language: stage 1, stage 2, the controls, USE) and ``model_card.md`` (the card of
the first T = 5 run with the multi-seed tables and that figure).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from common import (
    REPO,
    add_run_folder_options,
    load_recipe,
    prepare_run_folder,
    run_script,
    seed_list,
    write_file,
    write_results,
)

logger = logging.getLogger("musr_crossconst")

CONFIG = REPO / "recipes" / "configs" / "musr-gettext.yaml"
FIGURE, CARD = "musr_gettext_xsim.png", "model_card.md"
STAGES = (
    ("stage1", "stage 1"),
    ("alpha0", "stage 2, alpha 0 (same compute)"),
    ("alpha0_en", "stage 2, alpha 0 + en->en"),
    ("stage2", "stage 2 (CrossConST)"),
    ("use", "USE"),
)
CONTROLS = ("alpha0", "alpha0_en")
# CrossConST minus control B, per seed: the averages over languages (xsim lower is better, accuracy higher).
DIFFERENCES = (("xsim_en", 1.0), ("accuracy_en", 100.0), ("xsim_pivot", 1.0), ("accuracy_pivot", 100.0))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="musr_crossconst", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    add_run_folder_options(parser, "/tmp/musr_experiment")
    parser.add_argument(
        "--config", type=Path, default=CONFIG, help="The recipe's settings and data (default: %(default)s)."
    )
    parser.add_argument(
        "--seeds", type=seed_list, default=[13, 42, 87], help="Seeds of the T = 5 runs (default: 13,42,87)."
    )
    parser.add_argument(
        "--t1_seeds",
        type=seed_list,
        default=[],
        help="Optional: seeds of T = 1 runs against the T = 5 ones (measured before, see experiments/README.md; "
        "each costs a stage 1) (default: none).",
    )
    parser.add_argument(
        "--t1_stages",
        choices=("1", "2"),
        default="1",
        help="1: T = 1 runs stage 1 only (its stage 2 is cut to one step and not reported); 2: both (default: 1).",
    )
    parser.add_argument(
        "--t1_language", default="ar", help="The language T = 1 vs T = 5 is reported on: the smallest (default: ar)."
    )
    parser.add_argument(
        "--control",
        type=seed_list,
        default=None,
        help="Seeds of both controls (stage 2 with alpha 0 from the same T = 5 stage-1 model for the compute of "
        "its CrossConST stage: A the same pairs, B with their English -> English copies); '' for none "
        "(default: --seeds).",
    )
    parser.add_argument(
        "--control_cost_factor",
        type=float,
        default=2.5,
        help="The controls' stage-2 steps are CrossConST's times this: the cost of a CrossConST step in "
        "cross-entropy steps, from benchmarks/bench_musr.py (benchmarks/README.md: 2.08x to 2.54x; the upper end "
        "gives the controls at least CrossConST's compute) (default: %(default)s).",
    )
    parser.add_argument("--stage1_steps", type=int, default=None, help="Stage-1 steps (default: the config's).")
    parser.add_argument("--stage2_steps", type=int, default=None, help="Stage-2 steps (default: the config's).")
    parser.add_argument(
        "--tokenizer",
        type=Path,
        default=None,
        help="A tokenizer folder for every run (default: the one the first run trains).",
    )
    parser.add_argument(
        "--reference",
        choices=("use", "none"),
        default="use",
        help="use: score the offline USE on each seed's held-out set as a reference; none: skip it (default: use).",
    )
    return parser


def flat(results: dict[str, Any], stages: tuple[str, ...]) -> dict[str, float]:
    """``stage1/xsim_fr-en``-style keys from a run's results."""
    return {f"{stage}/{key}": float(value) for stage in stages for key, value in results[stage]["final"].items()}


def use_metrics(recipe: Any, config: Path, seed: int) -> dict[str, float]:
    """The offline USE on the held-out set that the runs of ``seed`` held out (same split function, same seed)."""
    from transformers import TrainingArguments

    from bitext_hf.encoders import USEEncoder
    from bitext_hf.families.musr import MuSREvaluator, load_many_to_one, multiway_held_out
    from bitext_hf.training import parse_args

    script_args, _, _ = parse_args(
        recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=["--config", str(config)]
    )
    data = multiway_held_out(load_many_to_one(script_args.train_pairs), script_args.held_out, seed)
    evaluator = MuSREvaluator(None, data.held_out, script_args.pivot, batch_size=script_args.eval_batch_size)
    return {f"use/{key}": value for key, value in evaluator.evaluate_encoder(USEEncoder(threads=1)).items()}


def markdown(report: dict[str, Any], languages: list[str], pivot: str, t1_language: str) -> str:
    """The regime; per target (English, the pivot) xsim and accuracy (%) per language and stage, mean ± std;
    CrossConST minus control B per seed; then T = 1 vs T = 5 on the smallest language when it ran."""
    from bitext_hf.hub import markdown_table

    control = report.get("control") or {"mean": {}, "std": {}, "runs": [], "seeds": []}
    mean, std = {**report["t5"]["mean"], **control["mean"]}, {**report["t5"]["std"], **control["std"]}

    def cell(key: str, source_mean: dict[str, float], source_std: dict[str, float], scale: float) -> str:
        return f"{source_mean[key] * scale:.1f} ± {source_std[key] * scale:.1f}" if key in source_mean else "-"

    regime = report["regime"]
    seeds = f"Seeds: {', '.join(map(str, report['t5']['seeds']))}"
    if control["mean"]:
        seeds += f" (controls: {', '.join(map(str, control['seeds']))})"
    blocks = [
        f"Regime: {len(languages)} languages into English, {regime['stage1_steps']} stage-1 steps, "
        f"{regime['stage2_steps']} stage-2 (CrossConST, alpha {regime['alpha']}) steps of {regime['batch_size']} "
        "pairs; the controls (alpha 0, from "
        f"the same stage-1 model) {regime['control_steps']} steps = {regime['stage2_steps']} x "
        f"{regime['control_cost_factor']} (a CrossConST step's cost in cross-entropy steps); en->en: an English -> "
        "English copy of each stage-2 pair in the mix (1:1).",
        seeds + "; xsim in %, accuracy in % (mean of both directions), mean ± std over the seeds.",
    ]
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
    differences = [(key, scale) for key, scale in DIFFERENCES if f"diff/{key}" in control["mean"]]
    if differences:
        rows = [
            {"seed": str(seed), **{key: f"{run_[f'diff/{key}'] * scale:+.1f}" for key, scale in differences}}
            for seed, run_ in zip(control["seeds"], control["runs"])
        ]
        rows.append(
            {
                "seed": "mean ± std",
                **{
                    key: f"{control['mean'][f'diff/{key}'] * scale:+.1f} ± {control['std'][f'diff/{key}'] * scale:.1f}"
                    for key, scale in differences
                },
            }
        )
        blocks.append(
            "CrossConST minus control B (stage 2, alpha 0 + en->en), per seed, averages over languages (xsim: "
            "negative favours CrossConST; accuracy: positive does):\n\n" + markdown_table(rows)
        )
    t1 = report.get("t1")
    if t1:
        comparison = []
        for key, scale in (
            (f"xsim_{t1_language}-en", 1.0),
            (f"accuracy_{t1_language}-en", 100.0),
            (f"xsim_{t1_language}-{pivot}", 1.0),
            ("xsim_en", 1.0),
            ("accuracy_en", 100.0),
        ):
            comparison.append(
                {
                    "stage 1": key,
                    "T = 1": cell(f"stage1/{key}", t1["mean"], t1["std"], scale),
                    "T = 5": cell(f"stage1/{key}", mean, std, scale),
                }
            )
        seeds = ", ".join(map(str, t1["seeds"]))
        blocks.append(f"T = 1 vs T = 5 (stage 1, seeds {seeds}):\n\n" + markdown_table(comparison))
    return "\n\n".join(blocks)


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Every T = 5 seed (stage 1, stage 2, USE), its two controls, the T = 1 seeds; from scratch; write the report."""
    from transformers import TrainingArguments

    from bitext_hf.data import parse_spec
    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.hub.figures import xsim_by_series
    from bitext_hf.training import parse_args

    if not args.seeds:
        raise UsageError("--seeds: give at least one seed")
    if not args.config.is_file():
        raise UsageError(f"--config {args.config}: not a file")
    if not args.control_cost_factor > 0:
        raise UsageError(f"--control_cost_factor must be > 0, got {args.control_cost_factor}")
    control_seeds = args.seeds if args.control is None else args.control
    if not set(control_seeds) <= set(args.seeds):
        raise UsageError("--control: each seed must be one of --seeds (the controls start from that T = 5 run)")
    t1_stages = ("stage1",) if args.t1_stages == "1" else ("stage1", "stage2")
    recipe = load_recipe("train_musr")
    script_args, training_args, _ = parse_args(
        recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=["--config", str(args.config)]
    )
    stage_steps = {
        name: getattr(args, name) or getattr(script_args, name) or training_args.max_steps
        for name in ("stage1_steps", "stage2_steps")
    }
    control_steps = max(1, round(stage_steps["stage2_steps"] * args.control_cost_factor))
    steps = [flag for name, count in stage_steps.items() for flag in (f"--{name}", str(count))]
    data_files = [Path(path) for spec in script_args.train_pairs for path in parse_spec(spec).paths]
    inputs = [args.config, args.tokenizer, *data_files]
    folder = prepare_run_folder(
        args.output_dir, args.overwrite, (FIGURE, CARD), script=Path(__file__).stem, inputs=inputs
    )
    minutes: dict[str, dict[str, float]] = {}
    vocabulary: list[Path] = [args.tokenizer] if args.tokenizer else []
    results_by_run: dict[str, dict[str, Any]] = {}

    def run(name: str, seed: int, extra: list[str], stages: tuple[str, ...]) -> dict[str, float]:
        output_dir = folder / f"run-{name}-seed{seed}"
        started = time.perf_counter()
        arguments = [
            "--config",
            str(args.config),
            "--output_dir",
            str(output_dir),
            "--seed",
            str(seed),
            *steps,
            *extra,  # after the steps: a control's --stage2_steps replaces CrossConST's
            *(["--tokenizer", str(vocabulary[0])] if vocabulary else []),
        ]
        results = recipe.main(
            *parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=arguments)
        )
        vocabulary[:] = vocabulary or [output_dir]  # the first run's saved model holds its tokenizer
        histories = [results.get(stage, {}).get("log_history", []) for stage in ("stage1", "stage2")]
        minutes[f"{name}-seed{seed}"] = {
            "train": sum(entry.get("train_runtime", 0.0) for history in histories for entry in history) / 60,
            "run": (time.perf_counter() - started) / 60,
        }
        results_by_run[f"{name}-seed{seed}"] = results
        metrics = flat(results, stages)
        logger.info("%s seed %s: %s", name, seed, {k: v for k, v in metrics.items() if k.endswith(("_en", "_pivot"))})
        return metrics

    def t5(seed: int) -> dict[str, float]:
        reference = use_metrics(recipe, args.config, seed) if args.reference == "use" else {}
        return {**run("T5", seed, [], ("stage1", "stage2")), **reference}

    def control(seed: int) -> dict[str, float]:
        """Both controls from the T = 5 run's stage-1 model (copied: the recipe resumes after a finished stage 1),
        then CrossConST minus control B on the averages."""
        metrics: dict[str, float] = {}
        for prefix, name, extra in (
            ("alpha0", "T5-alpha0", []),
            # B: the encoder reads English as in CrossConST's target-as-input pass, 1:1 (module docstring: why).
            ("alpha0_en", "T5-alpha0-en", ["--stage2_english_copies", "true"]),
        ):
            shutil.copytree(folder / f"run-T5-seed{seed}" / "stage1", folder / f"run-{name}-seed{seed}" / "stage1")
            flags = ["--alpha", "0", "--stage2_steps", str(control_steps), "--resume_from_checkpoint", "auto", *extra]
            result = run(name, seed, flags, ("stage2",))
            metrics |= {key.replace("stage2/", f"{prefix}/", 1): value for key, value in result.items()}
        crossconst = results_by_run[f"T5-seed{seed}"]["stage2"]["final"]
        for key, _ in DIFFERENCES:
            if key in crossconst:
                metrics[f"diff/{key}"] = float(crossconst[key]) - metrics[f"alpha0_en/{key}"]
        return metrics

    report: dict[str, Any] = {"experiment": "musr_crossconst", "config": str(args.config), "seeds": args.seeds}
    report["t5"] = run_over_seeds(t5, args.seeds).to_dict()
    if control_seeds:
        report["control"] = run_over_seeds(control, control_seeds).to_dict()
    if args.t1_seeds:
        t1_extra = ["--temperature", "1"] + (["--stage2_steps", "1"] if t1_stages == ("stage1",) else [])
        report["t1"] = run_over_seeds(lambda seed: run("T1", seed, t1_extra, t1_stages), args.t1_seeds).to_dict()
    first = results_by_run[f"T5-seed{args.seeds[0]}"]
    languages, pivot = first["data"]["languages"], first["data"]["pivot"]
    report["regime"] = {
        "data": first["data"],
        **stage_steps,
        "alpha": script_args.alpha,
        "batch_size": training_args.per_device_train_batch_size,
        "control_steps": control_steps,
        "control_cost_factor": args.control_cost_factor,
        "t1 stages": list(t1_stages),
        "reference": args.reference,
    }
    report["minutes"] = minutes
    table = markdown(report, languages, pivot, args.t1_language)

    runs_of = {
        stage: report["control" if stage in CONTROLS else "t5"]["runs"]
        for stage, _ in STAGES
        if (stage not in CONTROLS or control_seeds) and (stage != "use" or args.reference == "use")
    }
    series = {
        label: {lang: [run_[f"{stage}/xsim_{lang}-en"] for run_ in runs_of[stage]] for lang in languages}
        for stage, label in STAGES
        if stage in runs_of
    }
    figure = xsim_by_series(
        series, folder / FIGURE, title=f"MuSR, xx→en xsim ({len(args.seeds)} seeds; lower is better)"
    )
    card = recipe.model_card(script_args, first, figures=[figure], seed_table=table)
    write_file(args.output_dir / FIGURE, figure.path.read_bytes())
    write_file(args.output_dir / CARD, card)
    write_results(args.output_dir, report, table)
    return report


if __name__ == "__main__":
    run_script(main, build_parser())
