"""``backend="onnx"`` and ``backend="openvino"``: the model converted at load time gives the torch float32
embeddings (Hugging Face and sentence-transformers folders, each pooling, a hidden layer, a custom architecture
with its own pooling), reduced precision stays close, and what a backend cannot do is refused in one line.

OpenVINO's bfloat16 is decided by OpenVINO's own report, and the encoder says what the compiled model computes in:
the tests hold on CPUs where OpenVINO has native bfloat16 (bfloat16 arithmetic is checked) and on those where it has
not (the encoder, told to try, says float32 and gives float32's vectors)."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from bitext_hf.encoders import EncoderLoadError, HFEncoder, exported, load_encoder
from bitext_hf.encoders.spec import EncoderSpec
from bitext_hf.encoding.cache import entry_key
from bitext_hf.errors import UsageError

SENTENCES = ["A short one.", "A considerably longer sentence with many more words in it.", "Mid length.", "x"]
RUNTIME = {"onnx": "onnxruntime", "openvino": "openvino"}
# The reduced precision each backend offers.
REDUCED = {"onnx": "int8", "openvino": "bf16"}
# How an encoder names each precision it computes in.
NAMES = {"none": "float32", "int8": "int8", "bf16": "bfloat16"}


def installed(backend: str):
    missing = importlib.util.find_spec(RUNTIME[backend]) is None
    return pytest.param(backend, marks=pytest.mark.skipif(missing, reason=f"{RUNTIME[backend]} is not installed"))


BACKENDS = [installed("onnx"), installed("openvino")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("pooling", "layer"), [("mean", None), ("cls", None), ("max", None), ("mean", 1)])
def test_float32_gives_the_torch_embeddings(tiny_model_dir, backend, pooling, layer):
    options = {"pooling": pooling, "layer": layer, "device": "cpu"}
    reference = HFEncoder(tiny_model_dir, quantize="none", **options).encode(SENTENCES, batch_size=3)
    encoder = HFEncoder(tiny_model_dir, backend=backend, quantize="none", **options)
    assert encoder.backend == backend and encoder.quantize == "none"
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=3), reference, atol=1e-5)


# A process whose oneDNN is capped below bfloat16 (ONEDNN_MAX_CPU_ISA=AVX2, how an AVX2-only CPU is simulated on a
# larger one) has OpenVINO kernels without bfloat16 while OpenVINO still reports it: a bfloat16 compile forced past
# the check fails there, where a real CPU without bfloat16 computes float32. The tests that force it do not apply.
ISA_CAPPED = bool(os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA"))
CAPPED_REASON = "oneDNN's instruction set is capped: OpenVINO cannot compile a forced bfloat16 graph"
FORCED_BF16_CANNOT_COMPILE = pytest.mark.skipif(ISA_CAPPED, reason=CAPPED_REASON)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reduced_precision_stays_close(tiny_model_dir, backend, monkeypatch):
    # The real answer first; then the encoder is let try bfloat16 wherever it runs: OpenVINO's CPU plugin computes
    # float32 where it has no native bfloat16, and the encoder must say so.
    if backend == "openvino" and ISA_CAPPED:
        pytest.skip(CAPPED_REASON)
    native = backend == "onnx" or exported.openvino_bf16()
    monkeypatch.setattr(exported, "openvino_bf16", lambda: True)
    reference = HFEncoder(tiny_model_dir, quantize="none").encode(SENTENCES)
    encoder = HFEncoder(tiny_model_dir, backend=backend, quantize=REDUCED[backend])
    embeddings = encoder.encode(SENTENCES)
    ran = REDUCED[backend] if native else "none"
    assert encoder.quantize == ran and embeddings.dtype == np.float32
    assert encoder.arithmetic == f"{ {'none': 'float32', 'int8': 'int8', 'bf16': 'bfloat16'}[ran] } ({backend})"
    if ran == "none":
        np.testing.assert_allclose(embeddings, reference, atol=1e-5)
    else:
        assert not np.allclose(embeddings, reference, atol=1e-6)  # the arithmetic did change
        assert (embeddings * reference).sum(axis=1).min() > 0.98


@pytest.mark.parametrize(
    ("backend", "openvino_has_bf16", "expected"),
    [("onnx", True, "none"), ("openvino", True, "bf16"), ("openvino", False, "none")],
)
def test_auto_is_the_fastest_precision_each_backend_has_here(monkeypatch, backend, openvino_has_bf16, expected):
    from bitext_hf.encoders import precision

    # OpenVINO's own report decides, not torch's: the two are set to disagree.
    monkeypatch.setattr(exported, "openvino_bf16", lambda: openvino_has_bf16)
    monkeypatch.setattr(precision, "native_bf16", lambda: not openvino_has_bf16)
    assert exported.exported_quantize(backend, "auto") == expected


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")
def test_openvino_bf16_where_openvino_lacks_it_is_refused_before_loading(tiny_model_dir, monkeypatch):
    from transformers import AutoModel

    from bitext_hf.encoders import precision

    monkeypatch.setattr(exported, "openvino_bf16", lambda: False)
    monkeypatch.setattr(precision, "native_bf16", lambda: True)  # torch's answer does not count here
    monkeypatch.setattr(AutoModel, "from_pretrained", lambda *a, **k: pytest.fail("a model was loaded"))
    for attempt in (
        lambda: HFEncoder(tiny_model_dir, backend="openvino", quantize="bf16"),
        lambda: EncoderSpec(str(tiny_model_dir), None, "bf16", "openvino").identity,
    ):
        with pytest.raises(UsageError) as error:
            attempt()
        assert str(error.value) == exported.OPENVINO_WITHOUT_BF16
    assert EncoderSpec(str(tiny_model_dir), None, "auto", "openvino").identity == f"{tiny_model_dir} (openvino)"


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")
@FORCED_BF16_CANNOT_COMPILE
def test_openvino_reports_the_precision_its_compiled_model_uses(tiny_model_dir, monkeypatch, caplog, tmp_path):
    """Should OpenVINO set the asked precision aside, the encoder says what its compiled model computes in, warns,
    and its vectors are not cached under the precision that was asked."""
    from bitext_hf.encoding.embedder import Embedder

    monkeypatch.setattr(exported, "openvino_bf16", lambda: True)
    monkeypatch.setattr(exported, "compiled_precision", lambda compiled: "none")
    encoder = HFEncoder(tiny_model_dir, backend="openvino", quantize="bf16")
    assert encoder.quantize == "none" and encoder.arithmetic == "float32 (openvino)"
    assert "asked for quantize='bf16' and computes in 'none'" in caplog.text
    stored = []
    options = {"quantize": "bf16", "backend": "openvino", "cache_dir": str(tmp_path), "show_progress": False}
    embedder = Embedder(model=str(tiny_model_dir), **options)
    monkeypatch.setattr(type(embedder.cache), "store", lambda self, key, embeddings: stored.append(key))
    embedder.embed(SENTENCES, "input")
    assert stored == [] and embedder.arithmetic == {str(tiny_model_dir): "float32 (openvino)"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_custom_architecture_with_its_own_pooling_converts(tmp_path, tiny_tokenizer, backend):
    """A Laser3 student (model code of this package, pooling and projection inside the model): optimum's exporters
    refuse such architectures; tracing the module does not."""
    import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
    from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig

    torch.manual_seed(0)
    config = Laser3StudentConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        projection_dim=16,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    Laser3Student(config).eval().save_pretrained(tmp_path / "student")
    tiny_tokenizer.save_pretrained(tmp_path / "student")
    reference = HFEncoder(tmp_path / "student", pooling="model", quantize="none").encode(SENTENCES)
    encoder = HFEncoder(tmp_path / "student", pooling="model", backend=backend, quantize="none")
    assert encoder.dim == 16
    np.testing.assert_allclose(encoder.encode(SENTENCES), reference, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sentence_transformers_folder_runs_its_own_modules_in_the_graph(tiny_model_dir, tmp_path, backend):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    torch.manual_seed(0)
    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    modules = [transformer, Pooling(32, "mean"), Dense(32, 8), Normalize()]  # pooling and a projection, as Laser3's
    SentenceTransformer(modules=modules).save(str(tmp_path / "st"))
    reference = load_encoder(tmp_path / "st", quantize="none").encode(SENTENCES)
    encoder = load_encoder(tmp_path / "st", backend=backend, quantize="none")
    assert encoder.dim == 8
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=3), reference, atol=1e-5)


def test_what_a_backend_cannot_do_is_refused_in_one_line(tiny_model_dir, tiny_tokenizer, monkeypatch):
    with pytest.raises(UsageError, match="backend='onnx' runs quantize='none' or 'int8', not 'bf16'"):
        HFEncoder(tiny_model_dir, backend="onnx", quantize="bf16")
    with pytest.raises(UsageError, match="backend='openvino' runs quantize='none' or 'bf16', not 'int8'"):
        HFEncoder(tiny_model_dir, backend="openvino", quantize="int8")
    from transformers import AutoModel

    with pytest.raises(UsageError, match="converts a model loaded by name"):
        HFEncoder(AutoModel.from_pretrained(tiny_model_dir), tokenizer=tiny_tokenizer, backend="onnx")
    with pytest.raises(UsageError, match="backend='tensorrt': choose one of torch, onnx, openvino"):
        load_encoder(tiny_model_dir, backend="tensorrt")
    with pytest.raises(EncoderLoadError, match="drop backend='onnx'"):
        load_encoder(backend="onnx")  # the embedded USE encoder is numpy
    for backend, module in RUNTIME.items():
        monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
        with pytest.raises(EncoderLoadError, match=rf"pip install 'bitext-hf\[{backend}\]'"):
            HFEncoder(tiny_model_dir, backend=backend, quantize="none")


def test_the_backend_names_the_cache_entry_and_the_encoder(tiny_model_dir, monkeypatch):
    monkeypatch.setattr(exported, "openvino_bf16", lambda: True)
    texts = ["one", "two"]
    runtimes = [("torch", "none"), ("torch", "int8"), ("onnx", "none"), ("onnx", "int8"), ("openvino", "bf16")]
    keys = {entry_key(texts, str(tiny_model_dir), quantize=q, backend=b) for b, q in runtimes}
    assert len(keys) == len(runtimes)
    assert EncoderSpec(str(tiny_model_dir), None, "int8", "onnx").identity == f"{tiny_model_dir} (onnx int8)"
    assert (
        EncoderSpec(str(tiny_model_dir), "cls", "none", "openvino").identity
        == f"{tiny_model_dir} (cls pooling, openvino)"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_encode_with_a_backend_names_it_in_the_manifest(tiny_model_dir, tmp_path, backend, caplog):
    from bitext_hf.cli import main
    from bitext_hf.encoding.shards import MANIFEST, read_manifest

    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    out = tmp_path / "shards"
    command = ["encode", "--input", str(tmp_path / "in.txt"), "--out", str(out), "--model", str(tiny_model_dir)]
    # OpenVINO's bfloat16 as "auto" gives it: where OpenVINO has it natively, float32 elsewhere.
    quantize = "int8" if backend == "onnx" else "auto"
    ran = "int8" if backend == "onnx" else "bf16" if exported.openvino_bf16() else "none"
    caplog.set_level(logging.INFO, logger="bitext_hf")
    assert main([*command, "--backend", backend, "--quantize", quantize, "--no-cache"]) == 0
    label = backend if ran == "none" else f"{backend} {ran}"
    assert read_manifest(str(out / MANIFEST)).encoder == f"{tiny_model_dir} ({label})"
    assert f"encoder {tiny_model_dir} computes in {NAMES[ran]} ({backend})" in caplog.text


@pytest.mark.skipif(
    importlib.util.find_spec("openvino_telemetry") is None, reason="openvino_telemetry is not installed"
)
def test_openvino_conversion_sends_no_telemetry(tiny_model_dir, monkeypatch, tmp_path):
    """OpenVINO's converter posts usage events (from a forked process) unless the user opted out: loading an encoder
    sends nothing, and writes nothing under the home folder (where the telemetry keeps its client id)."""
    import openvino_telemetry

    sent = []
    monkeypatch.setattr(openvino_telemetry.Telemetry, "send_event", lambda self, *a, **k: sent.append(a))
    monkeypatch.setattr(openvino_telemetry.Telemetry, "start_session", lambda self, *a, **k: sent.append(a))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CI", raising=False)  # the telemetry stays off in CI by itself; a user's machine is not CI
    HFEncoder(tiny_model_dir, backend="openvino", quantize="none", device="cpu").encode(SENTENCES)
    assert sent == [] and list(tmp_path.iterdir()) == []


_DROPPED_FIRST_IN_FIRST_OUT = """
import gc, signal, subprocess, torch
from bitext_hf.encoders.exported import OpenVinoRunner

