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
