"""Fast checks of the experiment scripts in experiments/: --help, a tiny run of each end to end (a few steps, two
seeds, a corpus written here, a fake teacher), the results.json / results.md they write, and the refusal of a run
folder that already holds results. The real runs are the scripts themselves (experiments/README.md)."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pytest
from cli_fakes import DIM, FakeEncoders
from gettext_catalogs import write_catalogs
from recipe_support import help_texts

# The slow set (`python -m pytest -m slow`, which CI also runs): the paper experiments run end to end.
pytestmark = pytest.mark.slow

EXPERIMENTS = Path(__file__).resolve().parent.parent / "experiments"
SCRIPTS = ("laser3_ablation", "musr_crossconst", "contrastive_alignment")


@pytest.fixture
def experiments(monkeypatch):
    """The experiments folder importable as the scripts see it (their own folder first on sys.path)."""
    monkeypatch.syspath_prepend(str(EXPERIMENTS))
    import common

    return common


@pytest.fixture
def pair_files(tiny_pair_specs):
    return tiny_pair_specs


def check_results(output_dir: Path, seeds: int) -> dict:
    report = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "+-" in table or "±" in table, table
    assert table.count("\n|") >= 3, table  # a header, its rule and at least one row
    return report


@pytest.fixture(scope="module")
def help_text() -> dict[str, tuple[int, str]]:
    """``python experiments/<script>.py --help`` of every script, in one interpreter (recipe_support.help_texts)."""
    texts = help_texts(*(EXPERIMENTS / f"{script}.py" for script in (*SCRIPTS, "onealigner_transfer")))
    return {script.stem: value for script, value in texts.items()}


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_explains_every_option(help_text, script):
    code, text = help_text[script]
    assert code == 0
    assert "--output_dir" in text and "--overwrite" in text and "--seeds" in text
    assert "(default: " in text


def test_onealigner_transfer_help_explains_every_option(help_text):
    code, text = help_text["onealigner_transfer"]
    assert code == 0
    for option in ("--output_dir", "--overwrite", "--seeds", "--single_language", "--unseen_languages", "--pairs"):
        assert option in text
    assert text.count("(default: ") >= 12


def laser3_argv(monkeypatch, pair_files, tmp_path, anchors: int) -> list[str]:
    """The tiny Laser3 experiment's options (fake teacher, fr and de, 10 training pairs, 5 held-out, an anchor set
    of ``anchors`` English sentences from another language's pairs), before the protocol's own."""
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", FakeEncoders())
    monkeypatch.setattr("cli_fakes.FakeEncoder.dim", DIM, raising=False)  # the student projects to the teacher's dim
    # English anchors come from another language's pairs; the tiny corpus's languages share one English side.
    sentences = tmp_path / "it.tsv"
    sentences.write_text(
        "".join(f"Anchor sentence number {i}.\tFrase {i}.\n" for i in range(anchors + 1)), encoding="utf-8"
    )
    return [
        "--output_dir",
        str(tmp_path / "laser3"),
        "--languages",
        "fr,de",
        "--pairs",
        pair_files["fr"],
        pair_files["de"],
        f"it={sentences}",
        "--english_anchors",
        str(anchors),
        "--anchor_language",
        "it",
        "--train_pairs",
        "10",
        "--eval_pairs",
        "5",
        "--warmup",
        "0",
        "--vocab_size",
        "200",
    ]


def test_laser3_ablation_end_to_end(experiments, monkeypatch, pair_files, tmp_path):
    import laser3_ablation

    output_dir = tmp_path / "laser3"
    argv = [
        *laser3_argv(monkeypatch, pair_files, tmp_path, anchors=3),
        "--epochs",
        "0",
        "--steps",
        "2",
        "--seeds",
        "2",
        "--variants",
        "+ MLM + curriculum",
        "--curve_steps",
        "1",
    ]
    laser3_ablation.main(laser3_ablation.build_parser().parse_args(argv))
    report = check_results(output_dir, 2)
    assert report["seeds"] == [13, 42] and set(report["runs"]) == {"13", "42"}
    cells = report["mean +- std"]["+ MLM + curriculum"]
    assert {"fr", "de"} <= set(report["teacher zero-shot"]) and " +- " in cells["fr"] and " +- " in cells["de"]
    assert report["sizes"]["fr"] == {"train": 10, "monolingual": 5, "eval": 5, "monolingual per pair": 0.5}
    assert [point["step"] for point in report["curves"]["+ MLM + curriculum"]["13"]] == [1, 2]
    assert "batch share" in report["diagnostics"]["+ MLM"]
    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "| student, + MLM + curriculum |" in table and "final loss distil" in table and "| 5.93 |" in table
    # The anchor set: new English only, and the self task's pool counts it.
    chosen = (output_dir / "work" / "english-anchors.txt").read_text(encoding="utf-8").splitlines()
    assert len(chosen) == 3 and all(line.startswith("Anchor sentence") for line in chosen)
    assert report["sizes"]["english anchors"] == {"sentences": 3, "from": "it"}
    # Every run logged each task's loss; the table's cells are their last values over the seeds.
    history = report["task losses"]["+ MLM + curriculum"]["13"]
    assert history and all(key == "step" or key.startswith("loss_") for entry in history for key in entry)
    assert any("loss_distil" in entry for entry in history)
    # The card of the first seed's run carries the table, in its folder and as model_card.md.
    card = (output_dir / "model_card.md").read_text(encoding="utf-8")
    run_card = (output_dir / "work" / "run-plus_MLMplus_curriculum-seed13" / "README.md").read_text(encoding="utf-8")
    assert "## Ablation over seeds" in card and table.strip() in card and table.strip() in run_card

    # From scratch or not at all: the folder now holds results.
    from bitext_hf.errors import UsageError

    before = (output_dir / "results.json").read_bytes()
    with pytest.raises(UsageError, match="--overwrite"):
        laser3_ablation.main(laser3_ablation.build_parser().parse_args(argv))
    assert (output_dir / "results.json").read_bytes() == before


def test_laser3_ablation_epoch_protocol(experiments, monkeypatch, pair_files, tmp_path, capsys):
    import laser3_ablation

    output_dir = tmp_path / "laser3"
    argv = [
        *laser3_argv(monkeypatch, pair_files, tmp_path, anchors=5),
        "--epochs",
        "3",
        "--stage_epochs",
        "0.2",
        "--seeds",
        "1",
    ]
    report = laser3_ablation.main(laser3_ablation.build_parser().parse_args(argv))
    plan = report["epoch plan"]
    assert list(plan) == list(laser3_ablation.ARMS)
    # Epochs, not steps: MLM adds updates; the control gets them too; the curriculum prepends its stages.
    assert plan["distillation"]["steps"] < plan["+ MLM"]["steps"] == plan["distillation at MLM steps"]["steps"]
    curriculum = plan["+ MLM + curriculum"]
    assert curriculum["steps"] == plan["+ MLM"]["steps"] + curriculum["prefix stage steps"]
    assert round(curriculum["curriculum fraction"] * curriculum["steps"]) == curriculum["prefix stage steps"]
    assert plan["distillation"]["distil epochs (fr)"] == pytest.approx(3.0, abs=0.2)
    assert "mask" not in plan["distillation"]["batch share"] and plan["+ MLM"]["batch share"]["mask"] > 0
    entropy = report["unigram entropy of the MLM text (nats)"]
    assert set(entropy) == {"fr", "de", "mean"} and entropy["mean"] > 0
    assert report["verdict"] and report["verdict rule"] == laser3_ablation.VERDICT_RULE
    out = capsys.readouterr().out
    assert out.index("Verdict rule") < out.index('"steps"') < out.index("Verdict: ")
    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "Verdict rule (stated before the run)" in table and "| + MLM + curriculum |" in table
    assert "fr pairs, en side" in report["diagnostics"]["curriculum prefixes"]

    # --merge: runs of other seeds (one process each) make one table over every seed, the verdict recomputed.
    other = json.loads(json.dumps(report))
    other["runs"] = {
        "42": {arm: {**metrics, "fr": metrics["fr"] + 10} for arm, metrics in report["runs"]["13"].items()}
    }
    other["task losses"] = {arm: {"42": runs["13"]} for arm, runs in other["task losses"].items()}
    (tmp_path / "seed42").mkdir()
    (tmp_path / "seed42" / "results.json").write_text(json.dumps(other), encoding="utf-8")
    merge = ["--merge", str(output_dir), str(tmp_path / "seed42"), "--output_dir", str(tmp_path / "merged")]
    merged = laser3_ablation.main(laser3_ablation.build_parser().parse_args(merge))
    assert merged["seeds"] == [13, 42] and set(merged["runs"]) == {"13", "42"}
    for arm in plan:
        fr = report["runs"]["13"][arm]["fr"]
        assert merged["mean"][arm]["fr"] == pytest.approx(fr + 5) and merged["std"][arm]["fr"] == pytest.approx(
            50**0.5
        )
        assert merged["mean"][arm]["de"] == pytest.approx(report["runs"]["13"][arm]["de"])
    assert merged["verdict"] and merged["epoch plan"] == plan
    merged_table = (tmp_path / "merged" / "results.md").read_text(encoding="utf-8")
    assert "seeds 13, 42" in merged_table
    # The first run's card, its one-seed table replaced by the merged one, its links pointing into that run.
    card = (tmp_path / "merged" / "model_card.md").read_text(encoding="utf-8")
    assert card.count("## Ablation over seeds") == 1 and card.rstrip().endswith(merged_table.rstrip())
    assert "](../laser3/work/run-" in card
    # Runs of another setting, or the same seed twice, are refused before anything is written.
    from bitext_hf.errors import UsageError

    other["regime"] = {**other["regime"], "dropout": 0.1}
    (tmp_path / "seed42" / "results.json").write_text(json.dumps(other), encoding="utf-8")
    merge[-1] = str(tmp_path / "refused")
    with pytest.raises(UsageError, match="'regime' differs"):
        laser3_ablation.main(laser3_ablation.build_parser().parse_args(merge))
    (tmp_path / "copy").mkdir()
    shutil.copy(output_dir / "results.json", tmp_path / "copy" / "results.json")
    for folders, message in (
        ([output_dir, tmp_path / "copy"], "seed 13 is in two of the runs"),
        ([output_dir] * 2, "given twice"),
    ):
        argv = ["--merge", *map(str, folders), "--output_dir", str(tmp_path / "refused")]
        with pytest.raises(UsageError, match=message):
            laser3_ablation.main(laser3_ablation.build_parser().parse_args(argv))
    assert not (tmp_path / "refused").exists()


def test_laser3_verdict_rule(experiments):
    from laser3_ablation import ENTROPY_MARGIN, verdict

    from bitext_hf.families.laser3 import MLM_CONTEXT_MARGIN

    assert ENTROPY_MARGIN == MLM_CONTEXT_MARGIN  # the recipe's warning applies the verdict's rule

    means = {"distillation": 40.0, "distillation at MLM steps": 39.0, "+ MLM": 35.0, "+ MLM + curriculum": 34.0}
    assert verdict(means, {"+ MLM": 6.0, "+ MLM + curriculum": 6.0}, 7.0)[0].startswith("MLM: the gain holds")
    assert "regime not reached" in verdict(means, {"+ MLM": 6.8, "+ MLM + curriculum": 6.0}, 7.0)[0]
    assert "does not hold" in verdict(means, {"+ MLM": 6.0, "+ MLM + curriculum": 6.0}, 7.0)[1]
    assert verdict({"+ MLM": 1.0}, {}, 7.0)[0].startswith("not decided")


def test_musr_crossconst_end_to_end(experiments, pair_files, tmp_path, capsys):
    import musr_crossconst

    config = tmp_path / "musr.yaml"
    config.write_text(
        "train_pairs: [" + ", ".join(pair_files[lang] for lang in ("fr", "de", "es")) + "]\n"
        "train_examples: 32\nheld_out: 5\npivot: fr\nvocab_size: 200\nmax_seq_length: 32\nhidden_size: 16\n"
        "num_encoder_layers: 1\nnum_decoder_layers: 1\nnum_attention_heads: 2\nencoder_ffn_dim: 32\n"
        "decoder_ffn_dim: 32\nmax_steps: 2\nper_device_train_batch_size: 8\n"
        "save_strategy: 'no'\nreport_to: none\ndisable_tqdm: true\n",
        encoding="utf-8",
    )
    output_dir = tmp_path / "musr"
    argv = ["--output_dir", str(output_dir), "--config", str(config), "--languages", "", "--pivot", ""]
    argv += ["--seeds", "13", "--alphas", "3", "--stage1_steps", "4", "--stage1_eval_steps", "1"]
    argv += [
        "--stage1_patience",
        "1",
        "--stage1_plateau",
        "1.0",
        "--stage2_steps",
        "2",
        "--control_cost_factor",
        "1.5",
    ]
    argv += ["--reference", "none", "--pivot_xsim_below", "101"]
    musr_crossconst.main(musr_crossconst.build_parser().parse_args(argv))
    report = check_results(output_dir, 1)
    assert report["seeds"] == [13]
    run = report["runs"][0]
    arms = ("crossconst3", "a_updates", "a_compute", "b_compute")
    assert {"stage1/xsim_de-en", "stage1/xsim_de-fr", *(f"{arm}/xsim_de-en" for arm in arms)} <= set(run)
    # a plateau of 100% stops stage 1 at its second evaluation, before the cap of 4
    assert run["stage1/steps"] == 2 and report["plateau"]["13"]["stopped_at"] == 2
    assert [entry["step"] for entry in report["plateau"]["13"]["history"]] == [1, 2]
    first = json.loads(
        (output_dir / experiments.WORK / "run-crossconst3-seed13" / "eval_results.json").read_text(encoding="utf-8")
    )
    assert {key: entry["flags"][:2] for key, entry in report["regime"]["arms"].items()} == {
        "crossconst3": ["--alpha", "3"],
        **{key: ["--alpha", "0"] for key in arms[1:]},
    }
    for arm, steps, copies in (("a_updates", 2, False), ("a_compute", 3, False), ("b_compute", 3, True)):
        results = json.loads(
            (output_dir / experiments.WORK / f"run-{arm}-seed13" / "eval_results.json").read_text(encoding="utf-8")
        )
        assert results["stage1"]["final"] == first["stage1"]["final"]
        assert max(entry["step"] for entry in results["stage2"]["log_history"]) == steps
        assert ("stage2_english_copies" in results["data"]) is copies
    verdict = report["verdict"]
    assert verdict["verdict"] == "no verdict: one seed has no spread"  # the rule itself: the test below
    differences = verdict["alphas"]["3"]["a_compute"]["per_seed"]
    assert differences[0] == pytest.approx(run["a_compute/xsim_en"] - run["crossconst3/xsim_en"])
    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "Against English" in table and "Against fr" in table and "CrossConST alpha 3" in table
    assert "Verdict rule" in table and "**Verdict: " in table and "78.89 -> 82.69" in table
    assert "| 13 | 2 |" in table and "| plateau |" in table
    assert "Verdict rule" in capsys.readouterr().out
    assert (output_dir / "musr_gettext_xsim.png").read_bytes().startswith(b"\x89PNG")
    card = (output_dir / "model_card.md").read_text(encoding="utf-8")
    assert "musr_gettext_xsim.png" in card and "A, equal updates" in card


def test_musr_crossconst_verdict_rule(experiments):
    import musr_crossconst

    def report(pivot: list[float], a_updates: list[float], a_compute: list[float]) -> dict:
        runs = [
            {"stage1/xsim_pivot": p, "crossconst1/xsim_en": 50.0, "a_updates/xsim_en": u, "a_compute/xsim_en": c}
            for p, u, c in zip(pivot, a_updates, a_compute)
        ]
        return {"runs": runs}

    def verdict(*values: list[float]) -> str:
        return musr_crossconst.verdict(report(*values), [1.0], 50.0)["verdict"]

    assert verdict([40, 45], [55, 56], [53, 54]) == "gain"
    assert verdict([40, 45], [55, 56], [49, 54]) == "no gain"  # mean 1.5, spread 3.5 against A at compute
    assert verdict([40, 60], [55, 56], [53, 54]) == "regime not reached"
    assert verdict([40], [55], [53]).startswith("no verdict")


def test_musr_crossconst_defaults_are_the_issue_36_protocol(experiments):
    import musr_crossconst

    args = musr_crossconst.build_parser().parse_args([])
    from bitext_hf.errors import UsageError

    with pytest.raises(UsageError, match="--languages"):
        musr_crossconst.main(musr_crossconst.build_parser().parse_args(["--languages", "fr"]))
    with pytest.raises(UsageError, match="--alphas"):
        musr_crossconst.main(musr_crossconst.build_parser().parse_args(["--alphas", "0,3"]))
    assert args.seeds == [13, 42] and args.languages == "fr,de,es" and args.pivot == "de" and args.alphas == "1,3"
    assert args.stage2_label_smoothing == 0.0 and args.pivot_xsim_below == 50.0 and args.stage1_plateau == 0.01
    assert args.control_cost_factor == 2.5 and args.reference == "use"


def test_contrastive_alignment_end_to_end(experiments, pair_files, tmp_path):
    import math

    import contrastive_alignment

    output_dir = tmp_path / "contrastive"
    # A pair whose English is a zero-shot message: it must be kept out of the alignment data.
    french = Path(pair_files["fr"].partition("=")[2])
    french.write_text(french.read_text("utf-8") + "Open the text file number 0\tOuvrir le fichier texte 0\n", "utf-8")
    argv = [
        "--output_dir",
        str(output_dir),
        "--languages",
        "fr,de",
        "--pairs",
        pair_files["fr"],
        pair_files["de"],
        "--train_pairs",
        "12",
        "--held_out",
        "5",
        "--bases",
        "gettext-mlm",
        "--variants",
        "linear,strong",
        "--seeds",
        "2",
        "--steps_gettext_mlm",
        "2",
        "--mlm_steps",
        "2",
        "--vocab_size",
        "200",
        "--batch",
        "8",
        "--max_length",
        "32",
        "--aligner",
        "similarity",
        "--zero_shot_catalogs",
        str(write_catalogs(tmp_path / "locale")),
        "--zero_shot_per_app",
        "6",
        "--zero_shot_min_per_app",
        "4",
    ]
    contrastive_alignment.main(contrastive_alignment.build_parser().parse_args(argv))
    report = check_results(output_dir, 2)
    reports = report["reports"]
    assert list(reports) == ["gettext-mlm :: unaligned base", "gettext-mlm :: linear", "gettext-mlm :: strong"]
    assert reports["gettext-mlm :: strong"]["seeds"] == [13, 42]
    base_std = reports["gettext-mlm :: unaligned base"]["std"]
    assert all(value == 0.0 for key, value in base_std.items() if "zero_shot" not in key)
    assert {"word_accuracy", "xsim", "sentence_accuracy", "de/xsim"} <= set(reports["gettext-mlm :: strong"]["mean"])
    # Zero-shot transfer: every row (linear through its per-language exports), every language, finite accuracies over both seeds; the columns in the table.
    zero_shot = {"zero_shot_accuracy", "en/zero_shot_accuracy", "fr/zero_shot_accuracy", "de/zero_shot_accuracy"}
    for row in reports.values():
        assert zero_shot <= set(row["mean"]) and zero_shot <= set(row["std"])
        assert all(0.0 <= run[key] <= 1.0 and math.isfinite(run[key]) for run in row["runs"] for key in zero_shot)
        assert row["mean"]["zero_shot_accuracy"] == pytest.approx(
            (row["mean"]["fr/zero_shot_accuracy"] + row["mean"]["de/zero_shot_accuracy"]) / 2
        )
    assert report["zero-shot task"] == {
        "applications": {"editor": 6, "mailer": 6, "player": 6},
        "train (en)": 9,
        "test per language": 9,
    }
    table = (output_dir / "results.md").read_text(encoding="utf-8")
    assert "| zero-shot acc | en zero-shot (in-language) |" in table and "fr word / xsim / zero-shot" in table
    assert "Open the text file number 0" not in (output_dir / "work" / "fr.tsv").read_text("utf-8")
    run = json.loads((output_dir / "work" / "results" / "gettext-mlm-strong-seed13.json").read_text("utf-8"))
    assert set(run["zero_shot"]) == zero_shot
    assert contrastive_alignment.build_parser().parse_args(["--zero_shot", "false"]).zero_shot is False
    assert sorted(path.name for path in (output_dir / "work" / "results").iterdir()) == [
        "gettext-mlm-linear-seed13.json",
        "gettext-mlm-linear-seed42.json",
        "gettext-mlm-strong-seed13.json",
        "gettext-mlm-strong-seed42.json",
    ]
    # Only the card's run (first seed of strong) keeps its folder, without checkpoints; its card has the table.
    assert [path.name for path in (output_dir / "work" / "runs").iterdir()] == ["gettext-mlm-strong-seed13"]
    card_run = output_dir / "work" / "runs" / "gettext-mlm-strong-seed13"
    assert not list(card_run.glob("checkpoint-*")) and table.strip() in (card_run / "README.md").read_text("utf-8")
    card = (output_dir / "model_card.md").read_text(encoding="utf-8")
    assert "## Objectives over seeds" in card and table.strip() in card


def _earlier_run(experiments, output_dir: Path, script: str = "laser3_ablation") -> None:
    """An earlier run's outputs in ``output_dir``, recorded as a run writes them."""
    work = experiments.prepare_run_folder(output_dir, overwrite=False, script=script)
    (work / "run-old").mkdir()
    (work / "run-old" / "eval_results.json").write_text("{}", encoding="utf-8")
    experiments.write_results(output_dir, {}, "| a |")


