"""Which configuration a recipe run with no arguments runs: its default configuration (the paper's setup) where this
machine can run it, else the first shipped offline configuration that runs here, announced in one line and recorded
for the model card; a refusal in one line when none runs here.

What a setup may lack: the Hugging Face Hub for data or models that are not cached (downloads turned off, or the hub
not answering a short connection probe), a GPU for bf16 / fp16, and the eflomal aligner.

Why run the offline configuration rather than stop: ``accelerate launch recipes/<recipe>.py`` is the line users type,
and accelerate's launcher follows any non-zero exit of the script with a ``CalledProcessError`` traceback of its own
(exit 1), so a refusal can never be the last line the user sees nor keep its exit code there (recipes/README.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from bitext_hf.training.args import CONFIG_FLAG, load_yaml_config

__all__ = ["choose_default_config", "configuration_notes", "record_substitution"]


# Configuration keys that name a model or tokenizer (a hub id unless a local path or a recipe's own keyword).
_MODEL_KEYS = ("encoder", "base_model", "teacher", "model_name_or_path", "tokenizer", "tokenizer_name")
_OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
_HUB_PROBE_SECONDS = 3.0


# Why this process runs an offline configuration in place of the paper's setup, for the card (configuration_notes).
_SUBSTITUTION: list[str] = []


def choose_default_config(script: Path, config_path: Path) -> tuple[Path, str | None]:
    """The configuration to run when ``script`` gets no arguments, and the line that says why when it is not
    ``config_path`` (None when it is).

    ``config_path`` when this machine can run it; else its offline sibling (``<stem>-gettext.yaml``, then
    ``<stem>-smoke.yaml``) that runs here. Neither: UsageError, naming what is missing.
    """
    from bitext_hf.errors import UsageError

    lacks = _lacks(load_yaml_config(config_path))
    if not lacks:
        return config_path, None
    needs = f"the default configuration {_shown_path(config_path)} (the paper's setup) needs {'; '.join(lacks)}"
    for suffix in ("-gettext", "-smoke"):
        offline = config_path.with_name(f"{config_path.stem}{suffix}.yaml")
        if offline.is_file() and not _lacks(load_yaml_config(offline), probe=False):
            command = f"python {_shown_path(script)} {CONFIG_FLAG} {_shown_path(offline)}"
            return offline, f"{needs}: running the offline configuration {_shown_path(offline)} instead, as {command}"
    raise UsageError(f"{needs}; give --config with a configuration that runs here (recipes/README.md)")


def record_substitution(reason: str | None) -> None:
    """Remember for :func:`configuration_notes` why this run took an offline configuration (the reason
    :func:`choose_default_config` gave), or that it did not (None): each recipe run in the process sets it anew."""
    _SUBSTITUTION[:] = [reason] if reason else []


def configuration_notes() -> list[str]:
    """The model card's warning that the run took an offline configuration in place of the paper's setup (a recipe
    run with no arguments on a machine that cannot run that setup); empty for every other run."""
    return [
        f"**Not the paper's setup.** Run with no arguments, the recipe said: {reason}. Its numbers are those of that "
        "configuration."
        for reason in _SUBSTITUTION
    ]


def _lacks(config: dict[str, Any], *, probe: bool = True) -> list[str]:
    """What a configuration needs that this machine lacks, in words (empty: it can run here)."""
    import importlib.util

    import torch

    lacks = []
    specs = [value for value in _strings(config) if "hub:" in value]
    datasets = sorted({spec.split("hub:", 1)[1].split(":")[0].split("@")[0] for spec in specs})
    models = sorted({str(config[key]) for key in _MODEL_KEYS if _is_hub_id(config.get(key))})
    missing = [f"dataset {name}" for name in datasets if not _cached(name, "dataset")]
    missing += [f"model {name}" for name in models if not _cached(name, "model")]
    if missing:
        no_network = _no_network(probe)
        if no_network:
            lacks.append(f"the Hugging Face Hub for {', '.join(missing)} ({no_network})")
    if (config.get("bf16") or config.get("fp16")) and not config.get("use_cpu") and not torch.cuda.is_available():
        lacks.append(f"a GPU for {'bf16' if config.get('bf16') else 'fp16'} (none here)")
    if config.get("aligner") == "eflomal" and importlib.util.find_spec("eflomal") is None:
        lacks.append("eflomal (not installed: pip install 'bitext-hf[align]')")
    return lacks


def _strings(value: Any) -> list[str]:
    """Every string in a configuration value, at any depth of its lists and mappings."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    return []


def _is_hub_id(value: Any) -> bool:
    """``owner/name`` that is not a local path (``random`` and ``default`` name a recipe's own models)."""
    if not isinstance(value, str) or value.count("/") != 1 or value.startswith((".", "/", "~")):
        return False
    return " " not in value and not Path(value).expanduser().exists()


def _cached(repo_id: str, kind: str) -> bool:
    """Whether a hub repository (``kind``: model or dataset) is in this machine's Hugging Face caches."""
    from huggingface_hub import constants

    folder = Path(constants.HF_HUB_CACHE) / f"{kind}s--{repo_id.replace('/', '--')}"
    if folder.is_dir():
        return True
    if kind == "dataset":  # datasets' own cache of prepared data, by its default layout
        cache = os.environ.get("HF_DATASETS_CACHE") or os.path.join(constants.HF_HOME, "datasets")
        return Path(cache, repo_id.replace("/", "___")).is_dir()
    return False


def _no_network(probe: bool) -> str | None:
    """Why the hub cannot be reached (downloads turned off, or no answer), or None when it can (or, without
    ``probe``, when nothing says it cannot)."""
    for variable in _OFFLINE_VARIABLES:
        if os.environ.get(variable, "").strip().upper() in {"1", "ON", "YES", "TRUE"}:
            return f"downloads are off: {variable}={os.environ[variable]}"
    if not probe:
        return None
    import socket
    import threading
    from urllib.parse import urlparse

    from huggingface_hub import constants

    host = urlparse(constants.ENDPOINT).hostname or "huggingface.co"
    answered: list[bool] = []

    def connect() -> None:
        try:
            socket.create_connection((host, 443), timeout=_HUB_PROBE_SECONDS).close()
            answered.append(True)
        except OSError:
            answered.append(False)

    # A thread waited on for a bounded time: a name lookup can block longer than the connection's own timeout.
    thread = threading.Thread(target=connect, name="bitext-hf-hub-probe", daemon=True)
    thread.start()
    thread.join(2 * _HUB_PROBE_SECONDS)
    return None if answered and answered[0] else f"{host} cannot be reached"


def _shown_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it (as a user would type it), else absolute."""
    absolute = path.resolve()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
