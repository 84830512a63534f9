"""MuSR: the encoder-decoder without cross-attention (shapes, the sentence embedding as the only bridge, pooling,
save/load, remote code) and its training losses (label-smoothed cross-entropy, CrossConST)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel

import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.families.musr import CrossConSTLoss, crossconst_kl, reached_plateau, split_target
from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder

PAD = 1
SOURCE = torch.tensor([[0, 5, 6, 7, 8, 2], [0, 9, 10, 2, PAD, PAD], [0, 11, 12, 13, 2, PAD]])
TARGET = torch.tensor([[0, 20, 21, 22, 2], [0, 23, 2, PAD, PAD], [0, 24, 25, 2, PAD]])


def tiny_config(**overrides) -> MuSRConfig:
    values = dict(
        vocab_size=40,
        hidden_size=16,
        num_encoder_layers=2,
        num_decoder_layers=2,
        num_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=64,
        max_position_embeddings=32,
        dropout=0.0,
        attention_dropout=0.0,
    )
    values.update(overrides)
    return MuSRConfig(**values)


def tiny_model(**overrides) -> MuSREncoderDecoder:
    torch.manual_seed(0)
    return MuSREncoderDecoder(tiny_config(**overrides)).eval()


def batch() -> dict[str, torch.Tensor]:
    return {
        "src_input_ids": SOURCE,
        "src_attention_mask": (SOURCE != PAD).long(),
        "tgt_input_ids": TARGET,
        "tgt_attention_mask": (TARGET != PAD).long(),
    }


# -- model -------------------------------------------------------------------------------------------------------


def test_default_config_and_shapes():
    assert MuSRConfig().decoder_width == 2 * MuSRConfig().hidden_size  # builds without arguments
    model = tiny_model()
    _, labels = split_target(TARGET, (TARGET != PAD).long())
    output = model(input_ids=SOURCE, labels=labels)
    assert output.loss.ndim == 0 and output.to_tuple()[0] is output.loss  # loss first
    assert output.logits.shape == (3, TARGET.shape[1] - 1, 40)
    assert output.last_hidden_state.shape == (3, SOURCE.shape[1], 16)
    assert output.sentence_embedding.shape == (3, 16)
    assert model.decoder.layers[0].attention.query.in_features == 32  # decoder width 2d
    # without decoder inputs only the encoder runs: output[0] is the token states (sentence-transformers reads it)
    encoded = model(input_ids=SOURCE)
    assert encoded.logits is None and encoded[0].shape == (3, SOURCE.shape[1], 16)
    assert not any("cross" in name for name, _ in model.named_modules())
    assert model.lm_head.weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()  # untied


def test_config_validation():
    with pytest.raises(ValueError, match="divisible"):
        MuSRConfig(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="outside the vocabulary"):
        MuSRConfig(vocab_size=2, eos_token_id=2)
    with pytest.raises(ValueError, match="label_smoothing"):
        MuSRConfig(label_smoothing=1.0)


def test_decoder_sees_the_source_only_through_the_sentence_embedding():
    model = tiny_model()
    decoder_inputs, _ = split_target(TARGET, (TARGET != PAD).long())
    mask = (SOURCE != PAD)[..., None]

    def logits_with(change) -> torch.Tensor:
        # change the encoder's token states (what a cross-attention would read) before pooling
        handle = model.encoder.final_LayerNorm.register_forward_hook(lambda module, args, out: change(out))
        try:
            return model(input_ids=SOURCE, decoder_input_ids=decoder_inputs).logits
        finally:
            handle.remove()

    plain = logits_with(lambda states: states)
    # every state that is not the maximum of its dimension goes down: the sentence embedding stays the same
    lowered = logits_with(
        lambda states: torch.where(states == states.masked_fill(~mask, -1e9).amax(1, True), states, states - 1.0)
    )
    torch.testing.assert_close(lowered, plain, atol=0, rtol=0)
    # moving the maxima moves the logits: the embedding is the bridge
    assert not torch.allclose(logits_with(lambda states: states + 1.0), plain)


def test_max_pooling_ignores_padding():
    model = tiny_model()
    ids = torch.tensor([[0, 5, 6, 2]])
    padded = torch.tensor([[0, 5, 6, 2, PAD, PAD, PAD]])
    torch.testing.assert_close(model.encode(padded), model.encode(ids), atol=1e-6, rtol=1e-6)
    hidden = model(input_ids=ids).last_hidden_state
    torch.testing.assert_close(model.encode(ids), hidden.amax(dim=1))
    # a padded position with a huge value must not win the max
    states = torch.zeros(1, 3, 2)
    states[0, 2] = 100.0
    assert model.pool(states, torch.tensor([[1, 1, 0]])).max() == 0.0


def test_label_smoothed_cross_entropy_matches_a_hand_computation():
    model = tiny_model(label_smoothing=0.2)
    decoder_inputs, labels = split_target(TARGET, (TARGET != PAD).long())
    output = model(input_ids=SOURCE, decoder_input_ids=decoder_inputs, labels=labels)
    log_probs = output.logits.log_softmax(dim=-1)
    total, count = 0.0, 0
    for row in range(labels.shape[0]):
        for position in range(labels.shape[1]):
            label = int(labels[row, position])
            if label == -100:
                continue
            nll = -log_probs[row, position, label]
            uniform = -log_probs[row, position].mean()
            total += 0.8 * nll + 0.2 * uniform
            count += 1
    assert count == int((TARGET != PAD).sum()) - 3  # every target token but the leading <s>
    torch.testing.assert_close(output.loss, total / count)
    # labels alone: the decoder input is the labels shifted right behind <s>
    torch.testing.assert_close(model(input_ids=SOURCE, labels=labels).loss, output.loss)


def test_greedy_generate_stops_at_eos():
    model = tiny_model()
    out = model.generate(SOURCE, max_new_tokens=6)
    assert out.shape[0] == 3 and 2 <= out.shape[1] <= 7 and (out[:, 0] == 0).all()
    # step by step it equals the argmax of decode
    first = model.decode(model.encode(SOURCE), out[:, :1])[:, -1].argmax(-1)
    assert torch.equal(out[:, 1], first)
    with torch.no_grad():  # decoder states all ones, only </s> scores: every row stops after one step
        model.decoder.final_LayerNorm.weight.zero_()
        model.decoder.final_LayerNorm.bias.fill_(1.0)
        model.lm_head.weight.zero_()
        model.lm_head.weight[2] = 1.0
    assert model.generate(SOURCE).tolist() == [[0, 2]] * 3
    encoder_only = MuSREncoderDecoder(tiny_config(with_decoder=False))
    with pytest.raises(ValueError, match="without its decoder"):
        encoder_only.generate(SOURCE)


def test_save_load_identical_outputs_and_encoder_only_copy(tmp_path):
    model = tiny_model()
    _, labels = split_target(TARGET, (TARGET != PAD).long())
    model.save_pretrained(tmp_path)
    assert isinstance(AutoConfig.from_pretrained(tmp_path), MuSRConfig)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, MuSREncoderDecoder)
    expected = model(input_ids=SOURCE, labels=labels)
    actual = loaded(input_ids=SOURCE, labels=labels)
    assert torch.equal(actual.logits, expected.logits) and torch.equal(actual.loss, expected.loss)
    # the encoder alone loads from the full checkpoint (the decoder weights are left out)
    encoder_only = MuSREncoderDecoder.from_pretrained(tmp_path, with_decoder=False).eval()
    assert encoder_only.decoder is None and encoder_only.lm_head is None
    torch.testing.assert_close(encoder_only.encode(SOURCE), model.encode(SOURCE), atol=0, rtol=0)


def test_encode_texts_matches_token_ids(tiny_tokenizer):
    model = tiny_model(vocab_size=len(tiny_tokenizer))
    texts = ["The cat sleeps.", "Le chat dort sur le canapé du salon."]
    features = tiny_tokenizer(texts, padding=True, return_tensors="pt")
    expected = F.normalize(model.encode(features["input_ids"], features["attention_mask"]), dim=-1)
    with pytest.raises(ValueError, match="no tokenizer"):
        model.encode(texts)
    torch.testing.assert_close(model.encode(texts, tokenizer=tiny_tokenizer, batch_size=1), expected)
    torch.testing.assert_close(model.encode(texts), expected)  # the tokenizer used last
    torch.testing.assert_close(model.encode(texts[::-1], tiny_tokenizer), expected.flip(0))  # positional


@pytest.mark.slow
def test_remote_code_loads_without_bitext_hf(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "modeling_musr.py").exists() and (tmp_path / "configuration_musr.py").exists()
    assert set(json.loads((tmp_path / "config.json").read_text())["auto_map"]) == {"AutoConfig", "AutoModel"}
    decoder_inputs, _ = split_target(TARGET, (TARGET != PAD).long())
    expected = model(input_ids=SOURCE, decoder_input_ids=decoder_inputs).logits
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["bitext_hf"] = None  # any import of bitext_hf now fails
        import json, torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
        assert "bitext_hf" not in type(model).__module__, type(model).__module__
        ids = torch.tensor({SOURCE.tolist()})
        out = model(input_ids=ids, decoder_input_ids=torch.tensor({decoder_inputs.tolist()}))
        print(json.dumps(out.logits.tolist()))
        """
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf_home"),
            "OMP_NUM_THREADS": "1",
        },
    )
    assert result.returncode == 0, result.stderr[-2000:]
    torch.testing.assert_close(torch.tensor(json.loads(result.stdout.strip().splitlines()[-1])), expected)


