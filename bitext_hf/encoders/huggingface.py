"""Hugging Face encoders: a transformers model with its pooling (``HFEncoder``) and a sentence-transformers model
(``SentenceTransformerEncoder``), in torch or converted for ONNX Runtime or OpenVINO, in float32, bfloat16 or int8."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence

import numpy as np

from bitext_hf.encoders.base import (
    check_sentences,
    encoding_progress,
    l2_normalize,
    length_sorted_batches,
    token_counts,
)
from bitext_hf.encoders.exported import SAMPLE_SENTENCES, check_exportable, converted, exported_quantize
from bitext_hf.encoders.precision import (
    arithmetic,
    check_quantize,
    compute_context,
    default_device,
    prepare,
    quantize_int8,
    resolve_quantize,
)
from bitext_hf.encoders.sources import (
    ModelSource,
    load_source,
    resolve_model,
    warn_missing_weights,
)
from bitext_hf.encoders.spec import check_backend
from bitext_hf.io.logs import settle_imported_libraries
from bitext_hf.threads import check_threads, default_threads, limit_threads

__all__ = ["POOLINGS", "HFEncoder", "SentenceTransformerEncoder"]

# The poolings a user chooses; "model" (a model's own sentence_embedding) is chosen by the loader.
POOLINGS = ("mean", "max", "cls")

logger = logging.getLogger("bitext_hf.encoders")


class HFEncoder:
    """Any Hugging Face encoder (``AutoModel``) with mean, max or CLS pooling over a chosen hidden layer.

    Args:
        model_or_path (PreTrainedModel or str): a loaded model or a local path / hub id (hub ids must be cached: no
            network).
        pooling (str, defaults to "mean"): "mean", "max" or "cls" (padding excluded), or "model" for models whose
            output has their own ``sentence_embedding`` (e.g. a Laser3 student: pooling and projection).
        max_length (int, defaults to 512): longer inputs are truncated, with one warning per ``encode`` call; never
            more than the model's position table.
        tokenizer (PreTrainedTokenizerBase or str, optional): a tokenizer or its path (defaults to the model's).
        layer (int, optional): hidden state to pool (0 = embeddings); defaults to the last.
        device (str, optional): defaults to CUDA when available for a loaded path, and to the device of a given
            model. A given model is switched to eval mode only while it encodes (it may be in the middle of training).
        threads (int, optional): CPU threads while encoding (:func:`bitext_hf.threads.limit_threads`). By default a
            model loaded here encodes on the count in force (a ``limit_threads`` around the call, else the CPUs this
            process may use), and a given model on whatever its caller set (a training run keeps its own setting).
        quantize (str, defaults to "auto"): the arithmetic, "none" (float32), "bf16" (CUDA, or a CPU with native
            bfloat16: a ``UsageError`` on other CPUs, where it would run emulated) or "int8" (CPU); "auto" is "bf16"
            for a model loaded here on a CPU with native bfloat16, else "none" (:mod:`bitext_hf.encoders.precision`).
            A given model is never modified.
        backend (str, defaults to "torch"): "onnx" or "openvino" convert a model loaded here when it loads and run it
            with ONNX Runtime (float32 or int8) or OpenVINO (float32, or bf16 where OpenVINO has it natively) on the
            CPU (:mod:`bitext_hf.encoders.exported`).

    After loading, ``quantize`` and ``backend`` are what it computes in ("none", "bf16" or "int8"; OpenVINO's as its
    compiled model reports it) and ``arithmetic`` names both for people (``"float32 (torch)"``).
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
        if pooling not in (*POOLINGS, "model"):
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
            device = device or default_device(quantize)
            # Refused before the weights are read: a precision this machine would not compute as asked.
            _planned_precision(self.backend, quantize, torch.device(device).type)
            kwargs = {"local_files_only": source.local_only, "trust_remote_code": trust_remote_code}
            model, loading_info = load_source(
                source, lambda: AutoModel.from_pretrained(source.source, output_loading_info=True, **kwargs)
            )
            warn_missing_weights(source.name, loading_info, pooling)
            if tokenizer is None:
                tokenizer = load_source(source, lambda: AutoTokenizer.from_pretrained(source.source, **kwargs))
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
            model_limit = _position_capacity(model) or int(
                getattr(config, "max_position_embeddings", None) or max_length
            )
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
            self.quantize = self._runner.quantize
        self.arithmetic = arithmetic(self.quantize, self.backend, self.device.type)

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

        sentences = check_sentences(sentences)
        # Cut one token past the limit: enough to count the sentences that are truncated (said once below), and
        # the tokenizer then has no overlong sequence to warn about sentence by sentence.
        lengths = token_counts(self.tokenizer, sentences, self.max_length + 1)
        too_long = sum(length > self.max_length for length in lengths)
        if too_long:
            logger.warning(
                "%d of %d sentences exceed %d tokens and are truncated", too_long, len(lengths), self.max_length
            )
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        batches = length_sorted_batches(lengths, batch_size)
        # A caller's model is quantized afresh at each call: it may have been trained since the last one.
        model = quantize_int8(self.model, inplace=False) if self.quantize == "int8" and not self._owned else self.model
        was_training = model.training
        model.eval()
        context = compute_context(self.quantize, owned=self._owned, device_type=self.device.type)
        with _thread_limit(self), torch.inference_mode(), context:
            for rows in encoding_progress(batches, show_progress, len(batches), "Encoding"):
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
    """A ``SentenceTransformer`` (loaded, or a local path / cached hub id) behind the encoder protocol; ``threads``,
    ``quantize``, ``backend`` and what it reports after loading (``quantize``, ``arithmetic``) as :class:`HFEncoder`'s."""

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
            _planned_precision(self.backend, quantize, _sentence_transformers_device(device, quantize))
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
            self.quantize = self._runner.quantize
        else:
            self.quantize = resolve_quantize(quantize, device_type=model_or_path.device.type, owned=self._owned)
            self.model = prepare(model_or_path, self.quantize, owned=self._owned)
        self.arithmetic = arithmetic(self.quantize, self.backend, model_or_path.device.type)
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        sentences = check_sentences(sentences)
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
        batches = length_sorted_batches(self._token_counts(sentences), batch_size)
        output = np.zeros((len(sentences), self.dim), dtype=np.float32)
        if self._runner is not None:
            for rows in encoding_progress(batches, show_progress, len(batches), "Encoding"):
                output[rows] = self._runner(*self._tokenized([sentences[i] for i in rows], "np"))
            return l2_normalize(output)
        # A caller's model is quantized afresh at each call: it may have been trained since the last one.
        model = quantize_int8(self.model, inplace=False) if self.quantize == "int8" and not self._owned else self.model
        context = compute_context(self.quantize, owned=self._owned, device_type=model.device.type)
        with _thread_limit(self), context:
            for rows in encoding_progress(batches, show_progress, len(batches), "Encoding"):
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
                return token_counts(tokenizer, sentences, limit)
        return [len(sentence) for sentence in sentences]

    def _tokenized(self, sentences: list[str], kind: str):
        """(input_ids, attention_mask) as the model tokenizes (its own max length, lower-casing and so on)."""
        # sentence-transformers 6 renamed tokenize to preprocess (tokenize warns); 5 has tokenize only.
        preprocess = getattr(self.model, "preprocess", None) or self.model.tokenize
        features = preprocess(sentences)
        ids, mask = features["input_ids"], features["attention_mask"]
        return (ids, mask) if kind == "pt" else (ids.numpy(), mask.numpy())


def _planned_precision(backend: str, quantize: str | None, device_type: str) -> str:
    """What a model loaded by name will compute in on ``device_type``, or the ``UsageError`` that loading it would
    end in: found before its weights are read."""
    if backend == "torch":
        return resolve_quantize(quantize, device_type=device_type, owned=True)
    check_exportable(True, device_type, backend)
    return exported_quantize(backend, quantize)


def _sentence_transformers_device(device: str | None, quantize: str | None) -> str:
    """The device type a ``SentenceTransformer`` loaded with ``device`` lands on: int8 without a device on the CPU,
    else sentence-transformers' own choice."""
    import torch

    if device is not None:
        return torch.device(device).type
    if check_quantize(quantize) == "int8":
        return "cpu"
    from sentence_transformers.util import get_device_name

    return torch.device(get_device_name()).type


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


def _position_capacity(model) -> int | None:
    """How many tokens ``model``'s learned absolute position table numbers, or None without one (relative or rotary
    positions). RoBERTa-style encoders (XLM-R) count positions from ``padding_idx + 1``, so the rows up to it are
    never a token's: ``max_position_embeddings`` overstates what they take by that much. (The modeling families
    carry the same rule in their own files, which import nothing of the package's.)"""
    import torch

    table = getattr(getattr(model, "embeddings", None), "position_embeddings", None)
    if not isinstance(table, torch.nn.Embedding):
        return None
    return table.num_embeddings - (0 if table.padding_idx is None else table.padding_idx + 1)
