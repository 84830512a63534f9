"""A tiny deterministic encoder for command-line tests, so that they cost no model load and no encoding time.

A sentence's meaning is its text before ``|`` (the whole text when there is none): ``"cat|en"`` and ``"cat|de"``
embed close together (translations), different meanings far apart.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from bitext_hf.cli import main

DIM = 16


def fake_embedding(sentence: str) -> np.ndarray:
    meaning = sentence.split("|")[0]
    base = np.random.default_rng(zlib.crc32(meaning.encode())).standard_normal(DIM)
    noise = np.random.default_rng(zlib.crc32(sentence.encode())).standard_normal(DIM) * 0.05
    vector = base + noise
    return (vector / np.linalg.norm(vector)).astype(np.float32)


class FakeEncoder:
    def __init__(self, spec: str | None) -> None:
        self.spec = spec
        self.encoded: list[list[str]] = []

    def encode(self, sentences: Sequence[str], batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        self.encoded.append(list(sentences))
        return np.stack([fake_embedding(s) for s in sentences]) if sentences else np.empty((0, DIM), np.float32)


class FakeEncoders:
    """Records every ``load_encoder`` call; ``loaded`` is the list of specs in load order."""

    def __init__(self) -> None:
        self.loaded: list[str | None] = []
        self.encoders: list[FakeEncoder] = []

    def __call__(self, spec=None, *, pooling=None, **kwargs) -> FakeEncoder:
        self.loaded.append(spec)
        self.encoders.append(FakeEncoder(spec))
        return self.encoders[-1]

    @property
    def n_encoded(self) -> int:
        return sum(len(batch) for encoder in self.encoders for batch in encoder.encoded)


def install_fake_encoders(monkeypatch) -> FakeEncoders:
    """Make ``bitext_hf.encoders.load_encoder`` return fake encoders (use in a fixture)."""
    fakes = FakeEncoders()
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", fakes)
    return fakes


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--quiet"])
    out, err = capsys.readouterr()
    return code, out, err


def write_lines(path, lines: Sequence[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


SOURCES = ["cat|en", "dog|en", "tree|en", "house|en", "river|en"]
TARGETS = ["tree|de", "river|de", "cat|de", "house|de", "dog|de"]
# Line i of SOURCES is the translation of line GOLD[i] of TARGETS.
GOLD = {(0, 2), (1, 4), (2, 0), (3, 3), (4, 1)}


class SumEncoder:
    """A run of words embeds as the sum of their words' meanings (``cat|en`` and ``cat|de`` mean the same: the word
    before the bar, as :meth:`meaning_of` reads it), so the right grouping of sentences into beads has the highest
    cosine; ``encoded`` lists every text it was given. ``normalized``: rows L2-normalized."""

    normalized = False

    def __init__(self) -> None:
        self.encoded: list[str] = []

    @staticmethod
    def meaning_of(word: str) -> str:
        return word.split("|")[0]

    def encode(self, texts, batch_size=128, show_progress=False):
        self.encoded.extend(texts)
        vectors = np.stack([sum(self._meaning(word) for word in text.split()) for text in texts])
        if self.normalized:
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors.astype(np.float32)

    def _meaning(self, word: str) -> np.ndarray:
        return np.random.default_rng(zlib.crc32(self.meaning_of(word).encode())).standard_normal(32)


def use_encoder(monkeypatch, fake):
    """Make ``bitext_hf.encoders.load_encoder`` return ``fake`` whatever it is asked for; returns ``fake``."""
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", lambda spec=None, **options: fake)
    return fake
