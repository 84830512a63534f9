"""OneAligner's pure tensor functions: BERTScore F, in-batch normalization, the contrastive losses, mean pooling.

No model state: these are the definitions the tests check against direct computations, shared by the model
(``modeling_onealigner``, which imports this file relatively so that ``save_pretrained`` ships it as remote code
beside it) and by the block-wise retrieval in ``bitext_hf.families.onealigner``. Like the model file, this file imports
only torch and the standard library.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

__all__ = [
    "MAX_SIMILARITY_ELEMENTS",
    "OneAlignerInputError",
    "append_mask_columns",
    "bertscore_augmented",
    "bertscore_candidates",
    "bertscore_matrix",
    "bertscore_pairs",
    "contrastive_loss",
    "mask_penalty",
    "mean_pool",
    "normalize_scores",
    "pooled_contrastive_loss",
]

# Upper bound on elements of one token-similarity tensor (source chunk x target block x tokens x tokens).
MAX_SIMILARITY_ELEMENTS = 1 << 24


class OneAlignerInputError(ValueError):
    """Inputs that the OneAligner model cannot use: bad tensors or arguments, no tokenizer to read text with."""


def _with_mask_columns(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Append two columns so that one product both gives s.t and pushes left-out tokens below every real score.

    source' = [s, -penalty * left_out_s, 1] and target' = [t, 1, -penalty * left_out_t], so
    source'.target' = s.t - penalty * (left_out_s + left_out_t). With penalty > 2 max|s| max|t| (Cauchy-Schwarz),
    a left-out token can never be the max over tokens, with no masked copy of the (large) similarity tensor.
    """
    penalty = mask_penalty(source_states, target_states)
    return append_mask_columns(source_states, source_weights, penalty, source=True), append_mask_columns(
        target_states, target_weights, penalty, source=False
    )


def mask_penalty(source_states: torch.Tensor, target_states: torch.Tensor) -> torch.Tensor:
    """A penalty above 2 max|s| max|t|: larger than any difference of two real token similarities."""
    with torch.no_grad():
        bound = source_states.norm(dim=-1).amax() * target_states.norm(dim=-1).amax()
        return (4.0 * bound + 1.0).to(source_states.dtype)


def append_mask_columns(
    states: torch.Tensor, weights: torch.Tensor, penalty: torch.Tensor | float, *, source: bool
) -> torch.Tensor:
    """One side of `_with_mask_columns`: [s, -penalty * left_out, 1] (source) or [t, 1, -penalty * left_out].

    Public for callers that augment a large side once (with one `mask_penalty` for both sides) and reuse it.
    """
    left_out = (-penalty * (weights <= 0).to(states.dtype)).unsqueeze(-1)
    ones = torch.ones_like(left_out)
    return torch.cat([states, left_out, ones] if source else [states, ones, left_out], dim=-1)


