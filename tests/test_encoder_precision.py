"""``quantize=``: what "auto" resolves to, bfloat16 and int8 on loaded models and on a caller's model (never
modified, never stale), the refusals (USE, CUDA, unknown values), and the precision in the cache key, the manifest
name and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bitext_hf.encoders import EncoderLoadError, HFEncoder, SentenceTransformerEncoder, load_encoder, precision
from bitext_hf.encoding.cache import encoder_identity, entry_key
from bitext_hf.errors import UsageError

SENTENCES = ["A short one.", "A considerably longer sentence with many more words in it.", "Mid length.", "x"]


@pytest.fixture
def native(monkeypatch):
    """Pretend the CPU has (True) or lacks (False) native bfloat16."""

    def set_native(value: bool) -> None:
        monkeypatch.setattr(precision, "native_bf16", lambda: value)

    return set_native


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)  # rows are unit length


@pytest.mark.parametrize(
    ("asked", "device", "owned", "has_bf16", "expected"),
    [
        ("auto", "cpu", True, True, "bf16"),
        (None, "cpu", True, True, "bf16"),
        ("auto", "cpu", True, False, "none"),  # emulated bfloat16 is slower than float32
        ("auto", "cpu", False, True, "none"),  # a caller's model (in training, say) is left as it is
        ("auto", "cuda", True, True, "none"),
        ("int8", "cpu", False, False, "int8"),
        ("bf16", "cpu", True, False, "bf16"),  # asked for explicitly: emulated, but what was asked
        ("bf16", "cuda", True, False, "bf16"),  # the GPU's matrix units
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


@pytest.mark.parametrize("mode", ["bf16", "int8"])
def test_a_loaded_model_is_converted_and_stays_close_to_float32(tiny_model_dir, mode):
    reference = HFEncoder(tiny_model_dir, device="cpu", quantize="none").encode(SENTENCES, batch_size=2)
    encoder = HFEncoder(tiny_model_dir, device="cpu", quantize=mode)
    embeddings = encoder.encode(SENTENCES, batch_size=2)
    assert encoder.quantize == mode and embeddings.dtype == np.float32
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
def test_a_callers_model_is_never_modified_and_never_stale(tiny_model_dir, tiny_tokenizer, mode):
    from transformers import AutoModel

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
def test_a_sentence_transformers_model_takes_the_same_options(tiny_model_dir, tmp_path, mode):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")]).save(
        str(tmp_path / "st")
    )
    reference = load_encoder(tmp_path / "st", quantize="none").encode(SENTENCES)
    encoder = load_encoder(tmp_path / "st", quantize=mode)
    assert isinstance(encoder, SentenceTransformerEncoder) and encoder.quantize == mode
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
    assert encoder_identity(str(tiny_model_dir), "max", "auto") == f"{tiny_model_dir} (max pooling, bf16)"
    assert encoder_identity(str(tiny_model_dir), None, "none") == str(tiny_model_dir)
    native(False)
    assert entry_key(texts, str(tiny_model_dir), quantize="auto") == keys["none"]
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

    with pytest.raises(SystemExit) as exit_info:
        main(["encode", "--input", "in.txt", "--out", "x", "--quantize", "fp16"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'fp16'" in capsys.readouterr().err


def test_int8_asked_without_a_device_runs_on_the_cpu_where_cuda_is(tiny_model_dir, monkeypatch):
    """On a GPU machine a model loaded by name goes to CUDA, but int8 has CPU kernels only: asked for without a
    device, it runs on the CPU (the cache key says int8) instead of being refused; asked for on CUDA, refused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    encoder = HFEncoder(tiny_model_dir, quantize="int8")
    assert encoder.device.type == "cpu" and encoder.quantize == "int8"
    assert precision.effective_quantize(str(tiny_model_dir), "int8") == "int8"
    with pytest.raises(UsageError, match="quantize='int8' is a CPU option; on cuda"):
        precision.resolve_quantize("int8", device_type="cuda", owned=True)
