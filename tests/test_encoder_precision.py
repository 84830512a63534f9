"""``quantize=``: what "auto" resolves to, bfloat16 and int8 on loaded models and on a caller's model (never
modified, never stale), the refusals (USE, CUDA, unknown values, bfloat16 on a CPU that would emulate it: before
anything is loaded or read), the precision in the cache key, the manifest name and the CLI, and what an encoder and
``bitext-hf encode`` say they computed in.

The tests hold on CPUs with and without native bfloat16: those of bfloat16 arithmetic pretend the CPU has it (torch
then emulates it where it does not, slowly but on these tiny models), those of the refusal that it has not, and one
runs the real detection in a process that oneDNN is told is AVX2-only."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
import torch

from bitext_hf.encoders import EncoderLoadError, HFEncoder, SentenceTransformerEncoder, load_encoder, precision
from bitext_hf.encoders import spec as encoder_spec
from bitext_hf.encoders.spec import EncoderSpec
from bitext_hf.encoding.cache import entry_key
from bitext_hf.errors import UsageError

SENTENCES = ["A short one.", "A considerably longer sentence with many more words in it.", "Mid length.", "x"]


@pytest.fixture
def native(monkeypatch):
    """Pretend the CPU has (True: AVX512-BF16 or AMX) or lacks (False: AVX2 alone) native bfloat16; "converted":
    plain AVX-512, whose bfloat16 kernels convert to float32."""

    def set_native(value: bool | str) -> None:
        monkeypatch.setattr(precision, "native_bf16", lambda: bool(value))
        monkeypatch.setattr(precision, "fast_bf16", lambda: value is True)

    return set_native


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)  # rows are unit length


@pytest.mark.parametrize(
    ("asked", "device", "owned", "has_bf16", "expected"),
    [
        ("auto", "cpu", True, True, "bf16"),
        (None, "cpu", True, True, "bf16"),
        ("auto", "cpu", True, False, "none"),  # emulated bfloat16 is slower than float32
        ("auto", "cpu", True, "converted", "none"),  # so is plain AVX-512's, by conversion (0.64-0.82x)
        ("bf16", "cpu", True, "converted", "bf16"),  # but it runs when asked for: no emulation
        ("auto", "cpu", False, True, "none"),  # a caller's model (in training, say) is left as it is
        ("auto", "cuda", True, True, "none"),
        ("int8", "cpu", False, False, "int8"),
        ("bf16", "cpu", True, True, "bf16"),
        ("bf16", "cpu", False, True, "bf16"),  # a caller's model: autocast
        ("bf16", "cuda", True, False, "bf16"),  # the GPU's matrix units, whatever the CPU
        ("bf16", "cuda", False, False, "bf16"),  # a caller's model: autocast on CUDA
    ],
)
def test_auto_resolves_to_bf16_only_for_our_own_model_on_a_cpu_that_has_it(
    native, asked, device, owned, has_bf16, expected
):
    native(has_bf16)
    assert precision.resolve_quantize(asked, device_type=device, owned=owned) == expected


def test_unknown_values_and_int8_off_the_cpu_and_use_are_refused_in_one_line():
    with pytest.raises(UsageError, match="quantize='fp16': choose one of auto, none, bf16, int8"):
        precision.check_quantize("fp16")
    with pytest.raises(UsageError, match="quantize='int8' is a CPU option; on cuda use"):
        precision.resolve_quantize("int8", device_type="cuda", owned=True)
    with pytest.raises(UsageError, match="runs on CPUs and CUDA GPUs, not on mps"):
        precision.resolve_quantize("bf16", device_type="mps", owned=True)
    with pytest.raises(EncoderLoadError, match="USE encoder runs in torch, float32 or bf16; drop quantize='int8'"):
        load_encoder(quantize="int8")
    assert load_encoder(quantize="none").dim == 512  # USE takes "none", "bf16" and "auto"


@pytest.mark.parametrize("owned", [True, False])
def test_bf16_on_a_cpu_without_it_is_refused_in_one_line(native, owned):
    native(False)
    with pytest.raises(UsageError) as error:
        precision.resolve_quantize("bf16", device_type="cpu", owned=owned)
    assert str(error.value) == precision.EMULATED_BF16 and "\n" not in str(error.value)
    assert "no native bfloat16" in str(error.value) and "quantize='auto' (float32 here)" in str(error.value)
    assert precision.resolve_quantize("auto", device_type="cpu", owned=owned) == "none"


def test_the_refusal_comes_before_any_model_is_loaded(native, tiny_model_dir, tmp_path, monkeypatch):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    import bitext_hf.encoders.use as use

    (tmp_path / "st").mkdir()
    (tmp_path / "st" / "modules.json").write_text("[]", encoding="utf-8")  # a sentence-transformers folder
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    native(False)
    loaded = []

    def load(*args, **kwargs):
        loaded.append(args)
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(AutoModel, "from_pretrained", load)
    monkeypatch.setattr(SentenceTransformer, "__init__", load)
    monkeypatch.setattr(use.UseTorchForward, "__init__", load)
    for spec in (tiny_model_dir, tmp_path / "st", None):
        with pytest.raises(UsageError, match="no native bfloat16"):
            load_encoder(spec, quantize="bf16")
        # What names the vectors in caches and manifests, without loading, refuses the same.
        with pytest.raises(UsageError, match="no native bfloat16"):
            _ = EncoderSpec(spec, None, "bf16").identity
    with pytest.raises(UsageError, match="no native bfloat16"):
        HFEncoder(tiny_model_dir, device="cpu", quantize="bf16")
    assert loaded == []


def test_a_job_refuses_bf16_when_its_config_is_made_for_the_encoders_it_will_load(native, monkeypatch):
    """Before any text is read: each side's encoder, as mining loads them (a side without its own model: ``model``,
    by default the USE encoder, which runs on the CPU; Hugging Face models on CUDA where there is one)."""
    from bitext_hf.jobs.mine import MiningConfig

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    native(False)
    MiningConfig(src="src.txt", tgt="tgt.txt", quantize="bf16", src_model="a", tgt_model="b")
    for sides in ({}, {"src_model": "a"}, {"tgt_model": "b"}):
        with pytest.raises(UsageError, match="no native bfloat16"):
            MiningConfig(src="src.txt", tgt="tgt.txt", quantize="bf16", **sides)
    MiningConfig(src="src.txt", tgt="tgt.txt", quantize="auto")


def test_bf16_on_cuda_is_not_the_cpus_business(native, tiny_model_dir, monkeypatch):
    """A model loaded by name goes to CUDA where there is one: its bfloat16 is the GPU's, accepted whatever the CPU
    has; the USE encoder runs on the CPU and is refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    native(False)
    assert encoder_spec.runtime_label(str(tiny_model_dir), "bf16") == "bf16"
    assert encoder_spec.planned_arithmetic(str(tiny_model_dir), "bf16") == "bfloat16 (torch, cuda)"
    with pytest.raises(UsageError, match="no native bfloat16"):
        encoder_spec.runtime_label(None, "bf16")


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_a_loaded_model_is_converted_and_stays_close_to_float32(native, tiny_model_dir, mode):
    native(True)  # emulated where the CPU lacks it: the arithmetic is tested all the same
    reference = HFEncoder(tiny_model_dir, device="cpu", quantize="none").encode(SENTENCES, batch_size=2)
    encoder = HFEncoder(tiny_model_dir, device="cpu", quantize=mode)
    embeddings = encoder.encode(SENTENCES, batch_size=2)
    assert encoder.quantize == mode and embeddings.dtype == np.float32
    assert encoder.arithmetic == {"bf16": "bfloat16 (torch)", "int8": "int8 (torch)"}[mode]
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
    assert cosines(embeddings, reference).min() > 0.99
    assert not np.array_equal(embeddings, reference)  # the arithmetic did change
    if mode == "bf16":
        assert next(encoder.model.parameters()).dtype == torch.bfloat16
    else:
        quantized = [
            m for m in encoder.model.modules() if type(m).__name__ == "Linear" and "quantized" in type(m).__module__
        ]
        assert quantized, "no dynamically quantized Linear layer"


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_a_callers_model_is_never_modified_and_never_stale(native, tiny_model_dir, tiny_tokenizer, mode):
    from transformers import AutoModel

    native(True)
    model = AutoModel.from_pretrained(tiny_model_dir).train()  # as in the middle of training
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    encoder = HFEncoder(model, tokenizer=tiny_tokenizer, quantize=mode)
    first = encoder.encode(SENTENCES)
    reference = HFEncoder(model, tokenizer=tiny_tokenizer, quantize="none").encode(SENTENCES)
    assert cosines(first, reference).min() > 0.99
    after = model.state_dict()
    assert all(after[name].dtype == torch.float32 and torch.equal(after[name], before[name]) for name in before)
    assert model.training  # encoded in eval mode, then put back
    with torch.no_grad():  # the caller trains on: the next encode sees the new weights, not a copy of the old
        model.embeddings.word_embeddings.weight.copy_(torch.randn_like(model.embeddings.word_embeddings.weight))
    retrained = HFEncoder(model, tokenizer=tiny_tokenizer, quantize="none").encode(SENTENCES)
    again = encoder.encode(SENTENCES)
    assert cosines(again, retrained).min() > 0.99 and cosines(again, first).min() < 0.9


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_a_sentence_transformers_model_takes_the_same_options(native, tiny_model_dir, tmp_path, mode):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    native(True)
    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")]).save(
        str(tmp_path / "st")
    )
    reference = load_encoder(tmp_path / "st", quantize="none").encode(SENTENCES)
    encoder = load_encoder(tmp_path / "st", quantize=mode)
    assert isinstance(encoder, SentenceTransformerEncoder) and encoder.quantize == mode
    assert encoder.arithmetic.split()[0] == {"bf16": "bfloat16", "int8": "int8"}[mode]
    embeddings = encoder.encode(SENTENCES)
    assert embeddings.dtype == np.float32 and cosines(embeddings, reference).min() > 0.99


