"""MuSR (Gao et al., 2023) under the paper's protocol: stage 1 to a plateau, then CrossConST against cross-entropy
arms of equal updates and of equal compute, over seeds, with the verdict rule printed before the numbers.

The protocol (issue 36; experiments/README.md "MuSR"), on this machine's gettext catalogs (``--languages`` into
English, ``--pivot`` the non-English column; the model and optimizer of ``--config``), through
``recipes/train_musr.py``:

1. Stage 1, cross-entropy, until a plateau: every ``--stage1_eval_steps`` steps the plain cross-entropy of the
   multi-way held-out pairs; the stage ends when each of the last ``--stage1_patience`` of them improved on the one
   before by less than ``--stage1_plateau`` (relative), or at ``--stage1_steps`` (the cap). Precondition of a
   verdict: stage-1 xsim into the pivot under ``--pivot_xsim_below`` % in every seed; otherwise "regime not reached".
2. Stage 2 arms, each from the same seed's stage-1 model with a fresh optimizer, without label smoothing (the
   reference criterion's plain cross-entropy; ``--stage2_label_smoothing``): CrossConST at each of ``--alphas`` for
   ``--stage2_steps`` updates; control A (alpha 0, the same pairs) for the same updates and for CrossConST's compute
   (the updates times ``--control_cost_factor``, a CrossConST step's cost in cross-entropy steps from
   ``benchmarks/bench_musr.py``); control B (A at CrossConST's compute plus an English -> English copy of each pair,
   ``--stage2_english_copies``), a reported row, not the verdict.
3. The verdict (``VERDICT_RULE``) against A on the average xsim into English, printed with the tables.

Then the offline USE on the same held-out sets (its training data is not ours: a reference, not a baseline).

    OMP_NUM_THREADS=1 python experiments/musr_crossconst.py

Writes ``<output_dir>/results.json`` (every run's metrics, mean and std, the plateau of each seed, the verdict),
``<output_dir>/results.md`` (the tables, the paper's Table 4, the rule and the verdict), ``musr_gettext_xsim.png``
(xsim per language and arm) and ``model_card.md`` (the card of the first seed's CrossConST run with those tables).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
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
VERDICT_RULE = (
    "Verdict rule (fixed before any number of this protocol): the regime counts only if stage 1 reached xsim into "
    "the pivot below the threshold in every seed (otherwise: regime not reached, no verdict). Then, on the average "
    "xsim into English, CrossConST (at either alpha, both reported) shows a gain only if it beats control A at equal "
    "updates AND control A at CrossConST's compute, each by more than the seeds' spread: the mean over seeds of (A "
    "minus CrossConST) is larger than the sample standard deviation of those per-seed differences (two seeds at "
    "least). Otherwise: no gain. Control B is reported, not part of the verdict."
)
# The protocol's numbers: (option, type, default, help); RECIPE_OPTIONS reach the recipe under the same names.
PROTOCOL_OPTIONS = (
    ("stage1_steps", int, 3000, "Stage-1 step cap"),
    (
        "stage1_plateau",
        float,
        0.01,
        "Stage 1 stops when each of the last --stage1_patience held-out cross-entropies improved by less than this "
        "fraction; 0: run the cap",
    ),
    ("stage1_eval_steps", int, 100, "Steps between the held-out cross-entropies of --stage1_plateau"),
    ("stage1_patience", int, 3, "See --stage1_plateau"),
    ("pivot_xsim_below", float, 50.0, "Precondition: stage-1 xsim into the pivot (%%) below this in every seed"),
    ("stage2_steps", int, 300, "Updates of every equal-update arm"),
    (
        "stage2_label_smoothing",
        float,
        0.0,
        "Stage 2's label smoothing in every arm: 0 as the reference criterion; the config's (0.1) was the earlier "
        "protocol",
    ),
    (
        "control_cost_factor",
        float,
        2.5,
        "The compute-matched arms' updates are --stage2_steps times this: the cost of a CrossConST step in "
        "cross-entropy steps, from benchmarks/bench_musr.py (benchmarks/README.md: 2.08x to 2.54x; the upper end "
        "gives the controls at least CrossConST's compute)",
    ),
)
RECIPE_OPTIONS = ("stage1_steps", "stage1_plateau", "stage1_eval_steps", "stage1_patience", "stage2_label_smoothing")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="musr_crossconst", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    add_run_folder_options(parser, "/tmp/musr_experiment")
    parser.add_argument(
        "--config", type=Path, default=CONFIG, help="The recipe's model and optimizer (default: %(default)s)."
    )
    parser.add_argument(
        "--languages",
        default="fr,de,es",
        help="Source languages into English, from this machine's gettext catalogs; '' keeps the config's "
        "train_pairs (default: %(default)s).",
    )
    parser.add_argument(
        "--pivot", default="de", help="The non-English pivot ('' keeps the config's) (default: %(default)s)."
    )
    parser.add_argument(
        "--seeds",
        type=seed_list,
        default=[13, 42],
        help="Seeds: two fit the issue's two hours, a third adds about one (default: 13,42).",
    )
    parser.add_argument(
        "--alphas", default="1,3", help="CrossConST weights, one arm each (the reference README: 3) (default: 1,3)."
    )
    for name, kind, default, text in PROTOCOL_OPTIONS:
        parser.add_argument(f"--{name}", type=kind, default=default, help=f"{text} (default: %(default)s).")
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


def arms(alphas: list[float], steps: int, compute_steps: int) -> list[tuple[str, str, int, list[str]]]:
    """(key, label, updates, recipe flags) of every stage-2 arm; the first is the run that also trains stage 1."""
    crossconst = [
        (f"crossconst{alpha:g}", f"CrossConST alpha {alpha:g}", steps, ["--alpha", f"{alpha:g}"]) for alpha in alphas
    ]
    return [
        *crossconst,
        ("a_updates", "A, equal updates", steps, ["--alpha", "0"]),
        ("a_compute", "A, CrossConST's compute", compute_steps, ["--alpha", "0"]),
        (
            "b_compute",
            "B, A + en->en, CrossConST's compute",
            compute_steps,
            ["--alpha", "0", "--stage2_english_copies", "true"],
        ),
    ]


def flat(results: dict[str, Any], stage: str, prefix: str) -> dict[str, float]:
    """``<prefix>/xsim_fr-en``-style keys from one stage of a run's results."""
    return {f"{prefix}/{key}": float(value) for key, value in results[stage]["final"].items()}


