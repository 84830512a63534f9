"""Where an encoder comes from, checked before anything heavy is imported: a local folder (``config.json``, the
safetensors headers, tokenizer code only when allowed), the hub cache, or at most one short hub request; every
failure is one ``EncoderLoadError`` line. ``bitext_hf.encoders.load_encoder`` resolves a spec here once and hands
the result to its adapter.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, TypeVar

from bitext_hf.errors import EncoderLoadError
from bitext_hf.io.small_files import MAX_CONFIG_BYTES, read_small_json

logger = logging.getLogger("bitext_hf.encoders")
T = TypeVar("T")

DEFAULT_ENCODER = "use-multilingual-v3"  # the embedded offline encoder (bitext_hf.encoders.USEEncoder)


class ModelSource(NamedTuple):
    """Where a model is loaded from: what the caller named, the folder or hub id, its kind, and whether offline."""

    name: str
    source: str
    is_sentence_transformer: bool
    local_only: bool


# A HEAD request's timeout covers each connection attempt but not the name lookup (getaddrinfo blocks on its own
# schedule), so the probe also runs in a thread that is waited on for at most twice this long.
_PROBE_SECONDS = 3.0
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub accepts as true in HF_HUB_OFFLINE


def warn_missing_weights(name: str, loading_info: dict, pooling: str) -> None:
    """One line when weights the embeddings depend on are not in the checkpoint (they start at random), in place of
    transformers' table of keys (shown with the libraries' logs). Unused keys (a pre-training head) and, when this
    class pools the hidden states itself, the model's own pooler change nothing and are not reported."""
    missing = sorted(loading_info.get("missing_keys") or ())
    if pooling != "model":
        missing = [key for key in missing if key.split(".")[0] != "pooler"]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        logger.warning(
            "%s: %d weights are not in the checkpoint and start at random (%s): its embeddings are not a trained "
            "model's",
            name,
            len(missing),
            shown,
        )


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0].strip() if lines else type(error).__name__


def _fetch_hint(name: str) -> str:
    folder = name.rstrip("/").split("/")[-1]
    return (
        f"On a machine with network run `hf download {name} --local-dir {folder}`, copy that folder here and pass "
        f"its path (`--model {folder}`), or use the embedded default encoder ('{DEFAULT_ENCODER}')."
    )


def _offline_setting() -> str | None:
    """The variable that turns downloads off, read now (huggingface_hub reads it once, at its import)."""
    from huggingface_hub import constants

    for variable in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(variable, "").strip().upper() in _TRUE:
            return f"{variable}={os.environ[variable]}"
    return "HF_HUB_OFFLINE" if constants.HF_HUB_OFFLINE else None


def read_json(path: Path):
    try:
        return read_small_json(path, MAX_CONFIG_BYTES)  # bounded: a config of GBs is refused, not read
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise EncoderLoadError(f"{path}: cannot be read as JSON ({_first_line(error)})") from error


def _check_config(config: Path, trust_remote_code: bool, tensors: dict) -> None:
    """A readable config.json whose model_type transformers knows, before torch is imported and weights are read.

    transformers would raise a ValueError for an unknown type (exit 3 in the CLI, as if the data were wrong) and, for
    a model that ships its own code, may ask on the terminal whether to run it; this check says which and why.
    """
    if not config.is_file():
        raise EncoderLoadError(f"{config}: missing; a model folder needs its config.json")
    data = read_json(config)
    if not isinstance(data, dict):
        raise EncoderLoadError(f"{config}: not a model configuration (a JSON object)")
    _check_config_matches_weights(config, data, tensors)  # before transformers is imported: in a millisecond
    model_type = data.get("model_type")
    if model_type is None or ("auto_map" in data and trust_remote_code):
        return  # transformers has its own fallbacks for these; its error, if any, is reported by load_source
    from transformers import CONFIG_MAPPING, __version__

    import bitext_hf.modeling  # noqa: F401  (registers the bitext-hf families in CONFIG_MAPPING)

    if not isinstance(model_type, str) or model_type not in CONFIG_MAPPING:
        remedy = (
            "it ships its own code (auto_map), which is never run unasked: in Python, "
            "load_encoder(path, trust_remote_code=True) if you trust it"
            if "auto_map" in data
            else "a newer transformers may know it (`pip install -U transformers`)"
        )
        raise EncoderLoadError(
            f"{config}: model_type {model_type!r} is unknown to transformers {__version__}; {remedy}"
        )