# -- training losses -----------------------------------------------------------------------------------------------


def test_split_target_shifts_and_masks():
    decoder_inputs, labels = split_target(TARGET, (TARGET != PAD).long())
    assert torch.equal(decoder_inputs, TARGET[:, :-1])
    assert labels[0].tolist() == [20, 21, 22, 2]
    assert labels[1].tolist() == [23, 2, -100, -100]


def test_crossconst_with_alpha_zero_is_the_plain_cross_entropy():
    model = tiny_model()
    _, labels = split_target(TARGET, (TARGET != PAD).long())
    loss, parts = CrossConSTLoss(alpha=0.0)(model, batch())
    torch.testing.assert_close(loss, model(input_ids=SOURCE, labels=labels).loss)
    assert "kl" not in parts  # stage 1 does not run the second branch


def test_kl_is_zero_when_source_equals_target():
    model = tiny_model()
    same = {**batch(), "src_input_ids": TARGET, "src_attention_mask": (TARGET != PAD).long()}
    loss, parts = CrossConSTLoss(alpha=1.0)(model, same)
    assert parts["kl"].abs().item() < 1e-6
    torch.testing.assert_close(loss, parts["ce"])
    _, parts = CrossConSTLoss(alpha=1.0)(model, batch())
    assert parts["kl"].item() > 1e-4


