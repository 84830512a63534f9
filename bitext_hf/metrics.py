"""Deprecated path of :mod:`bitext_hf.evaluation.metrics`, kept for one release.

The metrics belong to the evaluation layer, beside the evaluators. Importing this path warns (``FutureWarning``, so
that users see it) and hands back the new package itself, so ``bitext_hf.metrics.load``, ``bitext_hf.metrics.xsim``
and the other names are the same objects as the new path's (a monkeypatch on one is seen through the other). The
submodules that callers imported by name (``functional``, ``peer_retrieval``, ``module_info``) are registered under
their old names too: ``import bitext_hf.metrics.functional`` must not load a second copy of the module.
"""

from __future__ import annotations

import sys
import warnings

import bitext_hf.evaluation.metrics as _metrics
from bitext_hf.evaluation.metrics import functional, module_info, peer_retrieval

warnings.warn(
    "bitext_hf.metrics moved to bitext_hf.evaluation.metrics; the old path will be removed in the next release",
    FutureWarning,
    stacklevel=2,
)

for _submodule in (functional, peer_retrieval, module_info):
    sys.modules[f"{__name__}.{_submodule.__name__.rpartition('.')[2]}"] = _submodule
# The import system returns what sys.modules holds under this name once the module has run: the new package.
sys.modules[__name__] = _metrics
