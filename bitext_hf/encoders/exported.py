"""``backend="onnx"`` and ``backend="openvino"``: an encoder's torch module converted when it is loaded, and run by
ONNX Runtime or OpenVINO on the CPU.

The graph is made in memory from the model as loaded (pooling inside the graph), handed to the runtime, and
forgotten with the process: nothing is cached on disk, so a graph can never outlive the weights it was made from (a
retrained model in the same folder), and no file is read back that someone else could have put there. It costs a
conversion at each load (seconds for a small model; benchmarks/README.md, "Encoder backends").

- ONNX Runtime: ``torch.onnx.export`` (the tracer), float32, or dynamic int8 (``onnxruntime.quantization``).
- OpenVINO: ``openvino.convert_model`` on the module, float32 or bfloat16 (its CPU plugin's inference precision).
  Its plugin takes a bfloat16 hint only on CPUs it computes bfloat16 on natively (AVX512-BF16, AMX) and quietly
  computes in float32 elsewhere, so bfloat16 is decided by OpenVINO's own report (:func:`openvino_bf16`), not
  torch's: asked for where OpenVINO lacks it, it is refused before anything is loaded; and the encoder reports the
  precision the compiled model says it uses, whatever was asked.

Why not sentence-transformers' backends (optimum's exporters): optimum's ONNX exporter supports transformers < 4.58
only, and both refuse custom architectures (a Laser3 student, a MuSR encoder), while tracing takes any module.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
import sys
import tempfile
import threading
import warnings

import numpy as np

from bitext_hf.errors import EncoderLoadError, UsageError

logger = logging.getLogger("bitext_hf.encoders")

INSTALL = {"onnx": "pip install 'bitext-hf[onnx]'", "openvino": "pip install 'bitext-hf[openvino]'"}
# The ONNX operator set of the exported graph: one that every supported ONNX Runtime runs on the CPU.
OPSET = 17
INPUTS = ("input_ids", "attention_mask")
# Two sentences of unequal length: the graph is traced with padding in it.
SAMPLE_SENTENCES = ["a short one", "a somewhat longer sentence than the first one"]
_CORE_LOCK = threading.Lock()
_CORE = []  # the process's one openvino.Core, once made (openvino_core)
_OPENVINO_PRECISIONS = {"f32": "none", "bf16": "bf16"}
OPENVINO_WITHOUT_BF16 = (
    "quantize='bf16': OpenVINO has no native bfloat16 on this CPU (AVX512-BF16 or AMX), where it computes in float32 "
    "whatever is asked; use quantize='auto' (float32 here) or 'none'"
)


def exported_quantize(backend: str, quantize: str | None) -> str:
    """What ``quantize`` means for a converted graph: ONNX Runtime runs "none" or "int8" ("auto": "none"; it has no
    bfloat16 kernels on the CPU for these graphs), OpenVINO "none" or "bf16" ("auto": bf16 where OpenVINO computes
    it natively on this CPU; an explicit "bf16" elsewhere is a ``UsageError``, :data:`OPENVINO_WITHOUT_BF16`)."""
    from bitext_hf.encoders.precision import check_quantize

    quantize = check_quantize(quantize)
    allowed = {"onnx": ("none", "int8"), "openvino": ("none", "bf16")}[backend]
    if quantize == "auto":
        return "bf16" if backend == "openvino" and openvino_bf16() else "none"
    if quantize not in allowed:
        raise UsageError(f"backend={backend!r} runs quantize={' or '.join(map(repr, allowed))}, not {quantize!r}")
    if quantize == "bf16" and not openvino_bf16():
        raise UsageError(OPENVINO_WITHOUT_BF16)
    return quantize


# oneDNN's instruction-set caps below its first bfloat16 kernels (AVX512_CORE_BF16; AVX2_VNNI_2 has bfloat16
# conversions): under one, OpenVINO's kernels cannot compute bfloat16 whatever its capabilities say.
@functools.cache
def openvino_bf16() -> bool:
    """Whether OpenVINO's CPU plugin computes bfloat16 natively here, by its own report (its optimization
    capabilities name BF16): it, not torch's oneDNN, decides whether it honours a bfloat16 hint. OpenVINO not
    installed: the ``EncoderLoadError`` that loading would raise.

    ``ONEDNN_MAX_CPU_ISA`` (or ``DNNL_MAX_CPU_ISA``) capped below the bfloat16 kernels counts as no bfloat16: the cap
    reaches OpenVINO's kernels but not its report of the CPU's capabilities, and a bfloat16 graph then fails to
    compile (seen: a Softmax with no kernel). With the cap, a process sees what an AVX2-only CPU gives."""
    from bitext_hf.encoders.precision import ISA_CAPS_WITHOUT_BF16_DOT, isa_cap

    if isa_cap() in ISA_CAPS_WITHOUT_BF16_DOT:  # the caps torch's arithmetic reads too: one list
        return False
    with without_openvino_telemetry():
        try:
            import openvino  # noqa: F401  (openvino_core imports it again)
        except ImportError:
            raise EncoderLoadError(f"backend 'openvino' needs OpenVINO: {INSTALL['openvino']}") from None
    return "BF16" in openvino_core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def check_exportable(owned: bool, device_type: str, backend: str) -> None:
    if not owned:
        raise UsageError(
            f"backend={backend!r} converts a model loaded by name; a given model runs with backend='torch'"
        )
    if device_type != "cpu":
        raise UsageError(f"backend={backend!r} runs on the CPU; this model is on {device_type}")


def converted(backend: str, module, sample, *, quantize: str, threads: int):
    """``module(input_ids, attention_mask) -> (batch, dim)`` as a callable on int64 numpy arrays, run by
    ``backend``. ``sample``: (input_ids, attention_mask) torch tensors to trace with."""
    return (OnnxRunner if backend == "onnx" else OpenVinoRunner)(module, sample, quantize=quantize, threads=threads)


class OnnxRunner:
    """The module exported by torch's tracer and run by ONNX Runtime (``quantize``: "none" or "int8", kept as the
    precision it computes in)."""

    def __init__(self, module, sample, *, quantize: str, threads: int) -> None:
        try:
            import onnxruntime
        except ImportError:
            raise EncoderLoadError(f"backend 'onnx' needs ONNX Runtime: {INSTALL['onnx']}") from None
        import torch

        axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
        graph = io.BytesIO()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the tracer's warnings are about the model's own Python branches
            torch.onnx.export(
                module.eval(),
                tuple(sample),
                graph,
                input_names=list(INPUTS),
                output_names=["embedding"],
                dynamic_axes={**axes, "embedding": {0: "batch"}},
                opset_version=OPSET,
                dynamo=False,  # the tracer: it exports the module as it runs, custom code included
            )
        self.quantize = quantize
        data = _int8(graph.getvalue()) if quantize == "int8" else graph.getvalue()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.log_severity_level = 3  # errors only: its notes on unused initializers are noise here
        self.session = onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask.astype(np.int64)}
        return np.asarray(self.session.run(None, feed)[0], dtype=np.float32)


class OpenVinoRunner:
    """The module converted by ``openvino.convert_model`` and compiled for the CPU (``quantize``: "none" or "bf16",
    OpenVINO's inference precision hint). ``quantize`` afterwards: what the compiled model says it computes in, which
    is what an encoder reports (the plugin may set a hint aside; a warning then says so)."""

    def __init__(self, module, sample, *, quantize: str, threads: int) -> None:
        import torch

        with without_openvino_telemetry():
            try:
                import openvino
            except ImportError:
                raise EncoderLoadError(f"backend 'openvino' needs OpenVINO: {INSTALL['openvino']}") from None
            with warnings.catch_warnings(), torch.no_grad():
                warnings.simplefilter("ignore")  # the tracer's warnings are about the model's own Python branches
                graph = openvino.convert_model(module.eval(), example_input=dict(zip(INPUTS, sample, strict=True)))
        config = {
            "INFERENCE_NUM_THREADS": int(threads),
            "INFERENCE_PRECISION_HINT": "bf16" if quantize == "bf16" else "f32",
            "PERFORMANCE_HINT": "LATENCY",  # one batch at a time, all threads on it
        }
        self.compiled = openvino_core().compile_model(graph, "CPU", config)
        self.quantize = compiled_precision(self.compiled)
        if self.quantize != quantize:
            logger.warning(
                "OpenVINO was asked for quantize=%r and computes in %r: the encoder reports what it computes in",
                quantize,
                self.quantize,
            )

    def __call__(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
        feed = {"input_ids": input_ids.astype(np.int64), "attention_mask": attention_mask.astype(np.int64)}
        return np.asarray(self.compiled(feed)[0], dtype=np.float32)


def compiled_precision(compiled) -> str:
    """The inference precision an OpenVINO compiled model says it uses: "bf16", or "none" for float32."""
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")
    name = precision.get_type_name() if hasattr(precision, "get_type_name") else str(precision)
    if name not in _OPENVINO_PRECISIONS:
        raise EncoderLoadError(f"OpenVINO compiled the model to compute in {name}, neither float32 nor bfloat16")
    return _OPENVINO_PRECISIONS[name]


@contextlib.contextmanager
def without_openvino_telemetry():
    """Import OpenVINO and convert with its own no-op telemetry stub in place of the ``openvino_telemetry`` package.

    Why: OpenVINO sends usage events to Google Analytics unless the user opted out beforehand: one when it is first
    imported, more at each conversion, each posted from a forked process after writing a client id under the home
    folder. Loading an encoder must not send anything or write outside its outputs, and offline the forked process
    waits on a name lookup that the parent then waits for at exit: a command that had finished hung. While this is in
    force ``import openvino_telemetry`` fails, so an OpenVINO imported now binds the stub it falls back to when the
    package is missing; an OpenVINO imported earlier has the stub swapped in for the conversion only."""
    import importlib

    absent = object()
    saved = sys.modules.get("openvino_telemetry", absent)
    sys.modules["openvino_telemetry"] = None  # an import of it raises ImportError
    swapped = []
    try:
        try:
            stub = importlib.import_module("openvino.tools.ovc.telemetry_stub")
        except ImportError:  # OpenVINO missing (the caller says so) or another layout: nothing to swap
            stub = None
        for name in ("convert_impl", "telemetry_utils", "utils") if stub is not None else ():
            module = sys.modules.get(f"openvino.tools.ovc.{name}")
            if module is not None and getattr(module, "tm", stub) is not stub:
                swapped.append((module, module.tm))
                module.tm = stub
        yield
    finally:
        for module, original in swapped:
            module.tm = original
        if saved is absent:
            del sys.modules["openvino_telemetry"]
        else:
            sys.modules["openvino_telemetry"] = saved


def openvino_core():
    """The process's one ``openvino.Core``: made at the first OpenVINO encoder, kept until the process ends.

    Why one and never freed: every ``Core`` loads an instance of OpenVINO's CPU plugin of its own, and on Linux each
    instance, when made, gives the calling thread a signal stack of its own (``sigaltstack``, mapped by the plugin)
    and, when freed, unmaps it and puts back the stack it found. Two instances freed in the order they were made (two
    encoders dropped first-in first-out, as the garbage collector may drop them) leave the thread on the unmapped
    stack of the first: the next signal whose handler runs on that stack (any Python handler, such as the SIGCHLD
    handler of torch's DataLoader, and faulthandler's) kills the process with SIGSEGV and no traceback, and a stack
    mapped again meanwhile gets the signal frame written over other data. One plugin instance that lives as long as
    the process swaps the stack once and never puts back a freed one.
    """
    import openvino

    with _CORE_LOCK:
        if not _CORE:
            _CORE.append(openvino.Core())
        return _CORE[0]


def _int8(graph: bytes) -> bytes:
    """The graph with dynamic int8 matrix products. ``quantize_dynamic`` reads and writes files only: a private
    temporary folder, removed at once."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="bitext-hf-onnx-") as folder:
        source, target = os.path.join(folder, "model.onnx"), os.path.join(folder, "model.int8.onnx")
        with open(source, "wb") as handle:
            handle.write(graph)
        root = logging.getLogger()
        level = root.level
        root.setLevel(logging.ERROR)  # it suggests a pre-processing step on the root logger, at warning level
        try:
            quantize_dynamic(source, target, weight_type=QuantType.QInt8)
        finally:
            root.setLevel(level)
        with open(target, "rb") as handle:
            return handle.read()
