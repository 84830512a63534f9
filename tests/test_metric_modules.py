"""The metric folders as a hub user meets them: `evaluate.load(<folder>)` on each, the same numbers as the functional
API on data with duplicates and ties, every import declared in the folder's requirements.txt, a card, and one clear
line from `evaluate` when bitext-hf is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import evaluate
import numpy as np
import pytest

from bitext_hf.evaluation.metrics import METRIC_NAMES, metric_path
from bitext_hf.evaluation.metrics import functional as F


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setattr(evaluate.config, "HF_EVALUATE_OFFLINE", True)


def tied_pairs(n: int = 40, d: int = 8):
    """Aligned embeddings and texts where sentences repeat: repeated rows are the same vector, so their cosines tie
    exactly, and retrieving either copy is a hit only in text mode."""
    rng = np.random.default_rng(21)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x + 0.8 * rng.standard_normal((n, d))).astype(np.float32)
    src_texts, tgt_texts = [f"source {i}" for i in range(n)], [f"target {i}" for i in range(n)]
    for a, b in ((3, 4), (10, 11), (20, 27)):
        x[b], y[b], src_texts[b], tgt_texts[b] = x[a], y[a], src_texts[a], tgt_texts[a]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, y, src_texts, tgt_texts


def load(name: str):
    return evaluate.load(str(metric_path(name)))


@pytest.mark.parametrize("margin", ["ratio", "absolute"])
def test_xsim_module_equals_functional(offline, margin):
    x, y, _, tgt_texts = tied_pairs()
    xsim = load("xsim")
    for texts in (None, tgt_texts):
        expected = F.xsim(x, y, k=4, margin=margin, target_texts=texts)
        got = xsim.compute(source_embeddings=x, target_embeddings=y, k=4, margin=margin, target_texts=texts)
        assert got == expected
    # The duplicates matter: text mode forgives a retrieved copy of the gold target.
    assert F.xsim(x, y, target_texts=tgt_texts)["errors"] < F.xsim(x, y)["errors"]


def test_accuracy_and_mteb_modules_equal_functional(offline):
    x, y, src_texts, tgt_texts = tied_pairs()
    accuracy = load("bitext_accuracy")
    for texts in ({}, {"source_texts": src_texts, "target_texts": tgt_texts}):
        got = accuracy.compute(source_embeddings=x, target_embeddings=y, **texts)
        assert got == F.bitext_accuracy(x, y, **texts)
    mteb = load("mteb_bitext_mining")
    assert mteb.compute(source_embeddings=x, target_embeddings=y) == F.mteb_bitext_mining(x, y)
    gold = [(i, i) for i in range(0, 40, 2)]
    assert mteb.compute(source_embeddings=x, target_embeddings=y, gold=gold) == F.mteb_bitext_mining(x, y, gold)
    assert F.mteb_bitext_mining(x, y)["accuracy"] < 1.0, "the data must make errors for the test to mean something"


def test_bucc_module_equals_functional_with_tied_scores(offline):
    # Tied scores on both sides of the best cut: a threshold cannot separate them.
    scores = [3.0, 2.0, 2.0, 2.0, 1.0, 0.5, 2.5, 2.0, 2.0, 1.0, 1.0]
    labels = [1, 1, 0, 1, 0, 1, 1, 1, 0, 1, 0]
    splits = ["train"] * 6 + ["test"] * 5
    got = load("bucc_f1").compute(scores=scores, labels=labels, splits=splits, n_gold_train=5, n_gold_test=4)
    expected = F.bucc_f1(
        scores[6:], labels[6:], n_gold_test=4, train_scores=scores[:6], train_labels=labels[:6], n_gold_train=5
    )
    assert got == expected and 0 < expected["f1"] < 1


def _distribution(import_name: str) -> str:
    return {"sklearn": "scikit-learn"}.get(import_name, import_name).replace("_", "-").lower()


@pytest.mark.parametrize("name", METRIC_NAMES)
def test_folder_is_a_self_contained_hub_metric(name):
    folder = metric_path(name)
    assert sorted(path.name for path in folder.iterdir() if path.name != "__pycache__") == sorted(
        [f"{name}.py", "README.md", "requirements.txt"]
    )
    requirements = {
        re.split(r"[<>=!~\[; ]", line.strip(), maxsplit=1)[0].lower()
        for line in (folder / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    # What evaluate itself checks before it runs a hub script: every library the script imports.
    imports = evaluate.loading.get_imports(str(folder / f"{name}.py"))
    standard = set(sys.stdlib_module_names) | {"__future__"}
    libraries = {_distribution(lib) for kind, lib, _, _ in imports if kind == "library" and lib not in standard}
    assert libraries <= requirements, f"imported but not declared in {name}/requirements.txt"
    assert "bitext-hf" in requirements and not [kind for kind, *_ in imports if kind != "library"]
    card = (folder / "README.md").read_text()
    assert card.startswith("---\n") and "- evaluate\n- metric\n" in card
    assert f'evaluate.load(str(metric_path("{name}")))' in card and f'evaluate.load("<user>/{name}")' in card


_WITHOUT_BITEXT_HF = """
import importlib.abc, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "bitext_hf" or name.startswith("bitext_hf."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, Hide())
import evaluate
try:
    evaluate.load(sys.argv[1])
except ImportError as error:
    print("IMPORT ERROR:", error)
"""


@pytest.mark.slow
def test_a_user_without_bitext_hf_gets_one_line_naming_the_package(tmp_path, monkeypatch):
    # The folder as a hub user downloads it: outside the package, with only evaluate importable.
    folder = shutil.copytree(metric_path("xsim"), tmp_path / "xsim")
    monkeypatch.setenv("HF_EVALUATE_OFFLINE", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "modules"))
    result = subprocess.run(
        [sys.executable, "-c", _WITHOUT_BITEXT_HF, str(folder)], capture_output=True, text=True, timeout=120
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("IMPORT ERROR:")]
    assert len(lines) == 1, result.stdout + result.stderr
    assert "pip install bitext_hf" in lines[0] and "xsim" in lines[0]
