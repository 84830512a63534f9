"""Tests of OneAlignerModel: BERTScore, in-batch normalization, loss, training, save/load, remote code, bad input."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoModel, GPT2Config, XLMRobertaConfig, XLMRobertaModel

import bitext_hf  # noqa: F401  (registers the Auto classes)
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
    two_stage_retrieve,
)


def tiny_encoder_config(tokenizer, layers: int = 2) -> XLMRobertaConfig:
    return XLMRobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )


@pytest.fixture()
def tiny_model(tiny_tokenizer) -> OneAlignerModel:
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=1, tokenizer=tiny_tokenizer)
    return model.eval()


def batch(model: OneAlignerModel, sentences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    return model._pad(model.tokenize(sentences))


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


def test_forward_outputs_and_field_order(tiny_model, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:4]]
    french = [pair[1] for pair in tiny_parallel_corpus[:4]]
    source_ids, source_mask = batch(tiny_model, english)
    target_ids, target_mask = batch(tiny_model, french)
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


def test_training_uses_raw_dot_products_and_the_mean_term(tiny_model, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:3]]
    german = [pair[1] for pair in tiny_parallel_corpus[20:23]]
    source_ids, source_mask = batch(tiny_model, english)
    target_ids, target_mask = batch(tiny_model, german)
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


def test_special_tokens_are_excluded_from_bertscore(tiny_model):
    input_ids, attention_mask = batch(tiny_model, ["The cat sleeps.", "Hi"])
    weights = tiny_model.token_weights(input_ids, attention_mask)
    assert tiny_model.config.exclude_token_ids == [0, 2]
    assert weights[input_ids == 0].sum() == 0 and weights[input_ids == 2].sum() == 0
    assert weights[attention_mask == 0].sum() == 0
    assert (weights.sum(dim=1) > 0).all()


def test_loss_decreases_and_parameters_change(tiny_tokenizer, tiny_parallel_corpus):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(tiny_encoder_config(tiny_tokenizer), layer=2, tokenizer=tiny_tokenizer)
    model.train()
    pairs = tiny_parallel_corpus[:8]
    source_ids, source_mask = batch(model, [pair[0] for pair in pairs])
    target_ids, target_mask = batch(model, [pair[1] for pair in pairs])
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
    model = OneAlignerModel.from_encoder(
        tiny_encoder_config(tiny_tokenizer), layer=1, tokenizer=tiny_tokenizer, pooled_loss_weight=0.5
    ).eval()
    source_ids, source_mask = batch(model, [pair[0] for pair in tiny_parallel_corpus[:4]])
    target_ids, target_mask = batch(model, [pair[1] for pair in tiny_parallel_corpus[:4]])
    output = model(source_ids, source_mask, target_ids, target_mask, return_loss=True)
    paper_loss = contrastive_loss(output.scores, 5.0, "global")
    pooled = pooled_contrastive_loss(output.sentence_embedding, output.target_sentence_embedding, 0.05)
    assert pooled.item() > 0
    assert output.loss.item() == pytest.approx((paper_loss + 0.5 * pooled).item(), rel=1e-6)


def test_from_encoder_loads_pretrained_weights_and_tokenizer(tiny_tokenizer, tmp_path):
    torch.manual_seed(0)
    encoder = XLMRobertaModel(tiny_encoder_config(tiny_tokenizer, layers=3), add_pooling_layer=False)
    encoder.save_pretrained(tmp_path)
    tiny_tokenizer.save_pretrained(tmp_path)
    model = OneAlignerModel.from_encoder(str(tmp_path), layer=2)
    assert model.encoder.config.num_hidden_layers == 2 and model.tokenizer is not None
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
        vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130, pad_token_id=tiny_tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    full = OneAlignerModel.from_encoder(config, layer=1, drop_unused_layers=False).eval()
    cut = OneAlignerModel.from_encoder(config, layer=1).eval()
    assert cut.encoder.config.num_hidden_layers == 2  # layer 1 and the next one, whose input is state 1
    cut.encoder.load_state_dict(full.encoder.state_dict(), strict=False)
    ids = torch.tensor([[0, 5, 6, 7, 2]])
    with torch.no_grad():
        torch.testing.assert_close(cut.token_states(ids), full.token_states(ids))


def test_text_helpers_agree(tiny_model, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    spanish = [pair[1] for pair in tiny_parallel_corpus[40:50]]
    matrix = tiny_model.similarity_matrix(english, spanish, batch_size=4)
    assert matrix.shape == (10, 10) and matrix.dtype == torch.float32
    # Blocks of 4: the score of (0, 1) is normalized inside block (sources 0-3, targets 0-3).
    source_ids, source_mask = batch(tiny_model, english[:4])
    target_ids, target_mask = batch(tiny_model, spanish[:4])
    with torch.no_grad():
        block = tiny_model(source_ids, source_mask, target_ids, target_mask).scores
    torch.testing.assert_close(matrix[:4, :4], block, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(tiny_model.score_pairs(english[:4], spanish[:4], batch_size=4), block.diagonal())
    assert tiny_model.retrieve(english, spanish, batch_size=4).tolist() == matrix.argmax(dim=1).tolist()
    raw_pairs = tiny_model.score_pairs(english, spanish, normalize=False)
    raw_matrix = tiny_model.similarity_matrix(english, spanish, normalize=False)
    torch.testing.assert_close(raw_pairs, raw_matrix.diagonal(), atol=1e-5, rtol=1e-5)


def test_two_stage_equals_full_matrix_when_it_sees_everything(tiny_model, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:12]]
    german = [pair[1] for pair in tiny_parallel_corpus[20:32]]
    # One block and a normalization sample holding every sentence: both paths compute the same scores.
    full = tiny_model.similarity_matrix(english, german)
    scores, indices = two_stage_retrieve(tiny_model, english, german, top_k=12, knn_backend="torch")
    expected_scores, expected_indices = full.sort(dim=1, descending=True)
    assert indices[:, 0].tolist() == expected_indices[:, 0].tolist()
    torch.testing.assert_close(torch.from_numpy(scores), expected_scores, atol=1e-5, rtol=1e-5)
    # A smaller K keeps the candidates' own ranking.
    scores_k, indices_k = two_stage_retrieve(tiny_model, english, german, top_k=3)
    assert scores_k.shape == indices_k.shape == (12, 3) and (scores_k[:, :-1] >= scores_k[:, 1:]).all()
    assert all(len(set(row)) == 3 for row in indices_k.tolist())


def _reference_token_candidates(source, target, top_k, neighbours):
    """token_candidates by its definition, one source token and one target sentence at a time (exact search)."""
    target_tokens = [(j, vector) for j, (states, weights, _) in enumerate(target) for vector in states[weights > 0]]
    all_vectors = torch.stack([vector for _, vector in target_tokens])
    rows = []
    for states, weights, _ in source:
        content = weights > 0
        token_weights = weights[content] / weights[content].sum()
        gains: dict[int, float] = {}
        for vector, weight in zip(states[content], token_weights):
            sims = all_vectors @ vector
            order = sorted(range(len(sims)), key=lambda u: (-float(sims[u]), u))[:neighbours]
            kth = float(sims[order[-1]])
            best: dict[int, float] = {}
            for u in order:
                best.setdefault(target_tokens[u][0], float(sims[u]))
            for j, sim in best.items():
                if sim > kth:
                    gains[j] = gains.get(j, 0.0) + float(weight) * (sim - kth)
        rows.append(sorted(gains, key=lambda j: (-gains[j], j))[:top_k])
    return rows


def test_token_first_stage_matches_its_definition(tiny_model, tiny_parallel_corpus):
    from bitext_hf.modeling.onealigner.retrieval import token_candidates

    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    german = [pair[1] for pair in tiny_parallel_corpus[:30]]
    source = tiny_model._encode_tokens(english, None, 8)
    target = tiny_model._encode_tokens(german, None, 8)
    top_k, neighbours = 6, 12
    candidates = token_candidates(source, target, top_k, token_neighbours=neighbours)
    expected = _reference_token_candidates(source, target, top_k, neighbours)
    assert candidates.shape == (10, top_k)
    for row, reference in zip(candidates.tolist(), expected):
        # The targets that gained come first, in the reference's order; the rest is topped up from pooled kNN.
        assert row[: len(reference)] == reference
        assert len(set(row)) == top_k and all(0 <= index < 30 for index in row)


def test_token_first_stage_ivf_path_with_every_cell_probed_is_exact(tiny_model, tiny_parallel_corpus, monkeypatch):
    from bitext_hf.modeling.onealigner import retrieval

    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    german = [pair[1] for pair in tiny_parallel_corpus[:60]]
    source = tiny_model._encode_tokens(english, None, 8)
    target = tiny_model._encode_tokens(german, None, 8)
    exact = retrieval.token_candidates(source, target, 5, token_neighbours=8)
    monkeypatch.setattr(retrieval, "EXACT_TOKEN_PRODUCTS", 0)
    approximate = retrieval.token_candidates(source, target, 5, token_neighbours=8, nprobe=10_000)
    assert approximate.tolist() == exact.tolist()


def test_two_stage_first_stages_and_bad_arguments(tiny_model, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:12]]
    german = [pair[1] for pair in tiny_parallel_corpus[:40]]
    full_top1 = tiny_model.similarity_matrix(english, german).argmax(dim=1).tolist()
    for first_stage in ("tokens", "pooled"):
        scores, indices = two_stage_retrieve(tiny_model, english, german, top_k=40, first_stage=first_stage)
        # K = every target: the first stage only orders candidates, the re-ranked top-1 is the full matrix's.
        assert indices[:, 0].tolist() == full_top1
        assert (scores[:, :-1] >= scores[:, 1:]).all()
    with pytest.raises(OneAlignerInputError, match="first_stage"):
        two_stage_retrieve(tiny_model, english, german, first_stage="bm25")


def test_mean_pool_similarity_variant(tiny_tokenizer, tiny_parallel_corpus):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(
        tiny_encoder_config(tiny_tokenizer), layer=1, tokenizer=tiny_tokenizer, similarity="mean_pool"
    ).eval()
    english = [pair[0] for pair in tiny_parallel_corpus[:5]]
    french = [pair[1] for pair in tiny_parallel_corpus[:5]]
    vectors_english = model.encode(english)
    vectors_french = model.encode(french)
    raw = model.similarity_matrix(english, french, normalize=False)
    torch.testing.assert_close(raw, vectors_english @ vectors_french.T, atol=1e-5, rtol=1e-5)


def test_save_pretrained_automodel_round_trip(tiny_tokenizer, tiny_parallel_corpus, tmp_path):
    torch.manual_seed(0)
    model = OneAlignerModel.from_encoder(
        tiny_encoder_config(tiny_tokenizer), layer=1, tokenizer=tiny_tokenizer, use_idf=True, alpha=0.5
    ).eval()
    model.fit_idf([pair[1] for pair in tiny_parallel_corpus])
    assert model.idf_weights.min() < model.idf_weights.max()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "modeling_onealigner.py").exists()
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, OneAlignerModel) and loaded.config.alpha == 0.5
    torch.testing.assert_close(loaded.idf_weights, model.idf_weights)
    source_ids, source_mask = batch(model, [pair[0] for pair in tiny_parallel_corpus[:4]])
    target_ids, target_mask = batch(model, [pair[1] for pair in tiny_parallel_corpus[:4]])
    with torch.no_grad():
        expected = model(source_ids, source_mask, target_ids, target_mask)
        actual = loaded(source_ids, source_mask, target_ids, target_mask)
    assert torch.equal(expected.scores, actual.scores) and torch.equal(expected.raw_scores, actual.raw_scores)


def test_remote_code_loads_without_bitext_hf(tiny_model, tiny_parallel_corpus, tmp_path):
    tiny_model.save_pretrained(tmp_path / "model")
    source_ids, source_mask = batch(tiny_model, [pair[0] for pair in tiny_parallel_corpus[:3]])
    target_ids, target_mask = batch(tiny_model, [pair[1] for pair in tiny_parallel_corpus[:3]])
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
        print("REMOTE-OK", type(model).__module__)
        """
    )
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    environment["HF_HUB_OFFLINE"] = "1"
    environment["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "REMOTE-OK" in result.stdout


# -- bad input ------------------------------------------------------------------------------------------------------


def test_mismatched_pair_counts(tiny_model):
    with pytest.raises(OneAlignerInputError, match="aligned lists"):
        tiny_model.score_pairs(["a b c", "d e f"], ["a b c"])
    ids, mask = batch(tiny_model, ["a b c", "d e f"])
    with pytest.raises(OneAlignerInputError, match="aligned batches"):
        tiny_model(ids, mask, ids[:1], mask[:1], return_loss=True)


def test_empty_strings_are_refused(tiny_model):
    with pytest.raises(OneAlignerInputError, match="sentence 1 is empty"):
        tiny_model.similarity_matrix(["The cat.", "  "], ["Le chat.", "Bonjour."])


def test_overlong_sentences_are_truncated_with_one_warning(tiny_model, caplog):
    tiny_model.config.max_seq_length = 8
    long_sentence = " ".join(["the cat sleeps on the sofa"] * 10)
    with caplog.at_level(logging.WARNING):
        first = tiny_model.tokenize([long_sentence, "short"])
        tiny_model.tokenize([long_sentence])
    assert len(first[0]) == 8 and first[0][-1] == 2 and first[0][0] == 0
    assert sum("exceed max_seq_length" in record.getMessage() for record in caplog.records) == 1
    assert tiny_model.score_pairs([long_sentence], [long_sentence]).shape == (1,)


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
