"""Text-level OneAligner scoring: tokenize, encode once, score corpora block by block, re-rank candidates.

Every function takes ``(model, tokenizer, texts, ...)`` and uses only the model's public methods (``encode``,
``features``, ``similarity``, ``fit_idf``) and the public BERTScore functions of ``bitext_hf.modeling.onealigner``,
so the model folder ships to the hub without this module.

In-batch normalization at evaluation time is applied per block of ``batch_size`` sources x ``batch_size`` targets
(``config.eval_batch_size`` by default, the paper's evaluation batch): a score depends only on its block.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.modeling.onealigner.modeling_onealigner import (
    MAX_SIMILARITY_ELEMENTS,
    OneAlignerFeatures,
    OneAlignerInputError,
    OneAlignerModel,
    append_mask_columns,
    bertscore_augmented,
    mask_penalty,
    normalize_scores,
)

__all__ = [
    "OneAlignerDataError",
    "OneAlignerUsageError",
    "encode",
    "encode_tokens",
    "fit_idf",
    "normalize_blocks",
    "pad_token_ids",
    "rerank",
    "rerank_encoded",
    "retrieval_accuracy",
    "retrieve",
    "score_pairs",
    "similarity_matrix",
    "tokenize",
]

logger = logging.getLogger(__name__)

# Models that already logged the truncation warning (it is shown once per model, not once per call).
_WARNED_TRUNCATION: weakref.WeakSet[OneAlignerModel] = weakref.WeakSet()


class OneAlignerUsageError(UsageError, OneAlignerInputError):
    """Arguments that cannot work (no tokenizer, mismatched lists, bad candidates, an unknown first stage)."""


class OneAlignerDataError(DataValidationError, OneAlignerInputError):
    """Sentences that cannot be scored (an empty string, a value that is not a string)."""


def tokenize(model: OneAlignerModel, tokenizer: Any, sentences: Sequence[str]) -> list[list[int]]:
    """Token ids with special tokens, truncated to `config.max_seq_length` (keeping the final EOS); warns once."""
    if tokenizer is None:
        raise OneAlignerUsageError("no tokenizer: pass the model's tokenizer (AutoTokenizer.from_pretrained(path)).")
    if isinstance(sentences, str):
        raise OneAlignerUsageError("expected a list of sentences, got a single string.")
    for index, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise OneAlignerDataError(f"sentence {index} is a {type(sentence).__name__}, not a string.")
        if not sentence.strip():
            raise OneAlignerDataError(f"sentence {index} is empty: remove empty lines before scoring.")
    encoded = tokenizer(list(sentences), add_special_tokens=True, truncation=False)["input_ids"]
    limit = model.max_tokens  # max_seq_length, capped by what the position table holds
    too_long = sum(len(ids) > limit for ids in encoded)
    if too_long and model not in _WARNED_TRUNCATION:
        logger.warning(
            "%d sentence(s) exceed max_seq_length=%d tokens and are truncated (this warning is shown once).",
            too_long,
            limit,
        )
        _WARNED_TRUNCATION.add(model)
    return [ids if len(ids) <= limit else [*ids[: limit - 1], ids[-1]] for ids in encoded]


def pad_token_ids(model: OneAlignerModel, sequences: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """`(input_ids, attention_mask)` on the model's device, padded with the encoder's pad id."""
    pad_id = model.config.encoder_config.pad_token_id
    rows = [torch.as_tensor(ids, dtype=torch.long) for ids in sequences]
    input_ids = pad_sequence(rows, batch_first=True, padding_value=0 if pad_id is None else int(pad_id))
    attention_mask = pad_sequence([torch.ones_like(row) for row in rows], batch_first=True)
    return input_ids.to(model.device), attention_mask.to(model.device)


@torch.inference_mode()
def encode_tokens(
    model: OneAlignerModel, tokenizer: Any, sentences: Sequence[str], batch_size: int | None = None
) -> list[OneAlignerFeatures]:
    """Per sentence, in order: `OneAlignerFeatures` of shapes `(length, hidden)`, `(length,)`, `(hidden,)` (float32).

    Evaluation features (cosine when `config.cosine_in_evaluation`). Batches are formed from length-sorted
    sentences so that padding costs little; encode a corpus once and pass the result to `rerank_encoded` or
    `bitext_hf.families.onealigner.token_candidates`.
    """
    batch_size = batch_size or model.config.eval_batch_size
    token_ids = tokenize(model, tokenizer, sentences)
    order = sorted(range(len(token_ids)), key=lambda index: len(token_ids[index]))
    encoded: list[Any] = [None] * len(token_ids)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        input_ids, attention_mask = pad_token_ids(model, [token_ids[index] for index in batch])
        features = model.features(input_ids, attention_mask, cosine=model.config.cosine_in_evaluation)
        pooled = features.pooled.float()
        lengths = attention_mask.sum(1).tolist()
        for row, index in enumerate(batch):
            length = int(lengths[row])
            encoded[index] = OneAlignerFeatures(
                features.vectors[row, :length].float(), features.weights[row, :length], pooled[row]
            )
    return encoded


def encode(
    model: OneAlignerModel, tokenizer: Any, sentences: Sequence[str], batch_size: int = 64, normalize: bool = True
) -> torch.Tensor:
    """Mean-pooled layer-L sentence vectors `(n, hidden)` float32 on CPU (L2-normalized by default): the first-stage
    index, and what the sentence-transformers export computes.

    `OneAlignerModel.encode`, after the checks every function here makes (a tokenizer, strings, no empty sentence)
    and its one warning about overlong sentences.
    """
    # The ids are dropped: tokenizing is cheap next to the encoder, and the model truncates the same way (the final
    # special token kept), so the shipped method stays the only implementation of the pooled vectors.
    tokenize(model, tokenizer, sentences)
    batch_size = batch_size or model.config.eval_batch_size
    return model.encode(list(sentences), tokenizer, batch_size=batch_size, normalize=normalize)


def fit_idf(model: OneAlignerModel, tokenizer: Any, sentences: Sequence[str]) -> torch.Tensor:
    """Set the model's idf weights from a reference corpus (`OneAlignerModel.fit_idf` on its token ids)."""
    return model.fit_idf(tokenize(model, tokenizer, sentences))


