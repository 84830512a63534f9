"""Tests of OneAlignerModel: BERTScore, in-batch normalization, loss, training, save/load, remote code, bad input.

The text-level and retrieval functions (``bitext_hf.families.onealigner``) are tested in test_onealigner_retrieval.py.
"""

from __future__ import annotations

import ast
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from onealigner_helpers import batch, tiny_aligner, tiny_encoder_config
from transformers import AutoModel, GPT2Config, XLMRobertaConfig, XLMRobertaModel

import bitext_hf.modeling  # registers the Auto classes (and binds `bitext_hf`)
from bitext_hf.families import onealigner
from bitext_hf.modeling.onealigner import (
    OneAlignerConfig,
    OneAlignerConfigError,
    OneAlignerInputError,
    OneAlignerModel,
    bertscore_matrix,
    bertscore_pairs,
    contrastive_loss,
    normalize_scores,
    pooled_contrastive_loss,
)

MODEL_FOLDER = Path(bitext_hf.__file__).parent / "modeling" / "onealigner"


@pytest.fixture()
def tiny_model(tiny_tokenizer) -> OneAlignerModel:
    return tiny_aligner(tiny_tokenizer)


def direct_bertscore(source: torch.Tensor, source_keep: torch.Tensor, target: torch.Tensor, target_keep: torch.Tensor):
    """BERTScore F of one pair written as the paper's sums, one token at a time."""
    source_tokens = [source[i] for i in range(source.shape[0]) if source_keep[i]]
    target_tokens = [target[j] for j in range(target.shape[0]) if target_keep[j]]
    precision = sum(max(float(s @ t) for s in source_tokens) for t in target_tokens) / len(target_tokens)
    recall = sum(max(float(s @ t) for t in target_tokens) for s in source_tokens) / len(source_tokens)
    return 2 * precision * recall / (precision + recall)


# -- pure functions --------------------------------------------------------------------------------------------------


def test_bertscore_matrix_matches_direct_per_pair_computation():
    generator = torch.Generator().manual_seed(0)
    source = torch.nn.functional.normalize(torch.randn(3, 5, 8, generator=generator), dim=-1)
    target = torch.nn.functional.normalize(torch.randn(4, 6, 8, generator=generator), dim=-1)
    source_keep = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]], dtype=torch.bool)
    target_keep = torch.tensor(
        [[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0], [1, 0, 1, 0, 1, 0]], dtype=torch.bool
    )
    # A tiny element budget forces the source-chunked path.
    for max_elements in (1 << 24, 10):
        matrix = bertscore_matrix(source, source_keep.float(), target, target_keep.float(), max_elements=max_elements)
        for i in range(3):
            for j in range(4):
                expected = direct_bertscore(source[i], source_keep[i], target[j], target_keep[j])
                assert matrix[i, j].item() == pytest.approx(expected, abs=1e-5)
    pairs = bertscore_pairs(source[:3], source_keep.float(), target[:3], target_keep[:3].float())
    torch.testing.assert_close(pairs, matrix.diagonal()[:3])


def test_bertscore_idf_weights_are_weighted_means():
    source = torch.eye(3).unsqueeze(0)  # tokens e0, e1, e2
    target = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])  # tokens e0, e1
    weights_source = torch.tensor([[1.0, 1.0, 2.0]])
    weights_target = torch.tensor([[1.0, 3.0]])
    # P = 1 (every target token found); R = (1 + 1 + 2 * 0) / 4 = 0.5; F = 2 * 0.5 / 1.5.
    value = bertscore_matrix(source, weights_source, target, weights_target).item()
    assert value == pytest.approx(2 / 3)


def test_normalization_on_a_hand_example():
    raw = torch.tensor([[3.0, 1.0], [1.0, 1.0]])
    # Row means (2, 1), column means (2, 1), grand mean 1.5, alpha 0.75.
    expected = torch.tensor([[3 - 0.75 * 4, 1 - 0.75 * 3], [1 - 0.75 * 3, 1 - 0.75 * 2]])
    torch.testing.assert_close(normalize_scores(raw, 0.75, add_mean_term=False), expected)
    torch.testing.assert_close(normalize_scores(raw, 0.75, add_mean_term=True), expected + 0.5 * 1.5)


