"""Package namespaces whose names are imported on first access (PEP 562), as transformers' packages do: importing a
package's light submodule (a config that ``--help`` reads, the launch check of a recipe) then costs none of the heavy
imports (torch, FAISS, numba, the Trainer) its other submodules make."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, submodule_of: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names each come from a submodule
    (``submodule_of``: name -> submodule, or a whole module path for a name another package defines) when first asked
    for; ``namespace`` is the package's ``globals()``, where
    each name is kept once imported, so later accesses skip ``__getattr__``.

    >>> __getattr__, __dir__ = lazy_exports(__name__, {"run_mining": "pipeline"}, globals())
    """

    def __getattr__(name: str) -> Any:
        if name not in submodule_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = submodule_of[name]
        value = getattr(importlib.import_module(module if "." in module else f"{package}.{module}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *submodule_of})

    return __getattr__, __dir__
