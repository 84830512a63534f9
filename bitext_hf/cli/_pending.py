"""Stand-ins for pieces other parts of the package are adding at the same time (bitext_hf.io, bitext_hf.data,
bitext_hf.mining, bitext_hf.metrics): each name is taken from its owner when it exists, else a minimal version here.

Everything is imported lazily: ``bitext-hf --help`` must not import torch.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bitext_hf.errors import DataValidationError, UsageError

__all__ = ["check_k", "check_output_path", "default_mode", "read_embeddings"]


def check_output_path(path: str, *, inputs=(), option: str = "--out") -> None:
    try:
        from bitext_hf.io import check_output_path as owner
    except ImportError:
        owner = None
    if owner is not None:
        owner(path, inputs=inputs, option=option)
        return
    if path == "":
        raise UsageError(f"{option}: empty path")
    if path == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    parent = target.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {path}: folder {parent} is not writable")
    resolved = os.path.realpath(path)
    for other in inputs:
        if other not in (None, "-") and os.path.realpath(other) == resolved:
            raise UsageError(f"{option} {path} is also an input ({other}); writing it would destroy that input")


def read_embeddings(path: str) -> np.ndarray:
    try:
        from bitext_hf.data import read_embeddings as owner
    except ImportError:
        owner = None
    if owner is not None:
        return owner(path)
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as error:
        raise DataValidationError(f"{path}: not a readable .npy embedding file ({error})") from None


def default_mode() -> str:
    import bitext_hf.mining as mining

    return getattr(mining, "DEFAULT_MODE", "max")


def check_k(k: int, n_src: int, n_tgt: int) -> None:
    import bitext_hf.mining as mining

    if hasattr(mining, "check_k"):
        mining.check_k(k, n_src, n_tgt)


def mine_documents_with_keys(src_emb, tgt_emb, src_docs, tgt_docs, *, src_keys, tgt_keys, **settings):
    """``mine_documents`` with per-document de-duplication by key, and the document id of every pair."""
    import inspect

    from bitext_hf.mining import mine_documents

    if "src_keys" in inspect.signature(mine_documents).parameters:
        pairs = mine_documents(src_emb, tgt_emb, src_docs, tgt_docs, src_keys=src_keys, tgt_keys=tgt_keys, **settings)
    else:  # without keys, a sentence repeated inside one document is mined at each of its lines
        pairs = mine_documents(src_emb, tgt_emb, src_docs, tgt_docs, **settings)
    if getattr(pairs, "doc_ids", None) is None:
        pairs.doc_ids = np.asarray(src_docs)[pairs.src_indices]
    return pairs


def read_mteb_tasks(path: str, *, split=None, subset=None, columns=None) -> dict:
    """``read_mteb`` as {subset name: BitextTask}."""
    from bitext_hf.data import BitextTask, read_mteb

    tasks = read_mteb(path, split=split, subset=subset, **({"columns": columns} if columns else {}))
    return {"default": tasks} if isinstance(tasks, BitextTask) else tasks


def mteb_bitext_mining(source_embeddings: np.ndarray, target_embeddings: np.ndarray, gold) -> dict:
    from bitext_hf.metrics import functional as F

    if hasattr(F, "mteb_bitext_mining"):
        return F.mteb_bitext_mining(source_embeddings, target_embeddings, gold=gold)
    # Minimal stand-in with MTEB's definition: nearest target by cosine, sklearn's weighted precision/recall/F1.
    from sklearn.metrics import f1_score, precision_score, recall_score

    rows = np.asarray([i for i, _ in gold])
    labels = np.asarray([j for _, j in gold])
    predicted = (np.asarray(source_embeddings)[rows] @ np.asarray(target_embeddings).T).argmax(axis=1)
    kw = dict(average="weighted", zero_division=0, labels=np.unique(labels))
    f1 = float(f1_score(labels, predicted, **kw))
    return {
        "accuracy": float((predicted == labels).mean()),
        "precision": float(precision_score(labels, predicted, **kw)),
        "recall": float(recall_score(labels, predicted, **kw)),
        "f1": f1,
        "main_score": f1,
    }
