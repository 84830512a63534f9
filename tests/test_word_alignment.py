"""Word alignments: grow-diag-final-and on hand examples, the filters, words and first subwords, the fallback
aligner on a tiny model, the on-disk cache, and the training examples / collator built from links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import AutoModel, BertConfig, PreTrainedTokenizerFast

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.contrastive_align import (
    AlignmentCollator,
    SimilarityAligner,
    align_words,
    build_examples,
    cache_path,
    check_links,
    drop_identical,
    eflomal_available,
    first_subword_positions,
    grow_diag_final_and,
    make_aligner,
    one_to_one,
    split_words,
    symmetrize,
    tokenize_words,
)

WORDS = ["the", "cat", "sleeps", "le", "chat", "dort", "a", "dog", "un", "chien", "runs", "court", "."]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer: every word of WORDS is one token, so positions are predictable."""
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, **{word: 4 + n for n, word in enumerate(WORDS)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]"
    )


def tiny_word_model() -> torch.nn.Module:
    """A random BERT whose embedding output (hidden state 0) depends on the word only: no position signal."""
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(WORDS) + 4,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
    )
    model = AutoModel.from_config(config).eval()
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.zero_()
        model.embeddings.token_type_embeddings.weight.zero_()
    return model


# -- grow-diag-final-and ----------------------------------------------------------------------------------------------


def test_gdfa_grows_from_the_intersection_into_unaligned_words() -> None:
    forward = [(0, 0), (1, 1), (2, 1)]
    backward = [(0, 0), (1, 1), (1, 2)]
    assert grow_diag_final_and(forward, backward) == [(0, 0), (1, 1), (1, 2), (2, 1)]


def test_gdfa_does_not_grow_between_aligned_words() -> None:
    # (0, 1) is in the union and next to both links, but source 0 and target 1 are already aligned.
    assert grow_diag_final_and([(0, 0), (1, 1)], [(0, 0), (1, 1), (0, 1)]) == [(0, 0), (1, 1)]


def test_gdfa_grows_along_diagonals() -> None:
    assert grow_diag_final_and([(0, 0), (1, 1)], [(0, 0)]) == [(0, 0), (1, 1)]


def test_gdfa_final_and_needs_both_words_unaligned() -> None:
    # (3, 3) is far from the intersection: final-and adds it; then (3, 4) has source 3 aligned: "and" refuses it
    # where plain "final" (either word unaligned) would take it.
    assert grow_diag_final_and([(0, 0), (3, 3), (3, 4)], [(0, 0)]) == [(0, 0), (3, 3)]
    assert symmetrize([(0, 0), (3, 3)], [(0, 0)], "intersect") == [(0, 0)]
    assert symmetrize([(0, 1)], [(2, 2)], "union") == [(0, 1), (2, 2)]
    with pytest.raises(ValueError, match="symmetrization"):
        symmetrize([], [], "grow-diag")


# -- filters ---------------------------------------------------------------------------------------------------------


def test_one_to_one_and_identical_filters() -> None:
    assert one_to_one([(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)]) == [(0, 0)]
    assert drop_identical([(0, 0), (1, 1), (2, 2)], ["Paris", "is", "2024"], ["Paris", "est", "2024"]) == [(1, 1)]


def test_links_outside_a_sentence_are_data_errors() -> None:
    assert check_links([[1, 0]], 2, 1, "x") == [(1, 0)]
    with pytest.raises(DataValidationError, match=r"pairs.tsv:3: alignment 2-0 points outside"):
        check_links([(2, 0)], 2, 5, "pairs.tsv:3")


def test_words_and_bad_pairs() -> None:
    assert split_words("Don't stop-now, Anna!") == ["Don't", "stop-now", ",", "Anna", "!"]
    with pytest.raises(DataValidationError, match="2 source but 1 target"):
        tokenize_words(["a", "b"], ["c"], "train")
    with pytest.raises(DataValidationError, match="pair 2 has an empty target"):
        tokenize_words(["a b", "c"], ["d", " "], "train")


def test_first_subword_positions_and_truncation() -> None:
    tokenizer = tiny_tokenizer()
    ids, positions = first_subword_positions(tokenizer, ["the", "cat", "sleeps"], max_length=16)
    assert positions == [1, 2, 3]  # after [CLS]
    assert tokenizer.convert_ids_to_tokens(ids) == ["[CLS]", "the", "cat", "sleeps", "[SEP]"]
    _, cut = first_subword_positions(tokenizer, ["the", "cat", "sleeps"], max_length=3)
    assert cut == [1, None, None]


