"""Independent brute-force reference implementations of the mining and metric definitions (DESIGN.md section 2).

They work on the full similarity matrix with plain numpy sorting and Python loops, sharing no code with the package,
so that agreement between the two is evidence that the blocked, vectorised engine implements the definitions.
"""

from __future__ import annotations

import numpy as np


def brute_neighbourhoods(x: np.ndarray, y: np.ndarray, k: int):
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    kx, ky = min(k, y.shape[0]), min(k, x.shape[0])
    fwd = np.argsort(-sim, axis=1, kind="stable")[:, :kx]
    bwd = np.argsort(-sim.T, axis=1, kind="stable")[:, :ky]
    a_x = np.array([sim[i, fwd[i]].mean() for i in range(x.shape[0])])
    a_y = np.array([sim[bwd[j], j].mean() for j in range(y.shape[0])])
    return sim, fwd, bwd, a_x, a_y


def brute_margin(cos: float, ax: float, ay: float, margin: str) -> float:
    if margin == "absolute":
        return cos
    if margin == "ratio":
        return cos / ((ax + ay) / 2)
    return cos - (ax + ay) / 2


def brute_mine(x, y, k=4, margin="ratio", mode="max", threshold=None) -> dict[tuple[int, int], float]:
    """{(src, tgt): score} by the definitions, one sentence at a time."""
    sim, fwd, bwd, a_x, a_y = brute_neighbourhoods(x, y, k)
    forward = {}
    for i in range(x.shape[0]):
        scores = [brute_margin(sim[i, j], a_x[i], a_y[j], margin) for j in fwd[i]]
        j = int(fwd[i][int(np.argmax(scores))])
        forward[(i, j)] = max(scores)
    backward = {}
    for j in range(y.shape[0]):
        scores = [brute_margin(sim[i, j], a_x[i], a_y[j], margin) for i in bwd[j]]
        i = int(bwd[j][int(np.argmax(scores))])
        backward[(i, j)] = max(scores)
    if mode == "forward":
        pairs = forward
    elif mode == "backward":
        pairs = backward
    elif mode == "intersect":
        pairs = {p: s for p, s in forward.items() if p in backward}
    elif mode == "union":
        pairs = {**backward, **forward}
    else:  # max: greedy over all forward and backward best candidates
        candidates = sorted(list(forward.items()) + list(backward.items()), key=lambda item: -item[1])
        used_src, used_tgt, pairs = set(), set(), {}
        for (i, j), score in candidates:
            if i not in used_src and j not in used_tgt:
                used_src.add(i)
                used_tgt.add(j)
                pairs[(i, j)] = score
    if threshold is not None:
        pairs = {p: s for p, s in pairs.items() if s >= threshold}
    return pairs


def brute_xsim(x, y, k=4, margin="ratio", target_texts=None) -> tuple[int, int]:
    sim, fwd, _, a_x, a_y = brute_neighbourhoods(x, y, k)
    errors = 0
    for i in range(x.shape[0]):
        scores = [brute_margin(sim[i, j], a_x[i], a_y[j], margin) for j in fwd[i]]
        predicted = int(fwd[i][int(np.argmax(scores))])
        if target_texts is None:
            errors += predicted != i
        else:
            errors += target_texts[predicted] != target_texts[i]
    return errors, x.shape[0]


def brute_accuracy(x, y) -> tuple[float, float]:
    sim = x.astype(np.float64) @ y.astype(np.float64).T
    gold = np.arange(x.shape[0])
    return float((sim.argmax(axis=1) == gold).mean()), float((sim.argmax(axis=0) == gold).mean())


def brute_best_f1(scores, labels, n_gold) -> float:
    """Best F1 over every threshold that can separate the scores."""
    best = 0.0
    for t in sorted(set(scores)):
        kept = [label for score, label in zip(scores, labels) if score >= t]
        tp = sum(kept)
        if tp:
            p, r = tp / len(kept), tp / n_gold
            best = max(best, 2 * p * r / (p + r))
    return best
