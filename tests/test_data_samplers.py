"""Samplers (size^alpha, temperature, example budget), PairSet filters and the pair padding collator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from bitext_hf.data.collators import PairCollator, pad_sequences
from bitext_hf.data.filters import drop_overlap, keep_pairs, min_tokens, min_words, split_held_out, tokenize_pairs
from bitext_hf.data.samplers import (
    budget_counts,
    sample_budget,
    sample_indices,
    size_alpha_weights,
    temperature_probabilities,
)
from bitext_hf.data.specs import PairSet
from bitext_hf.errors import DataValidationError, UsageError

# -- samplers ---------------------------------------------------------------------------------------------------------


def test_size_alpha_weights():
    np.testing.assert_allclose(size_alpha_weights([100, 25, 1], 1.0), np.array([100, 25, 1]) / 126)
    np.testing.assert_allclose(size_alpha_weights([100, 25, 1], 0.5), np.array([10, 5, 1]) / 16)
    np.testing.assert_allclose(size_alpha_weights([100, 25, 1], 0.0), [1 / 3] * 3)


def test_temperature_probabilities_follow_the_definition():
    sizes = np.array([900, 90, 10])
    for temperature in (0.5, 1.0, 2.0, 5.0):
        expected = (sizes / sizes.sum()) ** (1 / temperature)
        np.testing.assert_allclose(temperature_probabilities(sizes.tolist(), temperature), expected / expected.sum())
    np.testing.assert_allclose(temperature_probabilities([900, 90, 10], math.inf), [1 / 3] * 3)
    sharp = temperature_probabilities([900, 90, 10], 1e-3)  # computed in log space: no 0/0
    assert np.isfinite(sharp).all() and sharp[0] == pytest.approx(1.0)
    assert temperature_probabilities([1, 2], 3.0).sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: size_alpha_weights([], 0.5), "sizes is empty"),
        (lambda: size_alpha_weights([3, 0], 0.5), r"sizes\[1\] is 0"),
        (lambda: size_alpha_weights([3], 1.5), r"alpha must be in \[0, 1\]"),
        (lambda: temperature_probabilities([3], 0), "temperature must be > 0"),
        (lambda: temperature_probabilities([3], float("nan")), "temperature must be > 0"),
        (lambda: budget_counts([3], 0), "budget must be a positive"),
        (lambda: budget_counts([3], 2, alpha=0.5, temperature=2), "not both"),
        (lambda: sample_indices(3, 4, 0), "replacement=True"),
    ],
)
def test_sampler_arguments_are_validated(call, message):
    with pytest.raises(UsageError, match=message):
        call()


def test_budget_counts_without_replacement_never_exceed_sizes():
    counts = budget_counts([1000, 50, 5], 300, alpha=0.0)  # uniform wants 100 each; the 5 is all the last one has
    assert counts.tolist() == [245, 50, 5]  # what the two small sets cannot give goes to the large one
    assert budget_counts([1000, 50, 5], 2000).tolist() == [1000, 50, 5]  # the budget takes everything
    by_size = budget_counts([600, 300, 100], 100)  # alpha = 1 by default: proportional to size
    assert by_size.tolist() == [60, 30, 10]
    assert budget_counts([3, 3, 3], 7).tolist() == [3, 2, 2]  # deterministic rounding, sums to the budget


def test_budget_counts_with_replacement_follow_the_weights():
    counts = budget_counts([1000, 10], 600, temperature=math.inf, replacement=True)
    assert counts.tolist() == [300, 300]  # the small set is oversampled


def test_sample_indices_are_seeded_and_oversample_by_whole_passes():
    first, again = sample_indices(50, 20, 7), sample_indices(50, 20, 7)
    assert first.tolist() == again.tolist() and len(set(first.tolist())) == 20
    assert sample_indices(50, 20, 8).tolist() != first.tolist()
    repeated = sample_indices(4, 10, 0, replacement=True)
    assert sorted(np.bincount(repeated, minlength=4).tolist()) == [2, 2, 3, 3]


def test_sample_budget_draws_from_each_pairset():
    big = PairSet("fr", "en", "x", [f"f{i}" for i in range(100)], [f"e{i}" for i in range(100)], name="fr-en:x")
    small = PairSet("de", "en", "y", ["d0", "d1"], ["e0", "e1"], name="de-en:y")
    drawn = sample_budget([big, small], 10, alpha=0.0, seed=3)
    assert [len(pairs) for pairs in drawn] == [8, 2]
    assert all(src[1:] == tgt[1:] for src, tgt in drawn[0])  # pairs stay aligned
    assert [list(p) for p in drawn] == [list(p) for p in sample_budget([big, small], 10, alpha=0.0, seed=3)]


# -- filters ----------------------------------------------------------------------------------------------------------


def _pairs(n: int) -> PairSet:
    return PairSet("fr", "en", "t", [f"src {i}" for i in range(n)], [f"tgt {i}" for i in range(n)], name="fr-en:t")


def test_split_held_out_is_deterministic_and_disjoint():
    pairs = _pairs(30)
    train, held = split_held_out(pairs, 5, seed=1)
    again_train, again_held = split_held_out(pairs, 5, seed=1)
    assert list(held) == list(again_held) and list(train) == list(again_train)
    assert len(held) == 5 and len(train) == 25
    assert not set(train.src) & set(held.src)
    assert held.src == sorted(held.src, key=lambda text: int(text.split()[1]))  # original order
    assert list(split_held_out(pairs, 5, seed=2)[1]) != list(held)


def test_split_held_out_drops_leaked_duplicates_and_respects_eligibility():
    pairs = PairSet("fr", "en", "t", ["a", "b", "c", "d"], ["A", "B", "A", "D"], name="fr-en:t")
    train, held = split_held_out(pairs, 1, seed=0, eligible=lambda src, tgt: src == "a")
    assert list(held) == [("a", "A")]
    assert list(train) == [("b", "B"), ("d", "D")]  # ("c", "A") would leak the held-out target
    train_kept, _ = split_held_out(pairs, 1, seed=0, eligible=lambda src, tgt: src == "a", drop_leaked=False)
    assert len(train_kept) == 3


def test_split_held_out_refuses_too_few_pairs():
    with pytest.raises(DataValidationError, match=r"fr-en:t: 3 pairs, not enough to hold out 3"):
        split_held_out(_pairs(3), 3)
    with pytest.raises(DataValidationError, match="only 0 pairs pass"):
        split_held_out(_pairs(3), 1, eligible=lambda src, tgt: False)
    with pytest.raises(UsageError, match="n"):
        split_held_out(_pairs(3), 0)


def test_drop_overlap_and_word_filters():
    pairs = PairSet("fr", "en", "t", ["un chat", "deux", "trois chats noirs"], ["a cat", "two", "three black cats"])
    assert list(drop_overlap(pairs, ["two ", "nothing"])) == [
        ("un chat", "a cat"),
        ("trois chats noirs", "three black cats"),
    ]
    assert drop_overlap(pairs, ["un chat"]).src == ["deux", "trois chats noirs"]
    assert min_words(pairs, 2).src == ["un chat", "trois chats noirs"]
    assert keep_pairs(pairs, lambda src, tgt: "cat" in tgt).tgt == ["a cat", "three black cats"]


def _word_tokenizer():
    """A transformers tokenizer (one token a word) that adds <s> ... </s>, built in milliseconds."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocabulary = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    backend = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def test_min_tokens_with_a_callable_and_a_transformers_tokenizer():
    pairs = PairSet("fr", "en", "t", ["a b c d e", "a b c", "a b c d e f"], ["v w x y z", "v w x y z", "x"])
    assert min_tokens(pairs, 5, lambda texts: [text.split() for text in texts]).src == ["a b c d e"]
    assert len(min_tokens(pairs, 0, str.split)) == 3
    tokenizer = _word_tokenizer()
    assert len(tokenizer("a b c")["input_ids"]) == 5  # with <s> </s>, which min_tokens must not count
    assert min_tokens(pairs, 4, tokenizer).src == ["a b c d e"]
    examples = tokenize_pairs(pairs, tokenizer, max_length=5, min_tokens=3)  # one tokenization: ids and filter
    assert [len(example["src_input_ids"]) for example in examples] == [5, 5]  # <s> a b c </s>: truncated to 5
    assert examples[1]["tgt_input_ids"][0] == 0 and examples[1]["tgt_input_ids"][-1] == 2
    assert len(tokenize_pairs(pairs, tokenizer, max_length=5, min_tokens=4)) == 0  # 3 words fit after truncation
    batch = PairCollator(tokenizer.pad_token_id)(tokenize_pairs(pairs, tokenizer))
    assert batch["src_input_ids"].shape == (3, 8) and batch["tgt_attention_mask"].sum().item() == 7 + 7 + 3


