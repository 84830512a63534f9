"""The arithmetic an encoder runs in on the CPU: float32, bfloat16, or int8 weights (``quantize=``).

- ``"none"``: float32, the model as trained.
- ``"bf16"``: bfloat16 weights and activations. On CPUs whose oneDNN (torch's CPU kernels) has bfloat16 kernels
  (:func:`native_bf16`) it runs: natively with AVX512-BF16 or AMX (:func:`fast_bf16`), where this is the fastest
  path, and by conversion to float32 on plain AVX-512, where it is slower than float32 (0.64-0.82x its speed,
  measured with the ISA capped: benchmarks/README.md, "bfloat16 on plain AVX-512"); elsewhere (AVX2 alone, as on
  many laptops) torch emulates it many times slower than float32, so asking for it there is a ``UsageError``, raised
  before anything is loaded or read, never a silent slowdown.
- ``"int8"``: dynamic int8 quantization of every ``nn.Linear`` (weights int8, activations quantized per batch),
  for CPUs without native bfloat16.
- ``"auto"`` (the default): ``"bf16"`` for a model loaded here by name, on a CPU that computes bfloat16 natively
  (AVX512-BF16 or AMX: :func:`fast_bf16`), and ``"none"`` otherwise (plain AVX-512 included): a model handed over by its caller (in the middle of training, say) and CUDA runs are left
  as they are. benchmarks/README.md ("Encoder backends") has what each choice costs and changes in xsim.

On CUDA, ``"bf16"`` is the GPU's own fast arithmetic (its matrix units) and is accepted; ``"int8"`` (torch's dynamic
quantization) has CPU kernels only and is refused there. benchmarks/README.md ("On a GPU") has its speed.

A model loaded by name is converted in place (it is ours). A model handed over is never modified: bfloat16 runs
under ``torch.autocast`` and int8 on a quantized copy.

What ran is what is reported: the encoder spec (:mod:`bitext_hf.encoders.spec`) names it for caches and manifests
without loading anything, and agrees with what loading does; an encoder's ``arithmetic`` (:func:`arithmetic`) names
it for people.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import warnings

from bitext_hf.errors import UsageError

QUANTIZE_CHOICES = ("auto", "none", "bf16", "int8")
# How people read each precision (an encoder's ``arithmetic``, the logs).
PRECISION_NAMES = {"none": "float32", "bf16": "bfloat16", "int8": "int8"}
EMULATED_BF16 = (
    "quantize='bf16': this CPU has no native bfloat16 (AVX512-BF16 or AMX), where it runs emulated, many times "
    "slower than float32; use quantize='auto' (float32 here) or 'none'"
)


@functools.cache
def native_bf16() -> bool:
    """Whether torch has bfloat16 kernels for this CPU, rather than a slow emulation: oneDNN's own test, which torch's
    bfloat16 products follow (AVX512-BF16 or AMX natively, plain AVX-512 by conversion to float32, slower than
    float32 but far from the emulation's cost: :func:`fast_bf16` tells the two apart; not AVX2 alone). It honours
    ``ONEDNN_MAX_CPU_ISA``: a process started with ``ONEDNN_MAX_CPU_ISA=AVX2`` sees an AVX2-only CPU."""
    import torch

    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch build without oneDNN, or without this check
        return False


# oneDNN's instruction-set caps (ONEDNN_MAX_CPU_ISA, or DNNL_MAX_CPU_ISA) below its bfloat16 dot products
# (AVX512_CORE_BF16): under one, bfloat16 runs by conversion at best, whatever the CPU has.
ISA_CAPS_WITHOUT_BF16_DOT = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


def isa_cap() -> str:
    """The instruction-set cap oneDNN was given in the environment (``ONEDNN_MAX_CPU_ISA``, else
    ``DNNL_MAX_CPU_ISA``), upper case; "" when none."""
    return (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().upper()


@functools.cache
def fast_bf16() -> bool:
    """Whether bfloat16 is faster than float32 in torch on this CPU, which ``"auto"`` picks it on: bfloat16 kernels
    (:func:`native_bf16`) that compute its dot products in hardware, AVX512-BF16 or AMX on x86 (within oneDNN's
    instruction-set cap, :func:`isa_cap`: ``ONEDNN_MAX_CPU_ISA=AVX512_CORE`` sees plain AVX-512), the bfloat16
    instructions oneDNN requires on Arm. Plain AVX-512 has the kernels, by conversion, and was measured at
    0.64-0.82x float32's speed (benchmarks/README.md, "bfloat16 on plain AVX-512"): not fast."""
    if not native_bf16():
        return False
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return True  # oneDNN's check is the CPU's own bfloat16 instructions there
    if isa_cap() in ISA_CAPS_WITHOUT_BF16_DOT:
        return False
    import torch

    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # a torch without these checks: not known to be fast
        return False


def refuse_emulated_bf16() -> None:
    """A ``UsageError`` where torch would emulate bfloat16 on this CPU (:func:`native_bf16`)."""
    if not native_bf16():
        raise UsageError(EMULATED_BF16)


def arithmetic(quantize: str, runtime: str, device_type: str = "cpu") -> str:
    """How an encoder names what it computes in, for people: ``"float32 (torch)"``, ``"bfloat16 (openvino)"``,
    ``"bfloat16 (torch, cuda)"``; ``quantize`` resolved ("none", "bf16" or "int8")."""
    where = runtime if device_type == "cpu" else f"{runtime}, {device_type}"
    return f"{PRECISION_NAMES[quantize]} ({where})"


def check_quantize(quantize: str | None) -> str:
    """``quantize`` as one of QUANTIZE_CHOICES (None is "auto"); anything else is a ``UsageError``."""
    quantize = "auto" if quantize is None else str(quantize)
    if quantize not in QUANTIZE_CHOICES:
        raise UsageError(f"quantize={quantize!r}: choose one of {', '.join(QUANTIZE_CHOICES)}")
    return quantize


def default_device(quantize: str | None) -> str:
    """Where a model loaded by name runs when no device is given: CUDA when there is one, except for int8, which
    has CPU kernels only."""
    import torch

    return "cuda" if torch.cuda.is_available() and check_quantize(quantize) != "int8" else "cpu"


def resolve_quantize(quantize: str | None, *, device_type: str, owned: bool) -> str:
    """What ``quantize`` means for a model on ``device_type``: "none", "bf16" or "int8". ``owned``: the model was
    loaded here (by name), so it may be converted. int8 has CPU kernels only: elsewhere it is refused rather than
    silently ignored; bfloat16 runs on CUDA GPUs and on CPUs that compute it natively, and is refused on the others
    (:data:`EMULATED_BF16`), a caller's model under autocast included: it would be as slow."""
    quantize = check_quantize(quantize)
    if quantize == "auto":
        return "bf16" if owned and device_type == "cpu" and fast_bf16() else "none"
    if quantize == "int8" and device_type != "cpu":
        raise UsageError(f"quantize='int8' is a CPU option; on {device_type} use quantize='none' or 'bf16'")
    if quantize == "bf16" and device_type not in ("cpu", "cuda"):
        raise UsageError(f"quantize='bf16' runs on CPUs and CUDA GPUs, not on {device_type}; use quantize='none'")
    if quantize == "bf16" and device_type == "cpu":
        refuse_emulated_bf16()
    return quantize


def quantize_int8(model, *, inplace: bool):
    """``model`` with dynamic int8 ``nn.Linear`` layers (a quantized copy unless ``inplace``).

    torch's eager dynamic quantization is written by hand nowhere here: it is torch's own, deprecated in favour of
    torchao, which is not a dependency; its deprecation warning is said once in the docs, not on every load.
    """
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=inplace)


def prepare(model, mode: str, *, owned: bool):
    """The model to keep for ``mode``: converted in place when ``owned``; a caller's model as it is (it runs under
    :func:`compute_context`, or quantized afresh at each call, since it may be trained between calls)."""
    import torch

    if not owned or mode == "none":
        return model
    return model.to(torch.bfloat16) if mode == "bf16" else quantize_int8(model, inplace=True)


def compute_context(mode: str, *, owned: bool, device_type: str = "cpu"):
    """What each forward pass runs under: autocast for a caller's model in bfloat16 (its weights stay float32)."""
    import torch

    if mode == "bf16" and not owned:
        return torch.autocast(device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