def _stack(model: OneAlignerModel, items: Sequence[OneAlignerFeatures]) -> OneAlignerFeatures:
    """Pad per-sentence features into a batch for `model.similarity`."""
    pooled = torch.stack([item.pooled for item in items])
    if model.config.similarity == "mean_pool":
        return OneAlignerFeatures(None, None, pooled)
    # pad_sequence copies in C++: a Python loop of row copies dominated the two-stage search.
    vectors = pad_sequence([item.vectors for item in items], batch_first=True)
    return OneAlignerFeatures(vectors, pad_sequence([item.weights for item in items], batch_first=True), pooled)


def _similarity(model: OneAlignerModel, sources: Sequence[Any], targets: Sequence[Any]) -> torch.Tensor:
    return model.similarity(_stack(model, sources), _stack(model, targets), cosine=model.config.cosine_in_evaluation)


def _grouped_similarity(
    model: OneAlignerModel,
    sources: Sequence[OneAlignerFeatures],
    targets: Sequence[OneAlignerFeatures],
    group: int = 64,
) -> torch.Tensor:
    """f between two lists of per-sentence features, `(len(sources), len(targets))` float32.

    BERTScore costs grow with the padded lengths, so both sides are cut into groups of similar length
    (sorted by length) and every pair of groups is scored on its own; the scores do not depend on the grouping.
    """
    if model.config.similarity == "mean_pool":
        return _similarity(model, sources, targets).float()
    source_order = sorted(range(len(sources)), key=lambda index: sources[index].vectors.shape[0])
    target_order = sorted(range(len(targets)), key=lambda index: targets[index].vectors.shape[0])
    source_groups = [source_order[start : start + group] for start in range(0, len(source_order), group)]
    target_groups = [target_order[start : start + group] for start in range(0, len(target_order), group)]
    stacked_targets = [_stack(model, [targets[index] for index in indices]) for indices in target_groups]
    result = torch.empty((len(sources), len(targets)), dtype=torch.float32, device=model.device)
    cosine = model.config.cosine_in_evaluation
    for source_indices in source_groups:
        stacked_source = _stack(model, [sources[index] for index in source_indices])
        rows = torch.as_tensor(source_indices, device=model.device).unsqueeze(1)
        for target_indices, stacked_target in zip(target_groups, stacked_targets):
            columns = torch.as_tensor(target_indices, device=model.device).unsqueeze(0)
            result[rows, columns] = model.similarity(stacked_source, stacked_target, cosine=cosine).float()
    return result


