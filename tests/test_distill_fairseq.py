"""Laser3 training as fairseq's laser_distillation (the paper's code) does it: batches drawn across languages by
size ** alpha, the task weights multiplying the losses (``--lambda-mask 0.09``), MLM on blocks of consecutive
monolingual sentences (``TokenBlockDataset``); the earlier reading (weights as sampling probabilities) as an option."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from bitext_hf.data import PairSet
from bitext_hf.errors import UsageError
from bitext_hf.families.laser3 import (
    DistillationBatches,
    DistillationLoss,
    Stream,
    TaskSampler,
    TeacherEmbeddingCache,
    pack_blocks,
)
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig

DIM = 24


class HashTeacher:
    """A fixed random vector per text: a teacher without a model."""

    def encode(self, sentences, batch_size=64, show_progress=False):
        rows = [np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIM) for text in sentences]
        return np.asarray(rows, dtype=np.float32)


@pytest.fixture
def french(tiny_parallel_corpus_by_language):
    pairs = tiny_parallel_corpus_by_language["fr"]
    return PairSet("fr", "en", "tiny", [xx for _, xx in pairs], [en for en, _ in pairs])


def batches_for(tokenizer, bitext, tmp_path, **options):
    options = {"total_steps": 200, "batch_size": 4, "seed": 3, **options}
    cache = TeacherEmbeddingCache(tmp_path / "cache", HashTeacher(), "hash")
    return DistillationBatches(tokenizer=tokenizer, cache=cache, bitexts=[bitext], **options)


def shares(sampler: TaskSampler, steps: int = 20000) -> dict[tuple[str, str], float]:
    counts: dict[tuple[str, str], int] = {}
    for step in range(steps):
        stream = sampler.sample(step)
        counts[stream.task, stream.name] = counts.get((stream.task, stream.name), 0) + 1
    return {key: count / steps for key, count in counts.items()}


# ---------------------------------------------------------------- sampling


def test_batches_follow_sizes_to_the_alpha_across_tasks():
    # Three languages of 100, 400 and 900 examples: with alpha 0.5 their shares go as 10 : 20 : 30, whatever the
    # task weights (they multiply the losses). The earlier reading gave MLM 0.09 / 2.09 of the batches.
    streams = [Stream("distil", "ff", 100), Stream("self", "eng", 400), Stream("mask", "wo", 900)]
    sampler = TaskSampler(streams, alpha=0.5, seed=1)
    observed = shares(sampler)
    for stream, expected in zip(streams, (1 / 6, 2 / 6, 3 / 6)):
        assert observed[stream.task, stream.name] == pytest.approx(expected, abs=0.012), observed
    assert sampler.task_probabilities() == pytest.approx({"distil": 1 / 6, "self": 2 / 6, "mask": 3 / 6})
    assert sampler.loss_weights == {"distil": 1.0, "self": 1.0, "mask": 0.09}
    by_size = TaskSampler(streams, alpha=1.0).task_probabilities()
    assert by_size == pytest.approx({"distil": 100 / 1400, "self": 400 / 1400, "mask": 900 / 1400})


def test_a_languages_tasks_share_its_weight_by_size():
    # fairseq's joint weighting groups a language's datasets of every task: Wolof (300 pairs + 100 MLM blocks) and
    # English (400) weigh the same, and inside Wolof the MLM blocks get a quarter.
    streams = [Stream("distil", "wo", 300), Stream("mask", "wo", 100), Stream("self", "eng", 400)]
    probabilities = TaskSampler(streams, alpha=0.0).task_probabilities()
    assert probabilities == pytest.approx({"distil": 0.375, "mask": 0.125, "self": 0.5})


def test_default_alpha_is_fairseqs_joint_weighting():
    # fairseq's --joint-weighting-alpha 0.09 repeats a language (f_max / f) ** 0.09 times: shares go as size ** 0.91.
    sizes = {"ff": 100, "eng": 10000}
    upsampled = {name: size * (max(sizes.values()) / size) ** 0.09 for name, size in sizes.items()}
    expected = upsampled["ff"] / sum(upsampled.values())
    sampler = TaskSampler([Stream("distil", "ff", 100), Stream("self", "eng", 10000)])
    assert sampler.task_probabilities()["distil"] == pytest.approx(expected)


def test_a_task_of_weight_zero_draws_no_batch():
    streams = [Stream("distil", "wo", 10), Stream("mask", "wo", 1000)]
    sampler = TaskSampler(streams, task_weights={"distil": 1.0, "self": 1.0, "mask": 0.0})
    assert sampler.task_probabilities() == {"distil": 1.0}
    with pytest.raises(UsageError, match="have weight 0"):
        TaskSampler(streams, task_weights={"distil": 0.0, "mask": 0.0})
    with pytest.raises(UsageError, match="task_sampling must be one of"):
        TaskSampler(streams, task_sampling="temperature")


def test_mlm_share_of_batches_counts_blocks(tiny_tokenizer, french, tmp_path):
    monolingual = {"wo": [f"{text} {text}" for text in french.src] * 5}
    batches = batches_for(tiny_tokenizer, french, tmp_path, monolingual=monolingual, mlm_languages=["wo"])
    sizes = {(stream.task, stream.name): stream.size for stream in batches.sampler.streams}
    assert sizes[("mask", "wo")] == len(batches._mlm_ids["wo"]) < len(monolingual["wo"])
    expected = TaskSampler([Stream(task, name, size) for (task, name), size in sizes.items()], alpha=0.91)
    assert batches.sampler.task_probabilities() == pytest.approx(expected.task_probabilities())
    drawn = [batches[step]["task"] for step in range(0, 200, 10)]
    assert set(drawn) >= {"distil", "mask"}


# ---------------------------------------------------------------- loss weights


def test_the_mlm_loss_is_multiplied_by_its_weight(tiny_tokenizer, french, tmp_path):
    torch.manual_seed(0)
    config = Laser3StudentConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        projection_dim=DIM,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    student = Laser3Student(config).eval()
    loss_fn = DistillationLoss()
    for task_sampling, expected_weight in (("size_alpha", 0.09), ("probability", 1.0)):
        batches = batches_for(tiny_tokenizer, french, tmp_path, mlm_languages=["fr"], task_sampling=task_sampling)
        mask = next(batches[step] for step in range(200) if batches[step]["task"] == "mask")
        distil = next(batches[step] for step in range(200) if batches[step]["task"] == "distil")
        with torch.no_grad():
            for batch, weight in ((mask, expected_weight), (distil, 1.0)):
                plain = loss_fn.batch_loss(student, batch)
                loss, parts = loss_fn(student, batch)
                assert loss.item() == pytest.approx(weight * plain.item(), rel=1e-6), (task_sampling, batch["task"])
                # The logged part is the task's own loss, unweighted: the MLM cross-entropy reads as one.
                assert parts[f"loss_{batch['task']}"].item() == pytest.approx(plain.item(), rel=1e-6)
    custom = batches_for(
        tiny_tokenizer, french, tmp_path, mlm_languages=["fr"], task_weights={"distil": 1.0, "self": 0.5, "mask": 0.3}
    )
    assert {custom[step]["task"]: custom[step]["loss_weight"] for step in range(60)} == {
        "distil": 1.0,
        "self": 0.5,
        "mask": 0.3,
    }


# ---------------------------------------------------------------- MLM blocks


def test_pack_blocks_fills_blocks_with_whole_consecutive_sentences():
    sequences = [[1, 1], [2, 2, 2], [3], [4, 4, 4, 4, 4, 4, 4, 4], [5, 5]]
    assert pack_blocks(sequences, capacity=7, separator=0) == [
        [1, 1, 0, 2, 2, 2, 0],  # 7 tokens: [3] and its separator would make 9
        [3, 0],  # the next sentence does not fit: it is a block of its own (the caller truncates it)
        [4, 4, 4, 4, 4, 4, 4, 4, 0],
        [5, 5, 0],
    ]
    assert pack_blocks([], capacity=5, separator=0) == []


def test_an_mlm_example_holds_consecutive_sentences_up_to_the_max_length(tiny_tokenizer, french, tmp_path):
    max_length = 64
    monolingual = [*french.src, *french.src]
    batches = batches_for(
        tiny_tokenizer,
        french,
        tmp_path,
        monolingual={"fr": monolingual},
        mlm_languages=["fr"],
        task_weights={"distil": 0.0, "self": 0.0, "mask": 1.0},
        max_length=max_length,
        batch_size=64,
    )
    bos, eos, pad = tiny_tokenizer.bos_token_id, tiny_tokenizer.eos_token_id, tiny_tokenizer.pad_token_id
    ids = tiny_tokenizer(monolingual, add_special_tokens=False)["input_ids"]
    batch = batches[0]
    labels = batch["mlm_labels"]
    rows = torch.where(labels != -100, labels, batch["input_ids"])  # the examples before masking
    assert rows.shape[1] <= max_length and len(rows) == len(batches._mlm_ids["fr"])
    sentences_per_row, position = [], 0
    for row in rows.tolist():
        row = [token for token in row if token != pad]
        assert row[0] == bos and row[-1] == eos
        pieces = _split(row[1:-1], eos)
        # The row is the next sentences of the text in order, each ended by </s> ...
        assert pieces == ids[position : position + len(pieces)]
        position += len(pieces)
        sentences_per_row.append(len(pieces))
        # ... as many as fit: the next sentence would not.
        if position < len(ids):
            assert len(row) + len(ids[position]) + 1 > max_length
    assert position == len(ids), "every sentence is in one block"
    assert np.mean(sentences_per_row) >= 2.5, sentences_per_row
    # The earlier reading is kept: one sentence per example.
    single = batches_for(
        tiny_tokenizer,
        french,
        tmp_path,
        monolingual={"fr": monolingual},
        mlm_languages=["fr"],
        mlm_break_mode="eos",
        task_weights={"distil": 0.0, "self": 0.0, "mask": 1.0},
        max_length=max_length,
    )
    assert len(single._mlm_ids["fr"]) == len(monolingual)
    with pytest.raises(UsageError, match="mlm_break_mode"):
        batches_for(tiny_tokenizer, french, tmp_path, mlm_break_mode="none")


def _split(tokens: list[int], separator: int) -> list[list[int]]:
    pieces, piece = [], []
    for token in tokens:
        if token == separator:
            pieces.append(piece)
            piece = []
        else:
            piece.append(token)
    return [*pieces, piece]


def test_mlm_batches_hold_mlm_batch_size_blocks_and_the_others_batch_size_sentences(tiny_tokenizer, french, tmp_path):
    # fairseq batches by tokens, so its MLM batches of long blocks hold fewer examples: mlm_batch_size says how many.
    batches = batches_for(
        tiny_tokenizer,
        french,
        tmp_path,
        monolingual={"fr": [*french.src, *french.src, *french.src]},
        mlm_languages=["fr"],
        max_length=32,
        batch_size=6,
        mlm_batch_size=2,
    )
    sizes = {task: set() for task in ("distil", "self", "mask")}
    for step in range(60):
        batch = batches[step]
        sizes[batch["task"]].add(len(batch["input_ids"]))
    assert sizes == {"distil": {6}, "self": {6}, "mask": {2}}
    with pytest.raises(UsageError, match="mlm_batch_size"):
        batches_for(tiny_tokenizer, french, tmp_path, mlm_batch_size=0)


# ---------------------------------------------------------------- did MLM learn context?


def test_unigram_entropy_is_the_loss_of_a_head_that_ignores_the_context():
    from bitext_hf.families.laser3 import unigram_entropy

    assert unigram_entropy([[5, 6], [5, 6, 9]], ignored=[9]) == pytest.approx((np.log(2), 4))
    assert unigram_entropy([[5, 5, 5, 7]]) == pytest.approx((-(0.75 * np.log(0.75) + 0.25 * np.log(0.25)), 4))
    assert unigram_entropy([[9, 9]], ignored=[9])[1] == 0 and np.isnan(unigram_entropy([])[0])


def test_mlm_learning_check_needs_the_loss_a_margin_below_the_entropy():
    from bitext_hf.families.laser3 import MLM_CONTEXT_MARGIN, mlm_learning_check

    history = [{"loss": 1.0, "loss_distil": 0.5}, {"loss": 1.0, "loss_mask": 7.5}, {"loss": 1.0, "loss_mask": 6.2}]
    assert mlm_learning_check(6.8, history)["learned context"]  # 0.6 nats below
    check = mlm_learning_check(6.6, history)  # 0.4 nats below: frequency only
    assert check == {"final loss": 6.2, "unigram entropy": 6.6, "margin": MLM_CONTEXT_MARGIN, "learned context": False}
    assert mlm_learning_check(6.6, history[:1]) is None  # no MLM in the run


def test_the_batches_entropy_counts_what_mlm_can_mask(tiny_tokenizer, french, tmp_path):
    from bitext_hf.families.laser3 import unigram_entropy

    monolingual = {"wo": [f"{text} {text}" for text in french.src] * 5, "fr": list(french.src)}
    batches = batches_for(tiny_tokenizer, french, tmp_path, monolingual=monolingual, mlm_languages=["wo", "fr"])
    entropy = batches.mlm_unigram_entropy()
    eos = tiny_tokenizer.eos_token_id
    wo, wo_tokens = unigram_entropy(batches._mlm_ids["wo"], [eos])
    fr, fr_tokens = unigram_entropy(batches._mlm_ids["fr"], [eos])
    assert entropy["wo"] == pytest.approx(wo) and entropy["fr"] == pytest.approx(fr)
    assert entropy["mean"] == pytest.approx((wo * wo_tokens + fr * fr_tokens) / (wo_tokens + fr_tokens))
    assert batches_for(tiny_tokenizer, french, tmp_path).mlm_unigram_entropy() == {}


def test_the_card_warns_when_mlm_learned_no_context():
    from bitext_hf.families.laser3.export import model_card

    results = {"n_train_pairs": {"wo": 10}, "global_step": 5000}
    check = {"final loss": 6.9, "unigram entropy": 6.6, "margin": 0.5, "learned context": False}
    card = model_card(
        languages=["wo"], teacher="default", training_data=["wo=gettext"], results=results | {"mlm": check}
    )
    assert "Its MLM task learned no context" in card and "6.900 nats" in card and "--mask_weight 0" in card
    learned = model_card(
        languages=["wo"],
        teacher="default",
        training_data=["wo=gettext"],
        results=results | {"mlm": check | {"learned context": True}},
    )
    assert "learned no context" not in learned


def test_the_recipe_reports_and_warns_when_mlm_learned_no_context(tiny_tokenizer, french, tmp_path, caplog):
    from bitext_hf.families.laser3.recipe import check_mlm_learning

    monolingual = {"wo": [f"{text} {text}" for text in french.src] * 5}
    batches = batches_for(tiny_tokenizer, french, tmp_path, monolingual=monolingual, mlm_languages=["wo"])
    entropy = batches.mlm_unigram_entropy()["mean"]
    assert check_mlm_learning(batches, [{"loss": 1.0, "loss_distil": 0.5}]) is None  # no MLM logged
    with caplog.at_level("WARNING", logger="distill_wolof"):
        check = check_mlm_learning(batches, [{"loss": 1.0, "loss_mask": entropy + 0.1}])
    assert check["learned context"] is False and check["unigram entropy"] == pytest.approx(entropy, abs=1e-4)
    assert "learned no context" in caplog.text and "--mask_weight 0" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="distill_wolof"):
        assert check_mlm_learning(batches, [{"loss": 1.0, "loss_mask": entropy - 1.0}])["learned context"]
    assert "learned no context" not in caplog.text
