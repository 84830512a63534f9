"""Hostile and careless uses of what deletes or replaces outputs, one table: the
experiments' ``--overwrite``, exports into folders that hold other things, a recipe's ``--output_dir`` over its data.

Each case builds its files in a fresh folder and runs one program (an experiment script, ``save_for_hub`` or a recipe,
each with the one-line errors of ``run_reporting_errors``), then asserts the promises of tests/test_hostile.py: the
documented exit code, one stderr line without a traceback (on failure), every file that was there before
byte-identical (the outputs a case lets the program replace or delete aside), nothing unexpected created (no temp or
staging file either), no hang, nothing executed. The experiments are refused at their checks, before any training;
the cases that succeed call the run-folder function or the export directly.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from hostile_support import MARKER, refusal_line, snapshot
from transformers import TrainingArguments

from bitext_hf.errors import EXIT_DATA, EXIT_OK, EXIT_USAGE
from bitext_hf.io.logs import library_logs
from bitext_hf.training import run_recipe
from bitext_hf.training.args import run_reporting_errors

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
OUT = "out"
PAIRS = "Hello there.\tგამარჯობა.\nGood morning.\tდილა მშვიდობისა.\n"


@dataclass
class Setup:
    """What a case's setup returns: the program to run (it returns or raises ``SystemExit``) and the paths, relative
    to the case's folder, that it may replace or delete (an earlier run's or export's own outputs)."""

    action: Callable[[], object]
    owned: frozenset[str] = frozenset()


@dataclass
class Case:
    setup: Callable[[Path], Setup]
    code: int
    message: str = ""  # part of the one stderr line (failures)
    creates: tuple[str, ...] | str = ()  # outputs allowed to appear; EXPORT: the files of a fresh export
    gone: tuple[str, ...] = ()  # outputs that must have been deleted (successes)


EXPORT = "the files of a fresh export"


# Experiments: the run folder of laser3_ablation.py, its --overwrite and its manifest.


def _common():
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    import common

    return common


def _earlier_run(tmp: Path, script: str = "laser3_ablation", link_to: Path | None = None) -> Path:
    """An earlier run of ``script`` in tmp/out, as a run writes and records it: its prepared pairs, one run folder
    (and a link to ``link_to`` when given), the results."""
    common = _common()
    output_dir = tmp / OUT
    work = common.prepare_run_folder(output_dir, False, script=script)
    (work / "ka.tsv").write_text(PAIRS, encoding="utf-8")
    (work / "run-a").mkdir()
    (work / "run-a" / "eval_results.json").write_text("{}", encoding="utf-8")
    if link_to is not None:
        os.symlink(link_to, work / "link")
    common.write_results(output_dir, {"earlier": True}, "| earlier |")
    return output_dir


def _owned(tmp: Path) -> frozenset[str]:
    """Everything now in tmp/out: an earlier run's or export's outputs, which the case's program may replace."""
    return frozenset(path for path in snapshot(tmp) if path == OUT or path.startswith(f"{OUT}/"))


def _laser3(tmp: Path, *argv: str) -> Callable[[], object]:
    """``laser3_ablation.py ARGV`` as its ``__main__`` runs it."""
    common = _common()
    import laser3_ablation

    def action() -> object:
        saved = sys.argv
        sys.argv = ["laser3_ablation.py", "--output_dir", str(tmp / OUT), *argv]
        try:
            return common.run_script(laser3_ablation.main, laser3_ablation.build_parser())
        finally:
            sys.argv = saved

    return action


def _prepare(tmp: Path, script: str = "laser3_ablation") -> Callable[[], object]:
    """The run-folder step alone, with --overwrite: what a run does after its checks, before any training."""
    common = _common()
    return lambda: run_reporting_errors(
        script, lambda: common.prepare_run_folder(tmp / OUT, True, script=script, inputs=[tmp / "ka.tsv"])
    )


def _write_manifest(output_dir: Path, outputs: dict[str, str], script: str = "laser3_ablation", **extra) -> None:
    common = _common()
    content = {"written_by": common.MANIFEST_WRITER, "script": script, "state": "listed", "outputs": outputs, **extra}
    (output_dir / common.MANIFEST).write_text(json.dumps(content), encoding="utf-8")


