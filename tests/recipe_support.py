"""Helpers shared by the recipe tests: the recipe scripts of recipes/ imported as modules."""

from __future__ import annotations

import importlib
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