def _check_tokenizer_code(folder: Path, trust_remote_code: bool) -> None:
    """Refuse a tokenizer that ships its own code (an ``AutoTokenizer`` entry in tokenizer_config.json's ``auto_map``)
    unless it is trusted: transformers would otherwise either stop with a multi-line error or quietly load a plain
    class of the declared name, which need not tokenize as the checkpoint's own code does."""
    path = folder / "tokenizer_config.json"
    if trust_remote_code or not path.is_file():
        return
    data = read_json(path)
    auto_map = data.get("auto_map") if isinstance(data, dict) else None
    if auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map:
        raise EncoderLoadError(
            f"{path}: the tokenizer ships its own code (auto_map), which is never run unasked: in Python, "
            "load_encoder(path, trust_remote_code=True) if you trust it"
        )


def _check_safetensors(folder: Path) -> dict[str, tuple[Path, tuple[int, ...]]]:
    """Read each safetensors header (cheap: the header only); a corrupt or truncated file is named before loading.

    Returns every tensor of the weights transformers would load (``model.safetensors`` when there is one, else
    every shard) by name: its file and shape."""
    from safetensors import safe_open

    files = sorted(folder.glob("*.safetensors"))
    loaded = [folder / "model.safetensors"] if folder / "model.safetensors" in files else files
    tensors: dict[str, tuple[Path, tuple[int, ...]]] = {}
    for file in files:
        try:
            with safe_open(str(file), framework="numpy") as weights:
                names = weights.keys() if file in loaded else ()
                tensors.update({name: (file, tuple(weights.get_slice(name).get_shape())) for name in names})
        except Exception as error:  # SafetensorError derives from Exception only; OSError for unreadable files
            raise EncoderLoadError(
                f"{file}: not a valid safetensors file ({_first_line(error)}); it is corrupt or truncated: "
                "copy or download it again"
            ) from error
    return tensors


# config.json's names for a model's depth and width, as transformers' configurations spell them. The width of the
# token embeddings is embedding_size where there is one (ALBERT and ELECTRA factor it out of hidden_size).
_DEPTH_KEYS = ("num_hidden_layers", "num_layers", "n_layers", "n_layer")
_WIDTH_KEYS = ("embedding_size", "hidden_size", "d_model", "n_embd", "dim")
# The numbered modules of a layer stack (BERT's encoder.layer.N, GPT-2's h.N, T5's block.N, LLaMA's layers.N) and
# the token embeddings (BERT's word_embeddings, LLaMA's and BART's embed_tokens, GPT-2's wte, T5's shared).
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block|blocks)\.(\d+)\.")
_TOKEN_EMBEDDINGS = re.compile(r"(?:^|\.)(?:word_embeddings|embed_tokens|wte|shared)\.weight")


def _claimed(config: dict, keys: Sequence[str]) -> tuple[str, float] | None:
    """The first of ``keys`` that config.json sets to a number: (key, value)."""
    for key in keys:
        value = config.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return key, value
    return None


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


