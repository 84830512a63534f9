"""One encoder as a run asks for it (:class:`EncoderSpec`: model, pooling, quantize, backend), resolved once: what it
is called (:attr:`~EncoderSpec.name`), whether it is the embedded default (:func:`is_default_encoder`, the one test),
what it will compute in (:meth:`~EncoderSpec.planned`, refusing what loading would refuse), and the identity the
embedding cache, the shard manifests and the sidecars name it by (:attr:`~EncoderSpec.identity`). The loader
(:func:`bitext_hf.encoders.load_encoder`) and every job ask it, so the answers cannot differ between them.

Nothing here loads a model: a spec is planned from its options, so that a warm cache never serves what a cold one
would refuse, and a manifest names the arithmetic before the first batch.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

__all__ = ["DEFAULT_NAMES", "EncoderSpec", "is_default_encoder"]

# What names the embedded default encoder: nothing, these aliases, or its own name (sources.DEFAULT_ENCODER).
DEFAULT_NAMES = ("default", "use")


def is_default_encoder(model: str | os.PathLike | None) -> bool:
    """Whether ``model`` asks for the embedded default encoder (USE v3): None, ``default``, ``use`` or its name."""
    from bitext_hf.encoders.sources import DEFAULT_ENCODER

    return model is None or os.fspath(model) in (*DEFAULT_NAMES, DEFAULT_ENCODER)


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
        from bitext_hf.encoders.precision import planned_runtime

        return planned_runtime(self.model, self.quantize, self.backend)

    @property
    def runtime_label(self) -> str:
        """How caches and manifests name what it computes in ("" for torch float32: the keys of earlier releases),
        see :func:`bitext_hf.encoders.precision.runtime_label`."""
        from bitext_hf.encoders.precision import runtime_label

        return runtime_label(self.model, self.quantize, self.backend)

    @property
    def identity(self) -> str:
        """How manifests, sidecars and the embedding cache name this encoder: its name, its pooling, and what it
        computes in when that is not torch float32 ("auto" resolved: it may be bfloat16 on one machine and float32
        on another)."""
        details = [f"{self.pooling} pooling"] if self.pooling else []
        if self.runtime_label:
            details.append(self.runtime_label)
        return f"{self.name} ({', '.join(details)})" if details else self.name

    @property
    def arithmetic(self) -> str:
        """What it computes in, for people: "float32 (torch)", "bfloat16 (openvino)" (planned, not loaded)."""
        from bitext_hf.encoders.precision import planned_arithmetic

        return planned_arithmetic(self.model, self.quantize, self.backend)

    def load(self, **kwargs: Any) -> Any:
        """The encoder (:func:`bitext_hf.encoders.load_encoder` with this spec's options and ``kwargs``)."""
        from bitext_hf.encoders import load_encoder

        return load_encoder(self.model, pooling=self.pooling, quantize=self.quantize, backend=self.backend, **kwargs)