def use_metrics(recipe: Any, arguments: list[str], seed: int) -> dict[str, float]:
    """The offline USE on the held-out set that the runs of ``seed`` held out (same split function, same seed)."""
    from transformers import TrainingArguments

    from bitext_hf.encoders import USEEncoder
    from bitext_hf.families.musr import MuSREvaluator
    from bitext_hf.families.musr.data import load_data
    from bitext_hf.training import parse_args

    script_args, _, _ = parse_args(
        recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=arguments
    )
    data = load_data(script_args, seed)  # the recipe's own split
    evaluator = MuSREvaluator(None, data.held_out, script_args.pivot, batch_size=script_args.eval_batch_size)
    return {f"use/{key}": value for key, value in evaluator.evaluate_encoder(USEEncoder(threads=1)).items()}


def verdict(report: dict[str, Any], alphas: list[float], threshold: float) -> dict[str, Any]:
    """``VERDICT_RULE`` applied: the precondition per seed, then per alpha A minus CrossConST (xsim into English,
    positive favours CrossConST) against both A arms, mean and sample std over the seeds."""
    runs = report["runs"]
    pivot_xsim = [run_["stage1/xsim_pivot"] for run_ in runs]
    result: dict[str, Any] = {"stage1_xsim_pivot": pivot_xsim, "threshold": threshold, "alphas": {}}
    for alpha in alphas:
        comparisons = {}
        for control in ("a_updates", "a_compute"):
            differences = [run_[f"{control}/xsim_en"] - run_[f"crossconst{alpha:g}/xsim_en"] for run_ in runs]
            spread = float(np.std(differences, ddof=1)) if len(differences) > 1 else 0.0
            mean = float(np.mean(differences))
            comparisons[control] = {
                "per_seed": differences,
                "mean": mean,
                "std": spread,
                "beats": bool(len(differences) > 1 and mean > spread),
            }
        comparisons["gain"] = all(comparisons[control]["beats"] for control in ("a_updates", "a_compute"))
        result["alphas"][f"{alpha:g}"] = comparisons
    if not all(value < threshold for value in pivot_xsim):
        result["verdict"] = "regime not reached"
    elif len(runs) < 2:
        result["verdict"] = "no verdict: one seed has no spread"
    else:
        result["verdict"] = "gain" if any(entry["gain"] for entry in result["alphas"].values()) else "no gain"
    return result