def test_crossconst_kl_direction_and_masking():
    logits_x, logits_y = torch.randn(2, 3, 5), torch.randn(2, 3, 5)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    p_x, log_p_x, log_p_y = logits_x.softmax(-1), logits_x.log_softmax(-1), logits_y.log_softmax(-1)
    per_token = (p_x * (log_p_x - log_p_y)).sum(-1)  # KL(p(.|x) || p(.|y))
    torch.testing.assert_close(crossconst_kl(logits_x, logits_y, mask), per_token[mask].mean())


def test_gradients_reach_both_branches():
    model = tiny_model()
    loss_fn = CrossConSTLoss(alpha=1.0)
    branches = loss_fn.branches(model, batch())
    kl = crossconst_kl(branches.logits_x, branches.logits_y, branches.labels != -100)
    (grad,) = torch.autograd.grad(kl, [branches.sentence_embedding])  # rows of x, then rows of y
    rows = SOURCE.shape[0]
    assert grad[:rows].abs().sum() > 0 and grad[rows:].abs().sum() > 0  # neither side is detached
    # and the full loss moves the encoder through the English branch too
    model.zero_grad()
    loss_fn(model, batch())[0].backward()
    assert model.encoder.embeddings.word_embeddings.weight.grad[20:26].abs().sum() > 0  # English target tokens


@pytest.mark.slow
def test_the_translation_loss_is_the_same_under_transformers_4_57(tmp_path):
    """transformers 4.x's config base class set `decoder_start_token_id` to None after MuSRConfig had set it, so a
    checkpoint loaded there could not shift its labels (TypeError) and trained nothing."""
    from remote_code_tf4 import run_without_bitext_hf

    model = tiny_model()
    model.save_pretrained(tmp_path / "model")
    code = f"""
        import json, torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path / "model")!r}, trust_remote_code=True).eval()
        source, target = torch.tensor({SOURCE.tolist()!r}), torch.tensor({TARGET.tolist()!r})
        print(json.dumps([model.config.decoder_start_token_id, model(input_ids=source, labels=target).loss.item()]))
        """
    start, loss = run_without_bitext_hf(code, cwd=tmp_path, transformers_4=True)
    assert start == 0
    assert loss == pytest.approx(model(input_ids=SOURCE, labels=TARGET).loss.item(), rel=1e-5)


def test_plateau_needs_every_recent_evaluation_to_improve_too_little():
    assert not reached_plateau([5.0, 4.0], 0.01, patience=2)  # too few evaluations
    assert reached_plateau([5.0, 4.0, 3.99, 3.98], 0.01, patience=2)
    assert not reached_plateau([5.0, 4.0, 3.99, 3.0], 0.01, patience=2)  # the last one still improved by 25%
    assert reached_plateau([3.0, 3.1, 3.2], 0.01, patience=2)  # getting worse is no improvement
