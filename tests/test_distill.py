"""Distillation components: curriculum, masking, task mixing, teacher cache, loss, training dynamics, resume,
bad input."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from bitext_hf.data import DataValidationError, PairSet, load_pairs, read_lines
from bitext_hf.data.filters import split_held_out
from bitext_hf.families.laser3 import (
    DistillationBatches,
    DistillationDataError,
    DistillationLoss,
    SentenceMaskingCollator,
    Stream,
    StudentEncoder,
    TaskSampler,
    TeacherEmbeddingCache,
    curriculum_ratios,
    curriculum_stage,
    distillation_term,
    prefix_length,
    prefix_texts_and_ids,
)
from bitext_hf.families.laser3.curriculum import prefix_cuts
from bitext_hf.families.laser3.data import ENGLISH
from bitext_hf.modeling.laser3 import Laser3Student, Laser3StudentConfig


class CountingTeacher:
    """A frozen torch teacher (a random tiny Laser3Student) behind the Encoder protocol, counting what it encodes."""

    def __init__(self, tokenizer, dim: int = 24) -> None:
        torch.manual_seed(123)
        config = Laser3StudentConfig(
            vocab_size=len(tokenizer),
            hidden_size=dim,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
        self.model = Laser3Student(config).eval().requires_grad_(False)
        self.encoder = StudentEncoder(self.model, tokenizer, max_length=64)
        self.dim = dim
        self.encoded = 0

    def encode(self, sentences, batch_size=64, show_progress=False):
        self.encoded += len(sentences)
        return self.encoder.encode(sentences, batch_size=batch_size)


def tiny_student(tokenizer, projection_dim: int = 24, seed: int = 0, dropout: float = 0.0) -> Laser3Student:
    torch.manual_seed(seed)
    config = Laser3StudentConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        projection_dim=projection_dim,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return Laser3Student(config)


@pytest.fixture
def bitexts(tiny_parallel_corpus_by_language):
    return [
        PairSet(language, "en", "tiny", [xx for _, xx in pairs], [en for en, _ in pairs])
        for language, pairs in tiny_parallel_corpus_by_language.items()
    ]


# ---------------------------------------------------------------- curriculum


@pytest.mark.parametrize(
    ("increment", "expected"),
    [
        (0.1, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
        (0.2, [0.2, 0.4, 0.6, 0.8, 1.0]),
        (0.3, [0.3, 0.6, 0.9, 1.0]),
        (1.0, [1.0]),
    ],
)
def test_curriculum_ratios(increment, expected):
    assert curriculum_ratios(increment) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("num_subwords", "ratio", "expected"),
    [
        (10, 0.1, 1),
        (10, 0.3, 3),
        (10, 1.0, 10),
        (7, 0.5, 4),
        (7, 0.1, 1),
        (3, 0.2, 1),
        (1, 0.1, 1),
        (0, 0.5, 0),
        (20, 0.7, 14),
        (9, 0.9, 9),
    ],
)
def test_prefix_length(num_subwords, ratio, expected):
    assert prefix_length(num_subwords, ratio) == expected


def test_curriculum_stage_splits_steps_evenly():
    stages = [curriculum_stage(step, 100, 10) for step in range(100)]
    assert stages == [step // 10 for step in range(100)]
    assert curriculum_stage(99, 100, 4) == 3 and curriculum_stage(0, 100, 4) == 0


def test_curriculum_fraction_gives_the_rest_to_whole_sentences():
    # 10 stages, the 9 partial ones share the first 45 of 100 steps (5 each), whole sentences from step 45 on.
    stages = [curriculum_stage(step, 100, 10, partial_fraction=0.45) for step in range(100)]
    assert stages[:45] == [step // 5 for step in range(45)]
    assert stages[45:] == [9] * 55
    assert [curriculum_stage(step, 10, 3, partial_fraction=0.0) for step in range(10)] == [2] * 10
    with pytest.raises(ValueError, match="partial_fraction"):
        curriculum_stage(0, 10, 3, partial_fraction=1.0)


def test_prefix_texts_and_ids_cut_both_sides(tiny_tokenizer):
    texts = ["Save the file before closing.", "Enregistrez le fichier avant de fermer."]
    full = tiny_tokenizer(texts, add_special_tokens=False)["input_ids"]
    for ratio in curriculum_ratios(0.1):
        prefix_texts, prefix_ids = prefix_texts_and_ids(texts, tiny_tokenizer, ratio)
        for text, ids, whole, cut in zip(texts, prefix_ids, full, prefix_texts):
            assert ids == whole[: prefix_length(len(whole), ratio)]
            assert text.startswith(cut) and cut
    assert prefix_texts_and_ids(texts, tiny_tokenizer, 1.0)[0] == texts
    short = prefix_texts_and_ids(texts, tiny_tokenizer, 0.1)[0]
    assert all(len(cut) < len(text) for cut, text in zip(short, texts))


def curriculum_batches(tokenizer, bitexts, cache, total_steps, increment, **options):
    """Distil batches of the first bitext only, its language on the curriculum."""
    return DistillationBatches(
        tokenizer=tokenizer,
        cache=cache,
        bitexts=bitexts[:1],
        curriculum_languages=[bitexts[0].src_lang],
        total_steps=total_steps,
        batch_size=8,
        task_weights={"distil": 1.0, "self": 0.0, "mask": 0.0},
        curriculum_increment=increment,
        **options,
    )


def test_batches_follow_the_curriculum(tiny_tokenizer, bitexts, tmp_path):
    cache = TeacherEmbeddingCache(tmp_path, CountingTeacher(tiny_tokenizer), "counting")
    batches = curriculum_batches(tiny_tokenizer, bitexts, cache, 50, 0.2)
    full_lengths = {
        text: len(ids)
        for text, ids in zip(bitexts[0].src, tiny_tokenizer(bitexts[0].src, add_special_tokens=False)["input_ids"])
    }
    longest = max(full_lengths.values())
    for step in range(50):
        batch = batches[step]
        ratio = batch["ratio"]
        assert ratio == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0][step // 10])
        real_lengths = batch["attention_mask"].sum(dim=1) - 2
        assert int(real_lengths.max()) <= prefix_length(longest, ratio)
    # Teacher embeddings of every stage were computed once each: 5 stages x 20 English sentences.
    assert cache.teacher.encoded == 5 * len(bitexts[0])


def test_use_tokenizer_cuts_english_prefixes_with_its_own_pieces():
    from bitext_hf.encoders.use import UseTokenizer

    texts = ["Save the file before closing.", "Open"]
    teacher = UseTokenizer()
    encoded = teacher(texts, add_special_tokens=False, return_offsets_mapping=True)
    # The same pieces as the encoder's ids (less BOS/EOS), with offsets into the original texts.
    assert encoded["input_ids"] == [ids[1:-1] for ids in teacher.encode(texts)]
    assert encoded["offset_mapping"][1] == [(0, 4)]
    cuts = prefix_cuts(texts, teacher, [0.1, 1.0], max_length=62)
    assert cuts[0.1][0] == ["Save", "Open"] and cuts[1.0][0] == texts


def test_batches_cut_english_with_the_teacher_tokenizer(tiny_tokenizer, bitexts, tmp_path):
    from bitext_hf.encoders.use import UseTokenizer

    cache = TeacherEmbeddingCache(tmp_path, CountingTeacher(tiny_tokenizer), "counting")
    curriculum_batches(tiny_tokenizer, bitexts, cache, 10, 0.5, teacher_tokenizer=UseTokenizer())
    expected = prefix_cuts(bitexts[0].tgt, UseTokenizer(), [0.5], max_length=126)[0.5][0]
    assert cache.get(expected, 0.5).shape[0] == len(expected)
    assert cache.teacher.encoded == 2 * len(bitexts[0])  # the 50% cuts were the teacher tokenizer's: cached


# ---------------------------------------------------------------- masking


def masked_with_collator(tokenizer, input_ids, seed=0):
    collator = SentenceMaskingCollator(tokenizer, mlm_probability=0.15)
    collator.generator = torch.Generator().manual_seed(seed)
    specials = torch.tensor([tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id])
    return collator.torch_mask_tokens(input_ids.clone(), special_tokens_mask=torch.isin(input_ids, specials))


def test_masking_rate_and_labels(tiny_tokenizer):
    bos, eos, pad, mask = (tiny_tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "<mask>"))
    input_ids = torch.randint(5, len(tiny_tokenizer), (400, 50), generator=torch.Generator().manual_seed(1))
    input_ids[:, 0], input_ids[:, -1] = bos, eos
    input_ids[:200, 40:] = pad
    masked, labels = masked_with_collator(tiny_tokenizer, input_ids)
    maskable = (input_ids != bos) & (input_ids != eos) & (input_ids != pad)
    is_masked = labels != -100
    assert is_masked.sum().item() / maskable.sum().item() == pytest.approx(0.15, abs=0.01)
    assert not (is_masked & ~maskable).any(), "special tokens and padding are never masked"
    assert torch.equal(labels[is_masked], input_ids[is_masked])
    # The paper's masking: every chosen token becomes <mask> (no 10% random, no 10% kept as in BERT's 80/10/10).
    assert (masked[is_masked] == mask).all()
    assert torch.equal(masked[~is_masked], input_ids[~is_masked])


def test_every_short_sentence_gets_a_mask(tiny_tokenizer):
    bos, eos, pad, mask = (tiny_tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "<mask>"))
    input_ids = torch.tensor([[bos, 7, eos, pad, pad]] * 100)
    masked, labels = masked_with_collator(tiny_tokenizer, input_ids)
    assert ((labels != -100).sum(dim=1) == 1).all() and (masked[:, 1] == mask).all()


def test_mlm_batches_are_a_function_of_the_step(tiny_tokenizer, bitexts, tmp_path):
    def mask_batches():
        batches = DistillationBatches(
            tokenizer=tiny_tokenizer,
            cache=TeacherEmbeddingCache(tmp_path, CountingTeacher(tiny_tokenizer), "counting"),
            bitexts=bitexts[:1],
            mlm_languages=[bitexts[0].src_lang],
            total_steps=6,
            batch_size=8,
            task_weights={"distil": 0.0, "self": 0.0, "mask": 1.0},
        )
        return [batches[step] for step in (5, 0, 3)]

    first, again = mask_batches(), mask_batches()
    for one, other in zip(first, again):
        assert torch.equal(one["input_ids"], other["input_ids"]) and torch.equal(
            one["mlm_labels"], other["mlm_labels"]
        )
    assert not torch.equal(first[0]["mlm_labels"], first[2]["mlm_labels"])


# ---------------------------------------------------------------- task mixing


def test_task_mixing_proportions_with_probability_sampling():
    # task_sampling="probability": this package's earlier reading, the weights are the tasks' probabilities (the
    # default is fairseq's reading: tests/test_distill_fairseq.py).
    streams = [
        Stream("distil", "wo", 900),
        Stream("distil", "ff", 100),
        Stream("self", "eng", 1000),
        Stream("mask", "wo", 500),
    ]
    sampler = TaskSampler(streams, alpha=0.5, seed=3, task_sampling="probability")
    draws = [sampler.sample(step) for step in range(20000)]
    tasks = np.array([stream.task for stream in draws])
    total = 1.0 + 1.0 + 0.09
    assert np.mean(tasks == "distil") == pytest.approx(1.0 / total, abs=0.015)
    assert np.mean(tasks == "self") == pytest.approx(1.0 / total, abs=0.015)
    assert np.mean(tasks == "mask") == pytest.approx(0.09 / total, abs=0.006)
    distil_names = np.array([stream.name for stream in draws if stream.task == "distil"])
    # size ** 0.5: 30 vs 10, so Wolof gets 3/4 of the distillation batches.
    assert np.mean(distil_names == "wo") == pytest.approx(0.75, abs=0.02)
    assert sampler.task_probabilities()["mask"] == pytest.approx(0.09 / total)
    assert [sampler.sample(step) for step in range(50)] == draws[:50], "draws are a function of (seed, step)"
    assert sampler.loss_weights == {"distil": 1.0, "self": 1.0, "mask": 1.0}, "the weights were spent on sampling"


def test_task_sampler_skips_tasks_without_data():
    streams = [Stream("distil", "wo", 10), Stream("mask", "wo", 10)]
    sampler = TaskSampler(streams, task_sampling="probability")
    assert sampler.task_probabilities() == pytest.approx({"distil": 1.0 / 1.09, "mask": 0.09 / 1.09})
    # fairseq's reading: by size (the two share a language), the weight goes to the loss instead.
    assert TaskSampler(streams).task_probabilities() == pytest.approx({"distil": 0.5, "mask": 0.5})


# ---------------------------------------------------------------- teacher cache


def test_teacher_cache_computes_once_per_text_set_and_ratio(tiny_tokenizer, tmp_path):
    teacher = CountingTeacher(tiny_tokenizer)
    texts = ["Where is the station?", "It is raining today."]
    first = TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts)
    assert isinstance(first, np.memmap) and first.shape == (2, 24)
    again = TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts)
    np.testing.assert_array_equal(first, again)
    assert teacher.encoded == 2
    TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts, prefix_ratio=0.5)
    TeacherEmbeddingCache(tmp_path, teacher, "other-teacher").get(texts)
    TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts[:1])
    assert teacher.encoded == 7
    assert not list(tmp_path.rglob("*.tmp"))


def test_teacher_cache_entries_are_checked_and_a_bad_one_is_encoded_again(tiny_tokenizer, tmp_path, caplog):
    teacher = CountingTeacher(tiny_tokenizer)
    texts = ["Where is the station?", "It is raining today."]
    cache = TeacherEmbeddingCache(tmp_path, teacher, "t")
    first = np.array(cache.get(texts))
    path = cache.path_for(texts)
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF  # a flipped bit in the vectors: the checksum fails
    path.write_bytes(bytes(data))
    with caplog.at_level("WARNING"):
        again = TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts)
    assert teacher.encoded == 4 and "fails its checksum" in caplog.text
    np.testing.assert_array_equal(again, first)
    path.unlink()
    os.mkfifo(path)  # would block a plain open: served never, replaced by a good entry
    np.testing.assert_array_equal(TeacherEmbeddingCache(tmp_path, teacher, "t").get(texts), first)
    assert teacher.encoded == 6 and path.is_file()


def test_teacher_cache_rejects_bad_teacher_output(tmp_path):
    class Broken:
        def encode(self, sentences, batch_size=64, show_progress=False):
            return np.zeros((len(sentences) + 1, 4), dtype=np.float32)

    with pytest.raises(DistillationDataError, match="shape"):
        TeacherEmbeddingCache(tmp_path, Broken(), "broken").get(["a", "b"])
    assert not list(tmp_path.iterdir()), "no partial cache file is left behind"


# ---------------------------------------------------------------- loss


def test_cosine_distillation_term():
    student, teacher = torch.randn(6, 8), torch.randn(6, 8)
    expected = (1 - torch.nn.functional.cosine_similarity(student, teacher)).mean()
    assert distillation_term(student, teacher).item() == pytest.approx(expected.item(), rel=1e-5)
    assert distillation_term(teacher * 3, teacher).item() == pytest.approx(0.0, abs=1e-6)
    with_contrastive = distillation_term(student, teacher, contrastive_weight=0.5)
    assert with_contrastive.item() > expected.item()


def test_training_loss_is_the_checkpoints_distillation_loss(tiny_tokenizer):
    model = tiny_student(tiny_tokenizer).eval()
    inputs = tiny_tokenizer(["Where is the station?", "It is raining."], padding=True, return_tensors="pt")
    teacher = torch.randn(2, 24)
    output = model(**inputs, teacher_embeddings=teacher)
    torch.testing.assert_close(distillation_term(output.sentence_embedding, teacher), output.loss)


# ---------------------------------------------------------------- training dynamics


def test_self_task_reuses_the_bitexts_cached_english(tiny_tokenizer, bitexts, tmp_path):
    teacher = CountingTeacher(tiny_tokenizer)
    extra_english = ["A sentence found in no bitext.", "Another one."]
    batches = DistillationBatches(
        tokenizer=tiny_tokenizer,
        cache=TeacherEmbeddingCache(tmp_path, teacher, "counting"),
        bitexts=bitexts,
        english=extra_english,
        total_steps=4,
        batch_size=4,
    )
    # Each distinct English side once (the cache is keyed by the text list), plus the extra English: the pool
    # shared with the bitexts is not re-encoded.
    english_sides = {tuple(bitext.tgt) for bitext in bitexts}
    assert teacher.encoded == sum(len(side) for side in english_sides) + len(extra_english)
    pool = list(dict.fromkeys([*extra_english, *(t for bitext in bitexts for t in bitext.tgt)]))
    rows = np.arange(len(pool))
    np.testing.assert_allclose(
        batches._targets[ENGLISH, 1.0][rows], teacher.encoder.encode(pool), rtol=1e-5, atol=1e-6
    )


def test_training_lowers_loss_changes_student_not_teacher(tiny_tokenizer, bitexts, tmp_path):
    teacher = CountingTeacher(tiny_tokenizer)
    teacher_before = {name: value.clone() for name, value in teacher.model.state_dict().items()}
    cache = TeacherEmbeddingCache(tmp_path, teacher, "counting")
    batches = DistillationBatches(
        tokenizer=tiny_tokenizer,
        cache=cache,
        bitexts=bitexts,
        mlm_languages=["fr"],
        curriculum_languages=["fr"],
        total_steps=60,
        batch_size=16,
        task_weights={"distil": 1.0, "self": 1.0, "mask": 0.3},
        max_length=64,  # the student's positions: MLM blocks fill it
        seed=1,
    )
    encoded_after_setup = teacher.encoded
    student = tiny_student(tiny_tokenizer)
    student_before = {name: value.clone() for name, value in student.state_dict().items()}
    loss_module = DistillationLoss()
    # Probe batches: the last steps (full sentences), one MLM batch; losses per task before and after.
    probe = [batches[step] for step in range(50, 60)] + [
        batches[step] for step in range(60) if batches[step]["task"] == "mask"
    ][:1]

    def probe_losses() -> dict[str, float]:
        totals: dict[str, float] = {}
        with torch.no_grad():
            for batch in probe:
                totals[batch["task"]] = totals.get(batch["task"], 0.0) + loss_module.batch_loss(student, batch).item()
        return totals

    initial = probe_losses()
    optimizer = torch.optim.AdamW(student.parameters(), lr=3e-3)
    seen_tasks = set()
    for step in range(60):
        batch = batches[step]
        seen_tasks.add(batch["task"])
        loss = loss_module.batch_loss(student, batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    final = probe_losses()
    assert seen_tasks == {"distil", "self", "mask"}
    for task in ("distil", "self"):
        assert final[task] < 0.5 * initial[task], (task, initial, final)
    assert final["mask"] < initial["mask"], (initial, final)
    changed = [name for name, value in student.state_dict().items() if not torch.equal(value, student_before[name])]
    assert "layers.0.attention.query.weight" in changed and "projection.weight" in changed
    assert "lm_head.decoder.weight" in changed
    for name, value in teacher.model.state_dict().items():
        assert torch.equal(value, teacher_before[name]), f"teacher parameter {name} changed"
    assert teacher.encoded == encoded_after_setup, "teacher embeddings are never recomputed during training"


@pytest.mark.slow
def test_resume_from_checkpoint_reproduces_the_run(tiny_tokenizer, bitexts, tmp_path):
    import shutil

    from transformers import TrainingArguments

    from bitext_hf.training import BitextTrainer

    cache = TeacherEmbeddingCache(tmp_path / "cache", CountingTeacher(tiny_tokenizer), "counting")
    batches = DistillationBatches(
        tokenizer=tiny_tokenizer,
        cache=cache,
        bitexts=bitexts,
        mlm_languages=["de"],
        curriculum_languages=["de"],
        total_steps=6,
        batch_size=8,
        max_length=64,  # the student's positions: MLM blocks fill it
        seed=93,  # MLM batches (their loss weighted 0.09) on both sides of the checkpoint, and the other tasks
    )
    tasks = [batches[step]["task"] for step in range(6)]
    assert "mask" in tasks[:3] and "mask" in tasks[3:] and {"distil", "self"} <= set(tasks), tasks

    def train(output_dir, resume=None):
        args = TrainingArguments(
            output_dir=str(output_dir),
            max_steps=6,
            per_device_train_batch_size=1,  # an item is a whole batch
            train_sampling_strategy="sequential",
            learning_rate=1e-3,
            save_steps=3,
            logging_steps=2,
            disable_tqdm=True,
            seed=5,
            report_to="none",
            use_cpu=True,
        )
        trainer = BitextTrainer(
            model=tiny_student(tiny_tokenizer, seed=7, dropout=0.1),  # dropout: the RNG state must resume too
            args=args,
            train_dataset=batches,
            data_collator=DistillationBatches.collate,
            loss_fn=DistillationLoss(),
        )
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    # The learning-rate schedule depends on max_steps, so the interrupted run is the same 6-step run stopped early:
    # resume continues from its step-3 checkpoint.
    uninterrupted = train(tmp_path / "full")
    train(tmp_path / "resumed")
    shutil.rmtree(tmp_path / "resumed" / "checkpoint-6")
    resumed = train(tmp_path / "resumed", resume=str(tmp_path / "resumed" / "checkpoint-3"))
    assert resumed.state.global_step == 6
    for (name, value), other in zip(uninterrupted.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(value, other), name
    # Each task's loss is logged on its own, next to the Trainer's loss.
    logged = {key for entry in uninterrupted.state.log_history if "loss" in entry for key in entry}
    assert logged >= {"loss", "loss_distil", "loss_self", "loss_mask"}


# ---------------------------------------------------------------- bad input


def test_misaligned_files_are_rejected(tmp_path):
    (tmp_path / "wo.txt").write_text("Jàng\nBind\nDem\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Read\nWrite\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"3 lines but .* has 2.*line-aligned"):
        load_pairs(f"wo={tmp_path / 'wo.txt'},{tmp_path / 'en.txt'}")
    with pytest.raises(DataValidationError, match="2 source but 1 target"):
        PairSet("wo", "en", "lists", ["a", "b"], ["a"])


def test_empty_lines_are_rejected(tmp_path):
    (tmp_path / "pairs.tsv").write_text("Read\tJàng\n\nWrite\tBind\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"pairs.tsv:2: empty line"):
        load_pairs(f"wo={tmp_path / 'pairs.tsv'}")
    (tmp_path / "bad.tsv").write_text("Read\tJàng\nWrite\t \n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"bad.tsv:2"):
        load_pairs(f"wo={tmp_path / 'bad.tsv'}")
    with pytest.raises(DataValidationError, match=r"missing\.txt: no such file"):
        read_lines(tmp_path / "missing.txt")
    with pytest.raises(DataValidationError, match="LANG=SOURCE"):
        load_pairs(str(tmp_path / "pairs.tsv"))


def test_language_without_data_is_rejected(tiny_tokenizer, bitexts, tmp_path):
    cache = TeacherEmbeddingCache(tmp_path, CountingTeacher(tiny_tokenizer), "counting")
    common = dict(tokenizer=tiny_tokenizer, cache=cache, bitexts=bitexts, total_steps=4)
    with pytest.raises(DistillationDataError, match="'wo' has no data"):
        DistillationBatches(**common, mlm_languages=["wo"])
    with pytest.raises(DistillationDataError, match="'wo' has no data"):
        DistillationBatches(**common, curriculum_languages=["wo"])
    with pytest.raises(DistillationDataError, match="'fr' has no data"):
        DistillationBatches(**common, monolingual={"fr": []}, mlm_languages=["fr"])
    with pytest.raises(DistillationDataError, match="'wo' has no data"):
        DistillationBatches(**{**common, "bitexts": [*bitexts, PairSet("wo", "en", "empty", [], [])]})
    with pytest.raises(DistillationDataError, match="teacher side must be English"):
        DistillationBatches(**{**common, "bitexts": [PairSet("fr", "de", "pivot", ["Bonjour"], ["Hallo"])]})


def test_split_held_out_never_leaks(bitexts):
    train, test = split_held_out(bitexts[0], 5, seed=1)
    assert len(test) == 5 and len(train) == 15
    assert not set(train.tgt) & set(test.tgt)
    with pytest.raises(DataValidationError, match="not enough to hold out"):
        split_held_out(bitexts[0], 20)


def test_student_encoder_matches_model_and_normalises(tiny_tokenizer):
    student = tiny_student(tiny_tokenizer).eval()
    encoder = StudentEncoder(student, tiny_tokenizer)
    texts = ["Hoy llueve.", "The children play in the garden.", "Où est la gare ?"]
    embeddings = encoder.encode(texts, batch_size=2)
    assert embeddings.dtype == np.float32 and embeddings.shape == (3, 24)
    np.testing.assert_allclose(np.linalg.norm(embeddings, axis=1), 1.0, rtol=1e-5)
    single = np.concatenate([encoder.encode([text]) for text in texts])
    np.testing.assert_allclose(embeddings, single, atol=1e-5)


def test_unavailable_hub_dataset_names_it_and_the_local_alternative(monkeypatch, tmp_path):
    import datasets.config
    import huggingface_hub.constants

    # Offline mode: load_dataset fails at once instead of reaching for the network.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))
    with pytest.raises(DataValidationError, match=r"no-such-org/no-such-bitext.*local files"):
        load_pairs("wol=hub:no-such-org/no-such-bitext:eng_Latn-wol_Latn@train")


def test_group_by_length_cuts_padding_and_covers_the_data(tiny_tokenizer, bitexts, tmp_path):
    cache = TeacherEmbeddingCache(tmp_path, CountingTeacher(tiny_tokenizer), "counting")

    def padding_and_coverage(group_by_length: bool) -> tuple[float, set[int]]:
        batches = DistillationBatches(
            tokenizer=tiny_tokenizer,
            cache=cache,
            bitexts=bitexts,
            total_steps=300,
            batch_size=4,
            task_weights={"distil": 1.0, "self": 1.0, "mask": 0.0},
            group_by_length=group_by_length,
            seed=2,
        )
        padded, seen_lengths = 0.0, set()
        for step in range(300):
            batch = batches[step]
            padded += 1.0 - batch["attention_mask"].float().mean().item()
            seen_lengths.update(batch["attention_mask"].sum(dim=1).tolist())
        return padded / 300, seen_lengths

    grouped_padding, grouped_lengths = padding_and_coverage(True)
    uniform_padding, uniform_lengths = padding_and_coverage(False)
    assert grouped_padding < 0.5 * uniform_padding, (grouped_padding, uniform_padding)
    assert grouped_lengths == uniform_lengths, "grouping still reaches the shortest and the longest sentences"


def test_length_grouped_windows_draw_every_example_at_the_same_rate():
    from types import SimpleNamespace

    # The shortest and the longest examples sit at the two ends of the length-sorted pool.
    owner = SimpleNamespace(batch_size=8, group_by_length=True, _length_order={}, seed=0)
    pool = [[0] * (index % 17 + 1) for index in range(50)]
    counts = np.zeros(len(pool))
    rng = np.random.default_rng(0)
    for _ in range(20_000):
        counts[DistillationBatches._choose(owner, ("distil", "x", 1.0), pool, rng, 8)] += 1
    rate = counts / counts.mean()
    assert rate.min() > 0.85 and rate.max() < 1.15, (rate.min(), rate.max())