def test_a_folder_with_results_is_refused_without_overwrite(experiments, tmp_path, monkeypatch, capsys):
    import laser3_ablation

    output_dir = tmp_path / "run"
    _earlier_run(experiments, output_dir)
    before = (output_dir / "results.json").read_bytes()
    # Refused before any work, with one line and the usage exit code.
    monkeypatch.setattr(sys, "argv", ["laser3_ablation.py", "--output_dir", str(output_dir), "--pairs", "fr=/nope"])
    with pytest.raises(SystemExit) as exit_info:
        experiments.run_script(laser3_ablation.main, laser3_ablation.build_parser())
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1

    monkeypatch.setattr(sys, "argv", ["laser3_ablation.py", "--output_dir", str(output_dir)])
    with pytest.raises(SystemExit) as exit_info:
        experiments.run_script(laser3_ablation.main, laser3_ablation.build_parser())
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--overwrite" in error and error.count("\n") == 1
    assert (output_dir / "results.json").read_bytes() == before
    assert (output_dir / "work" / "run-old" / "eval_results.json").is_file()

    # --overwrite deletes the earlier run: nothing of it is reused.
    work = experiments.prepare_run_folder(output_dir, overwrite=True, script="laser3_ablation")
    assert work == output_dir / "work" and not any(work.iterdir()) and not (output_dir / "results.json").exists()