def test_normalization_demotes_a_popular_sentence():
    # Target 2 is "popular": it scores high with every source and wins rows 0 and 1 before normalization.
    raw = torch.tensor([[0.80, 0.10, 0.85], [0.10, 0.80, 0.85], [0.10, 0.10, 0.90]])
    assert raw.argmax(dim=1).tolist() == [2, 2, 2]
    assert normalize_scores(raw, 0.75, add_mean_term=False).argmax(dim=1).tolist() == [0, 1, 2]


def test_global_loss_pairs_each_positive_with_all_off_diagonal_negatives():
    scores = torch.tensor([[2.0, 0.5, -1.0], [0.3, 1.0, 0.2], [0.0, -0.4, 1.5]])
    temperature = 5.0
    logits = scores / temperature
    negatives = [logits[m, n].item() for m in range(3) for n in range(3) if m != n]
    expected = 0.0
    for i in range(3):
        positive = logits[i, i].item()
        expected += -positive + math.log(math.exp(positive) + sum(math.exp(v) for v in negatives))
    expected /= 3
    assert contrastive_loss(scores, temperature, "global").item() == pytest.approx(expected, rel=1e-6)
    row = torch.nn.functional.cross_entropy(logits, torch.arange(3)).item()
    assert contrastive_loss(scores, temperature, "row").item() == pytest.approx(row, rel=1e-6)
    assert contrastive_loss(scores, temperature, "global").item() > row  # more negatives, higher loss


# -- model ----------------------------------------------------------------------------------------------------------


def test_forward_outputs_and_field_order(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:4]]
    french = [pair[1] for pair in tiny_parallel_corpus[:4]]
    source_ids, source_mask = batch(tiny_model, tiny_tokenizer, english)
    target_ids, target_mask = batch(tiny_model, tiny_tokenizer, french)
    output = tiny_model(source_ids, source_mask, target_ids, target_mask, return_loss=True)
    assert list(output.keys())[:3] == ["loss", "scores", "raw_scores"]
    assert output.scores.shape == output.raw_scores.shape == (4, 4)
    torch.testing.assert_close(output.scores, normalize_scores(output.raw_scores, 0.75, add_mean_term=False))
    # Evaluation uses cosine BERTScore: F of unit vectors lies in [-1, 1].
    assert output.raw_scores.abs().max() <= 1.0 + 1e-5
    # Layer 1 token states, the same as asking the encoder for hidden state 1.
    hidden = tiny_model.encoder(source_ids, attention_mask=source_mask, output_hidden_states=True).hidden_states[1]
    torch.testing.assert_close(output.last_hidden_state, hidden)
    encoded_only = tiny_model(source_ids, source_mask)
    assert encoded_only.loss is None and encoded_only.scores is None
    assert tiny_model(source_ids, source_mask, return_dict=False)[0].shape == hidden.shape


def test_training_uses_raw_dot_products_and_the_mean_term(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:3]]
    german = [pair[1] for pair in tiny_parallel_corpus[20:23]]
    source_ids, source_mask = batch(tiny_model, tiny_tokenizer, english)
    target_ids, target_mask = batch(tiny_model, tiny_tokenizer, german)
    tiny_model.config.attention_probs_dropout_prob = 0.0
    tiny_model.train()
    for module in tiny_model.modules():  # dropout off so both passes see the same states
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    output = tiny_model(source_ids, source_mask, target_ids, target_mask)
    states_source = output.last_hidden_state
    states_target = output.target_last_hidden_state
    weights_source = tiny_model.token_weights(source_ids, source_mask)
    weights_target = tiny_model.token_weights(target_ids, target_mask)
    expected_raw = bertscore_matrix(states_source, weights_source, states_target, weights_target)
    torch.testing.assert_close(output.raw_scores, expected_raw)
    torch.testing.assert_close(output.scores, normalize_scores(expected_raw, 0.75, add_mean_term=True))