def _input_inside_work(tmp: Path) -> Setup:
    # The issue's first case: the input given by --pairs is a file the earlier run wrote into work/.
    output_dir = _earlier_run(tmp)
    return Setup(_laser3(tmp, "--pairs", f"ka={output_dir / 'work' / 'ka.tsv'}", "--overwrite"))


def _input_linked_into_work(tmp: Path) -> Setup:
    output_dir = _earlier_run(tmp)
    os.symlink(output_dir / "work" / "ka.tsv", tmp / "ka.tsv")
    return Setup(_laser3(tmp, "--pairs", f"ka={tmp / 'ka.tsv'}", "--overwrite"))


def _tokenizer_inside_work(tmp: Path) -> Setup:
    output_dir = _earlier_run(tmp)
    return Setup(_laser3(tmp, "--tokenizer", str(output_dir / "work" / "run-a"), "--overwrite"))


def _empty_pairs_after_results(tmp: Path) -> Setup:
    # Results deleted first and the input refused after: the issue's second case. The input is checked first now.
    _earlier_run(tmp)
    (tmp / "ka.tsv").write_text("", encoding="utf-8")
    return Setup(_laser3(tmp, "--pairs", f"ka={tmp / 'ka.tsv'}", "--overwrite"))


def _users_file_in_work(tmp: Path) -> Setup:
    output_dir = _earlier_run(tmp)
    (output_dir / "work" / "projects").mkdir()
    (output_dir / "work" / "projects" / "thesis.txt").write_text("chapter 1", encoding="utf-8")
    (tmp / "ka.tsv").write_text(PAIRS, encoding="utf-8")
    return Setup(_laser3(tmp, "--pairs", f"ka={tmp / 'ka.tsv'}", "--overwrite"))


def _only_users_work_folder(tmp: Path) -> Setup:
    # The issue's third case: the folder's only match is the user's own work/.
    (tmp / OUT / "work" / "projects").mkdir(parents=True)
    (tmp / OUT / "work" / "projects" / "thesis.txt").write_text("chapter 1", encoding="utf-8")
    return Setup(_laser3(tmp, "--overwrite"))


def _results_without_manifest(tmp: Path) -> Setup:
    (tmp / OUT / "work" / "run-old").mkdir(parents=True)
    (tmp / OUT / "results.json").write_text("{}", encoding="utf-8")
    return Setup(_laser3(tmp, "--overwrite"))


def _manifest_lists_parent(tmp: Path) -> Setup:
    (tmp / "outside.txt").write_text("keep", encoding="utf-8")
    (tmp / OUT).mkdir()
    _write_manifest(tmp / OUT, {"work/../../outside.txt": "file", "work": "folder"})
    return Setup(_prepare(tmp))


def _manifest_lists_absolute_path(tmp: Path) -> Setup:
    (tmp / "outside.txt").write_text("keep", encoding="utf-8")
    (tmp / OUT / "work").mkdir(parents=True)
    _write_manifest(tmp / OUT, {str(tmp / "outside.txt"): "file", "work": "folder"})
    return Setup(_prepare(tmp))


def _manifest_is_a_link(tmp: Path) -> Setup:
    (tmp / "elsewhere").mkdir()
    _write_manifest(tmp / "elsewhere", {"work": "folder"})
    (tmp / OUT / "work").mkdir(parents=True)
    os.symlink(tmp / "elsewhere" / _common().MANIFEST, tmp / OUT / _common().MANIFEST)
    return Setup(_prepare(tmp))


def _manifest_of_another_script(tmp: Path) -> Setup:
    _earlier_run(tmp, script="musr_crossconst")
    return Setup(_prepare(tmp))


def _run_killed_before_listing(tmp: Path) -> Setup:
    (tmp / OUT / "work" / "run-a").mkdir(parents=True)
    _write_manifest(tmp / OUT, {}, state="running")
    return Setup(_prepare(tmp))


def _recorded_folder_now_a_link(tmp: Path) -> Setup:
    output_dir = _earlier_run(tmp)
    (tmp / "elsewhere").mkdir()
    (tmp / "elsewhere" / "eval_results.json").write_text("{}", encoding="utf-8")
    (output_dir / "work" / "run-a" / "eval_results.json").unlink()
    (output_dir / "work" / "run-a").rmdir()
    os.symlink(tmp / "elsewhere", output_dir / "work" / "run-a")
    return Setup(_prepare(tmp))