# -- aligners and the cache -------------------------------------------------------------------------------------------


def test_fallback_aligner_links_mutual_best_words() -> None:
    aligner = SimilarityAligner(tiny_word_model(), tiny_tokenizer(), layer=0)
    source = [["the", "cat", "sleeps", "."]]
    target = [[".", "sleeps", "the", "cat"]]  # the same words, reordered: identical vectors at layer 0
    forward, backward = aligner.align(source, target)
    assert forward == [[(0, 2), (1, 3), (2, 1), (3, 0)]]
    assert symmetrize(forward[0], backward[0]) == [(0, 2), (1, 3), (2, 1), (3, 0)]


def test_missing_eflomal_names_the_fallback() -> None:
    if eflomal_available():
        pytest.skip("eflomal is installed")
    with pytest.raises(UsageError, match="fallback aligner 'similarity'"):
        make_aligner("eflomal")
    assert isinstance(make_aligner("auto", tiny_word_model(), tiny_tokenizer()), SimilarityAligner)
    with pytest.raises(UsageError, match="expected one of"):
        make_aligner("fast_align")


class _CountingAligner:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def cache_key(self) -> str:
        return "counting-1"

    def align(self, source_words, target_words):
        self.calls += 1
        forward = [[(0, 0), (1, 1)] for _ in source_words]
        backward = [[(0, 0), (1, 1), (1, 0)] for _ in source_words]
        return forward, backward


def test_align_words_pipeline_and_cache(tmp_path: Path) -> None:
    aligner = _CountingAligner()
    source, target = [["the", "cat"], ["a", "dog"]], [["le", "chat"], ["a", "chien"]]
    first = align_words(aligner, source, target, cache_dir=tmp_path)
    # gdfa keeps (0,0), (1,1); (1, 0) joins neither (both words aligned); "a" = "a" is dropped as identical.
    assert first == [[(0, 0), (1, 1)], [(1, 1)]]
    path = cache_path(tmp_path, aligner, source, target)
    assert path.is_file() and json.loads(path.read_text())["aligner"] == "counting-1"
    assert align_words(aligner, source, target, cache_dir=tmp_path) == first
    assert aligner.calls == 1  # the second run read the cache
    assert cache_path(tmp_path, aligner, source, [["le", "chat"], ["un", "chien"]]) != path  # content hash
    path.write_text("{not json")
    with pytest.raises(DataValidationError, match=str(path.name)):
        align_words(aligner, source, target, cache_dir=tmp_path)


def test_examples_and_collator_map_links_to_first_subwords() -> None:
    tokenizer = tiny_tokenizer()
    source, target = [["the", "cat", "sleeps"], ["a", "dog"]], [["le", "chat", "dort"], ["un", "chien"]]
    links = [[(0, 0), (2, 2)], []]  # the second pair has no link left: no example
    examples = build_examples(tokenizer, source, target, links, language=1, max_length=16)
    assert len(examples) == 1 and examples[0]["links"] == [(1, 1), (3, 3)]
    examples += build_examples(tokenizer, [["a", "dog"]], [["un", "chien"]], [[(1, 1)]], language=0)
    batch = AlignmentCollator(tokenizer.pad_token_id)(examples)
    assert batch["alignments"].tolist() == [[0, 1, 1], [0, 3, 3], [1, 2, 2]]
    assert batch["languages"].tolist() == [1, 0]
    assert batch["input_ids"].shape == (2, 5) and batch["attention_mask"][1].tolist() == [1, 1, 1, 1, 0]


def test_eflomal_aligner_when_installed() -> None:
    if not eflomal_available():
        pytest.skip("eflomal is not installed (pip install 'bitext-hf[align]')")
    from bitext_hf.families.contrastive_align import EflomalAligner

    aligner = EflomalAligner()
    source = [["the", "cat", "sleeps"], ["the", "dog", "runs"], ["a", "cat", "runs"]] * 20
    target = [["le", "chat", "dort"], ["le", "chien", "court"], ["un", "chat", "court"]] * 20
    forward, backward = aligner.align(source, target)
    assert len(forward) == len(backward) == 60
    assert (1, 1) in symmetrize(forward[0], backward[0])  # cat - chat
    assert aligner.cache_key().startswith("eflomal-2")