def test_special_tokens_are_excluded_from_bertscore(tiny_model, tiny_tokenizer):
    input_ids, attention_mask = batch(tiny_model, tiny_tokenizer, ["The cat sleeps.", "Hi"])
    weights = tiny_model.token_weights(input_ids, attention_mask)
    assert tiny_model.config.exclude_token_ids == [0, 2]
    assert weights[input_ids == 0].sum() == 0 and weights[input_ids == 2].sum() == 0
    assert weights[attention_mask == 0].sum() == 0
    assert (weights.sum(dim=1) > 0).all()


def test_loss_decreases_and_parameters_change(tiny_tokenizer, tiny_parallel_corpus):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=2)
    model.train()
    pairs = tiny_parallel_corpus[:8]
    source_ids, source_mask = batch(model, tiny_tokenizer, [pair[0] for pair in pairs])
    target_ids, target_mask = batch(model, tiny_tokenizer, [pair[1] for pair in pairs])
    before = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(8):
        loss = model(source_ids, source_mask, target_ids, target_mask, return_loss=True).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1
    changed = [name for name, parameter in model.named_parameters() if not torch.equal(parameter, before[name])]
    assert len(changed) == len(before)  # every parameter reaches hidden state L: no dead weights (pooler dropped)


def test_pooled_loss_is_added_with_its_weight(tiny_tokenizer, tiny_parallel_corpus):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=1, pooled_loss_weight=0.5).eval()
    source_ids, source_mask = batch(model, tiny_tokenizer, [pair[0] for pair in tiny_parallel_corpus[:4]])
    target_ids, target_mask = batch(model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus[:4]])
    output = model(source_ids, source_mask, target_ids, target_mask, return_loss=True)
    paper_loss = contrastive_loss(output.scores, 5.0, "global")
    pooled = pooled_contrastive_loss(output.sentence_embedding, output.target_sentence_embedding, 0.05)
    assert pooled.item() > 0
    assert output.loss.item() == pytest.approx((paper_loss + 0.5 * pooled).item(), rel=1e-6)


def test_from_encoder_loads_pretrained_weights_and_keeps_no_tokenizer(tiny_tokenizer, tmp_path):
    torch.manual_seed(0)
    encoder = XLMRobertaModel(tiny_encoder_config(tiny_tokenizer, layers=3), add_pooling_layer=False)
    encoder.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    model = OneAlignerModel.from_encoder(str(tmp_path), layer=2)
    assert model.encoder.config.num_hidden_layers == 2 and not hasattr(model, "tokenizer")
    saved = encoder.state_dict()
    for name, tensor in model.encoder.state_dict().items():
        assert torch.equal(tensor, saved[name]), name


def test_from_encoder_drops_layers_above_l(tiny_tokenizer):
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer, layers=3), layer=2)
    assert model.encoder.config.num_hidden_layers == 2 and model.config.layer == 2
    kept = OneAlignerModel.from_encoder(
        tiny_encoder_config(tiny_tokenizer, layers=3), layer=2, drop_unused_layers=False
    )
    assert kept.encoder.config.num_hidden_layers == 3
    assert OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer, layers=12)).config.layer == 8


def test_dropping_layers_keeps_hidden_state_l_of_an_encoder_with_a_final_norm(tiny_tokenizer):
    from transformers import XLMRobertaXLConfig

    config = XLMRobertaXLConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    full = OneAlignerModel.from_encoder(config, layer=1, drop_unused_layers=False).eval()
    cut = OneAlignerModel.from_encoder(config, layer=1).eval()
    assert cut.encoder.config.num_hidden_layers == 2  # layer 1 and the next one, whose input is state 1
    cut.encoder.load_state_dict(full.encoder.state_dict(), strict=False)
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        torch.testing.assert_close(cut.token_states(ids), full.token_states(ids))