def test_overwrite_deletes_only_what_the_earlier_run_recorded(experiments, tmp_path):
    from bitext_hf.errors import UsageError

    output_dir = tmp_path / "run"
    _earlier_run(experiments, output_dir)
    notes = output_dir / "notes.txt"  # beside the outputs, never one of them: kept, and no obstacle
    notes.write_text("mine", encoding="utf-8")
    thesis = output_dir / "work" / "projects" / "thesis.txt"
    thesis.parent.mkdir()
    thesis.write_text("mine", encoding="utf-8")
    with pytest.raises(UsageError, match="work/projects was not written by the earlier run"):
        experiments.prepare_run_folder(output_dir, overwrite=True, script="laser3_ablation")
    assert thesis.read_text(encoding="utf-8") == "mine" and (output_dir / "results.json").is_file()
    thesis.rename(tmp_path / "thesis.txt")
    thesis.parent.rmdir()
    work = experiments.prepare_run_folder(output_dir, overwrite=True, script="laser3_ablation")
    assert not any(work.iterdir()) and notes.read_text(encoding="utf-8") == "mine"
    # The new run is recorded from its start: refused without --overwrite, and by another experiment's script.
    with pytest.raises(UsageError, match="--overwrite"):
        experiments.prepare_run_folder(output_dir, overwrite=False, script="laser3_ablation")
    with pytest.raises(UsageError, match="records a run of 'laser3_ablation'"):
        experiments.prepare_run_folder(output_dir, overwrite=True, script="musr_crossconst")