def _recorded_link_pointing_outside(tmp: Path) -> Setup:
    # A link the run itself made: --overwrite removes the link, never what it points to.
    (tmp / "elsewhere").mkdir()
    (tmp / "elsewhere" / "data.txt").write_text("keep", encoding="utf-8")
    _earlier_run(tmp, link_to=tmp / "elsewhere")
    return Setup(_prepare(tmp), owned=_owned(tmp))


def _malformed_pairs_after_unrecorded_results(tmp: Path) -> Setup:
    # An input that cannot be read is refused before the folder is looked at (it used to be emptied first).
    (tmp / OUT / "work").mkdir(parents=True)
    (tmp / OUT / "results.json").write_text("{}", encoding="utf-8")
    (tmp / "ka.tsv").write_text("one column only\n", encoding="utf-8")
    return Setup(_laser3(tmp, "--pairs", f"ka={tmp / 'ka.tsv'}", "--overwrite"))


# Exports: save_for_hub into folders that hold other things.


_EXPORT_OPTIONS = {"pooling": "mean"}


_MODEL_FOLDER: list[Path] = []  # conftest's tiny_model_dir, set by the test (a setup has no fixtures)


@functools.cache
def _tiny_model_and_tokenizer():
    from transformers import AutoTokenizer, XLMRobertaModel

    return XLMRobertaModel.from_pretrained(_MODEL_FOLDER[0]).eval(), AutoTokenizer.from_pretrained(_MODEL_FOLDER[0])


def _export(tmp: Path, options: dict | None = None, card: str = "# model\n") -> Callable[[], object]:
    from bitext_hf.hub import save_for_hub

    model, tokenizer = _tiny_model_and_tokenizer()
    options = _EXPORT_OPTIONS if options is None else options

    def export() -> object:
        with library_logs(False):  # as the recipes call it: transformers' progress bars hidden
            return save_for_hub(model, tokenizer, tmp / OUT, model_card=card, sentence_transformers=options)

    return lambda: run_reporting_errors("export", export)


def _user_folders_named_like_modules(tmp: Path) -> Setup:
    # The issue's case: every folder named like a module folder (^\d+_[A-Za-z]+$) went.
    for folder, name in (("1_Data", "corpus.txt"), ("2024_Notes", "notes.md"), ("3_Normalize", "mine.txt")):
        (tmp / OUT / folder).mkdir(parents=True)
        (tmp / OUT / folder / name).write_text("mine", encoding="utf-8")
    return Setup(_export(tmp, {"pooling": "mean", "normalize": False}))


def _reexport_keeps_users_file(tmp: Path) -> Setup:
    # v1 wrote 1_Pooling, 2_Dense, 3_Normalize; the user then put a file in 3_Normalize/ and a checkpoint beside.
    dense = torch.nn.Linear(32, 8)
    _export(tmp, {"pooling": "mean", "dense": dense, "normalize": True}, "# v1\n")()
    owned = _owned(tmp)
    (tmp / OUT / "3_Normalize" / "notes.txt").write_text("mine", encoding="utf-8")
    (tmp / OUT / "checkpoint-5").mkdir()
    (tmp / OUT / "checkpoint-5" / "trainer_state.json").write_text("{}", encoding="utf-8")
    return Setup(_export(tmp, {"pooling": "max"}, "# v2\n"), owned=owned)


def _users_folder_where_export_writes(tmp: Path) -> Setup:
    (tmp / OUT / "1_Pooling").mkdir(parents=True)
    (tmp / OUT / "1_Pooling" / "draft.txt").write_text("mine", encoding="utf-8")
    return Setup(_export(tmp))


def _forged_modules_json(tmp: Path) -> Setup:
    # A modules.json this package did not write: the folders it lists are not taken for an earlier export's.
    (tmp / OUT / "1_Data").mkdir(parents=True)
    (tmp / OUT / "1_Data" / "corpus.txt").write_text("mine", encoding="utf-8")
    forged = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    forged.append({"idx": 1, "name": "1", "path": "1_Data", "type": "sentence_transformers.models.Pooling"})
    (tmp / OUT / "modules.json").write_text(json.dumps(forged), encoding="utf-8")
    return Setup(_export(tmp, {"pooling": "mean", "normalize": False}), owned=frozenset({f"{OUT}/modules.json"}))


