"""Tests for ``bitext_hf.training.train_tokenizer`` and the ``tiny_tokenizer`` fixture."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, DataCollatorForLanguageModeling

from bitext_hf.training import SPECIAL_TOKENS, TokenizerTrainingError, train_tokenizer


def test_special_token_ids_are_xlmr_like(tiny_tokenizer):
    assert SPECIAL_TOKENS == ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
    tok = tiny_tokenizer
    assert (tok.bos_token_id, tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.mask_token_id) == (
        0,
        1,
        2,
        3,
        4,
    )
    assert tok.cls_token_id == 0 and tok.sep_token_id == 2
    assert 250 <= len(tok) <= 300


def test_encoding_wraps_in_bos_eos_without_token_type_ids(tiny_tokenizer):
    encoded = tiny_tokenizer("Le chat dort sur le canapé.")
    assert set(encoded) == {"input_ids", "attention_mask"}
    ids = encoded["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2
    assert tiny_tokenizer.unk_token_id not in ids  # every character of the training corpus is in the vocabulary
    pair = tiny_tokenizer("a b", "c d")["input_ids"]
    assert pair[0] == 0 and pair[-1] == 2 and pair.count(2) == 3


def test_round_trip_restores_text_and_normalizes(tiny_tokenizer):
    text = "Die Kinder spielen im Garten."
    assert tiny_tokenizer.decode(tiny_tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    # NFKC folds full-width letters; runs of whitespace collapse.
    assert tiny_tokenizer("ＡＢ   \t x")["input_ids"] == tiny_tokenizer("AB x")["input_ids"]


def test_unseen_characters_map_to_unk(tiny_tokenizer):
    assert tiny_tokenizer.unk_token_id in tiny_tokenizer("你好")["input_ids"]


def test_batch_padding_and_truncation(tiny_tokenizer):
    batch = tiny_tokenizer(
        ["Hoy llueve.", "Die Besprechung beginnt in zehn Minuten."], padding=True, return_tensors="pt"
    )
    assert batch["input_ids"][0, -1].item() == tiny_tokenizer.pad_token_id
    assert batch["attention_mask"][0].sum() < batch["attention_mask"][1].sum()
    truncated = tiny_tokenizer("Die Besprechung beginnt in zehn Minuten." * 20, truncation=True)["input_ids"]
    assert len(truncated) == tiny_tokenizer.model_max_length == 64
    assert truncated[-1] == 2


def test_save_and_reload_with_auto_tokenizer(tiny_tokenizer, tmp_path):
    tiny_tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "¿Dónde está la estación?"
    assert reloaded(text)["input_ids"] == tiny_tokenizer(text)["input_ids"]
    assert reloaded.mask_token_id == 4 and reloaded.pad_token_id == 1
    assert reloaded.model_max_length == 64


def test_mlm_collator_masks_only_real_tokens(tiny_tokenizer):
    collator = DataCollatorForLanguageModeling(tiny_tokenizer, mlm_probability=0.5, seed=0)
    features = [tiny_tokenizer(t) for t in ["Le ciel est bleu et dégagé.", "Hoy llueve."]]
    batch = collator(features)
    labels, input_ids = batch["labels"], batch["input_ids"]
    assert (labels != -100).any()
    special = torch.isin(labels, torch.tensor([0, 1, 2]))
    assert not special.any()  # <s>, </s> and padding are never prediction targets
    assert (input_ids[labels != -100] == tiny_tokenizer.mask_token_id).any()


def test_trains_on_a_generator(tiny_parallel_corpus):
    tokenizer = train_tokenizer((pair[1] for pair in tiny_parallel_corpus), vocab_size=120, model_max_length=32)
    assert len(tokenizer) == 120
    assert tokenizer.model_max_length == 32


@pytest.mark.parametrize(
    ("texts", "vocab_size", "message"),
    [
        ([], 100, "empty corpus"),
        (["", "   ", "\n"], 100, "empty corpus"),
        (["same sentence"] * 5, 100, "distinct"),
        (["ab cd", "cd ef", "ef ab"], 500, "supports only"),
        (["a b", "c d"], 5, "exceed the 5 special tokens"),
        ("a single string", 100, "single string"),
        ([b"bytes", "text"], 100, "expects strings"),
    ],
)
def test_bad_corpus_or_settings_raise_clear_errors(texts, vocab_size, message):
    with pytest.raises(TokenizerTrainingError, match=message):
        train_tokenizer(texts, vocab_size=vocab_size)


def test_train_or_reuse_tokenizer_keeps_the_vocabulary_of_a_resumed_run(tmp_path, tiny_parallel_corpus):
    from bitext_hf.training import train_or_reuse_tokenizer

    texts = [text for pair in tiny_parallel_corpus for text in pair]
    first = train_or_reuse_tokenizer(texts, output_dir=tmp_path, reuse=False, vocab_size=150)
    assert (tmp_path / "tokenizer" / "tokenizer.json").is_file()
    resumed = train_or_reuse_tokenizer(["unrelated text"] * 3, output_dir=tmp_path, reuse=True, vocab_size=150)
    assert resumed.get_vocab() == first.get_vocab()
    assert resumed("Le chat dort.")["input_ids"] == first("Le chat dort.")["input_ids"]
