"""Real embeddings for tests: the bundled demo (Django UI messages, en-de) encoded with the embedded USE v3."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

DEMO = Path(__file__).resolve().parents[1] / "bitext_hf" / "demo"


@functools.cache
def demo_texts() -> tuple[list[str], list[str], list[tuple[int, int]]]:
    from bitext_hf.data import read_lines

    gold = [tuple(map(int, line.split("\t"))) for line in (DEMO / "gold.tsv").read_text().splitlines()[1:]]
    return read_lines(DEMO / "en.txt"), read_lines(DEMO / "de.txt"), gold


@functools.cache
def demo_embeddings() -> tuple[np.ndarray, np.ndarray]:
    from bitext_hf.encoders import USEEncoder

    en, de, _ = demo_texts()
    encoder = USEEncoder()
    return encoder.encode(en), encoder.encode(de)


def demo_aligned() -> tuple[np.ndarray, np.ndarray, list[str], list[str]]:
    """Only the gold pairs, row i of each side aligned: real data for xsim / accuracy."""
    en, de, gold = demo_texts()
    x, y = demo_embeddings()
    src_rows, tgt_rows = [i for i, _ in gold], [j for _, j in gold]
    return x[src_rows], y[tgt_rows], [en[i] for i in src_rows], [de[j] for j in tgt_rows]