def test_save_pretrained_automodel_round_trip(tiny_tokenizer, tiny_parallel_corpus, tmp_path):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=1, use_idf=True, alpha=0.5).eval()
    onealigner.fit_idf(model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus])
    assert model.idf_weights.min() < model.idf_weights.max()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "modeling_onealigner.py").exists()
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, OneAlignerModel) and loaded.config.alpha == 0.5
    torch.testing.assert_close(loaded.idf_weights, model.idf_weights)
    source_ids, source_mask = batch(model, tiny_tokenizer, [pair[0] for pair in tiny_parallel_corpus[:4]])
    target_ids, target_mask = batch(model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus[:4]])
    with torch.no_grad():
        expected = model(source_ids, source_mask, target_ids, target_mask)
        actual = loaded(source_ids, source_mask, target_ids, target_mask)
    assert torch.equal(expected.scores, actual.scores) and torch.equal(expected.raw_scores, actual.raw_scores)


@pytest.mark.slow
def test_remote_code_loads_without_bitext_hf(tiny_model, tiny_tokenizer, tiny_parallel_corpus, tmp_path):
    tiny_model.save_pretrained(tmp_path / "model")
    source_ids, source_mask = batch(tiny_model, tiny_tokenizer, [pair[0] for pair in tiny_parallel_corpus[:3]])
    target_ids, target_mask = batch(tiny_model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus[:3]])
    torch.save((source_ids, source_mask, target_ids, target_mask), tmp_path / "inputs.pt")
    with torch.no_grad():
        torch.save(tiny_model(source_ids, source_mask, target_ids, target_mask).scores, tmp_path / "expected.pt")
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["bitext_hf"] = None  # any import of bitext_hf now fails
        import torch
        from transformers import AutoModel
        model = AutoModel.from_pretrained({str(tmp_path / "model")!r}, trust_remote_code=True).eval()
        assert "bitext_hf" not in type(model).__module__, type(model).__module__
        inputs = torch.load({str(tmp_path / "inputs.pt")!r})
        with torch.no_grad():
            scores = model(*inputs).scores
        assert torch.equal(scores, torch.load({str(tmp_path / "expected.pt")!r}))
        with torch.no_grad():  # the public methods the retrieval functions use work in the shipped code too
            features = model.features(*inputs[:2]), model.features(*inputs[2:])
            assert torch.allclose(model.similarity(*features), model(*inputs).raw_scores)
        print("REMOTE-OK", type(model).__module__)
        """
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment["HF_HUB_OFFLINE"] = "1"
    environment["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    # -I: no PYTHONPATH, no user site, not the current folder; the script also blocks bitext_hf itself.
    result = subprocess.run(
        [sys.executable, "-I", "-c", script],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "REMOTE-OK" in result.stdout
    shipped = sorted(path.name for path in (tmp_path / "model").glob("*.py"))
    assert shipped == ["configuration_onealigner.py", "functional_onealigner.py", "modeling_onealigner.py"]


def _imported_modules(path: Path) -> list[tuple[str, int]]:
    """(module, level) of every import statement in a file; level > 0 for relative imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


def test_model_folder_imports_only_torch_transformers_and_itself():
    allowed = set(sys.stdlib_module_names) | {"torch", "transformers"}
    files = sorted(MODEL_FOLDER.glob("*.py"))
    assert {path.name for path in files} == {
        "__init__.py",
        "configuration_onealigner.py",
        "functional_onealigner.py",
        "modeling_onealigner.py",
    }
    for path in files:
        for module, level in _imported_modules(path):
            if level or module.split(".")[0] in allowed:
                continue
            # The package's __init__ (never shipped) registers the family with the Auto classes.
            assert path.name == "__init__.py" and module.startswith("bitext_hf.modeling"), (path.name, module)


def test_features_and_similarity_are_what_forward_scores(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    source_ids, source_mask = batch(tiny_model, tiny_tokenizer, [pair[0] for pair in tiny_parallel_corpus[:4]])
    target_ids, target_mask = batch(tiny_model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus[:5]])
    with torch.no_grad():
        output = tiny_model(source_ids, source_mask, target_ids, target_mask)
        source = tiny_model.features(source_ids, source_mask)
        target = tiny_model.features(target_ids, target_mask)
        raw = tiny_model.features(source_ids, source_mask, cosine=False)
    torch.testing.assert_close(tiny_model.similarity(source, target), output.raw_scores)
    torch.testing.assert_close(tiny_model.normalize(tiny_model.similarity(source, target)), output.scores)
    torch.testing.assert_close(raw.vectors, output.last_hidden_state)
    torch.testing.assert_close(source.vectors.norm(dim=-1)[source_mask.bool()], torch.ones(int(source_mask.sum())))
    torch.testing.assert_close(source.pooled, output.sentence_embedding)
    assert torch.equal(source.weights, tiny_model.token_weights(source_ids, source_mask))