def test_the_precision_is_part_of_the_cache_key_and_the_encoder_name(native, tiny_model_dir, monkeypatch):
    # The CPU's case: where CUDA is, a model loaded by name encodes there, and "auto" is float32 (checked last).
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    native(True)
    texts = ["one", "two"]
    keys = {mode: entry_key(texts, str(tiny_model_dir), quantize=mode) for mode in ("auto", "bf16", "none", "int8")}
    assert keys["auto"] == keys["bf16"]  # what is computed, not what was asked, names the vectors
    assert len({keys["bf16"], keys["none"], keys["int8"]}) == 3
    assert EncoderSpec(str(tiny_model_dir), "max", "auto").identity == f"{tiny_model_dir} (max pooling, bf16)"
    assert EncoderSpec(str(tiny_model_dir), None, "none").identity == str(tiny_model_dir)
    native(False)
    assert entry_key(texts, str(tiny_model_dir), quantize="auto") == keys["none"]
    with pytest.raises(UsageError, match="no native bfloat16"):  # never a key for vectors that will not be made
        entry_key(texts, str(tiny_model_dir), quantize="bf16")
    # The embedded USE encoder computes in float32 unless bf16 is asked for, even on a CPU that has it: its vectors
    # are the reference ones.
    assert entry_key(texts, None, quantize="auto") == entry_key(texts, None, quantize="none")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    native(True)
    assert entry_key(texts, None, quantize="auto") == entry_key(texts, None, quantize="none")
    assert entry_key(texts, None, quantize="bf16") != entry_key(texts, None, quantize="none")
    assert entry_key(texts, str(tiny_model_dir), quantize="auto") == keys["none"]
    assert entry_key(texts, str(tiny_model_dir), quantize="int8") == keys["int8"]  # int8 runs on the CPU