def markdown(
    report: dict[str, Any], arm_list: list[tuple[str, str, int, list[str]]], languages: list[str], pivot: str
) -> str:
    """The regime and criterion, per target (English, the pivot) xsim and accuracy per language and arm, the
    plateau per seed, the comparisons against A, the paper's numbers, the rule and the verdict."""
    from bitext_hf.families.musr.export import PAPER_TABLE4
    from bitext_hf.hub import markdown_table

    mean, std, runs, seeds = report["mean"], report["std"], report["runs"], report["seeds"]
    columns = [("stage1", "stage 1"), *[(key, label) for key, label, _, _ in arm_list], ("use", "USE")]

    def cell(key: str, scale: float) -> str:
        return f"{mean[key] * scale:.1f} ± {std[key] * scale:.1f}" if key in mean else "-"

    regime = report["regime"]
    blocks = [
        f"Regime: {', '.join(languages)} into English, pivot {pivot}; stage 1 until the held-out cross-entropy "
        f"improved by less than {regime['stage1_plateau']:.0%} at each of {regime['stage1_patience']} evaluations in "
        f"a row (every {regime['stage1_eval_steps']} steps; cap {regime['stage1_steps']}); stage 2 from that model, "
        f"label smoothing {regime['stage2_label_smoothing']:g}, batch {regime['batch_size']}: "
        + "; ".join(f"{label} {steps} updates" for _, label, steps, _ in arm_list)
        + f" ({regime['stage2_steps']} x {regime['control_cost_factor']:g}, a CrossConST step's cost).",
        f"Seeds: {', '.join(map(str, seeds))}; xsim in %, accuracy in % (mean of both directions), mean ± std over "
        "the seeds.",
        PAPER_TABLE4,
    ]
    for target, label in (("en", "English"), ("pivot", pivot)):
        rows = []
        for language in [*languages, "average"]:
            if language == pivot and target == "pivot":
                continue
            suffix = target if language == "average" else f"{language}-{'en' if target == 'en' else pivot}"
            row: dict[str, str] = {"language": language}
            for metric, scale in (("xsim", 1.0), ("accuracy", 100.0)):
                for key, name in columns:
                    row[f"{metric} {name}"] = cell(f"{key}/{metric}_{suffix}", scale)
            rows.append(row)
        blocks.append(f"Against {label} (xx → {'en' if target == 'en' else pivot}):\n\n" + markdown_table(rows))
    plateau = [
        {
            "seed": str(seed),
            "stage-1 steps": f"{run_['stage1/steps']:.0f}",
            "held-out cross-entropy": f"{run_['stage1/held_out_ce']:.3f}" if "stage1/held_out_ce" in run_ else "-",
            "xsim into the pivot": f"{run_['stage1/xsim_pivot']:.1f}",
            "stopped by": "plateau" if (report["plateau"].get(str(seed)) or {}).get("stopped_at") else "step cap",
        }
        for seed, run_ in zip(seeds, runs)
    ]
    blocks.append(
        "Stage 1 per seed (where it stopped, its last held-out cross-entropy in nats):\n\n" + markdown_table(plateau)
    )
    result = report["verdict"]
    rows = []
    for alpha, entry in result["alphas"].items():
        for control, name in (("a_updates", "A, equal updates"), ("a_compute", "A, CrossConST's compute")):
            values = entry[control]
            rows.append(
                {
                    "CrossConST": f"alpha {alpha}",
                    "against": name,
                    **{f"seed {seed}": f"{value:+.1f}" for seed, value in zip(seeds, values["per_seed"])},
                    "mean ± std": f"{values['mean']:+.1f} ± {values['std']:.1f}",
                    "beats it": "yes" if values["beats"] else "no",
                }
            )
    blocks.append(
        "Control minus CrossConST, average xsim into English (positive favours CrossConST):\n\n" + markdown_table(rows)
    )
    reached = ", ".join(f"{value:.1f}" for value in result["stage1_xsim_pivot"])
    blocks.append(
        f"{VERDICT_RULE}\n\nPrecondition: stage-1 xsim into {pivot} per seed {reached} (threshold "
        f"{result['threshold']:g}). **Verdict: {result['verdict']}.**"
    )
    return "\n\n".join(blocks)


