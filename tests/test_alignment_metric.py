"""alignment_f1 equals vecalign's own score.py (tests/vecalign_score.py) on the same alignments, edge cases included,
through the function and the `evaluate` module; vecalign-format files are read as vecalign reads them."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from vecalign_score import score_multiple

from bitext_hf.data.alignment_files import read_beads
from bitext_hf.errors import DataValidationError
from bitext_hf.evaluation.metrics import alignment_f1, load

VECALIGN = os.environ.get("VECALIGN_REPO", "/work/.mirror/thompsonb+vecalign/repo")


def random_alignment(rng, n: int, m: int) -> list[tuple[list[int], list[int]]]:
    """Beads covering n x m sentences in order, of random sizes (1-0 and 0-1 included)."""
    beads, i, j = [], 0, 0
    while i < n or j < m:
        a = int(rng.integers(0, 3)) if i < n else 0
        b = int(rng.integers(0, 3)) if j < m else 0
        a, b = min(a, n - i), min(b, m - j)
        if a == b == 0:
            continue
        beads.append((list(range(i, i + a)), list(range(j, j + b))))
        i, j = i + a, j + b
    return beads


def perturbed(rng, beads):
    """A test alignment close to ``beads``: some neighbours merged, some split into a bead and a deletion."""
    out = []
    for xs, ys in beads:
        if out and rng.random() < 0.2:
            px, py = out.pop()
            out.append((px + xs, py + ys))
        elif len(xs) > 1 and rng.random() < 0.3:
            out += [(xs[:1], ys), (xs[1:], [])]
        else:
            out.append((xs, ys))
    return out


def assert_same(gold, test):
    ours = alignment_f1(gold, test)
    theirs = score_multiple(gold_list=gold, test_list=test)
    assert ours == pytest.approx({key: float(value) for key, value in theirs.items()}, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_equals_vecalign_score_on_random_documents(seed):
    rng = np.random.default_rng(seed)
    gold, test = [], []
    for _ in range(int(rng.integers(1, 4))):
        n, m = int(rng.integers(0, 30)), int(rng.integers(0, 30))
        beads = random_alignment(rng, n, m)
        gold.append(beads)
        test.append(perturbed(rng, beads) if rng.random() < 0.7 else random_alignment(rng, n, m))
    assert_same(gold, test)


@pytest.mark.parametrize(
    "gold, test",
    [
        ([[]], [[]]),  # nothing on either side: every ratio 0
        ([[([0], [0])]], [[]]),
        ([[]], [[([0], [0])]]),
        ([[([], [])]], [[([], []), ([0], [0])]]),  # beads empty on both sides are ignored
        ([[([0], []), ([], [0])]], [[([0], []), ([], [0])]]),  # deletions only: precision counts them, recall not
        ([[([0], [0]), ([1], [])]], [[([0, 1], [0])]]),  # a lax hit, not a strict one
        ([[([0], [0])]], [[([0], [0]), ([0], [0])]]),  # a repeated bead counts once
        ([[([0, 1], [0, 1])], [([0], [])]], [[([0], [0]), ([1], [1])], [([], [0])]]),
    ],
)
def test_equals_vecalign_score_on_edge_cases(gold, test):
    assert_same(gold, test)


def _bleualign(name: str) -> str:
    return subprocess.run(
        ["git", "-C", VECALIGN, "show", f"HEAD:bleualign_data/{name}"], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.skipif(not os.path.isdir(VECALIGN), reason="needs a checkout of vecalign (VECALIGN_REPO)")
def test_equals_vecalign_score_on_the_bleualign_gold_files(tmp_path):
    rng = np.random.default_rng(0)
    gold = []
    for number in range(7):
        path = tmp_path / f"test{number}.defr"
        path.write_text(_bleualign(f"test{number}.defr"))
        gold.append(read_beads(path))
    test = [perturbed(rng, beads) for beads in gold]
    assert_same(gold, test)
    assert alignment_f1(gold, gold)["f1_strict"] == 1.0


def test_the_evaluate_module_gives_the_function_s_numbers():
    rng = np.random.default_rng(3)
    gold = [random_alignment(rng, 12, 10), random_alignment(rng, 5, 0)]
    test = [perturbed(rng, gold[0]), gold[1]]
    metric = load("alignment_f1")
    as_lists = [[[list(xs), list(ys)] for xs, ys in document] for document in test]
    gold_lists = [[[list(xs), list(ys)] for xs, ys in document] for document in gold]
    assert metric.compute(predictions=as_lists, references=gold_lists) == pytest.approx(alignment_f1(gold, test))


def test_read_beads_reads_vecalign_files_with_and_without_scores(tmp_path):
    path = tmp_path / "a.align"
    path.write_text("[0]:[0, 1]\n[1, 2]:[]:0.000000\n[]:[2]:-0.1\n\n")
    assert read_beads(path) == [([0], [0, 1]), ([1, 2], []), ([], [2])]
    for bad in ("[0]\n", "[0]:[x]\n", "__import__('os'):[1]\n", "[-1]:[0]\n", "[[0]]:[0]\n"):
        path.write_text(bad)
        with pytest.raises(DataValidationError, match=r"a\.align:1: expected a bead"):
            read_beads(path)


def test_documents_must_pair_up():
    with pytest.raises(ValueError, match="1 gold and 2 test"):
        alignment_f1([[]], [[], []])