def _score_row_blocks(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    batch_size: int | None,
    normalize: bool | None,
) -> Iterator[torch.Tensor]:
    """`similarity_matrix` one block of `batch_size` source rows at a time, `(rows, n_target)` float32 on CPU."""
    batch_size = batch_size or model.config.eval_batch_size
    normalize = model.config.normalization if normalize is None else normalize
    source = encode_tokens(model, tokenizer, source_sentences, batch_size)
    target = encode_tokens(model, tokenizer, target_sentences, batch_size)
    for source_start in range(0, len(source), batch_size):
        source_block = source[source_start : source_start + batch_size]
        rows = torch.empty((len(source_block), len(target)), dtype=torch.float32)
        for target_start in range(0, len(target), batch_size):
            raw = _grouped_similarity(model, source_block, target[target_start : target_start + batch_size])
            if normalize:
                raw = normalize_scores(raw, model.config.alpha, add_mean_term=False)
            rows[:, target_start : target_start + raw.shape[1]] = raw.cpu()
        yield rows


@torch.inference_mode()
def similarity_matrix(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    batch_size: int | None = None,
    normalize: bool | None = None,
) -> torch.Tensor:
    """Evaluation scores for every source-target pair, `(n_source, n_target)` float32 on CPU.

    Cosine similarities; in-batch normalization (when configured, or forced with `normalize`) is applied per
    evaluation block of `batch_size` sources x `batch_size` targets, as the paper does at inference.
    """
    matrix = torch.empty((len(source_sentences), len(target_sentences)), dtype=torch.float32)
    start = 0
    for rows in _score_row_blocks(model, tokenizer, source_sentences, target_sentences, batch_size, normalize):
        matrix[start : start + rows.shape[0]] = rows
        start += rows.shape[0]
    return matrix


@torch.inference_mode()
def retrieve(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    batch_size: int | None = None,
    normalize: bool | None = None,
) -> torch.Tensor:
    """Top-1 target index for every source over the full score matrix, `(n_source,)` int64.

    Row block by row block: only `batch_size` rows of the matrix exist at a time (the whole matrix is 1.6 GB
    at 20k x 20k)."""
    blocks = _score_row_blocks(model, tokenizer, source_sentences, target_sentences, batch_size, normalize)
    best = [rows.argmax(dim=1) for rows in blocks]
    return torch.cat(best) if best else torch.empty(0, dtype=torch.long)


def normalize_blocks(raw_scores: torch.Tensor, alpha: float, block: int) -> torch.Tensor:
    """In-batch normalization of an un-normalized matrix per `block` x `block` evaluation block (no mean term):
    what `similarity_matrix(normalize=True)` returns, from `similarity_matrix(normalize=False)`."""
    normalized = torch.empty_like(raw_scores)
    for row in range(0, raw_scores.shape[0], block):
        for column in range(0, raw_scores.shape[1], block):
            normalized[row : row + block, column : column + block] = normalize_scores(
                raw_scores[row : row + block, column : column + block], alpha, add_mean_term=False
            )
    return normalized


def retrieval_accuracy(scores: torch.Tensor) -> dict[str, float]:
    """Top-1 retrieval accuracy in both directions of a square score matrix whose diagonal holds the gold pairs.

    Returns:
        `{"src2tgt_accuracy", "tgt2src_accuracy", "accuracy"}` (fractions; accuracy is their mean), the keys of
        `bitext_hf.evaluation.metrics.functional.bitext_accuracy`.
    """
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise OneAlignerUsageError(f"retrieval_accuracy needs a square score matrix, got {tuple(scores.shape)}.")
    gold = torch.arange(scores.shape[0], device=scores.device)
    src2tgt = (scores.argmax(dim=1) == gold).float().mean().item()
    tgt2src = (scores.argmax(dim=0) == gold).float().mean().item()
    return {"src2tgt_accuracy": src2tgt, "tgt2src_accuracy": tgt2src, "accuracy": (src2tgt + tgt2src) / 2}