def main(args: argparse.Namespace) -> dict[str, Any]:
    """Every seed: stage 1 to the plateau with the first arm, the other arms from its stage-1 model, USE; the
    report with the verdict."""
    from transformers import TrainingArguments

    from bitext_hf.data import parse_spec
    from bitext_hf.errors import UsageError
    from bitext_hf.evaluation import run_over_seeds
    from bitext_hf.families.musr import model_card
    from bitext_hf.hub.figures import xsim_by_series
    from bitext_hf.training import parse_args

    if not args.seeds:
        raise UsageError("--seeds: give at least one seed")
    if not args.config.is_file():
        raise UsageError(f"--config {args.config}: not a file")
    if not args.control_cost_factor > 0:
        raise UsageError(f"--control_cost_factor must be > 0, got {args.control_cost_factor}")
    try:
        alphas = [float(value) for value in args.alphas.split(",") if value.strip()]
    except ValueError:
        raise UsageError(f"--alphas {args.alphas!r}: give numbers, e.g. 1,3") from None
    if not alphas or min(alphas) <= 0 or len(set(alphas)) != len(alphas):
        raise UsageError(f"--alphas {args.alphas!r}: give distinct weights > 0")
    if min(args.stage1_steps, args.stage2_steps, args.stage1_eval_steps, args.stage1_patience) < 1:
        raise UsageError("--stage1_steps, --stage2_steps, --stage1_eval_steps and --stage1_patience must be >= 1")
    recipe = load_recipe("train_musr")
    languages = [language.strip() for language in args.languages.split(",") if language.strip()]
    overrides = ["--config", str(args.config)]
    if languages:
        overrides += ["--train_pairs", *(f"{language}=gettext" for language in languages)]
    if args.pivot:
        overrides += ["--pivot", args.pivot]
    script_args, training_args, _ = parse_args(
        recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=overrides
    )
    if len(script_args.train_pairs) < 2:
        raise UsageError("--languages: give at least two (the precondition is measured against a non-English pivot)")
    batch = training_args.per_device_train_batch_size
    compute_steps = max(1, round(args.stage2_steps * args.control_cost_factor))
    arm_list = arms(alphas, args.stage2_steps, compute_steps)
    protocol = [
        *overrides,
        *(flag for name in RECIPE_OPTIONS for flag in (f"--{name}", str(getattr(args, name)))),
        # Enough pairs that stage 1 need not repeat them before its cap (and each stage draws its own).
        "--train_examples",
        str(max(script_args.train_examples, args.stage1_steps * batch, compute_steps * batch)),
    ]
    data_files = [Path(path) for spec in script_args.train_pairs for path in parse_spec(spec).paths]
    folder = prepare_run_folder(
        args.output_dir,
        args.overwrite,
        (FIGURE, CARD),
        script=Path(__file__).stem,
        inputs=[args.config, args.tokenizer, *data_files],
    )
    minutes: dict[str, dict[str, float]] = {}
    vocabulary: list[Path] = [args.tokenizer] if args.tokenizer else []
    results_by_run: dict[str, dict[str, Any]] = {}

    def run(name: str, seed: int, extra: list[str]) -> dict[str, Any]:
        output_dir = folder / f"run-{name}-seed{seed}"
        started = time.perf_counter()
        arguments = [
            *protocol,
            "--output_dir",
            str(output_dir),
            "--seed",
            str(seed),
            *extra,
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
        logger.info(
            "%s seed %s: %s",
            name,
            seed,
            {k: v for k, v in results["stage2"]["final"].items() if k.endswith(("_en", "_pivot"))},
        )
        return results

    def one_seed(seed: int) -> dict[str, float]:
        """Stage 1 and the first arm in one run, every other arm from its stage-1 model (copied: the recipe
        resumes after a finished stage 1), then USE."""
        (first_key, _, first_steps, first_flags), *others = arm_list
        first = run(first_key, seed, ["--stage2_steps", str(first_steps), *first_flags])
        history = (first["stage1"].get("plateau") or {}).get("history") or []
        steps = max((entry.get("step", 0) for entry in first["stage1"].get("log_history", [])), default=0)
        metrics = {
            **flat(first, "stage1", "stage1"),
            "stage1/steps": float(steps),
            **({"stage1/held_out_ce": float(history[-1]["held_out_ce"])} if history else {}),
            **flat(first, "stage2", first_key),
        }
        for key, _, arm_steps, flags in others:
            shutil.copytree(
                folder / f"run-{first_key}-seed{seed}" / "stage1", folder / f"run-{key}-seed{seed}" / "stage1"
            )
            extra = ["--stage2_steps", str(arm_steps), "--resume_from_checkpoint", "auto", *flags]
            metrics |= flat(run(key, seed, extra), "stage2", key)
        if args.reference == "use":
            metrics |= use_metrics(recipe, overrides, seed)
        return metrics

    report: dict[str, Any] = {"experiment": "musr_crossconst", "protocol": "issue 36", "config": str(args.config)}
    report |= run_over_seeds(one_seed, args.seeds).to_dict()
    first = results_by_run[f"{arm_list[0][0]}-seed{args.seeds[0]}"]
    languages, pivot = first["data"]["languages"], first["data"]["pivot"]
    report["regime"] = {
        "data": first["data"],
        "stage1_steps": args.stage1_steps,
        "stage1_plateau": args.stage1_plateau,
        "stage1_eval_steps": args.stage1_eval_steps,
        "stage1_patience": args.stage1_patience,
        "stage2_steps": args.stage2_steps,
        "stage2_label_smoothing": args.stage2_label_smoothing,
        "arms": {key: {"label": label, "updates": steps, "flags": flags} for key, label, steps, flags in arm_list},
        "batch_size": batch,
        "control_cost_factor": args.control_cost_factor,
        "reference": args.reference,
    }
    report["plateau"] = {
        str(seed): results_by_run[f"{arm_list[0][0]}-seed{seed}"]["stage1"].get("plateau") for seed in args.seeds
    }
    report["verdict_rule"] = VERDICT_RULE
    report["verdict"] = verdict(report, alphas, args.pivot_xsim_below)
    report["minutes"] = minutes
    table = markdown(report, arm_list, languages, pivot)
    print(VERDICT_RULE)
    print(f"Verdict: {report['verdict']['verdict']}")

    labels = [("stage1", "stage 1"), *[(key, label) for key, label, _, _ in arm_list]]
    labels += [("use", "USE")] if args.reference == "use" else []
    series = {
        label: {lang: [run_[f"{key}/xsim_{lang}-en"] for run_ in report["runs"]] for lang in languages}
        for key, label in labels
    }
    figure = xsim_by_series(
        series,
        folder / FIGURE,
        title=f"MuSR, xx→en xsim ({len(args.seeds)} seed{'s' if len(args.seeds) > 1 else ''}; lower is better)",
    )
    card_args, _, _ = parse_args(
        recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=protocol
    )
    card = model_card(card_args, first, figures=[figure], seed_table=table)
    write_file(args.output_dir / FIGURE, figure.path.read_bytes())
    write_file(args.output_dir / CARD, card)
    write_results(args.output_dir, report, table)
    return report


if __name__ == "__main__":
    run_script(main, build_parser())