# -- collators --------------------------------------------------------------------------------------------------------


def test_pad_sequences():
    ids, mask = pad_sequences([[5, 6, 7], [8], torch.tensor([9, 10])], pad_id=1)
    assert ids.tolist() == [[5, 6, 7], [8, 1, 1], [9, 10, 1]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0], [1, 1, 0]]
    assert ids.dtype == mask.dtype == torch.long
    wide, wide_mask = pad_sequences([[5, 6, 7]], pad_id=0, pad_to_multiple_of=8)
    assert wide.shape == wide_mask.shape == (1, 8) and wide_mask.sum() == 3
    with pytest.raises(ValueError, match="empty batch"):
        pad_sequences([], pad_id=0)


def test_pair_collator_pads_both_sides_and_batches_other_keys():
    batch = PairCollator(pad_token_id=1)(
        [
            {"src_input_ids": [0, 5, 2], "tgt_input_ids": [0, 2], "label": 1},
            {"src_input_ids": [0, 2], "tgt_input_ids": [0, 6, 7, 2], "label": 0},
        ]
    )
    assert set(batch) == {"src_input_ids", "src_attention_mask", "tgt_input_ids", "tgt_attention_mask", "label"}
    assert batch["src_input_ids"].tolist() == [[0, 5, 2], [0, 2, 1]]
    assert batch["tgt_attention_mask"].tolist() == [[1, 1, 0, 0], [1, 1, 1, 1]]
    assert batch["label"].tolist() == [1, 0]
    with pytest.raises(KeyError, match="tgt_input_ids"):
        PairCollator(pad_token_id=1)([{"src_input_ids": [0]}])
