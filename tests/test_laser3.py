"""Laser3Student model: shapes, pooling, projection, config validation, save/load round trips, remote code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoConfig, AutoModel

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig


def tiny_config(**overrides) -> Laser3StudentConfig:
    values = dict(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    values.update(overrides)
    return Laser3StudentConfig(**values)


BATCH = torch.tensor([[0, 5, 6, 7, 8, 2], [0, 9, 10, 2, 1, 1]])
MASK = (BATCH != 1).long()


@pytest.mark.parametrize("pooling", ["max", "bos"])
@pytest.mark.parametrize("projection_dim", [None, 32, 16])
def test_forward_shapes_and_padding_invariance(pooling, projection_dim):
    torch.manual_seed(0)
    model = Laser3Student(tiny_config(pooling=pooling, projection_dim=projection_dim)).eval()
    output = model(input_ids=BATCH, attention_mask=MASK)
    assert output.loss is None
    assert output.last_hidden_state.shape == (2, 6, 32)
    expected_dim = projection_dim or 32
    assert output.sentence_embedding.shape == (2, expected_dim)
    assert (model.projection is not None) == (projection_dim not in (None, 32))
    # The padded row embeds exactly as it does alone (padding is masked in attention and pooling).
    alone = model(input_ids=BATCH[1:, :4], attention_mask=MASK[1:, :4]).sentence_embedding
    torch.testing.assert_close(output.sentence_embedding[1:], alone, atol=1e-5, rtol=1e-5)
    # outputs[0] is the token states when no loss is asked for (what sentence-transformers reads).
    assert model(input_ids=BATCH, attention_mask=MASK, return_dict=False)[0].shape == (2, 6, 32)


def test_max_pooling_is_max_over_real_tokens():
    model = Laser3Student(tiny_config()).eval()
    output = model(input_ids=BATCH, attention_mask=MASK)
    expected = output.last_hidden_state[1, :4].amax(dim=0)
    torch.testing.assert_close(output.sentence_embedding[1], expected)


def test_losses_only_when_asked():
    model = Laser3Student(tiny_config(projection_dim=16))
    labels = torch.full_like(BATCH, -100)
    labels[0, 2] = 6
    mlm = model(input_ids=BATCH, attention_mask=MASK, labels=labels)
    assert mlm.loss is not None and mlm.mlm_logits.shape == (2, 6, 300)
    assert mlm.loss.item() == pytest.approx(
        torch.nn.functional.cross_entropy(mlm.mlm_logits[0, 2:3], torch.tensor([6])).item(), rel=1e-5
    )
    teacher = torch.randn(2, 16)
    distil = model(input_ids=BATCH, attention_mask=MASK, teacher_embeddings=teacher)
    expected = (1 - torch.nn.functional.cosine_similarity(distil.sentence_embedding, teacher)).mean()
    assert distil.loss.item() == pytest.approx(expected.item(), rel=1e-5)
    assert distil.mlm_logits is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, "divisible"),
        ({"pooling": "mean"}, "pooling"),
        ({"projection_dim": 0}, "projection_dim"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"hidden_dropout_prob": 1.5}, "hidden_dropout_prob"),
        ({"mask_token_id": 500}, "mask_token_id"),
        ({"hidden_act": "swish"}, "hidden_act"),
    ],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_long_input_error():
    model = Laser3Student(tiny_config(max_position_embeddings=8))
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(input_ids=torch.zeros(1, 9, dtype=torch.long))


def test_save_pretrained_automodel_round_trip(tmp_path):
    model = Laser3Student(tiny_config(projection_dim=16)).eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert isinstance(AutoConfig.from_pretrained(tmp_path), Laser3StudentConfig)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, Laser3Student)
    torch.testing.assert_close(
        loaded(input_ids=BATCH, attention_mask=MASK).sentence_embedding,
        model(input_ids=BATCH, attention_mask=MASK).sentence_embedding,
    )


@pytest.mark.slow
def test_remote_code_loads_without_bitext_hf(tmp_path):
    model = Laser3Student(tiny_config(projection_dim=16)).eval()
    model.save_pretrained(tmp_path)  # a plain save ships the code (no register_for_auto_class by the caller)
    assert (tmp_path / "modeling_laser3.py").exists() and (tmp_path / "configuration_laser3.py").exists()
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert set(auto_map) == {"AutoConfig", "AutoModel"}
    expected = model(input_ids=BATCH, attention_mask=MASK).sentence_embedding
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["bitext_hf"] = None  # any import of bitext_hf now fails
        import torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
        assert "bitext_hf" not in type(model).__module__, type(model).__module__
        ids = torch.tensor({BATCH.tolist()})
        print(model(input_ids=ids, attention_mask=(ids != 1).long()).sentence_embedding.tolist())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home")},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    embeddings = torch.tensor(json.loads(result.stdout.strip().splitlines()[-1]))
    torch.testing.assert_close(embeddings, expected, atol=1e-5, rtol=1e-5)


def test_init_weights_follow_initializer_range():
    torch.manual_seed(0)
    model = Laser3Student(tiny_config(initializer_range=0.5, hidden_size=64, intermediate_size=128))
    layer = model.layers[0]
    assert layer.intermediate.weight.std().item() == pytest.approx(0.5, rel=0.05)
    assert model.embeddings.word_embeddings.weight.std().item() == pytest.approx(0.5, rel=0.05)
    assert torch.count_nonzero(layer.intermediate.bias) == 0 and torch.count_nonzero(model.lm_head.decoder.bias) == 0
    assert torch.count_nonzero(model.embeddings.word_embeddings.weight[1]) == 0  # the padding row
    assert (
        torch.equal(layer.ffn_LayerNorm.weight, torch.ones(64)) and torch.count_nonzero(layer.ffn_LayerNorm.bias) == 0
    )


def test_mlm_decoder_is_the_output_embedding_and_resizes_untied():
    model = Laser3Student(tiny_config())
    assert model.get_output_embeddings() is model.lm_head.decoder
    assert Laser3StudentConfig(tie_word_embeddings=True).tie_word_embeddings is False  # never tied (4.x would tie)
    model.resize_token_embeddings(310)
    assert model.config.vocab_size == 310
    assert model.lm_head.decoder.weight.shape == (310, 32) and model.lm_head.decoder.bias.shape == (310,)
    assert model.lm_head.decoder.weight.data_ptr() != model.embeddings.word_embeddings.weight.data_ptr()
    ids = torch.tensor([[0, 305, 2]])
    assert model(input_ids=ids, return_mlm_logits=True).mlm_logits.shape == (1, 3, 310)


def test_encode_needs_a_tokenizer_when_the_model_has_no_folder():
    model = Laser3Student(tiny_config())
    with pytest.raises(ValueError, match="no tokenizer"):
        model.encode(["Jàngalekat bi."])
    with pytest.raises(TypeError, match="list of strings"):
        model.encode("Jàngalekat bi.")
