"""Register the model families with the Auto classes without importing transformers and torch at ``import bitext_hf``.

Registering needs the config and model classes, hence torch and transformers: about 4 s of imports, which every
``bitext-hf`` command (``--help`` included) would pay even when it never builds a model. So ``import bitext_hf``
registers at once only when transformers is already imported; otherwise it registers right after transformers is
first imported (a post-import hook on ``sys.meta_path``), before the caller can reach ``AutoModel``. Either way
``import bitext_hf`` followed by ``AutoModel.from_pretrained(<a bitext-hf checkpoint>)`` works without
``trust_remote_code``, as before.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from types import ModuleType

logger = logging.getLogger(__name__)

__all__ = ["register_when_transformers_is_imported"]


def _register() -> None:
    from bitext_hf.modeling import register_auto_classes

    try:
        register_auto_classes()
    except Exception as error:  # a broken registration must not break ``import transformers`` for the caller
        logger.warning("bitext_hf could not register its models with the transformers Auto classes: %s", error)


class _RegisteringLoader(importlib.abc.Loader):
    """Runs the real loader of ``transformers``, then registers the model families and retires the hook."""

    def __init__(self, loader: importlib.abc.Loader, hook: _TransformersImportHook) -> None:
        self._loader = loader
        self._hook = hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        if self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        _register()


class _TransformersImportHook(importlib.abc.MetaPathFinder):
    """Finds ``transformers`` with the other finders and wraps its loader.

    It stays installed until transformers is actually executed: libraries probe for it with
    ``importlib.util.find_spec`` (availability checks) without importing it, and such a probe must not use it up.
    """

    def __init__(self) -> None:
        self._searching = False

    def find_spec(self, name: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name != "transformers" or self._searching:
            return None
        self._searching = True  # the search below asks every finder again, this one included
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._searching = False
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _RegisteringLoader(spec.loader, self)
        return spec


def register_when_transformers_is_imported() -> None:
    """Register now if transformers is loaded, else as soon as it is (idempotent)."""
    if "transformers" in sys.modules:
        _register()
    elif not any(isinstance(finder, _TransformersImportHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, _TransformersImportHook())