def bertscore_matrix(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
    *,
    max_elements: int = MAX_SIMILARITY_ELEMENTS,
) -> torch.Tensor:
    """BERTScore F between every source and every target sentence.

    Args:
        source_states: `(n_s, L_s, d)` token vectors (already L2-normalized for cosine).
        source_weights: `(n_s, L_s)` token weights; 0 marks tokens left out (padding, special tokens), 1 or the
            idf weight marks tokens that count. Every sentence needs at least one token with a positive weight.
        target_states: `(n_t, L_t, d)` token vectors of the targets, as `source_states`.
        target_weights: `(n_t, L_t)` token weights of the targets, as `source_weights`.

    Returns:
        `(n_s, n_t)`: F = 2PR / (P + R) with P = weighted mean over target tokens of the max similarity to a
        source token and R the reverse (Zhang et al. 2020, as OneAligner defines them).
    """
    n_source, source_length, _ = source_states.shape
    n_target, target_length, _ = target_states.shape
    per_source = max(1, n_target * source_length * target_length)
    chunk = max(1, max_elements // per_source)
    source_augmented, target_augmented = _with_mask_columns(
        source_states, source_weights, target_states, target_weights
    )
    # Token-major layout ((length, sentence) rows): both max reductions then run over outer dimensions, several
    # times faster on CPU than reducing a short innermost dimension (benchmarks/README.md, "OneAligner").
    target_flat = target_augmented.transpose(0, 1).reshape(target_length * n_target, -1).transpose(0, 1)
    target_weights_by_token = target_weights.transpose(0, 1).unsqueeze(0)  # (1, L_t, n_t)
    target_total = target_weights.sum(-1)
    rows = []
    for start in range(0, n_source, chunk):
        states = source_augmented[start : start + chunk]
        weights = source_weights[start : start + chunk]
        n_chunk = states.shape[0]
        similarity = (states.transpose(0, 1).reshape(source_length * n_chunk, -1) @ target_flat).view(
            source_length, n_chunk, target_length, n_target
        )
        # P: each target token takes its best source token; R: each source token its best target token. Left-out
        # tokens never win a max (see _with_mask_columns) and have weight 0 in the means.
        best_for_target = similarity.amax(dim=0)  # (n_chunk, L_t, n_t)
        precision = (best_for_target * target_weights_by_token).sum(1) / target_total.unsqueeze(0)
        best_for_source = similarity.amax(dim=2)  # (L_s, n_chunk, n_t)
        recall = (best_for_source * weights.transpose(0, 1).unsqueeze(-1)).sum(0) / weights.sum(-1, keepdim=True)
        rows.append(_f_measure(precision, recall))
    return torch.cat(rows, dim=0)


def bertscore_candidates(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    candidate_states: torch.Tensor,
    candidate_weights: torch.Tensor,
) -> torch.Tensor:
    """BERTScore F of each source against its own k candidates: `(n, L_s, d)` x `(n, k, L_t, d)` -> `(n, k)`.

    One batched product per source against all of its candidates (weights as in `bertscore_matrix`).
    """
    n_source = source_states.shape[0]
    if candidate_states.ndim != 4 or candidate_states.shape[0] != n_source:
        raise OneAlignerInputError(
            f"candidate_states must be (n_source={n_source}, k, length, hidden), got {tuple(candidate_states.shape)}."
        )
    source_augmented, candidate_augmented = _with_mask_columns(
        source_states, source_weights, candidate_states, candidate_weights
    )
    return bertscore_augmented(source_augmented, source_weights, candidate_augmented, candidate_weights)


def bertscore_augmented(
    source_augmented: torch.Tensor,
    source_weights: torch.Tensor,
    candidate_augmented: torch.Tensor,
    candidate_weights: torch.Tensor,
) -> torch.Tensor:
    """`bertscore_candidates` on sides already augmented by `append_mask_columns` (one `mask_penalty` for both),
    `(n, L_s, d+2)` x `(n, k, L_t, d+2)` -> `(n, k)`: a caller can augment a large target bank once and gather
    every source's candidates from it."""
    n_source, source_length, width = source_augmented.shape
    _, k, target_length, _ = candidate_augmented.shape
    similarity = torch.bmm(
        source_augmented, candidate_augmented.reshape(n_source, k * target_length, width).transpose(1, 2)
    ).view(n_source, source_length, k, target_length)
    precision = (similarity.amax(dim=1) * candidate_weights).sum(-1) / candidate_weights.sum(-1)  # (n, k)
    best_for_source = similarity.amax(dim=3)  # (n, L_s, k)
    recall = (best_for_source * source_weights.unsqueeze(-1)).sum(1) / source_weights.sum(-1, keepdim=True)
    return _f_measure(precision, recall)


def bertscore_pairs(
    source_states: torch.Tensor,
    source_weights: torch.Tensor,
    target_states: torch.Tensor,
    target_weights: torch.Tensor,
) -> torch.Tensor:
    """BERTScore F of aligned pairs: row i of the sources against row i of the targets; returns `(n,)`."""
    if source_states.shape[0] != target_states.shape[0]:
        raise OneAlignerInputError(
            f"bertscore_pairs needs as many sources as targets, got {source_states.shape[0]} and "
            f"{target_states.shape[0]}."
        )
    return bertscore_candidates(
        source_states, source_weights, target_states.unsqueeze(1), target_weights.unsqueeze(1)
    ).squeeze(1)


def _f_measure(precision: torch.Tensor, recall: torch.Tensor) -> torch.Tensor:
    # Raw dot products can make P + R tiny or negative; keep the denominator away from 0 with its sign.
    denominator = precision + recall
    eps = torch.finfo(denominator.dtype).eps
    denominator = torch.where(denominator.abs() < eps, torch.full_like(denominator, eps), denominator)
    return 2.0 * precision * recall / denominator


def normalize_scores(raw_scores: torch.Tensor, alpha: float, *, add_mean_term: bool) -> torch.Tensor:
    """In-batch normalization: S_ij = f_ij - alpha * (mean_n f_in + mean_m f_mj) [+ (2 alpha - 1) mean(f)]."""
    scores = raw_scores - alpha * (raw_scores.mean(dim=1, keepdim=True) + raw_scores.mean(dim=0, keepdim=True))
    if add_mean_term:
        scores = scores + (2.0 * alpha - 1.0) * raw_scores.mean()
    return scores


def contrastive_loss(scores: torch.Tensor, temperature: float, loss_type: str = "global") -> torch.Tensor:
    """Cross-entropy over in-batch negatives; the positives are the diagonal of the square `scores`.

    `"global"`: each positive logit l_ii against all N^2 - N off-diagonal logits of the batch,
    loss_i = -l_ii + log(exp(l_ii) + sum_{m != n} exp(l_mn)); `"row"`: InfoNCE over row i.
    """
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise OneAlignerInputError(f"the contrastive loss needs a square score matrix, got {tuple(scores.shape)}.")
    logits = scores.float() / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    if loss_type == "row":
        return F.cross_entropy(logits, labels)
    if loss_type != "global":
        raise OneAlignerInputError(f"loss_type={loss_type!r}: expected 'global' or 'row'.")
    positives = logits.diagonal()
    if logits.shape[0] == 1:  # no negatives: the softmax over one logit is 1
        return (positives - positives).sum()
    off_diagonal = logits.masked_fill(torch.eye(logits.shape[0], dtype=torch.bool, device=logits.device), -math.inf)
    negatives = torch.logsumexp(off_diagonal.flatten(), dim=0)
    return (torch.logaddexp(positives, negatives) - positives).mean()


def pooled_contrastive_loss(source: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """Symmetric InfoNCE on the cosine of pooled vectors (row i of each side aligned): the first-stage loss."""
    logits = F.normalize(source.float(), dim=-1) @ F.normalize(target.float(), dim=-1).transpose(0, 1) / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.transpose(0, 1), labels)) / 2


def mean_pool(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Attention-mask mean of token vectors: what sentence-transformers' mean Pooling computes."""
    mask = attention_mask.to(states.dtype).unsqueeze(-1)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
