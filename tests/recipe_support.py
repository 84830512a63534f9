"""Helpers shared by the recipe tests: the recipe scripts of recipes/ imported as modules."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_recipe(name: str):
    """``recipes/<name>.py`` as a module (its ``main`` and argument classes), imported once per session."""
    sys.path.insert(0, str(ROOT / "recipes"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def bare_packages(*packages: str) -> str:
    """Python source to run first in a subprocess: each of ``packages`` (``bitext_hf.training``, ...) becomes its
    folder without its ``__init__``, so that importing one module of it loads that module's own imports only.

    The subprocesses that check one function in a fresh interpreter (another hash seed, another process) then skip
    the imports of the package's other modules, which cost seconds each time.
    """
    lines = ["import importlib.util, sys, types"]
    for package in packages:
        parent, _, _ = package.rpartition(".")
        lines += [
            f"import {parent}",
            f"_bare = types.ModuleType({package!r})",
            f"_bare.__path__ = list(importlib.util.find_spec({package!r}).submodule_search_locations)",
            f"sys.modules[{package!r}] = _bare",
        ]
    return "\n".join(lines) + "\n"


def run_align(output_dir: Path, *flags: str) -> dict:
    """align_contrastive's smoke configuration cut to six steps with a checkpoint every three, into ``output_dir``."""
    align_contrastive = import_recipe("align_contrastive")
    from transformers import TrainingArguments

    from bitext_hf.training import ModelArguments, parse_args

    args = [
        "--config",
        str(ROOT / "recipes/configs/align_contrastive-smoke.yaml"),
        "--output_dir",
        str(output_dir),
        "--max_pairs",
        "200",
        "--held_out",
        "0",
        "--max_steps",
        "6",
        "--save_steps",
        "3",
        "--save_total_limit",
        "5",
        "--logging_steps",
        "1",
        "--per_device_train_batch_size",
        "8",
        "--disable_tqdm",
        "true",
        *flags,
    ]
    return align_contrastive.main(
        *parse_args(align_contrastive.ScriptArguments, TrainingArguments, ModelArguments, args=args)
    )


_HELP = """
import contextlib, io, json, runpy, sys
scripts, texts = sys.argv[1:], {}
for script in scripts:
    sys.argv, out = [script, "--help"], io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    texts[script] = [code, out.getvalue()]
print(json.dumps(texts))
"""


def help_texts(*scripts: Path) -> dict[Path, tuple[int, str]]:
    """Each script's ``--help``, run as ``__main__`` (``python SCRIPT --help``) one after the other in one fresh
    interpreter with the scripts' folder first on ``sys.path``: ``{script: (exit code, stdout)}``. One interpreter
    imports torch and transformers once for all of them."""
    folders = list(dict.fromkeys(str(script.parent) for script in scripts))
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path[:0] = {folders!r}\n{_HELP}", *map(str, scripts)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return {Path(script): (code, text) for script, (code, text) in json.loads(result.stdout).items()}
