"""Tests of bitext_hf.families.onealigner: text-level scoring, block-wise normalization, re-ranking and the two-stage
retrieval, each against the full matrix, the model's own forward or a brute-force definition."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
from onealigner_helpers import batch, tiny_aligner

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families import onealigner as oa
from bitext_hf.families.onealigner import two_stage
from bitext_hf.modeling.onealigner import OneAlignerInputError, OneAlignerModel


@pytest.fixture()
def tiny_model(tiny_tokenizer) -> OneAlignerModel:
    return tiny_aligner(tiny_tokenizer)


def test_text_helpers_agree(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    spanish = [pair[1] for pair in tiny_parallel_corpus[40:50]]
    matrix = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, spanish, batch_size=4)
    assert matrix.shape == (10, 10) and matrix.dtype == torch.float32
    # Blocks of 4: the score of (0, 1) is normalized inside block (sources 0-3, targets 0-3).
    source_ids, source_mask = batch(tiny_model, tiny_tokenizer, english[:4])
    target_ids, target_mask = batch(tiny_model, tiny_tokenizer, spanish[:4])
    with torch.no_grad():
        block = tiny_model(source_ids, source_mask, target_ids, target_mask).scores
    torch.testing.assert_close(matrix[:4, :4], block, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(
        oa.score_pairs(tiny_model, tiny_tokenizer, english[:4], spanish[:4], batch_size=4), block.diagonal()
    )
    assert (
        oa.retrieve(tiny_model, tiny_tokenizer, english, spanish, batch_size=4).tolist()
        == matrix.argmax(dim=1).tolist()
    )
    raw_pairs = oa.score_pairs(tiny_model, tiny_tokenizer, english, spanish, normalize=False)
    raw_matrix = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, spanish, normalize=False)
    torch.testing.assert_close(raw_pairs, raw_matrix.diagonal(), atol=1e-5, rtol=1e-5)


def test_two_stage_equals_full_matrix_when_it_sees_everything(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:12]]
    german = [pair[1] for pair in tiny_parallel_corpus[20:32]]
    # One block and a normalization sample holding every sentence: both paths compute the same scores.
    full = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, german)
    scores, indices = oa.two_stage_retrieve(tiny_model, tiny_tokenizer, english, german, top_k=12, knn_backend="torch")
    expected_scores, expected_indices = full.sort(dim=1, descending=True)
    assert indices[:, 0].tolist() == expected_indices[:, 0].tolist()
    torch.testing.assert_close(torch.from_numpy(scores), expected_scores, atol=1e-5, rtol=1e-5)
    # A smaller K keeps the candidates' own ranking.
    scores_k, indices_k = oa.two_stage_retrieve(tiny_model, tiny_tokenizer, english, german, top_k=3)
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


def test_token_first_stage_matches_its_definition(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    german = [pair[1] for pair in tiny_parallel_corpus[:30]]
    source = oa.encode_tokens(tiny_model, tiny_tokenizer, english, 8)
    target = oa.encode_tokens(tiny_model, tiny_tokenizer, german, 8)
    top_k, neighbours = 6, 12
    candidates = oa.token_candidates(source, target, top_k, token_neighbours=neighbours)
    expected = _reference_token_candidates(source, target, top_k, neighbours)
    assert candidates.shape == (10, top_k)
    for row, reference in zip(candidates.tolist(), expected):
        # The targets that gained come first, in the reference's order; the rest is topped up from pooled kNN.
        assert row[: len(reference)] == reference
        assert len(set(row)) == top_k and all(0 <= index < 30 for index in row)


def test_token_first_stage_ivf_path_with_every_cell_probed_is_exact(
    tiny_model, tiny_tokenizer, tiny_parallel_corpus, monkeypatch
):
    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    german = [pair[1] for pair in tiny_parallel_corpus[:60]]
    source = oa.encode_tokens(tiny_model, tiny_tokenizer, english, 8)
    target = oa.encode_tokens(tiny_model, tiny_tokenizer, german, 8)
    exact = oa.token_candidates(source, target, 5, token_neighbours=8)
    monkeypatch.setattr(two_stage, "EXACT_TOKEN_PRODUCTS", 0)
    approximate = oa.token_candidates(source, target, 5, token_neighbours=8, nprobe=10_000)
    assert approximate.tolist() == exact.tolist()


def test_two_stage_first_stages_and_bad_arguments(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:12]]
    german = [pair[1] for pair in tiny_parallel_corpus[:40]]
    full_top1 = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, german).argmax(dim=1).tolist()
    for first_stage in ("tokens", "pooled"):
        scores, indices = oa.two_stage_retrieve(
            tiny_model, tiny_tokenizer, english, german, top_k=40, first_stage=first_stage
        )
        # K = every target: the first stage only orders candidates, the re-ranked top-1 is the full matrix's.
        assert indices[:, 0].tolist() == full_top1
        assert (scores[:, :-1] >= scores[:, 1:]).all()
    with pytest.raises(OneAlignerInputError, match="first_stage"):
        oa.two_stage_retrieve(tiny_model, tiny_tokenizer, english, german, first_stage="bm25")


def test_mean_pool_similarity_variant(tiny_tokenizer, tiny_parallel_corpus):
    model = tiny_aligner(tiny_tokenizer, similarity="mean_pool")
    english = [pair[0] for pair in tiny_parallel_corpus[:5]]
    french = [pair[1] for pair in tiny_parallel_corpus[:5]]
    vectors_english = oa.encode(model, tiny_tokenizer, english)
    vectors_french = oa.encode(model, tiny_tokenizer, french)
    raw = oa.similarity_matrix(model, tiny_tokenizer, english, french, normalize=False)
    torch.testing.assert_close(raw, vectors_english @ vectors_french.T, atol=1e-5, rtol=1e-5)


def test_encode_is_the_model_encode_and_the_pooled_token_features(tiny_model, tiny_tokenizer, caplog):
    tiny_model.config.max_seq_length = 8
    sentences = ["The cat sleeps.", " ".join(["the dog runs in the park"] * 6), "Hello."]
    with caplog.at_level(logging.WARNING):
        vectors = oa.encode(tiny_model, tiny_tokenizer, sentences, batch_size=2)
    assert sum("exceed max_seq_length" in record.getMessage() for record in caplog.records) == 1
    torch.testing.assert_close(vectors, tiny_model.encode(sentences, tiny_tokenizer, batch_size=2))
    pooled = torch.stack([item.pooled for item in oa.encode_tokens(tiny_model, tiny_tokenizer, sentences, 2)])
    torch.testing.assert_close(vectors, torch.nn.functional.normalize(pooled.cpu(), dim=-1), atol=1e-5, rtol=1e-5)
    with pytest.raises(UsageError, match="no tokenizer"):
        oa.encode(tiny_model, None, sentences)


def test_empty_strings_are_refused(tiny_model, tiny_tokenizer):
    with pytest.raises(OneAlignerInputError, match="sentence 1 is empty"):
        oa.similarity_matrix(tiny_model, tiny_tokenizer, ["The cat.", "  "], ["Le chat.", "Bonjour."])


def test_overlong_sentences_are_truncated_with_one_warning(tiny_model, tiny_tokenizer, caplog):
    tiny_model.config.max_seq_length = 8
    long_sentence = " ".join(["the cat sleeps on the sofa"] * 10)
    with caplog.at_level(logging.WARNING):
        first = oa.tokenize(tiny_model, tiny_tokenizer, [long_sentence, "short"])
        oa.tokenize(tiny_model, tiny_tokenizer, [long_sentence])
    assert len(first[0]) == 8 and first[0][-1] == 2 and first[0][0] == 0
    assert sum("exceed max_seq_length" in record.getMessage() for record in caplog.records) == 1
    assert oa.score_pairs(tiny_model, tiny_tokenizer, [long_sentence], [long_sentence]).shape == (1,)


def test_block_normalization_and_accuracy_are_the_matrix_functions(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:10]]
    german = [pair[1] for pair in tiny_parallel_corpus[20:30]]
    raw = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, german, batch_size=4, normalize=False)
    normalized = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, german, batch_size=4)
    torch.testing.assert_close(oa.normalize_blocks(raw, tiny_model.config.alpha, 4), normalized)
    # Row 0 and column 1 miss their gold pair: 2/3 correct in each direction.
    scores = torch.tensor([[0.1, 0.9, 0.0], [0.0, 0.5, 0.4], [0.0, 0.2, 0.8]])
    accuracy = oa.retrieval_accuracy(scores)
    assert accuracy == pytest.approx({"src2tgt_accuracy": 2 / 3, "tgt2src_accuracy": 2 / 3, "accuracy": 2 / 3})
    with pytest.raises(UsageError, match="square"):
        oa.retrieval_accuracy(scores[:2])


def test_rerank_of_every_target_is_the_sorted_full_matrix(tiny_model, tiny_tokenizer, tiny_parallel_corpus):
    english = [pair[0] for pair in tiny_parallel_corpus[:6]]
    spanish = [pair[1] for pair in tiny_parallel_corpus[40:46]]
    full = oa.similarity_matrix(tiny_model, tiny_tokenizer, english, spanish)
    candidates = torch.arange(5, -1, -1).repeat(6, 1)  # every target, in the wrong order
    scores, indices = oa.rerank(tiny_model, tiny_tokenizer, english, spanish, candidates)
    expected_scores, expected_indices = full.sort(dim=1, descending=True)
    assert indices.tolist() == expected_indices.tolist()
    torch.testing.assert_close(scores, expected_scores, atol=1e-5, rtol=1e-5)


def test_bad_input_is_a_usage_or_data_error(tiny_model, tiny_tokenizer):
    with pytest.raises(UsageError, match="no tokenizer"):
        oa.similarity_matrix(tiny_model, None, ["The cat."], ["Le chat."])
    with pytest.raises(UsageError, match="aligned lists"):
        oa.score_pairs(tiny_model, tiny_tokenizer, ["a b c", "d e f"], ["a b c"])
    with pytest.raises(DataValidationError, match="sentence 0 is a int"):
        oa.encode(tiny_model, tiny_tokenizer, [3])
    with pytest.raises(UsageError, match="outside"):
        oa.rerank(tiny_model, tiny_tokenizer, ["The cat."], ["Le chat."], torch.tensor([[1]]))
    with pytest.raises(UsageError, match="top_k"):
        oa.two_stage_retrieve(tiny_model, tiny_tokenizer, ["The cat."], ["Le chat."], top_k=0)
    # Callers that caught the model family's error still do.
    with pytest.raises(OneAlignerInputError):
        oa.two_stage_retrieve(tiny_model, tiny_tokenizer, [], ["Le chat."])
    assert np.isfinite(oa.score_pairs(tiny_model, tiny_tokenizer, ["The cat."], ["Le chat."]).numpy()).all()