@torch.inference_mode()
def score_pairs(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    *,
    batch_size: int | None = None,
    normalize: bool | None = None,
) -> torch.Tensor:
    """Scores of aligned pairs (source i with target i), `(n,)`.

    With normalization, each consecutive block of `batch_size` pairs is normalized against itself (the pairs'
    own sources and targets are the in-batch context), as in training and evaluation.
    """
    if len(source_sentences) != len(target_sentences):
        raise OneAlignerUsageError(
            f"score_pairs needs aligned lists: {len(source_sentences)} sources vs {len(target_sentences)} targets."
        )
    batch_size = batch_size or model.config.eval_batch_size
    normalize = model.config.normalization if normalize is None else normalize
    source = encode_tokens(model, tokenizer, source_sentences, batch_size)
    target = encode_tokens(model, tokenizer, target_sentences, batch_size)
    scores = []
    for start in range(0, len(source), batch_size):
        if normalize:
            raw = _grouped_similarity(model, source[start : start + batch_size], target[start : start + batch_size])
            scores.append(normalize_scores(raw, model.config.alpha, add_mean_term=False).diagonal().cpu())
        else:
            block = slice(start, start + batch_size)
            own = torch.arange(len(source[block])).unsqueeze(1)
            scores.append(_candidate_scores(model, source[block], target[block], own, batch_size)[:, 0])
    return torch.cat(scores) if scores else torch.empty(0)


