"""Zero-shot cross-lingual transfer: fit a linear classifier on English only, test it on other languages.

The explicit-alignment paper fine-tunes the whole encoder with a linear head on English task data and tests on
other languages. Here the encoder stays frozen and only the linear head trains, on its sentence embeddings: cheap
enough to repeat over seeds with :func:`bitext_hf.evaluation.run_over_seeds`, and it measures what alignment
changes, whether an English decision boundary holds in the other languages' regions of the space.

Data is local: a list of ``(text, label)`` per language; labels are any hashable values, mapped to classes from
the English training data (a test label never seen in training counts as an error, with a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence

import numpy as np
import torch

from bitext_hf.errors import DataValidationError, UsageError

__all__ = ["ZeroShotTransfer", "zero_shot_transfer"]

logger = logging.getLogger(__name__)

Examples = Sequence[tuple[str, Hashable]]


def _check(examples: Examples, name: str) -> tuple[list[str], list[Hashable]]:
    if not examples:
        raise DataValidationError(f"zero-shot data {name!r} is empty")
    texts, labels = [], []
    for number, example in enumerate(examples, start=1):
        if not isinstance(example, (tuple, list)) or len(example) != 2 or not isinstance(example[0], str):
            raise DataValidationError(f"zero-shot data {name!r}, example {number}: expected (text, label)")
        if not example[0].strip():
            raise DataValidationError(f"zero-shot data {name!r}, example {number}: empty text")
        texts.append(example[0])
        labels.append(example[1])
    return texts, labels


def zero_shot_transfer(
    encode: Callable[[list[str]], np.ndarray],
    train: Examples,
    tests: Mapping[str, Examples],
    *,
    seed: int = 0,
    epochs: int = 100,
    learning_rate: float = 1e-2,
    batch_size: int = 32,
    test_encoders: Mapping[str, Callable[[list[str]], np.ndarray]] | None = None,
) -> dict[str, float]:
    """Train a linear head (softmax regression, Adam) on ``train`` embeddings; accuracy per test language.

    Args:
        encode: texts -> `(n, d)` sentence embeddings (e.g. ``HFEncoder(...).encode``).
        train: English ``(text, label)`` examples.
        tests: {language: examples}; include English to see the in-language accuracy.
        seed: initialisation and batch order of the head (what the seed runner varies).
        test_encoders: {language: encode} for test languages embedded differently from English (a linear
            mapping's per-language W); the others use ``encode``.

    Returns:
        ``{"<lang>/accuracy": ..., "transfer_accuracy": mean over the languages other than the training one}``;
        a language named ``en`` (or the only one) is excluded from the transfer mean when others exist.
    """
    if epochs < 1 or batch_size < 1 or not learning_rate > 0:
        raise UsageError("zero_shot_transfer needs epochs >= 1, batch_size >= 1 and a positive learning_rate")
    if not tests:
        raise UsageError("zero_shot_transfer needs at least one test language")
    texts, labels = _check(train, "train")
    classes = sorted(set(labels), key=repr)
    if len(classes) < 2:
        raise DataValidationError("zero-shot training data has a single label: nothing to classify")
    index = {label: position for position, label in enumerate(classes)}
    features = torch.as_tensor(np.asarray(encode(texts), dtype=np.float32))
    targets = torch.tensor([index[label] for label in labels])
    generator = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(features.shape[1], len(classes))
    with torch.no_grad():  # seeded initialisation, independent of the global RNG state
        head.weight.copy_(torch.randn(head.weight.shape, generator=generator) * 0.01)
        head.bias.zero_()
    optimizer = torch.optim.Adam(head.parameters(), lr=learning_rate)
    for _ in range(epochs):
        order = torch.randperm(len(targets), generator=generator)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(head(features[rows]), targets[rows]).backward()
            optimizer.step()
    results: dict[str, float] = {}
    for language, examples in tests.items():
        test_texts, test_labels = _check(examples, language)
        unseen = sum(label not in index for label in test_labels)
        if unseen:
            logger.warning("zero-shot %s: %d test labels never seen in training count as errors", language, unseen)
        with torch.no_grad():
            embed = (test_encoders or {}).get(language, encode)
            predicted = head(torch.as_tensor(np.asarray(embed(test_texts), dtype=np.float32))).argmax(1).tolist()
        correct = sum(index.get(label, -1) == guess for label, guess in zip(test_labels, predicted))
        results[f"{language}/accuracy"] = correct / len(test_labels)
    others = [name for name in tests if name != "en"] or list(tests)
    results["transfer_accuracy"] = float(np.mean([results[f"{name}/accuracy"] for name in others]))
    return results


class ZeroShotTransfer:
    """``evaluator(seed) -> metrics``: :func:`zero_shot_transfer` with fixed data, for ``run_over_seeds``."""

    def __init__(
        self,
        encode: Callable[[list[str]], np.ndarray],
        train: Examples,
        tests: Mapping[str, Examples],
        **options: float,
    ) -> None:
        self.encode, self.train, self.tests, self.options = encode, list(train), dict(tests), options
        self._embeddings: dict[tuple[str, ...], np.ndarray] = {}

    def _encode_once(self, texts: list[str]) -> np.ndarray:
        # The encoder is frozen: every seed sees the same embeddings, so each text list is encoded once.
        key = tuple(texts)
        if key not in self._embeddings:
            self._embeddings[key] = np.asarray(self.encode(texts), dtype=np.float32)
        return self._embeddings[key]

    def __call__(self, seed: int) -> dict[str, float]:
        return zero_shot_transfer(self._encode_once, self.train, self.tests, seed=seed, **self.options)