def _check_config_matches_weights(config_path: Path, config: dict, tensors: dict) -> None:
    """Refuse a config.json that describes another model than its weights hold, from the safetensors headers alone.

    transformers builds the model the config describes before it reads a weight: a config claiming a million
    layers, or a width the weights do not have, takes minutes and gigabytes before the mismatch (or the missing
    layers, started at random) would show. Only what the config sets itself is compared, and only with weights
    named as transformers' models name them: a layer count above the layers present, token embeddings whose
    shape is not vocab_size x the width. A quantized checkpoint (``quantization_config``) packs its weights in
    other shapes and is left to transformers."""
    if not tensors or "quantization_config" in config:
        return
    depth = _claimed(config, _DEPTH_KEYS)
    layers = {int(match[1]) for name in tensors for match in [_LAYER_INDEX.search(name)] if match}
    if depth is not None and layers and depth[1] > max(layers) + 1:
        files = ", ".join(sorted({str(file.name) for file, _ in tensors.values()}))
        held = max(layers) + 1
        raise EncoderLoadError(
            f"{config_path}: {depth[0]} is {_number(depth[1])} but the weights ({files}) hold {held} "
            f"layer{'s' if held > 1 else ''}; the config is not this checkpoint's"
        )
    width, vocab = _claimed(config, _WIDTH_KEYS), _claimed(config, ("vocab_size",))
    for name, (file, shape) in tensors.items():
        if not _TOKEN_EMBEDDINGS.search(name) or len(shape) != 2:
            continue
        for claim, size in ((vocab, shape[0]), (width, shape[1])):
            if claim is not None and claim[1] != size:
                raise EncoderLoadError(
                    f"{config_path}: {claim[0]} is {_number(claim[1])} but {file.name} holds {name} of shape "
                    f"{shape[0]} x {shape[1]}; the config is not this checkpoint's"
                )


def _check_files_are_regular(folder: Path) -> None:
    """Every file of a model folder is a regular file (or a link to one, as in the Hub cache): the loaders open
    config, weights and tokenizer files by name, and a FIFO there would make them wait for a writer forever, a
    device feed them without end."""
    from bitext_hf.io.small_files import SmallFileError, regular_file_status

    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as error:
        raise EncoderLoadError(f"{folder}: cannot be listed ({_first_line(error)})") from None
    for entry in entries:
        try:
            if entry.is_dir():
                continue
            regular_file_status(entry.path)
        except (SmallFileError, OSError) as error:
            raise EncoderLoadError(f"{entry.path}: {error}; a model folder holds regular files") from None


def _check_folder(path: Path, trust_remote_code: bool) -> bool:
    """Cheap checks of a local model folder; True for a sentence-transformers folder."""
    if not path.is_dir():
        raise EncoderLoadError(f"{path}: not a folder; pass the folder that holds the model")
    _check_files_are_regular(path)
    modules_file = path / "modules.json"
    if modules_file.is_file():
        modules = read_json(modules_file)
        if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
            raise EncoderLoadError(f"{modules_file}: not a sentence-transformers module list")
        for module in modules:
            folder = path / str(module.get("path", ""))
            if folder.is_dir() and folder != path:
                _check_files_are_regular(folder)
            if str(module.get("type", "")).endswith("Transformer"):
                tensors = _check_safetensors(folder)
                _check_config(folder / "config.json", trust_remote_code, tensors)
                _check_tokenizer_code(folder, trust_remote_code)
            else:
                _check_safetensors(folder)
        return True
    if not (path / "config.json").is_file():
        raise EncoderLoadError(
            f"{path}: neither a sentence-transformers folder (modules.json) nor a model (config.json)"
        )
    tensors = _check_safetensors(path)
    _check_config(path / "config.json", trust_remote_code, tensors)
    _check_tokenizer_code(path, trust_remote_code)
    return False


def _has_weights(folder: Path) -> bool:
    patterns = ("*.safetensors", "*.bin", "*/*.safetensors", "*/*.bin")
    return any(next(folder.glob(pattern), None) is not None for pattern in patterns)