def _modules_json_pointing_outside(tmp: Path) -> Setup:
    # A modules.json this package did not write, listing a folder outside, and an export without sentence-transformers
    # files: the file is not an earlier export's (kept), the folder outside is never followed.
    (tmp / "2_Dense").mkdir()
    (tmp / "2_Dense" / "config.json").write_text("{}", encoding="utf-8")
    (tmp / OUT).mkdir()
    entries = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    entries.append({"idx": 1, "name": "1", "path": "../2_Dense", "type": "sentence_transformers.models.Dense"})
    (tmp / OUT / "modules.json").write_text(json.dumps(entries), encoding="utf-8")
    from bitext_hf.hub import save_for_hub

    model, tokenizer = _tiny_model_and_tokenizer()

    def export() -> object:
        with library_logs(False):
            return save_for_hub(model, tokenizer, tmp / OUT, model_card="# model\n")

    return Setup(lambda: run_reporting_errors("export", export))


def _module_folder_is_a_link(tmp: Path) -> Setup:
    # An earlier export's 2_Dense replaced by a link to the user's folder: the link is not followed.
    _export(tmp, {"pooling": "mean", "dense": torch.nn.Linear(32, 8), "normalize": False})()
    owned = _owned(tmp)
    (tmp / "mine").mkdir()
    (tmp / "mine" / "config.json").write_text("{}", encoding="utf-8")
    for name in os.listdir(tmp / OUT / "2_Dense"):
        (tmp / OUT / "2_Dense" / name).unlink()
    (tmp / OUT / "2_Dense").rmdir()
    os.symlink(tmp / "mine", tmp / OUT / "2_Dense")
    return Setup(_export(tmp, {"pooling": "max"}), owned=owned - {f"{OUT}/2_Dense"})


# Recipes: --output_dir over the run's own inputs, refused before any data is read.


def _recipe(tmp: Path, name: str, *flags: str) -> Callable[[], object]:
    spec = importlib.util.spec_from_file_location(f"hostile_outputs_{name}", ROOT / "recipes" / f"{name}.py")
    recipe = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = recipe
    spec.loader.exec_module(recipe)
    third = {"distill_wolof": "StudentArguments", "train_musr": "ArchitectureArguments"}.get(name, "ModelArguments")
    model_arguments = getattr(recipe, third)

    def main(*parsed):
        os.mkdir(tmp / MARKER)  # reached main: the refusal came too late

    return lambda: run_recipe(main, recipe.ScriptArguments, TrainingArguments, model_arguments, args=list(flags))


def _recipe_output_dir_is_its_data(tmp: Path) -> Setup:
    (tmp / "fr.tsv").write_text("Hello.\tBonjour.\n", encoding="utf-8")
    data = str(tmp / "fr.tsv")
    return Setup(_recipe(tmp, "train_musr", "--output_dir", data, "--train_pairs", f"fr={data}"))


def _recipe_output_dir_is_its_tokenizer(tmp: Path) -> Setup:
    (tmp / "tokenizer").mkdir()
    (tmp / "tokenizer" / "tokenizer.json").write_text("{}", encoding="utf-8")
    folder = str(tmp / "tokenizer")
    return Setup(_recipe(tmp, "train_onealigner", "--output_dir", folder, "--tokenizer", folder))


def _recipe_output_dir_holds_moses_side(tmp: Path) -> Setup:
    (tmp / "data").mkdir()
    for side in ("fr", "en"):
        (tmp / "data" / f"a.{side}").write_text("x\n", encoding="utf-8")
    spec = f"fr={tmp / 'other.fr'},{tmp / 'data' / 'a.en'}"
    (tmp / "other.fr").write_text("y\n", encoding="utf-8")
    return Setup(_recipe(tmp, "distill_wolof", "--output_dir", str(tmp / "data"), "--bitexts", spec))