# -- bad input ------------------------------------------------------------------------------------------------------


def test_mismatched_batches_for_the_loss(tiny_model, tiny_tokenizer):
    ids, mask = batch(tiny_model, tiny_tokenizer, ["a b c", "d e f"])
    with pytest.raises(OneAlignerInputError, match="aligned batches"):
        tiny_model(ids, mask, ids[:1], mask[:1], return_loss=True)


def test_layer_out_of_range(tiny_tokenizer):
    with pytest.raises(OneAlignerConfigError, match="out of range"):
        OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=3)
    with pytest.raises(OneAlignerConfigError, match="out of range"):
        OneAlignerConfig(encoder_config=tiny_encoder_config(tiny_tokenizer), layer=-1)


def test_encoder_that_is_not_xlmr_like():
    with pytest.raises(OneAlignerConfigError, match="not XLM-R-like"):
        OneAlignerModel.from_encoder(GPT2Config(n_layer=2, n_embd=32, n_head=2), layer=1)
    with pytest.raises(OneAlignerConfigError, match="decoder"):
        OneAlignerConfig(encoder_config=XLMRobertaConfig(num_hidden_layers=2, is_decoder=True), layer=1)


def test_from_encoder_refuses_a_tokenizer(tiny_tokenizer):
    with pytest.raises(OneAlignerInputError, match="keeps no tokenizer"):
        OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=1, tokenizer=tiny_tokenizer)


def test_missing_encoder_path_names_the_fix(tmp_path):
    with pytest.raises(OneAlignerInputError, match="local folder"):
        OneAlignerModel.from_encoder(str(tmp_path / "no-such-encoder"))


@pytest.mark.parametrize(
    ("field", "value"),
    [("similarity", "cosine"), ("loss_type", "pairwise"), ("alpha", 1.5), ("softmax_temperature", 0.0)],
)
def test_config_validation(field, value):
    with pytest.raises(OneAlignerConfigError, match=field):
        OneAlignerConfig(layer=1, **{field: value})


@pytest.mark.parametrize(("depth", "layer"), [(12, 8), (24, 17), (6, 4), (2, 1)])
def test_default_layer_is_the_papers_for_base_and_large(depth, layer):
    encoder = XLMRobertaConfig(num_hidden_layers=depth, hidden_size=32, num_attention_heads=2, intermediate_size=64)
    assert OneAlignerConfig(encoder_config=encoder).layer == layer


@pytest.mark.parametrize("loss_type", ["global", "row"])
def test_the_footnote_mean_term_changes_neither_loss_nor_gradients(tiny_tokenizer, tiny_parallel_corpus, loss_type):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=2, loss_type=loss_type).train()
    source_ids, source_mask = batch(model, tiny_tokenizer, [pair[0] for pair in tiny_parallel_corpus[:6]])
    target_ids, target_mask = batch(model, tiny_tokenizer, [pair[1] for pair in tiny_parallel_corpus[:6]])
    results = {}
    for add_mean_term in (True, False):
        model.config.add_mean_term = add_mean_term
        model.zero_grad()
        torch.manual_seed(1)  # the same dropout masks in both runs
        output = model(source_ids, source_mask, target_ids, target_mask, return_loss=True)
        output.loss.backward()
        grads = [parameter.grad.clone() for parameter in model.parameters() if parameter.grad is not None]
        results[add_mean_term] = (output.scores.detach(), output.loss.item(), grads)
    assert not torch.allclose(results[True][0], results[False][0])  # the term does shift the scores
    assert results[True][1] == pytest.approx(results[False][1], rel=1e-6)
    # Equal up to float32 rounding: a gradient the term changed would differ by a share of its own size.
    for with_term, without_term in zip(results[True][2], results[False][2]):
        assert (with_term - without_term).norm() <= 1e-4 * with_term.norm() + 1e-8
