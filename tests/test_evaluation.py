"""bitext_hf.evaluation: the multi-seed runner, zero-shot transfer on toy data, word- and sentence-level retrieval."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_word_alignment import tiny_tokenizer, tiny_word_model

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.evaluation import (
    DEFAULT_SEEDS,
    ZeroShotTransfer,
    run_over_seeds,
    sentence_retrieval,
    word_retrieval_accuracy,
    zero_shot_transfer,
)

# -- seeds ------------------------------------------------------------------------------------------------------------


def test_mean_and_sample_std_per_metric() -> None:
    report = run_over_seeds(lambda seed: {"seed": seed, "twice": 2 * seed}, seeds=[1, 2, 6])
    assert report.seeds == [1, 2, 6]
    assert report.mean == {"seed": 3.0, "twice": 6.0}
    assert report.std["seed"] == pytest.approx(np.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + (6 - 3) ** 2) / 2))
    assert report.std["twice"] == pytest.approx(2 * report.std["seed"])
    assert report.format(digits=1)["seed"] == "3.0 +- 2.6"
    assert run_over_seeds(lambda seed: {"x": 1.0}, seeds=1).std == {"x": 0.0}


def test_seed_runner_reproduces_itself_and_seeds_torch() -> None:
    noisy = lambda seed: {"draw": float(torch.rand(()))}  # noqa: E731  (uses the global RNG the runner seeds)
    first, second = run_over_seeds(noisy, seeds=3), run_over_seeds(noisy, seeds=3)
    assert first.seeds == list(DEFAULT_SEEDS[:3])
    assert first.runs == second.runs
    assert len({run["draw"] for run in first.runs}) == 3  # different seeds, different draws
    assert len(run_over_seeds(noisy, seeds=7).seeds) == 7


def test_seed_runner_refuses_bad_input() -> None:
    with pytest.raises(UsageError, match="no repeats"):
        run_over_seeds(lambda seed: {"x": 1.0}, seeds=[1, 1])
    with pytest.raises(UsageError, match="reported metrics"):
        run_over_seeds(lambda seed: {"x": 1.0} if seed == 1 else {"y": 1.0}, seeds=[1, 2])
    with pytest.raises(UsageError, match="not a finite"):
        run_over_seeds(lambda seed: {"x": float("nan")}, seeds=[1])


# -- zero-shot transfer -------------------------------------------------------------------------------------------------

_TRAIN = [("good film", 1), ("great film", 1), ("bad film", 0), ("awful film", 0)] * 4
_TESTS = {"en": [("good film", 1), ("bad film", 0)], "fr": [("bon film", 1), ("mauvais film", 0)]}
_POSITIVE = {"good": 0, "great": 0, "bon": 0}


def _encoder(aligned: bool):
    """Toy sentence embeddings: class direction per word; an unaligned French puts its words on the other side."""

    def encode(texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            word = text.split()[0]
            positive = word in _POSITIVE
            if not aligned and word in ("bon", "mauvais"):
                positive = not positive
            rows.append([1.0, 0.1] if positive else [-1.0, 0.1])
        return np.asarray(rows, dtype=np.float32)

    return encode


def test_zero_shot_transfer_rewards_an_aligned_space() -> None:
    aligned = zero_shot_transfer(_encoder(True), _TRAIN, _TESTS, seed=0, epochs=30)
    assert aligned == {"en/accuracy": 1.0, "fr/accuracy": 1.0, "transfer_accuracy": 1.0}
    unaligned = zero_shot_transfer(_encoder(False), _TRAIN, _TESTS, seed=0, epochs=30)
    assert unaligned["en/accuracy"] == 1.0 and unaligned["transfer_accuracy"] == 0.0
    # A per-language encoder (a linear mapping's W) embeds French its own way, English keeps ``encode``.
    mapped = zero_shot_transfer(
        _encoder(False), _TRAIN, _TESTS, seed=0, epochs=30, test_encoders={"fr": _encoder(True)}
    )
    assert mapped == {"en/accuracy": 1.0, "fr/accuracy": 1.0, "transfer_accuracy": 1.0}


def test_zero_shot_over_seeds_and_bad_data() -> None:
    report = run_over_seeds(ZeroShotTransfer(_encoder(True), _TRAIN, _TESTS, epochs=10), seeds=2)
    assert report.mean["transfer_accuracy"] == 1.0 and report.std["transfer_accuracy"] == 0.0
    with pytest.raises(DataValidationError, match="single label"):
        zero_shot_transfer(_encoder(True), [("good film", 1)], _TESTS)
    with pytest.raises(DataValidationError, match="'fr', example 1: empty text"):
        zero_shot_transfer(_encoder(True), _TRAIN, {"fr": [("  ", 1)]})


# -- retrieval ----------------------------------------------------------------------------------------------------------


def test_word_retrieval_accuracy_on_aligned_words() -> None:
    model, tokenizer = tiny_word_model(), tiny_tokenizer()
    source = [["the", "cat", "sleeps"], ["a", "dog", "runs"]]
    same = word_retrieval_accuracy(model, tokenizer, source, source, [[(0, 0), (1, 1)], [(1, 1), (2, 2)]], layer=0)
    assert same["accuracy"] == 1.0 and same["word_pairs"] == 4.0
    # Linking each word to a different one (and mapping the target side by a flip) loses the retrieval.
    flipped = torch.flip(torch.eye(32), [0])
    shuffled = word_retrieval_accuracy(
        model, tokenizer, source, source, [[(0, 1), (1, 0)], [(1, 2), (2, 1)]], layer=0, target_map=flipped
    )
    assert shuffled["accuracy"] < 1.0
    with pytest.raises(DataValidationError, match="no aligned word pair"):
        word_retrieval_accuracy(model, tokenizer, source, source, [[], []])


def test_sentence_retrieval_xsim() -> None:
    model, tokenizer = tiny_word_model(), tiny_tokenizer()
    sentences = ["the cat sleeps", "a dog runs", "le chat dort", "un chien court"]
    result = sentence_retrieval(model, tokenizer, sentences, sentences)
    assert result == {"xsim": 0.0, "sentence_accuracy": 1.0}