CASES: dict[str, Case] = {
    "overwrite: --pairs input inside out/work": Case(_input_inside_work, EXIT_USAGE, "work/ka.tsv, which the input"),
    "overwrite: --pairs a link into out/work": Case(_input_linked_into_work, EXIT_USAGE, "which the input"),
    "overwrite: --tokenizer inside out/work": Case(_tokenizer_inside_work, EXIT_USAGE, "which the input"),
    "overwrite: empty --pairs, earlier results kept": Case(
        _empty_pairs_after_results, EXIT_DATA, "ka.tsv: file is empty"
    ),
    "overwrite: user's file in out/work/projects": Case(_users_file_in_work, EXIT_USAGE, "work/projects was not"),
    "overwrite: user's own work/, no record": Case(_only_users_work_folder, EXIT_USAGE, "no record"),
    "overwrite: results of an older version": Case(_results_without_manifest, EXIT_USAGE, "no record"),
    "overwrite: manifest lists ../outside": Case(_manifest_lists_parent, EXIT_USAGE, "not an output"),
    "overwrite: manifest lists an absolute path": Case(_manifest_lists_absolute_path, EXIT_USAGE, "not an output"),
    "overwrite: manifest is a link": Case(_manifest_is_a_link, EXIT_USAGE, "not a regular file"),
    "overwrite: manifest of another experiment": Case(_manifest_of_another_script, EXIT_USAGE, "records a run of"),
    "overwrite: run killed before listing": Case(_run_killed_before_listing, EXIT_USAGE, "still running"),
    "overwrite: recorded folder now a link": Case(_recorded_folder_now_a_link, EXIT_USAGE, "is now a link"),
    "overwrite: recorded link removed, target kept": Case(
        _recorded_link_pointing_outside,
        EXIT_OK,
        creates=(f"{OUT}/work", f"{OUT}/.bitext-hf-outputs.json"),
        gone=(f"{OUT}/results.json", f"{OUT}/work/link", f"{OUT}/work/ka.tsv"),
    ),
    "overwrite: malformed --pairs, unrecorded results": Case(
        _malformed_pairs_after_unrecorded_results, EXIT_DATA, "ka.tsv"
    ),
    "export: 1_Data/, 2024_Notes/, 3_Normalize/ kept": Case(_user_folders_named_like_modules, EXIT_OK, creates=EXPORT),
    "export: re-export keeps a user's file": Case(
        _reexport_keeps_users_file, EXIT_OK, creates=EXPORT, gone=(f"{OUT}/2_Dense",)
    ),
    "export: user's folder where a module goes": Case(_users_folder_where_export_writes, EXIT_DATA, "1_Pooling: a"),
    "export: forged modules.json lists 1_Data": Case(_forged_modules_json, EXIT_OK, creates=EXPORT),
    "export without modules: modules.json not ours": Case(_modules_json_pointing_outside, EXIT_OK, creates=EXPORT),
    "export: module folder now a link": Case(_module_folder_is_a_link, EXIT_OK, creates=EXPORT),
    "recipe: --output_dir is its data file": Case(_recipe_output_dir_is_its_data, EXIT_USAGE, "is " + "{tmp}/fr.tsv"),
    "recipe: --output_dir is its --tokenizer": Case(_recipe_output_dir_is_its_tokenizer, EXIT_USAGE, "an input"),
    "recipe: --output_dir holds a bitext side": Case(_recipe_output_dir_holds_moses_side, EXIT_USAGE, "holds"),
}


@pytest.fixture(scope="module")
def fresh_export(tmp_path_factory, tiny_model_dir) -> frozenset[str]:
    """Every path a fresh export into an empty folder creates: what an export case may add."""
    _MODEL_FOLDER[:] = [tiny_model_dir]
    tmp = tmp_path_factory.mktemp("fresh")
    _export(tmp, {"pooling": "mean", "dense": torch.nn.Linear(32, 8), "normalize": True})()
    return frozenset(snapshot(tmp)) | {f"{OUT}/2_Normalize"}


@pytest.mark.parametrize("name", CASES)
def test_hostile_output_case(name, capsys, tmp_path, monkeypatch, fresh_export):
    case = CASES[name]
    monkeypatch.chdir(tmp_path)
    setup = case.setup(tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)
    try:
        setup.action()
        code = EXIT_OK
    except SystemExit as exit:
        code = exit.code
    err = capsys.readouterr().err
    after = snapshot(tmp_path)

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        line = refusal_line(err)
        assert ": error: " in line and case.message.format(tmp=tmp_path) in line, line
    for path, entry in before.items():
        if path not in setup.owned:
            assert after.get(path) == entry, f"{path} changed"
    for path in case.gone:
        assert path not in after, f"{path} left"
    created = set(after) - set(before)
    allowed = fresh_export if case.creates == EXPORT else set(case.creates)
    assert created <= allowed, sorted(created - allowed)
    assert not [path for path in after if ".staging" in path or path.endswith(".tmp")], "a temporary file is left"
    assert not (tmp_path / MARKER).exists(), "code ran that should not have"