@torch.inference_mode()
def rerank(
    model: OneAlignerModel,
    tokenizer: Any,
    source_sentences: Sequence[str],
    target_sentences: Sequence[str],
    candidates: torch.Tensor,
    *,
    batch_size: int | None = None,
    normalize: bool | None = None,
    normalization_sample: int | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Second stage: BERTScore only for the given candidates, `candidates[i]` = target indices for source i.

    In-batch normalization needs each source's mean score against a batch of targets and each target's mean
    against a batch of sources; here that batch is a fixed random sample of `normalization_sample`
    (default: `config.eval_batch_size`) sentences of the other side, so that the terms estimate the same
    quantity as in-batch normalization at that batch size, at the cost of n x sample pairs instead of n^2.

    Returns:
        `(scores, indices)`, both `(n_source, k)`, sorted by decreasing score; `indices` are target indices.
    """
    batch_size = batch_size or model.config.eval_batch_size
    source = encode_tokens(model, tokenizer, source_sentences, batch_size)
    target = encode_tokens(model, tokenizer, target_sentences, batch_size)
    return rerank_encoded(
        model,
        source,
        target,
        candidates,
        batch_size=batch_size,
        normalize=normalize,
        normalization_sample=normalization_sample,
        seed=seed,
    )


@torch.inference_mode()
def rerank_encoded(
    model: OneAlignerModel,
    source: Sequence[OneAlignerFeatures],
    target: Sequence[OneAlignerFeatures],
    candidates: torch.Tensor,
    *,
    batch_size: int | None = None,
    normalize: bool | None = None,
    normalization_sample: int | None = None,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`rerank` on features from `encode_tokens` (lets a two-stage search encode each sentence once)."""
    batch_size = batch_size or model.config.eval_batch_size
    candidates = torch.as_tensor(candidates, dtype=torch.long).cpu()
    if candidates.ndim != 2 or candidates.shape[0] != len(source):
        raise OneAlignerUsageError(
            f"candidates must be (n_source, k) = ({len(source)}, k), got {tuple(candidates.shape)}."
        )
    if candidates.numel() and (candidates.min() < 0 or candidates.max() >= len(target)):
        raise OneAlignerUsageError("candidates hold target indices outside [0, n_target).")
    normalize = model.config.normalization if normalize is None else normalize
    n_source = candidates.shape[0]
    raw = _candidate_scores(model, source, target, candidates, batch_size)
    if normalize:
        sample_size = normalization_sample or model.config.eval_batch_size
        generator = torch.Generator().manual_seed(seed)
        target_sample = torch.randperm(len(target), generator=generator)[: min(sample_size, len(target))]
        source_sample = torch.randperm(len(source), generator=generator)[: min(sample_size, len(source))]
        row_means = _mean_against(model, source, torch.arange(n_source), target, target_sample, batch_size)
        used_targets = torch.unique(candidates)
        column_means = torch.zeros(len(target))
        column_means[used_targets] = _mean_against(model, target, used_targets, source, source_sample, batch_size)
        raw = raw - model.config.alpha * (row_means.unsqueeze(1) + column_means[candidates])
    scores, order = raw.sort(dim=1, descending=True)
    return scores, candidates.gather(1, order)


def _candidate_scores(
    model: OneAlignerModel,
    source: Sequence[OneAlignerFeatures],
    target: Sequence[OneAlignerFeatures],
    candidates: torch.Tensor,
    batch_size: int,
) -> torch.Tensor:
    """f of every source i against its candidates `candidates[i]`, `(n_source, k)` float32 on CPU."""
    n_source, k = candidates.shape
    scores = torch.empty((n_source, k), dtype=torch.float32)
    if not n_source or not k:
        return scores
    if model.config.similarity == "mean_pool":
        sources = _pooled_vectors(model, source)
        targets = _pooled_vectors(model, target)
        for start in range(0, n_source, batch_size):
            rows = candidates[start : start + batch_size].to(targets.device)
            block = (sources[start : start + batch_size].unsqueeze(1) * targets[rows]).sum(-1)
            scores[start : start + batch_size] = block.float().cpu()
        return scores
    # Every target is padded and augmented (`append_mask_columns`) once; each chunk of sources gathers its
    # candidates into one reused buffer. Fresh per-chunk copies cost more than the scoring itself, mostly in page
    # faults of new allocations (benchmarks/README.md, "OneAligner", has the profile).
    target_vectors, target_weights, _ = _stack(model, target)
    # Each source sentence's largest token norm as a 1-d "vector": no copy of every source token is needed.
    source_norms = torch.stack([item.vectors.norm(dim=-1).amax() for item in source]).unsqueeze(-1)
    penalty = mask_penalty(source_norms, target_vectors)
    target_augmented = append_mask_columns(target_vectors, target_weights, penalty, source=False)
    target_lengths = torch.as_tensor([item.vectors.shape[0] for item in target])
    full_length, width = target_augmented.shape[1:]
    # Sources sorted by length, a chunk at a time, each padded only to its own longest sentences; a chunk
    # gathers about 2^24 candidate elements.
    order = sorted(range(n_source), key=lambda index: source[index].vectors.shape[0])
    chunk = max(1, min(n_source, MAX_SIMILARITY_ELEMENTS // (k * full_length * width)))
    buffer = torch.empty(chunk * k * full_length * width, dtype=target_augmented.dtype, device=model.device)
    for start in range(0, n_source, chunk):
        rows = order[start : start + chunk]
        vectors, weights, _ = _stack(model, [source[index] for index in rows])
        chosen = candidates[rows]
        length = int(target_lengths[chosen].max())
        flat = chosen.reshape(-1).to(target_augmented.device)
        gathered = buffer[: flat.numel() * length * width].view(flat.numel(), length, width)
        torch.index_select(target_augmented[:, :length], 0, flat, out=gathered)
        values = bertscore_augmented(
            append_mask_columns(vectors, weights, penalty, source=True),
            weights,
            gathered.view(len(rows), k, length, width),
            target_weights[:, :length][flat].view(len(rows), k, length),
        )
        scores[torch.as_tensor(rows)] = values.float().cpu()
    return scores


def _pooled_vectors(model: OneAlignerModel, items: Sequence[OneAlignerFeatures]) -> torch.Tensor:
    """The pooled vectors the `"mean_pool"` similarity compares (L2-normalized for cosine), `(n, hidden)`."""
    pooled = torch.stack([item.pooled for item in items])
    return F.normalize(pooled, dim=-1) if model.config.cosine_in_evaluation else pooled


def _mean_against(
    model: OneAlignerModel,
    queries: Sequence[OneAlignerFeatures],
    query_indices: torch.Tensor,
    others: Sequence[OneAlignerFeatures],
    other_sample: torch.Tensor,
    batch_size: int,
) -> torch.Tensor:
    """Mean f of each selected query sentence against the sampled sentences of the other side."""
    sampled = [others[int(index)] for index in other_sample]
    means = []
    for start in range(0, len(query_indices), batch_size):
        block = [queries[int(index)] for index in query_indices[start : start + batch_size]]
        means.append(_grouped_similarity(model, block, sampled).mean(dim=1).cpu())
    return torch.cat(means) if means else torch.empty(0)
