"""What the experiment scripts share: the run folder, the translation pairs, the recipes, the gettext MLM base,
seeds, results and errors.

Every experiment runs from scratch in ``<output_dir>/work/`` and ends by writing ``<output_dir>/results.json`` (every
run's numbers, mean and std over the seeds) and ``<output_dir>/results.md`` (the table). A folder that already holds
results or a ``work/`` folder is refused unless ``--overwrite`` is given, which deletes them first: nothing of an
earlier process is ever reused. The scripts import this module as ``common`` (Python puts a script's own folder
first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_JSON = "results.json"
RESULTS_MD = "results.md"
WORK = "work"


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
        "scratch (without it such a folder is refused).",
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


def prepare_run_folder(output_dir: Path, overwrite: bool, other_outputs: tuple[str, ...] = ()) -> Path:
    """The empty ``work/`` folder of a run from scratch; refuses a folder with an earlier run's results (or one of
    ``other_outputs``, files the experiment also writes there)."""
    from bitext_hf.errors import UsageError

    if output_dir.exists() and not output_dir.is_dir():
        raise UsageError(f"--output_dir {output_dir}: exists and is not a folder")
    names = (RESULTS_JSON, RESULTS_MD, WORK, *other_outputs)
    earlier = [output_dir / name for name in names if (output_dir / name).exists() or (output_dir / name).is_symlink()]
    if earlier and not overwrite:
        raise UsageError(
            f"--output_dir {output_dir}: holds an earlier run ({', '.join(path.name for path in earlier)}); "
            "pass --overwrite to delete it and start from scratch, or choose another folder"
        )
    for path in earlier:
        # Only what an experiment writes is deleted: a link or a file of another kind there is not ours.
        expected_folder = path.name == WORK
        if path.is_symlink() or not (path.is_dir() if expected_folder else path.is_file()):
            raise UsageError(f"--output_dir: {path} is not the {'folder' if expected_folder else 'file'} a run writes")
    for path in earlier:
        shutil.rmtree(path) if path.name == WORK else path.unlink()
    work = output_dir / WORK
    work.mkdir(parents=True)
    return work


def pair_files(values: list[str]) -> dict[str, Path]:
    """``--pairs xx=PATH ...`` as {language: path}, each an existing file."""
    from bitext_hf.errors import UsageError

    files: dict[str, Path] = {}
    for value in values:
        language, separator, path = value.partition("=")
        if not separator or not language or not path:
            raise UsageError(f"--pairs {value!r}: expected XX=FILE (English<TAB>XX lines)")
        if not Path(path).is_file():
            raise UsageError(f"--pairs {value!r}: {path} is not a file")
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
    """``results.json`` then ``results.md``, each complete or absent."""
    write_file(output_dir / RESULTS_JSON, json.dumps(report, indent=2) + "\n")
    write_file(output_dir / RESULTS_MD, table.rstrip("\n") + "\n")


def write_card_with_seeds(run_folder: Path, output_dir: Path, table: str, title: str) -> None:
    """The card of one run of the experiment (``run_folder/README.md``, as the recipe wrote it) with the
    experiment's table over seeds added as a last section, written back there (the folder is what would be pushed)
    and to ``<output_dir>/model_card.md``, whose image links point into the run folder."""
    import os
    import re

    card = (run_folder / "README.md").read_text(encoding="utf-8").rstrip("\n")
    card = f"{card}\n\n## {title}\n\n{table.rstrip()}\n"
    write_file(run_folder / "README.md", card)
    relative = Path(os.path.relpath(run_folder, output_dir)).as_posix()
    # Relative image links only: an absolute URL or path stays as it is.
    linked = re.sub(r"\]\((?![a-z]+://|/)([^)\s]+)\)", lambda m: f"]({relative}/{m.group(1)})", card)
    write_file(output_dir / "model_card.md", linked)


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
    run_reporting_errors(parser.prog, lambda: main(args))
