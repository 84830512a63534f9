"""The distillation data: :func:`load_data` (the recipe's bitexts, monolingual text, English and evaluation pairs)
and the step-indexed batches (one task per batch, curriculum prefixes, MLM on blocks of consecutive text, cached
teacher targets); their loss is :class:`bitext_hf.families.laser3.losses.DistillationLoss`.

Every batch is a pure function of (seed, step): resuming at step s replays exactly what an uninterrupted run saw.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from bitext_hf.data import PairSet, is_english, load_monolingual, load_pairs, read_lines
from bitext_hf.data.collators import pad_sequences
from bitext_hf.data.filters import drop_overlap, split_held_out
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.laser3.cache import TeacherEmbeddingCache
from bitext_hf.families.laser3.curriculum import (
    curriculum_ratios,
    curriculum_stage,
    prefix_cuts,
    prefix_texts_and_ids,
)
from bitext_hf.families.laser3.errors import DistillationDataError
from bitext_hf.families.laser3.masking import MLM_BREAK_MODES, SentenceMaskingCollator, pack_blocks, unigram_entropy
from bitext_hf.families.laser3.sampling import Stream, TaskSampler

if TYPE_CHECKING:
    from bitext_hf.families.laser3.arguments import ScriptArguments

__all__ = ["ENGLISH", "DistillationBatches", "load_data"]

logger = logging.getLogger(__name__)
recipe_logger = logging.getLogger("distill_wolof")  # what the recipe's user is told names the recipe

ENGLISH = "eng"


class _GatheredRows:
    """Rows of several (memory-mapped) arrays addressed as one: row i is ``parts[part[i]][row[i]]``, nothing copied."""

    def __init__(self, parts: list[np.ndarray], part: np.ndarray, row: np.ndarray) -> None:
        self.parts, self.part, self.row = parts, part, row

    def __getitem__(self, indices: np.ndarray) -> np.ndarray:
        indices = np.asarray(indices)
        out = np.empty((len(indices), self.parts[0].shape[1]), dtype=np.float32)
        for number, array in enumerate(self.parts):
            mask = self.part[indices] == number
            if mask.any():
                out[mask] = array[self.row[indices[mask]]]
        return out


def _english_targets(
    pool: Sequence[str],
    bitexts: Sequence[PairSet],
    targets: Mapping[tuple[str, float], np.ndarray],
    cache: TeacherEmbeddingCache,
) -> _GatheredRows:
    """Teacher embeddings of the self task's English pool: rows already cached for a bitext's English side are
    reused, and only English found in no bitext is sent to the teacher."""
    located: dict[str, tuple[int, int]] = {}
    parts = [targets[bitext.src_lang, 1.0] for bitext in bitexts]
    for number, bitext in enumerate(bitexts):
        for row, text in enumerate(bitext.tgt):
            located.setdefault(text, (number, row))
    extra = [text for text in pool if text not in located]
    if extra:
        parts.append(cache.get(extra, 1.0))
        located.update((text, (len(parts) - 1, row)) for row, text in enumerate(extra))
    part, row = (np.array(column, dtype=np.int64) for column in zip(*(located[text] for text in pool)))
    return _GatheredRows(parts, part, row)


class DistillationBatches(torch.utils.data.Dataset):
    """Step-indexed training batches: item ``step`` is the whole batch of micro-step ``step``. Give it to a Trainer
    with ``per_device_train_batch_size=1``, ``train_sampling_strategy="sequential"`` and
    ``data_collator=DistillationBatches.collate`` (one item per micro-batch, in step order).

    Tasks: ``distil`` (student gets a language's sentence, the target is the teacher's embedding of its English
    translation), ``self`` (student and teacher both get the English sentence), ``mask`` (MLM on monolingual text
    of the ``mlm_languages``, by default in blocks of consecutive sentences up to ``max_length`` as fairseq's
    ``TokenBlockDataset`` packs them: ``<s> a </s> b </s> c </s>``). Which dataset feeds a batch and what the task
    weights mean is :class:`~bitext_hf.families.laser3.sampling.TaskSampler`'s ``task_sampling``; each batch carries
    its ``loss_weight`` (the task's weight with ``size_alpha``, 1 with ``probability``), which
    :class:`DistillationLoss` multiplies its loss by. With the curriculum, pairs of ``curriculum_languages`` are cut
    to growing prefixes (stages split the steps evenly, or the partial stages share ``curriculum_fraction`` of them);
    the teacher's embeddings of every stage are cached once. MLM batches hold ``mlm_labels`` (see
    :class:`SentenceMaskingCollator`).

    Args:
        tokenizer: the student tokenizer (fast, with offsets).
        cache: the teacher embedding cache.
        bitexts: training pairs per student language.
        monolingual: extra student-language text per language for MLM (defaults to the bitext's student side).
        english: extra English sentences for the self task (the English sides of the bitexts are always used).
        mlm_languages / curriculum_languages: languages that get MLM batches / the curriculum.
        total_steps: length of the run (the curriculum's time axis).
        batch_size: sentences per batch (and blocks per MLM batch unless ``mlm_batch_size`` is given).
        mlm_batch_size: blocks of monolingual text per MLM batch (fairseq batches by tokens: fewer, longer examples).
        task_weights: weight of each task (default distil 1.0, self 1.0, mask 0.09): its loss multiplier with
            ``size_alpha``, its probability of being drawn with ``probability``; 0 turns a task off.
        alpha: the size exponent of the dataset sampling (1: by size, 0: uniform); None: 0.91 with ``size_alpha``
            (fairseq's ``--joint-weighting-alpha 0.09``), 0.5 with ``probability``.
        task_sampling: ``size_alpha`` (fairseq's: batches drawn across languages by size ** alpha, the weights
            multiply the losses) or ``probability`` (the weights are the tasks' sampling probabilities).
        mlm_break_mode: ``complete`` (MLM examples are blocks of whole consecutive sentences up to ``max_length``,
            fairseq's default) or ``eos`` (one sentence per example).
        curriculum_increment: stage increment (0.1: prefixes of 10%, 20%, ..., 100%).
        curriculum_fraction: share of the steps given to the stages shorter than 100% (split evenly among them; the
            whole-sentence stage gets the rest); None splits all stages evenly.
        teacher_tokenizer: what counts the English side's subwords for the curriculum's prefixes (called as a Hugging
            Face fast tokenizer with offsets, e.g. :class:`bitext_hf.encoders.use.UseTokenizer`, the teacher's own);
            None: the student tokenizer, as for the student side.
        mask_rate: fraction of tokens replaced by <mask> in MLM batches.
        max_length: truncation length in student subwords (specials included).
        group_by_length: batch sentences of similar length (a random window of the length-sorted pool, wrapping
            around its end so that every sentence is drawn at the same rate), which removes most padding (about 3x faster steps: benchmarks/README.md, "Training loop"); otherwise sample
            uniformly.
        seed: the seed of every draw.
    """

    def __init__(
        self,
        *,
        tokenizer: Any,
        cache: TeacherEmbeddingCache,
        bitexts: Sequence[PairSet],
        monolingual: Mapping[str, Sequence[str]] | None = None,
        english: Sequence[str] = (),
        mlm_languages: Sequence[str] = (),
        curriculum_languages: Sequence[str] = (),
        total_steps: int,
        batch_size: int = 32,
        mlm_batch_size: int | None = None,
        task_weights: Mapping[str, float] | None = None,
        alpha: float | None = None,
        task_sampling: str = "size_alpha",
        mlm_break_mode: str = "complete",
        curriculum_increment: float = 0.1,
        curriculum_fraction: float | None = None,
        teacher_tokenizer: Any | None = None,
        mask_rate: float = 0.15,
        max_length: int = 128,
        group_by_length: bool = True,
        seed: int = 0,
    ) -> None:
        if total_steps < 1 or batch_size < 1 or (mlm_batch_size is not None and mlm_batch_size < 1):
            raise UsageError(
                f"total_steps, batch_size and mlm_batch_size must be positive, got {total_steps}, {batch_size} and "
                f"{mlm_batch_size}"
            )
        if not 0.0 < mask_rate < 1.0:
            raise UsageError(f"MLM masking rate must be in (0, 1), got {mask_rate}")
        if max_length < 3:
            raise UsageError(f"max_length must leave room for <s>, </s> and a token, got {max_length}")
        if mlm_break_mode not in MLM_BREAK_MODES:
            raise UsageError(f"mlm_break_mode must be one of {list(MLM_BREAK_MODES)}, got {mlm_break_mode!r}")
        monolingual = dict(monolingual or {})
        languages = [bitext.src_lang for bitext in bitexts]
        if len(set(languages)) != len(languages):
            raise DistillationDataError(f"a language appears twice among the bitexts: {languages}")
        by_language = {bitext.src_lang: bitext for bitext in bitexts}
        for bitext in bitexts:
            if not is_english(bitext.tgt_lang):
                raise DistillationDataError(
                    f"{bitext.name}: the teacher side must be English, got {bitext.tgt_lang!r} (use an xx=SOURCE spec)"
                )
            if not len(bitext):
                raise DistillationDataError(f"language {bitext.src_lang!r} has no data (0 sentence pairs left)")
        for language in curriculum_languages:
            if language not in by_language:
                raise DistillationDataError(
                    f"curriculum language {language!r} has no data: it needs a bitext (have {languages})"
                )
        for language in mlm_languages:
            if language not in monolingual and language not in by_language:
                raise DistillationDataError(
                    f"MLM language {language!r} has no data: give monolingual text or a bitext for it"
                )
        for language, texts in monolingual.items():
            if not texts:
                raise DistillationDataError(f"language {language!r} has no data (empty monolingual list)")
        self.tokenizer = tokenizer
        self.total_steps = total_steps
        self.batch_size = batch_size
        self.mlm_batch_size = mlm_batch_size or batch_size
        self.mask_rate = mask_rate
        self.max_length = max_length
        self.seed = seed
        self.group_by_length = group_by_length
        self._length_order: dict[tuple[str, str, float], np.ndarray] = {}
        self.ratios = curriculum_ratios(curriculum_increment)
        curriculum_stage(0, total_steps, len(self.ratios), curriculum_fraction)  # validates the fraction now
        self.curriculum_fraction = curriculum_fraction
        self.curriculum_languages = set(curriculum_languages)
        self._body_length = max_length - 2  # room for <s> and </s>

        # Targets: per (language, stage) the student ids and the teacher embeddings of the English side.
        self._student_ids: dict[tuple[str, float], list[list[int]]] = {}
        self._targets: dict[tuple[str, float], np.ndarray | _GatheredRows] = {}
        streams = []
        for bitext in bitexts:
            ratios = self.ratios if bitext.src_lang in self.curriculum_languages else [1.0]
            partial = [ratio for ratio in ratios if ratio < 1.0]
            english_tokenizer = tokenizer if teacher_tokenizer is None else teacher_tokenizer
            teacher_cuts = prefix_cuts(bitext.tgt, english_tokenizer, partial, self._body_length) if partial else {}
            student_cuts = prefix_cuts(bitext.src, tokenizer, ratios, self._body_length)
            for ratio in ratios:
                if ratio < 1.0:
                    # Teacher sees exactly the English prefix; at 100% it sees the untouched sentence.
                    self._targets[bitext.src_lang, ratio] = cache.get(teacher_cuts[ratio][0], ratio)
                else:
                    self._targets[bitext.src_lang, ratio] = cache.get(bitext.tgt, 1.0)
                self._student_ids[bitext.src_lang, ratio] = student_cuts[ratio][1]
            streams.append(Stream("distil", bitext.src_lang, len(bitext)))

        english_pool = list(dict.fromkeys([*english, *(t for bitext in bitexts for t in bitext.tgt)]))
        if english_pool:
            self._student_ids[ENGLISH, 1.0] = prefix_texts_and_ids(english_pool, tokenizer, 1.0, self._body_length)[1]
            self._targets[ENGLISH, 1.0] = _english_targets(english_pool, bitexts, self._targets, cache)
            streams.append(Stream("self", ENGLISH, len(english_pool)))

        self._mlm_ids: dict[str, list[list[int]]] = {}
        for language in mlm_languages:
            texts = monolingual.get(language) or by_language[language].src
            ids = prefix_texts_and_ids(texts, tokenizer, 1.0, self._body_length)[1]
            if mlm_break_mode == "complete":
                # Room for <s> before the block; the block's last </s> is the one _pad appends.
                blocks = pack_blocks(ids, self._body_length + 1, tokenizer.eos_token_id)
                ids = [block[:-1] for block in blocks]
            self._mlm_ids[language] = ids
            streams.append(Stream("mask", language, len(ids)))

        self.sampler = TaskSampler(
            streams, task_weights=task_weights, alpha=alpha, seed=seed, task_sampling=task_sampling
        )
        self.loss_weights = self.sampler.loss_weights
        self._pad_id = tokenizer.pad_token_id
        self._masking = SentenceMaskingCollator(tokenizer, mlm_probability=mask_rate)
        self._special_ids = torch.tensor(
            sorted({tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.mask_token_id})
        )

    def __len__(self) -> int:
        return self.total_steps

    def mlm_unigram_entropy(self) -> dict[str, float]:
        """Per MLM language the unigram entropy (nats) of the tokens its MLM examples can mask (the blocks'
        separators left out), and ``"mean"``, the languages' entropies weighted by their tokens (the loss of a head
        that knows the language, which a block's context gives at once); empty without MLM languages."""
        entropies, tokens = {}, {}
        for language, ids in self._mlm_ids.items():
            entropies[language], tokens[language] = unigram_entropy(ids, [self.tokenizer.eos_token_id])
        if sum(tokens.values()):
            entropies["mean"] = sum(entropies[lang] * tokens[lang] for lang in tokens if tokens[lang]) / sum(
                tokens.values()
            )
        return entropies

    @staticmethod
    def collate(items: list[dict[str, Any]]) -> dict[str, Any]:
        """The ``data_collator`` for a DataLoader of batch size 1 over this dataset: an item is already a batch."""
        return items[0]

    def stage_ratio(self, step: int) -> float:
        """The curriculum prefix ratio at ``step``."""
        return self.ratios[curriculum_stage(step, self.total_steps, len(self.ratios), self.curriculum_fraction)]

    def _pad(self, sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        bos, eos = self.tokenizer.bos_token_id, self.tokenizer.eos_token_id
        return pad_sequences([[bos, *sequence[: self._body_length], eos] for sequence in sequences], self._pad_id)

    def _choose(
        self, key: tuple[str, str, float], pool: list[list[int]], rng: np.random.Generator, size: int
    ) -> np.ndarray:
        """Sorted indices of the batch's ``size`` examples: a random window of the pool sorted by length when
        grouping by length (little padding, every example drawn at the same rate), else a uniform sample."""
        size = min(size, len(pool))
        if not self.group_by_length:
            return np.sort(rng.choice(len(pool), size=size, replace=False))
        order = self._length_order.get(key)
        if order is None:
            # Ties in length are broken by a fixed random permutation, so windows mix examples of equal length.
            shuffled = np.random.default_rng([self.seed, len(pool)]).permutation(len(pool))
            lengths = np.array([len(pool[i]) for i in shuffled])
            order = self._length_order[key] = shuffled[np.argsort(lengths, kind="stable")]
        # The window wraps around the end of the sorted pool: each example then lies in exactly `size` of the
        # len(pool) windows, so all are drawn at the same rate. A window that stopped at the end would draw the
        # shortest and longest examples up to `size` times less often than the others.
        start = int(rng.integers(0, len(pool)))
        return np.sort(order[(start + np.arange(size)) % len(pool)])

    def __getitem__(self, step: int) -> dict[str, Any]:
        if not 0 <= step < self.total_steps:
            raise IndexError(f"step {step} outside [0, {self.total_steps})")
        stream = self.sampler.sample(step)
        rng = np.random.default_rng([self.seed, step, 1])
        if stream.task == "mask":
            pool = self._mlm_ids[stream.name]
            chosen = self._choose(("mask", stream.name, 1.0), pool, rng, self.mlm_batch_size)
            input_ids, attention_mask = self._pad([pool[i] for i in chosen])
            # A generator per step: the masks are a function of (seed, step), as resumption needs.
            self._masking.generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
            input_ids, labels = self._masking.torch_mask_tokens(
                input_ids, special_tokens_mask=torch.isin(input_ids, self._special_ids)
            )
            return {
                "task": "mask",
                "language": stream.name,
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                # Not "labels": the Trainer would count label tokens to rescale a loss it then leaves unaveraged.
                "mlm_labels": labels,
                "loss_weight": self.loss_weights["mask"],
            }
        ratio = self.stage_ratio(step) if stream.name in self.curriculum_languages else 1.0
        pool = self._student_ids[stream.name, ratio]
        chosen = self._choose((stream.task, stream.name, ratio), pool, rng, self.batch_size)
        input_ids, attention_mask = self._pad([pool[i] for i in chosen])
        targets = torch.from_numpy(np.asarray(self._targets[stream.name, ratio][chosen], dtype=np.float32))
        return {
            "task": stream.task,
            "language": stream.name,
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "teacher_embeddings": targets,
            "ratio": ratio,
            "loss_weight": self.loss_weights[stream.task],
        }


def load_data(
    script_args: ScriptArguments,
) -> tuple[list[PairSet], dict[str, list[str]], list[str], list[PairSet]]:
    """The recipe's data, validated: the training bitexts, the monolingual text by language, extra English and the
    evaluation bitexts (``--eval_bitexts``, else ``--held_out`` pairs of each ``--eval_languages`` bitext); training
    pairs that share a side with an evaluation pair are dropped."""
    train = [load_pairs(spec, max_pairs=script_args.max_pairs_per_language) for spec in script_args.bitexts]
    evaluation = [load_pairs(spec) for spec in script_args.eval_bitexts]
    if not evaluation and script_args.held_out > 0:
        by_language = {pairs.src_lang: index for index, pairs in enumerate(train)}
        for language in script_args.eval_languages:
            if language not in by_language:
                raise DataValidationError(f"eval language {language!r} has no data among the training bitexts")
            train[by_language[language]], held = split_held_out(train[by_language[language]], script_args.held_out)
            evaluation.append(held)
    # No evaluation sentence may be trained on: drop training pairs sharing a side with the evaluation pairs.
    held_texts = [text for pairs in evaluation for text in (*pairs.src, *pairs.tgt)]
    train = [drop_overlap(pairs, held_texts) for pairs in train] if held_texts else train
    monolingual: dict[str, list[str]] = {}
    for spec in script_args.monolingual:
        language, texts = load_monolingual(spec, max_sentences=script_args.max_monolingual)
        monolingual.setdefault(language, []).extend(texts)
    unused = sorted(set(monolingual) - set(script_args.mlm_languages))
    if unused:
        recipe_logger.warning(
            "monolingual text of %s trains the vocabulary only: MLM runs on --mlm_languages (%s)",
            ", ".join(unused),
            ", ".join(script_args.mlm_languages) or "none",
        )
    english = [line for path in script_args.english for line in read_lines(path)]
    return train, monolingual, english, evaluation
