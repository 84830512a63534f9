"""What the experiment scripts share: the run folder, the translation pairs, the recipes, the gettext MLM base,
seeds, results and errors.

Every experiment runs from scratch in ``<output_dir>/work/`` and ends by writing ``<output_dir>/results.json`` (every
run's numbers, mean and std over the seeds) and ``<output_dir>/results.md`` (the table). Each run records what it wrote
in ``<output_dir>/.bitext-hf-outputs.json``. A folder that already holds results or a ``work/`` folder is refused
unless ``--overwrite`` is given, which deletes what the earlier run recorded, and nothing else, once every check of
the new run has passed: nothing of an earlier process is ever reused, and nothing it did not write is ever deleted.
The scripts import this module as ``common`` (Python puts a script's own folder first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
MODEL_CARD = "model_card.md"
WORK = "work"
# The record of a run's outputs: what --overwrite may delete. A hand-made file or one of another program is refused.
MANIFEST = ".bitext-hf-outputs.json"
MANIFEST_WRITER = "bitext-hf experiments"
MANIFEST_MAX_BYTES = 64 * 2**20  # a listing of every file of 50 runs is far smaller; more is not a record of ours
# What --merge reads of an earlier run: its results.json (every seed's numbers and loss curves: a few MB for 50 seeds)
# and its model card (kilobytes). More is not a file a run of these scripts wrote.
RESULTS_MAX_BYTES = 64 * 2**20
CARD_MAX_BYTES = 16 * 2**20
# Runs prepared by this process and not yet listed in their manifest: {output_dir: (script, output names)}.
_open_runs: dict[Path, tuple[str, tuple[str, ...]]] = {}


def add_run_folder_options(parser: argparse.ArgumentParser, default_output_dir: str) -> None:
    parser.add_argument(
        "--output_dir",
        type=Path,
        default=Path(default_output_dir),
        help=f"Run folder: {RESULTS_JSON} and {RESULTS_MD} are written here, every run's files under {WORK}/ "
        "(default: %(default)s).",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help=f"Delete the results and the {WORK}/ folder of an earlier run in --output_dir and start again from "
        f"scratch (without it such a folder is refused). Only what that run recorded in {MANIFEST} is deleted, "
        "after every check of the new run: a folder holding anything else, or an input of the new run, is refused.",
    )


def add_pairs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pairs",
        nargs="+",
        default=[],
        metavar="XX=TSV",
        help="Translation pairs of language XX from a file of English<TAB>XX lines instead of this machine's "
        "gettext catalogs (default: the catalogs for every language).",
    )


def prepare_run_folder(
    output_dir: Path,
    overwrite: bool,
    other_outputs: tuple[str, ...] = (),
    *,
    script: str,
    inputs: Iterable[Path | None] = (),
) -> Path:
    """The empty ``work/`` folder of a run of ``script`` from scratch, with the run recorded in ``MANIFEST``.

    A folder with an earlier run's outputs (``results.*``, ``model_card.md``, ``work/`` or one of ``other_outputs``,
    files the experiment also writes there) is refused without ``overwrite``; with it, only what the manifest of an
    earlier run of ``script`` lists is deleted, and only once nothing else stands in the way: an output the manifest
    does not list (a user's file in ``work/``, results of an older version), a link where it recorded a file or folder,
    one of ``inputs`` (files or folders this run reads) among what would be deleted. Call it after every other check
    of the run: it is the last one, and the first step that changes the disk."""
    from bitext_hf.errors import UsageError

    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output_dir {output_dir}: exists and is not a folder")
    names = (RESULTS_JSON, RESULTS_MD, MODEL_CARD, WORK, *other_outputs)
    on_disk = _outputs_on_disk(output_dir, names)
    manifest = output_dir / MANIFEST
    recorded = _read_manifest(manifest, script, names) if manifest.exists() or manifest.is_symlink() else None
    if recorded is None and on_disk:
        first = sorted(on_disk)[0]
        raise UsageError(
            f"--output_dir {output_dir}: holds {first} but no record ({MANIFEST}) of a run of {script}.py that wrote "
            "it (an older version or another program): move those files away or choose another folder"
        )
    if recorded is not None and not overwrite:
        shown = ", ".join(sorted({relative.split("/")[0] for relative in on_disk})) or MANIFEST
        raise UsageError(
            f"--output_dir {output_dir}: holds an earlier run ({shown}); pass --overwrite to delete it and start from "
            "scratch, or choose another folder"
        )
    if recorded is not None:
        _check_deletable(output_dir, on_disk, recorded, script)
        _check_inputs_survive(output_dir, on_disk, inputs)
        _delete_recorded(output_dir, on_disk)
    output_dir.mkdir(parents=True, exist_ok=True)
    _write_manifest(output_dir, script, None)
    work = output_dir / WORK
    work.mkdir()
    _open_runs[output_dir] = (script, names)
    return work


def record_run_outputs(output_dir: Path) -> None:
    """Rewrite the manifest of the run this process prepared in ``output_dir`` with every output it holds now, so
    that a later ``--overwrite`` deletes them (and nothing added since). Done at the end of a run, and by
    :func:`run_script` when a run stops early; a folder this process did not prepare is left alone."""
    if output_dir not in _open_runs:
        return
    script, names = _open_runs.pop(output_dir)
    # A FIFO or device is nothing a run makes: left out, a later --overwrite names it and deletes nothing.
    outputs = {path: kind for path, kind in _outputs_on_disk(output_dir, names).items() if kind != "other"}
    _write_manifest(output_dir, script, outputs)


def _kind(path: Path) -> str | None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def _outputs_on_disk(output_dir: Path, names: tuple[str, ...]) -> dict[str, str]:
    """{path relative to ``output_dir``: kind} of every entry at or under the outputs ``names``, links not followed
    (``os.walk`` lists a link to a folder among the folders, and never enters it)."""
    entries: dict[str, str] = {}
    for name in names:
        kind = _kind(output_dir / name)
        if kind is None:
            continue
        entries[name] = kind
        if kind != "folder":
            continue
        for folder, folders, files in os.walk(output_dir / name):
            for entry in folders + files:
                path = Path(folder) / entry
                entries[path.relative_to(output_dir).as_posix()] = _kind(path) or "file"
    return entries


def _read_manifest(manifest: Path, script: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The manifest of an earlier run of ``script``: its state and {relative path: kind}; every path checked to be
    one of ``names`` or under one (never absolute, never ``..``), so that nothing outside them can be deleted."""
    from bitext_hf.errors import UsageError
    from bitext_hf.io.small_files import SmallFileError, read_small_json

    def refuse(why: str) -> UsageError:
        return UsageError(f"{manifest}: {why}; delete the folder's outputs yourself or choose another --output_dir")

    if _kind(manifest) != "file":
        raise refuse("not a regular file (a link or a folder): not a record this script wrote")
    try:
        content = read_small_json(manifest, MANIFEST_MAX_BYTES)
    except SmallFileError as error:
        raise refuse(f"{error}: not a record this script wrote") from None
    except (ValueError, RecursionError):
        raise refuse("not JSON: not a record this script wrote") from None
    if not isinstance(content, dict) or content.get("written_by") != MANIFEST_WRITER:
        raise refuse("not a record this script wrote")
    if content.get("script") != script:
        raise refuse(f"records a run of {content.get('script')!r}, not of {script}.py")
    outputs = content.get("outputs")
    if content.get("state") not in ("running", "listed") or not isinstance(outputs, dict):
        raise refuse("not a record this script wrote")
    for relative, kind in outputs.items():
        parts = relative.split("/")
        if kind not in ("file", "folder", "link") or parts[0] not in names or {"", ".", ".."} & set(parts):
            raise refuse(f"lists {relative!r}, which is not an output of {script}.py")
    return content


def _check_deletable(output_dir: Path, on_disk: dict[str, str], recorded: dict[str, Any], script: str) -> None:
    """Refuse before anything is deleted: an output that the earlier run did not record, or whose kind changed."""
    from bitext_hf.errors import UsageError

    if recorded["state"] == "running" and on_disk:
        raise UsageError(
            f"--output_dir {output_dir}: a run of {script}.py is still running there, or was killed before it listed "
            f"its outputs; once none runs, delete {', '.join(sorted({path.split('/')[0] for path in on_disk}))} "
            "yourself or choose another folder"
        )
    outputs = recorded["outputs"]
    for relative, kind in sorted(on_disk.items()):
        if relative not in outputs:
            raise UsageError(
                f"--output_dir {output_dir}: {relative} was not written by the earlier run (--overwrite deletes only "
                "what a run recorded): move it out of the folder or choose another folder"
            )
        if kind != outputs[relative]:
            raise UsageError(
                f"--output_dir {output_dir}: {relative} is now a {kind}, the earlier run wrote a {outputs[relative]}: "
                "move it away or choose another folder"
            )


def _check_inputs_survive(output_dir: Path, on_disk: dict[str, str], inputs: Iterable[Path | None]) -> None:
    """Refuse an input (followed to what it is) that is, holds or lies inside an output --overwrite would delete."""
    from bitext_hf.errors import UsageError

    # Every folder on the way was checked to be a folder, not a link: the real path of an output is its name there.
    # Deepest first, so that the message names the output itself rather than the folder holding it.
    base = Path(os.path.realpath(output_dir))
    doomed = sorted((base / relative for relative in on_disk), key=lambda path: len(path.parts), reverse=True)
    for given in inputs:
        if given is None:
            continue
        real = Path(os.path.realpath(given))
        for path in doomed:
            if real == path or path in real.parents or real in path.parents:
                raise UsageError(
                    f"--output_dir {output_dir}: --overwrite would delete {path.relative_to(base)}, which the input "
                    f"{given} needs: move it out of {output_dir} or choose another folder"
                )


def _delete_recorded(output_dir: Path, on_disk: dict[str, str]) -> None:
    """Files and links first (``unlink`` never follows a link), then the folders, deepest first (``rmdir`` removes
    only an empty one: what was checked is all there is)."""
    for relative, kind in on_disk.items():
        if kind != "folder":
            (output_dir / relative).unlink()
    for relative in sorted((path for path, kind in on_disk.items() if kind == "folder"), key=len, reverse=True):
        (output_dir / relative).rmdir()
    (output_dir / MANIFEST).unlink()


def _write_manifest(output_dir: Path, script: str, outputs: dict[str, str] | None) -> None:
    """The record of a run: ``running`` (nothing listed yet) or ``listed`` with every output and its kind."""
    content = {
        "written_by": MANIFEST_WRITER,
        "script": script,
        "state": "running" if outputs is None else "listed",
        "outputs": outputs or {},
    }
    write_file(output_dir / MANIFEST, json.dumps(content, indent=1, sort_keys=True) + "\n")


def read_run_file(path: Path, option: str, max_bytes: int) -> str:
    """The UTF-8 text of a file of an earlier run that this one reads (``--merge RUN_DIR``'s results.json, its model
    card), read once and bounded, before anything of this run is written:

    * missing, a link to nothing, a FIFO, a device or a folder: ``UsageError`` (exit 2) saying what it is; never
      opened, so a FIFO waits for no writer and ``/dev/zero`` is not read;
    * more than ``max_bytes`` (measured before a byte is read, and while reading), unreadable, or not UTF-8:
      ``DataValidationError`` (exit 3) naming the file (and line).
    """
    from bitext_hf.errors import DataValidationError, UsageError
    from bitext_hf.io.small_files import SmallFileError, read_small_file, regular_file_status

    try:
        regular_file_status(path)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file (not a finished run of this script)") from None
    except SmallFileError as error:
        raise UsageError(f"{option} {path}: {error}; a run's files are regular files") from None
    except OSError as error:
        raise DataValidationError(f"{option} {path}: cannot be read ({error.strerror or error})") from None
    try:
        data = read_small_file(path, max_bytes)
    except SmallFileError as error:
        raise DataValidationError(f"{option} {path}: {error}") from None
    except OSError as error:  # it went away, or was swapped, since it was looked at
        raise DataValidationError(f"{option} {path}: cannot be read ({error.strerror or error})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataValidationError(
            f"{option} {path}:{line}: invalid UTF-8 (byte 0x{data[error.start]:02x}); not a file this script wrote"
        ) from None


def read_run_json(path: Path, option: str, max_bytes: int = RESULTS_MAX_BYTES) -> Any:
    """The JSON value of a file of an earlier run (:func:`read_run_file`); not JSON, or nested too deep:
    ``DataValidationError`` naming the file and line."""
    from bitext_hf.errors import DataValidationError

    text = read_run_file(path, option, max_bytes)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DataValidationError(f"{option} {path}:{error.lineno}: not JSON ({error.msg})") from None
    except RecursionError:
        raise DataValidationError(f"{option} {path}: JSON nested too deeply") from None


def pair_files(values: list[str]) -> dict[str, Path]:
    """``--pairs xx=PATH ...`` as {language: path}, each an existing file of pairs, read once here so that an empty
    or malformed one is refused before the run folder is touched (``DataValidationError`` naming file and line)."""
    from bitext_hf.data import load_pairs
    from bitext_hf.errors import UsageError

    files: dict[str, Path] = {}
    for value in values:
        language, separator, path = value.partition("=")
        if not separator or not language or not path:
            raise UsageError(f"--pairs {value!r}: expected XX=FILE (English<TAB>XX lines)")
        if not Path(path).is_file():
            raise UsageError(f"--pairs {value!r}: {path} is not a file")
        load_pairs(f"{language}={path}")
        files[language] = Path(path)
    return files


def translation_pairs(language: str, files: dict[str, Path]) -> list[tuple[str, str]]:
    """(English, translation) pairs of ``language``: from its ``--pairs`` file, else from the gettext catalogs."""
    from bitext_hf.data import gettext_pairs, load_pairs

    if language in files:
        pairs = load_pairs(f"{language}={files[language]}")
        return list(zip(pairs.tgt, pairs.src, strict=True))
    return gettext_pairs(language)


def load_recipe(name: str) -> ModuleType:
    """``recipes/<name>.py`` as a module (recipes are scripts, not a package)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / "recipes" / f"{name}.py")
    recipe = importlib.util.module_from_spec(spec)
    sys.modules[name] = recipe
    spec.loader.exec_module(recipe)
    return recipe


def seed_count_or_list(value: str) -> int | list[int]:
    """``5``: the first five ``DEFAULT_SEEDS``; ``42,43`` (one seed: ``42,``): those seeds."""
    try:
        return [int(seed) for seed in value.split(",") if seed.strip()] if "," in value else int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: a number of seeds (5) or seeds separated by commas (42,43)"
        ) from None


def seed_list(value: str) -> list[int]:
    """Seeds separated by commas; an empty string is no seed."""
    try:
        return [int(seed) for seed in value.split(",") if seed.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: seeds separated by commas, e.g. 13,42,87") from None


def true_or_false(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r}: expected true or false")


def write_file(path: Path, content: str | bytes) -> None:
    """``content`` into ``path``, complete or absent, never through a link."""
    from bitext_hf.io import atomic_output

    with atomic_output(path, "wb" if isinstance(content, bytes) else "w", follow_symlinks=False) as handle:
        handle.write(content)


def write_results(output_dir: Path, report: dict[str, Any], table: str) -> None:
    """``results.json`` then ``results.md``, each complete or absent, the last outputs of a run: then the run's
    manifest lists everything it wrote."""
    write_file(output_dir / RESULTS_JSON, json.dumps(report, indent=2) + "\n")
    write_file(output_dir / RESULTS_MD, table.rstrip("\n") + "\n")
    record_run_outputs(output_dir)


def write_card_with_seeds(run_folder: Path, output_dir: Path, table: str, title: str) -> None:
    """The card of one run of the experiment (``run_folder/README.md``, as the recipe wrote it) with the
    experiment's table over seeds added as a last section, written back there (the folder is what would be pushed)
    and to ``<output_dir>/model_card.md``, whose image links point into the run folder."""
    card = (run_folder / "README.md").read_text(encoding="utf-8").rstrip("\n")
    card = f"{card}\n\n## {title}\n\n{table.rstrip()}\n"
    write_file(run_folder / "README.md", card)
    write_file(output_dir / MODEL_CARD, rebase_links(card, run_folder, output_dir))


def rebase_links(card: str, written_in: Path, moved_to: Path) -> str:
    """``card``, written for ``written_in``, with its relative links rewritten to work from ``moved_to``."""
    import os
    import re

    relative = Path(os.path.relpath(written_in, moved_to)).as_posix()
    # Relative image links only: an absolute URL or path stays as it is.
    return re.sub(r"\]\((?![a-z]+://|/)([^)\s]+)\)", lambda m: f"]({relative}/{m.group(1)})", card)


def gettext_mlm_base(
    folder: Path,
    texts: list[str],
    steps: int,
    vocab_size: int,
    max_length: int,
    *,
    seed: int = 0,
    tokenizer: Any = None,
    name: str = "base-gettext-mlm",
) -> Path:
    """A 4 x 128 XLM-R-style encoder pre-trained by MLM on ``texts`` from ``seed``, saved with its tokenizer in
    ``folder/name/``: ``tokenizer`` when given (several bases over the same text share one vocabulary), else a
    Unigram vocabulary of ``vocab_size`` trained on ``texts``."""
    from transformers import TrainingArguments, XLMRobertaConfig

    from bitext_hf.training.mlm import pretrain_mlm
    from bitext_hf.training.tokenizer import train_tokenizer

    base = folder / name
    if tokenizer is None:
        tokenizer = train_tokenizer(texts, vocab_size=vocab_size, model_max_length=max_length)
    config = XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=512,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        max_position_embeddings=max_length + 2 + tokenizer.pad_token_id,
    )
    ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
    args = TrainingArguments(output_dir=str(base), seed=seed, report_to="none", disable_tqdm=True)
    encoder = pretrain_mlm(
        config, tokenizer, ids, output_dir=base, steps=steps, learning_rate=5e-4, batch_size=32, training_args=args
    )
    tokenizer.save_pretrained(str(encoder))
    shutil.rmtree(base / "mlm-run", ignore_errors=True)
    return encoder


def run_script(main: Callable[[argparse.Namespace], Any], parser: argparse.ArgumentParser) -> None:
    """A script's ``if __name__ == "__main__"``: the recipes' one-line errors and exit codes (recipes/README.md)."""
    from bitext_hf.training.args import run_reporting_errors

    args = parser.parse_args()

    def main_recording_outputs() -> Any:
        try:
            return main(args)
        finally:  # a run that fails or is interrupted still lists what it wrote, for a later --overwrite
            for output_dir in list(_open_runs):
                record_run_outputs(output_dir)

    run_reporting_errors(parser.prog, main_recording_outputs)
