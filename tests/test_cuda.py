"""The CUDA paths: the exact kNN engine in float32 and half precision, the metrics, the encoders in float32 and
bfloat16, and the four recipes trained in bfloat16, each checked against a float64 or CPU reference.

Skipped where no CUDA device is (CI); run on a GPU machine by ``benchmarks/gpu/device_checks.sh``. With
``BITEXT_HF_TEST_DEVICE=cpu`` the same checks run on the CPU, which is how the file itself is checked before a GPU
run (the recipes then train under CPU bfloat16 autocast).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from recipe_support import import_recipe, run_align
from test_distill_recipe import corpus_files, tiny_args  # noqa: F401  (corpus_files: a fixture used below)
from test_musr_recipe import files  # noqa: F401  (a fixture used below)
from test_musr_recipe import flags as musr_flags
from test_musr_recipe import run as run_musr
from test_onealigner_recipe import data_files, recipe_flags  # noqa: F401  (data_files: a fixture used below)
from transformers import AutoModel, TrainingArguments

from bitext_hf.encoders import HFEncoder
from bitext_hf.evaluation.metrics.functional import bitext_accuracy, xsim
from bitext_hf.mining.knn import bidirectional_knn, column_topk, knn_search, row_topk
from bitext_hf.training import ModelArguments, parse_args

DEVICE = os.environ.get("BITEXT_HF_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device")
ROOT = Path(__file__).resolve().parents[1]
# The recipes train on DEVICE in bfloat16: the flags that say so come last, so they win over the tests' own.
DEVICE_FLAGS = ("--use_cpu", "true" if DEVICE == "cpu" else "false", "--bf16", "true")


def embeddings_with_duplicates_and_ties(seed: int, n: int = 1500, m: int = 1200, d: int = 48):
    """Sources and targets whose neighbourhoods hold exact duplicates (tied similarities), near copies and
    unrelated rows; unit length."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = np.concatenate([x[:400], x[:400] + 0.05 * rng.standard_normal((400, d)), rng.standard_normal((m - 800, d))])
    x[-100:] = x[:100]  # duplicate sources: tied rows in the backward lists
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x.astype(np.float32), y.astype(np.float32)


def assert_true_neighbours(sims, indices, reference, tolerance):
    """``indices`` are top-k neighbours under ``reference`` (float64 similarities): the similarity each returned
    neighbour really has equals the reference's k best, sorted, within ``tolerance``, and ``sims`` says it. Ties
    may be broken either way."""
    k = indices.shape[1]
    best = -np.sort(-reference, axis=1)[:, :k]
    chosen = np.take_along_axis(reference, indices, axis=1)
    assert (indices >= 0).all()
    assert np.abs(-np.sort(-chosen, axis=1) - best).max() <= tolerance
    assert np.abs(sims - chosen).max() <= tolerance