def test_cli_refuses_an_unknown_precision(capsys):
    from bitext_hf.cli import main

    assert main(["encode", "--input", "in.txt", "--out", "x", "--quantize", "fp16"]) == 2
    assert "quantize='fp16' (--quantize): must be one of auto, none, bf16, int8" in capsys.readouterr().err


def test_int8_asked_without_a_device_runs_on_the_cpu_where_cuda_is(tiny_model_dir, monkeypatch):
    """On a GPU machine a model loaded by name goes to CUDA, but int8 has CPU kernels only: asked for without a
    device, it runs on the CPU (the cache key says int8) instead of being refused; asked for on CUDA, refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    encoder = HFEncoder(tiny_model_dir, quantize="int8")
    assert encoder.device.type == "cpu" and encoder.quantize == "int8"
    assert encoder_spec.effective_quantize(str(tiny_model_dir), "int8") == "int8"
    with pytest.raises(UsageError, match="quantize='int8' is a CPU option; on cuda"):
        precision.resolve_quantize("int8", device_type="cuda", owned=True)


def test_cli_encode_refuses_bf16_before_reading_and_names_what_ran(native, capsys, caplog, tmp_path, monkeypatch):
    import logging

    import bitext_hf.data
    from bitext_hf.cli import main
    from bitext_hf.jobs import EncodeConfig, run_encoding

    (tmp_path / "in.txt").write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    read = []
    read_lines = bitext_hf.data.read_lines
    monkeypatch.setattr(bitext_hf.data, "read_lines", lambda *a, **k: read.append(a) or read_lines(*a, **k))
    native(False)
    out = tmp_path / "out.npy"
    command = ["encode", "--input", str(tmp_path / "in.txt"), "--out", str(out), "--no-cache"]
    assert main([*command, "--quantize", "bf16", "-q"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"bitext-hf encode: error: {precision.EMULATED_BF16}"]
    assert read == [] and not out.exists()
    # What runs is what is said: the encoder's own word, in the result and the log.
    with caplog.at_level(logging.INFO, logger="bitext_hf"):
        result = run_encoding(EncodeConfig(input=str(tmp_path / "in.txt"), out=str(out), no_cache=True, quiet=True))
    assert result.arithmetic == "float32 (torch)" and read
    assert "encoder use-multilingual-v3 computes in float32 (torch)" in caplog.text


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="ONEDNN_MAX_CPU_ISA caps x86 ISAs")
@pytest.mark.skipif(not torch.cpu._is_avx512_supported(), reason="no AVX-512 to cap")
def test_a_plain_avx512_cpu_is_detected_for_real_and_auto_is_float32_there():
    """No pretending: oneDNN capped to plain AVX-512 (no AVX512-BF16, no AMX) has bfloat16 kernels, by conversion,
    measured slower than float32 (benchmarks/README.md, "bfloat16 on plain AVX-512"): bf16 runs when asked for,
    "auto" is float32."""
    script = (
        "from bitext_hf.encoders import precision, spec\n"
        "print(precision.native_bf16(), precision.fast_bf16())\n"
        "print(repr(spec.runtime_label('some-model', 'auto')), repr(spec.runtime_label('some-model', 'bf16')))\n"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["True False", "'' 'bf16'"]


@pytest.mark.parametrize(
    ("cap", "fast"),
    [("AVX2", False), ("avx512_core", False), ("AVX512_CORE_VNNI", False), ("AVX512_CORE_BF16", None), ("", None)],
)
def test_fast_bfloat16_honours_the_isa_cap(monkeypatch, cap, fast):
    """Below AVX512_CORE_BF16 no cap leaves bfloat16 dot products; at or above it (or without a cap) the CPU's own
    (None: whatever this machine has)."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(precision, "native_bf16", lambda: True)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    hardware = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    assert precision.fast_bf16.__wrapped__() is (hardware if fast is None else fast)
    monkeypatch.setattr(precision, "native_bf16", lambda: False)  # no bfloat16 kernels at all: never fast
    assert precision.fast_bf16.__wrapped__() is False


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="ONEDNN_MAX_CPU_ISA caps x86 ISAs")
def test_an_avx2_only_cpu_is_detected_and_refused_for_real():
    """No pretending: oneDNN, told the CPU is AVX2-only (as many laptops are), makes torch report no bfloat16
    kernels, and bf16 is refused; "auto" is float32 there."""
    script = (
        "from bitext_hf.encoders import precision, spec\n"
        "from bitext_hf.errors import UsageError\n"
        "print(precision.native_bf16(), repr(spec.runtime_label('some-model', 'auto')))\n"
        "try:\n"
        "    spec.runtime_label(None, 'bf16')\n"
        "except UsageError as error:\n"
        "    print(error)\n"
    )
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "CUDA_VISIBLE_DEVICES": ""}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["False ''", precision.EMULATED_BF16]


def test_an_identity_plans_the_runtime_once(native, tiny_model_dir, monkeypatch):
    """Planning may import and probe a backend: the identity asks once for what it names."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    native(True)
    calls, real = [], encoder_spec.planned_runtime
    monkeypatch.setattr(encoder_spec, "planned_runtime", lambda *args: calls.append(args) or real(*args))
    assert EncoderSpec(str(tiny_model_dir), "max", "auto").identity == f"{tiny_model_dir} (max pooling, bf16)"
    assert len(calls) == 1
