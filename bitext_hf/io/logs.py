"""What the entry points (the ``bitext-hf`` command line, the recipes) let the libraries underneath print.

By default a command's stderr holds its own lines only. The libraries log what their own developers need and a user
of the command cannot act on: faiss's loader tries each CPU build in turn and logs every miss, transformers prints a
table of checkpoint keys when an encoder's checkpoint holds a head it does not use (and a bar for loading and
writing weights), datasets draws a bar for every ``map``, sentence-transformers a bar for every ``encode``. Verbose
(``-v`` / ``--verbose``, or a recipe's ``--log_level info``) shows all of them at INFO.

Only an entry point chooses: a Python user of the package keeps the libraries' own settings. transformers and
datasets set their logger's level when they are imported, over one set before, so a library imported later in the
command reads its level from its environment variable (set for the command, restored after it, and kept where the
user set it); one imported already is set directly, and :func:`settle_imported_libraries` sets one imported after
the command started (transformers, when an encoder is loaded).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

__all__ = ["LIBRARY_LOGGERS", "library_logs", "settle_imported_libraries"]

# Libraries on the standard logging tree, kept at WARNING by default: their warnings say something a user can act
# on (sentence-transformers building mean pooling for a folder that is not one of its models, for example).
LIBRARY_LOGGERS = (
    "faiss",
    "sentence_transformers",
    "huggingface_hub",
    "accelerate",
    "evaluate",
    "trl",
    "peft",
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
)

# The variables transformers and datasets read at import. transformers at ERROR: its load report and its
# "Token indices sequence length" notice are warnings, and bitext_hf.encoders says what matters of both in one line.
_VARIABLES_QUIET = {"TRANSFORMERS_VERBOSITY": "error", "DATASETS_VERBOSITY": "warning"}
_VARIABLES_VERBOSE = {"TRANSFORMERS_VERBOSITY": "info", "DATASETS_VERBOSITY": "info"}
_DATASETS_BARS = "HF_DATASETS_DISABLE_PROGRESS_BARS"

_verbose: bool | None = None  # the entry point's choice; None: not chosen (a library user), nothing is changed


@contextlib.contextmanager
def library_logs(verbose: bool) -> Iterator[None]:
    """Within the block, the libraries log at INFO (``verbose``) or only their warnings (and transformers only its
    errors), without progress bars of their own. The environment variables and the levels of
    :data:`LIBRARY_LOGGERS` are restored at the end; transformers and datasets keep theirs (imported during the block,
    they had none before it)."""
    global _verbose
    saved = {name: os.environ.get(name) for name in (*_VARIABLES_QUIET, _DATASETS_BARS)}
    levels = {name: logging.getLogger(name).level for name in LIBRARY_LOGGERS}
    previous, _verbose = _verbose, verbose
    try:
        if verbose:
            os.environ.update(_VARIABLES_VERBOSE)
        else:
            for name, value in _VARIABLES_QUIET.items():
                os.environ.setdefault(name, value)  # a level the user set is theirs
            os.environ.setdefault(_DATASETS_BARS, "1")
        for name in LIBRARY_LOGGERS:
            logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
        settle_imported_libraries()
        yield
    finally:
        _verbose = previous
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def settle_imported_libraries() -> None:
    """Apply the entry point's choice to transformers and datasets where they are imported; nothing when no entry
    point chose (a Python user of the package keeps the libraries' settings)."""
    if _verbose is None:
        return
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.set_verbosity(logging.INFO if _verbose else _level(os.environ["TRANSFORMERS_VERBOSITY"]))
        if _verbose:
            transformers_logging.enable_progress_bar()
        else:
            transformers_logging.disable_progress_bar()
    if "datasets" in sys.modules:
        import datasets
        from datasets.utils import logging as datasets_logging

        datasets_logging.set_verbosity(logging.INFO if _verbose else _level(os.environ["DATASETS_VERBOSITY"]))
        if _verbose:
            datasets.enable_progress_bars()
        else:
            datasets.disable_progress_bars()


def _level(name: str) -> int:
    """A level named as the libraries' variables name it (``error``, ``warning``, ...); WARNING when unknown."""
    level = logging.getLevelName(name.strip().upper())
    return level if isinstance(level, int) else logging.WARNING