def test_overwrite_refuses_results_it_has_no_record_of(experiments, tmp_path):
    from bitext_hf.errors import UsageError

    output_dir = tmp_path / "run"
    (output_dir / "work" / "run-old").mkdir(parents=True)
    (output_dir / "results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="no record"):
        experiments.prepare_run_folder(output_dir, overwrite=True, script="laser3_ablation")
    assert (output_dir / "results.json").read_text(encoding="utf-8") == "{}" and (output_dir / "work").is_dir()
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(UsageError, match="not a folder"):
        experiments.prepare_run_folder(tmp_path / "file", overwrite=True, script="laser3_ablation")


def test_a_stopped_run_lists_what_it_wrote(experiments, tmp_path, monkeypatch, capsys):
    """run_script records the outputs of a run that fails, so that --overwrite can delete them."""
    output_dir = tmp_path / "run"

    def failing_main(args):
        work = experiments.prepare_run_folder(output_dir, overwrite=False, script="laser3_ablation")
        (work / "partial.bin").write_bytes(b"x")
        raise RuntimeError("boom")

    monkeypatch.setattr(sys, "argv", ["laser3_ablation.py"])
    with pytest.raises(SystemExit):
        experiments.run_script(failing_main, argparse.ArgumentParser())
    capsys.readouterr()
    manifest = json.loads((output_dir / experiments.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["state"] == "listed" and manifest["outputs"]["work/partial.bin"] == "file"
    experiments.prepare_run_folder(output_dir, overwrite=True, script="laser3_ablation")
    assert not (output_dir / "work" / "partial.bin").exists()


# What the experiments build on, checked fast: the MuSR figure, card and reference scoring, the fixed held-out draw.


def test_xsim_by_series_means_and_caption(tmp_path):
    from bitext_hf.hub.figures import xsim_by_series

    figure = xsim_by_series(
        {
            "stage 1": {"fr": [10.0, 12.0, 14.0], "ar": [30.0, 32.0, 34.0]},
            "stage 2": {"fr": [8.0, 9.0, 10.0]},
            "USE": {"fr": 5.0, "ar": 20.0},
        },
        tmp_path / "bars.png",
    )
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


def _musr_results() -> dict:
    final = {
        "xsim_fr-en": 40.0,
        "xsim_ar-en": 60.0,
        "accuracy_fr-en": 0.5,
        "xsim_en": 50.0,
        "accuracy_en": 0.5,
        "xsim_pivot": 70.0,
        "accuracy_pivot": 0.3,
        "bucc_f1_en": 0.4,
    }
    return {
        "data": {"languages": ["fr", "ar"], "pivot": "fr", "train_examples": [10, 10]},
        "stage1": {"final": final},
        "stage2": {"final": {**final, "xsim_fr-en": 30.0, "xsim_ar-en": 45.0}},
    }


def test_card_shows_the_stage_figure_and_the_seed_table(experiments, tmp_path):
    from transformers import TrainingArguments

    from bitext_hf.families.musr.export import card_figures, model_card
    from bitext_hf.training import parse_args

    recipe = experiments.load_recipe("train_musr")
    script_args, _, _ = parse_args(recipe.ScriptArguments, TrainingArguments, recipe.ArchitectureArguments, args=[])
    figures = card_figures(_musr_results(), tmp_path)
    assert [figure.path.name for figure in figures] == ["xsim_by_stage.png"]
    assert "stage 1 50.00%" in figures[0].caption and "stage 2 (CrossConST) 37.50%" in figures[0].caption
    card = model_card(script_args, _musr_results(), figures=figures, seed_table="| seeds | 3 |")
    assert "](xsim_by_stage.png)" in card and "| seeds | 3 |" in card and "Over seeds" in card
    assert "Over seeds" not in model_card(script_args, _musr_results())
    no_held_out = {**_musr_results(), "stage1": {"final": {}}, "stage2": {"final": {}}}
    assert card_figures(no_held_out, tmp_path / "none") == []


def test_evaluate_encoder_scores_any_encoder(tiny_parallel_corpus_by_language):
    import numpy as np

    from bitext_hf.data import PairSet
    from bitext_hf.families.musr import MuSREvaluator

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


def test_held_out_seed_fixes_the_held_out_pairs_across_training_seeds(experiments, tmp_path):
    """The experiment evaluates every seed on the same pairs: --held_out_seed decouples the draw from --seed."""
    tsv = tmp_path / "de.tsv"
    tsv.write_text("".join(f"english sentence {i}\tdeutscher Satz {i}\n" for i in range(60)), encoding="utf-8")
    from bitext_hf.families.contrastive_align.data import load_data

    recipe = experiments.load_recipe("align_contrastive")

    def held_out(seed: int, **kwargs) -> list[str]:
        args = recipe.ScriptArguments(train_pairs=[f"de={tsv}"], held_out=10, aligner="similarity", **kwargs)
        train, held = load_data(args, seed)
        assert not set(held["de"].src) & set(train["de"].src)
        return held["de"].src

    assert held_out(13, held_out_seed=0) == held_out(42, held_out_seed=0) == held_out(7, held_out_seed=0)
    assert held_out(13) != held_out(42)  # the default: the training seed draws the held-out pairs