@pytest.mark.parametrize(("precision", "tolerance"), [("fp32", 1e-5), ("fp16", 2e-3), ("bf16", 1.6e-2)])
def test_bidirectional_knn_finds_the_float64_neighbours(precision, tolerance):
    x, y = embeddings_with_duplicates_and_ties(0)
    reference = x.astype(np.float64) @ y.astype(np.float64).T
    # Small blocks, so that merging across row and column blocks is exercised too.
    knn = bidirectional_knn(x, y, 5, device=DEVICE, backend="torch", precision=precision, block_elements=1 << 18)
    assert_true_neighbours(knn.forward_sims, knn.forward_indices, reference, tolerance)
    assert_true_neighbours(knn.backward_sims, knn.backward_indices, reference.T, tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_grouped_top_k_equals_torch_top_k_on_a_block_of_the_engine_s_size(dtype):
    generator = torch.Generator(device=DEVICE).manual_seed(0)
    sims = torch.randn(4096, 65536 + 100, device=DEVICE, generator=generator).to(dtype)  # a partial last group
    sims[:, 1000] = sims[:, 5]  # ties
    for k in (1, 4, 16):
        values, indices = row_topk(sims, k)
        assert torch.equal(values, sims.topk(k, dim=1).values) and torch.equal(sims.gather(1, indices), values)
        values, indices = column_topk(sims, k)
        assert torch.equal(values, sims.T.topk(k, dim=1).values) and torch.equal(sims.T.gather(1, indices), values)


def test_knn_search_and_the_metrics_equal_the_cpu():
    x, y = embeddings_with_duplicates_and_ties(1)
    sims, indices = knn_search(x, y, 4, backend="torch", device=DEVICE)
    cpu_sims, cpu_indices = knn_search(x, y, 4, backend="torch", device="cpu")
    np.testing.assert_allclose(sims, cpu_sims, atol=1e-5)
    assert (indices == cpu_indices).mean() > 0.99  # float32 rounding may swap true near-ties
    gold = list(range(400)) + [0] * (len(x) - 400)
    assert xsim(x, y, gold=gold, device=DEVICE) == xsim(x, y, gold=gold, device="cpu")
    texts = [f"sentence {i % 700}" for i in range(1200)]
    on_device = bitext_accuracy(x[:1200], y, source_texts=texts, target_texts=texts, device=DEVICE)
    assert on_device == bitext_accuracy(x[:1200], y, source_texts=texts, target_texts=texts, device="cpu")


SENTENCES = ["Open file", "Datei öffnen", "Ouvrir le fichier", "Save as…", "Speichern unter…", "Quit"] * 3


def test_encoder_float32_equals_the_cpu_and_bfloat16_stays_close(tiny_model_dir, monkeypatch):
    if DEVICE == "cpu":  # this file checked on the CPU: bfloat16 as if native, emulated where it is not
        from bitext_hf.encoders import precision

        monkeypatch.setattr(precision, "native_bf16", lambda: True)
    reference = HFEncoder(tiny_model_dir, device="cpu", quantize="none").encode(SENTENCES, batch_size=4)
    float32 = HFEncoder(tiny_model_dir, device=DEVICE, quantize="none")
    assert float32.model.device.type == DEVICE
    np.testing.assert_allclose(float32.encode(SENTENCES, batch_size=4), reference, atol=1e-5)
    bf16 = HFEncoder(tiny_model_dir, device=DEVICE, quantize="bf16")
    assert bf16.quantize == "bf16" and next(bf16.model.parameters()).dtype == torch.bfloat16
    assert ((bf16.encode(SENTENCES, batch_size=4) * reference).sum(axis=1) > 0.99).all()
    # A caller's model in bfloat16 runs under autocast on its own device and is left in float32.
    model = AutoModel.from_pretrained(tiny_model_dir).to(DEVICE)
    given = HFEncoder(model, tokenizer=tiny_model_dir, quantize="bf16")
    assert ((given.encode(SENTENCES, batch_size=4) * reference).sum(axis=1) > 0.99).all()
    assert next(model.parameters()).dtype == torch.float32


def trained_on_device(output_dir: Path, global_step: int) -> None:
    """The run trained ``global_step`` steps with finite losses and left finite float32 weights that load."""
    states = [json.loads(path.read_text()) for path in output_dir.glob("**/trainer_state.json")]
    state = max(states, key=lambda state: state["global_step"])  # the last checkpoint's
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert losses and all(math.isfinite(loss) for loss in losses)
    assert state["global_step"] == global_step
    model = AutoModel.from_pretrained(output_dir)
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())


def test_distill_wolof_in_bf16(tmp_path, corpus_files, tiny_model_dir):  # noqa: F811
    recipe = import_recipe("distill_wolof")
    # A Hugging Face teacher, encoding on the device too (the default USE teacher runs on the CPU only).
    teacher = ("--teacher", str(tiny_model_dir))
    recipe.main(*tiny_args(recipe, corpus_files, tmp_path / "run", "--eval_steps", "0", *teacher, *DEVICE_FLAGS))
    trained_on_device(tmp_path / "run", 8)


def test_train_onealigner_in_bf16(tmp_path, data_files):  # noqa: F811
    recipe = import_recipe("train_onealigner")
    flags = recipe_flags(data_files, tmp_path / "run", *DEVICE_FLAGS)
    recipe.main(*parse_args(recipe.ScriptArguments, TrainingArguments, ModelArguments, args=flags))
    trained_on_device(tmp_path / "run", 4)


def test_train_musr_in_bf16(tmp_path, files):  # noqa: F811
    recipe = import_recipe("train_musr")
    run_musr(
        recipe, musr_flags(files, tmp_path / "run", "--save_strategy", "steps", "--save_steps", "3", *DEVICE_FLAGS)
    )
    trained_on_device(tmp_path / "run", 3)


def test_align_contrastive_in_bf16(tmp_path, tiny_pair_specs):
    pairs = ("--train_pairs", tiny_pair_specs["fr"], tiny_pair_specs["de"], "--vocab_size", "200")
    steps = ("--held_out", "4", "--max_steps", "4", "--save_steps", "4")
    run_align(tmp_path / "run", *pairs, *steps, *DEVICE_FLAGS)
    trained_on_device(tmp_path / "run", 4)