class Mean(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(8, 4)

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        return (self.embedding(input_ids) * mask).sum(1) / mask.sum(1)

sample = (torch.tensor([[1, 2, 3], [4, 5, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]]))
first = OpenVinoRunner(Mean(), sample, quantize="none", threads=1)
second = OpenVinoRunner(Mean(), sample, quantize="none", threads=1)
del first, second
gc.collect()
signal.signal(signal.SIGCHLD, lambda *_: None)
subprocess.run(["true"], check=True)
print("alive")
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="openvino is not installed")
@pytest.mark.skipif(sys.platform != "linux", reason="OpenVINO's CPU plugin swaps the signal stack on Linux only")
def test_openvino_encoders_dropped_in_any_order_leave_the_signal_stack_alive():
    """Each OpenVINO CPU plugin instance swaps the thread's signal stack and puts the previous one back when freed:
    two instances freed first-in first-out left the process on an unmapped stack, and the next signal with a Python
    handler (a child's SIGCHLD here, as torch's DataLoader handles it) ended it with SIGSEGV and no traceback. Run in
    a process of its own, so that a regression cannot take the test session down with it."""
    result = subprocess.run([sys.executable, "-c", _DROPPED_FIRST_IN_FIRST_OUT], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == "alive", (result.returncode, result.stderr[-2000:])


@pytest.mark.parametrize(("variable", "cap"), [("ONEDNN_MAX_CPU_ISA", "AVX2"), ("DNNL_MAX_CPU_ISA", "avx512_core")])
def test_a_one_dnn_cap_below_bfloat16_means_openvino_has_none(monkeypatch, variable, cap):
    """OpenVINO's kernels follow the cap, its capability report does not: the cap decides, before OpenVINO is
    asked (so even without it installed)."""
    monkeypatch.setenv(variable, cap)
    exported.openvino_bf16.cache_clear()
    try:
        assert exported.openvino_bf16() is False
        assert exported.exported_quantize("openvino", "auto") == "none"
    finally:
        exported.openvino_bf16.cache_clear()
