"""ContrastiveAlignedEncoder's training objectives as pure tensor functions: the paper's equations, and mean pooling.

Wu & Dredze (2020), section 2: ``orthogonalize_`` (Eq. 2), ``linear_mapping_loss`` (Eq. 1), ``l2_alignment_loss``
(Eq. 3), ``weak_contrastive_loss`` (Eq. 7), ``strong_contrastive_loss`` (Eq. 8) and ``parameter_regularization``
(Eq. 5); ``mean_pool`` gives ``encode``'s sentence vectors. No model state: these are the definitions the tests check
against hand computations, used by the model (``modeling_contrastive_align``, which imports this file relatively so
that ``save_pretrained`` ships it as remote code beside it; it re-exports them). Like the model file, this file
imports only torch and the standard library.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "ContrastiveAlignInputError",
    "l2_alignment_loss",
    "linear_mapping_loss",
    "mean_pool",
    "orthogonalize_",
    "parameter_regularization",
    "strong_contrastive_loss",
    "weak_contrastive_loss",
]


# Copied from modeling.onealigner.functional_onealigner.OneAlignerInputError with OneAligner->ContrastiveAlign
class ContrastiveAlignInputError(ValueError):
    """Inputs that the ContrastiveAlign model cannot use: bad tensors or arguments, no tokenizer to read text with."""


@torch.no_grad()
def orthogonalize_(weight: torch.Tensor, beta: float = 0.01) -> torch.Tensor:
    """Eq. 2 in place on a square matrix or a stack of them: W <- (1 + beta) W - beta (W W^T) W."""
    update = (1.0 + beta) * weight - beta * (weight @ weight.transpose(-1, -2)) @ weight
    return weight.copy_(update)


def l2_alignment_loss(source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Eq. 3: mean_i ||s_i - t_i||^2 over aligned rows `(n, d)`."""
    return (source - target).pow(2).sum(-1).mean()


def linear_mapping_loss(source: torch.Tensor, target: torch.Tensor, maps: torch.Tensor) -> torch.Tensor:
    """Eq. 1 per hidden state: `source`, `target` `(layers, n, d)`, `maps` `(layers, d, d)`; the mean over hidden
    states of mean_i ||s_i - t_i W||^2."""
    return (source - target @ maps).pow(2).sum(-1).mean()


def weak_contrastive_loss(source: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """Eq. 7 (negated, to minimize): projected aligned rows `(n, p)`; cosine / T; each s_i against every t_j and
    each t_i against every s_j, averaged over the 2n terms."""
    logits = F.normalize(source.float(), dim=-1) @ F.normalize(target.float(), dim=-1).transpose(0, 1) / temperature
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.transpose(0, 1), labels)) / 2


def strong_contrastive_loss(source: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """Eq. 8 (negated): H = [s_1..s_n, t_1..t_n]; each h against every h' != h of both languages, its aligned
    partner the positive; averaged over the 2n rows."""
    states = F.normalize(torch.cat([source, target]).float(), dim=-1)
    n = source.shape[0]
    logits = (states @ states.transpose(0, 1) / temperature).fill_diagonal_(float("-inf"))
    labels = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)]).to(logits.device)
    return F.cross_entropy(logits, labels)


def parameter_regularization(parameters: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> torch.Tensor:
    """Eq. 5: ||theta - theta_0||^2, the sum of squared differences over every named parameter."""
    total = None
    for name, parameter in parameters.items():
        term = (parameter - reference[name]).pow(2).sum()
        total = term if total is None else total + term
    if total is None:
        raise ContrastiveAlignInputError("the parameter regularizer has no trainable parameter to regularize.")
    return total


# Copied from modeling.onealigner.functional_onealigner.mean_pool
def mean_pool(states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Attention-mask mean of token vectors: what sentence-transformers' mean Pooling computes."""
    mask = attention_mask.to(states.dtype).unsqueeze(-1)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