def _probe_hub(name: str, missing: str) -> bool:
    """One retry-free request to the hub for a model that is not cached; True for a sentence-transformers repo.

    The libraries' own downloads retry every file five times with back-off (84 s on a machine without network);
    this asks once, briefly, and turns the answer into one message.
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import GatedRepoError, RemoteEntryNotFoundError, RepositoryNotFoundError

    outcome: list[bool | Exception] = []

    def probe() -> None:
        try:
            url = hf_hub_url(name, "modules.json")
            get_hf_file_metadata(url, timeout=_PROBE_SECONDS, retry_on_errors=False)
            outcome.append(True)
        except RemoteEntryNotFoundError:  # the repo exists, without modules.json: a transformers model
            outcome.append(False)
        except Exception as error:  # reported below, in the caller's thread
            outcome.append(error)

    thread = threading.Thread(target=probe, name="bitext-hf-hub-probe", daemon=True)
    thread.start()
    thread.join(2 * _PROBE_SECONDS)
    result = outcome[0] if outcome else TimeoutError(f"no answer within {2 * _PROBE_SECONDS:g} s")
    if isinstance(result, bool):
        return result
    if isinstance(result, GatedRepoError):
        raise EncoderLoadError(
            f"cannot load encoder {name!r}: it is gated on the Hugging Face Hub; accept its terms on its page and "
            "log in (`hf auth login`)"
        )
    if isinstance(result, RepositoryNotFoundError):
        raise EncoderLoadError(
            f"cannot load encoder {name!r}: no such model on the Hugging Face Hub (if it is private, log in with "
            "`hf auth login`)"
        )
    raise EncoderLoadError(
        f"cannot load encoder {name!r}: it is {missing}, and the Hugging Face Hub cannot be reached "
        f"({_first_line(result)}). {_fetch_hint(name)}"
    )


def resolve_model(spec: str | os.PathLike | ModelSource, *, trust_remote_code: bool = False) -> ModelSource:
    """A local folder, a cached hub id (as its cached folder) or a reachable hub id, checked cheaply; else one error.

    The cache is looked up first and by hand, so that a cached model never touches the network and a missing one
    fails at once when downloads are off, instead of after the libraries' retries.
    """
    if isinstance(spec, ModelSource):
        return spec
    name = str(spec)
    path = Path(name).expanduser()
    if path.exists():
        return ModelSource(name, str(path), _check_folder(path, trust_remote_code), local_only=True)
    if name.count("/") > 1 or name.startswith((".", "~", "/")):
        raise EncoderLoadError(f"{name}: no such folder")
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        raise EncoderLoadError(f"{name}: no such folder, and not a valid Hugging Face Hub id") from None
    cache = constants.HF_HUB_CACHE
    for marker in ("modules.json", "config.json"):
        cached = try_to_load_from_cache(name, marker, cache_dir=cache)
        if isinstance(cached, str):
            folder = Path(cached).parent
            if _has_weights(folder):
                return ModelSource(name, str(folder), _check_folder(folder, trust_remote_code), local_only=True)
            break
    missing = f"not a local folder and not (completely) in the Hugging Face cache ({cache})"
    offline = _offline_setting()
    if offline:
        raise EncoderLoadError(
            f"cannot load encoder {name!r}: it is {missing}, and downloads are off ({offline}). {_fetch_hint(name)}"
        )
    return ModelSource(name, name, _probe_hub(name, missing), local_only=False)


def load_source(source: ModelSource, build: Callable[[], T]) -> T:
    """Run a library loader; any failure is one EncoderLoadError line (the cause stays chained for --debug).

    The loaders raise OSError, ValueError, RuntimeError (shape mismatches), ImportError (a tokenizer's optional
    dependency) or safetensors' own error: each means this model cannot be loaded here, which is exit 4.
    """
    # Every loader here may meet a bitext-hf checkpoint; the Auto classes know those once bitext_hf.modeling is imported.
    import bitext_hf.modeling  # noqa: F401

    try:
        return build()
    except EncoderLoadError:
        raise
    except Exception as error:
        where = "" if source.source == source.name else f" from {source.source}"
        raise EncoderLoadError(f"cannot load encoder {source.name!r}{where}: {_first_line(error)}") from error
