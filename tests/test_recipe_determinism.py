"""The same seed gives the same model: for each of the four recipes, two runs with the same seed and data end with
bit-identical weights, and so does a run interrupted at a checkpoint and resumed; the vocabulary a recipe trains is
the same in every process; nothing depends on PYTHONHASHSEED.

Each recipe trains its own vocabulary here (no ``--tokenizer``), as the smoke configurations do: that vocabulary was
the difference between two runs (the ``tokenizers`` Unigram trainer is not deterministic). The second run reads the
first run's caches where a recipe has a cache option (word alignments, teacher embeddings), and the resumed run
starts in a fresh output folder from the first run's checkpoint, so it prepares its vocabulary and caches again:
either way the data must be the same. The runs reuse the tiny configurations of each recipe's own tests.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from recipe_support import bare_packages, import_recipe, run_align
from safetensors.torch import load_file
from test_distill_recipe import corpus_files, tiny_args  # noqa: F401  (corpus_files: a fixture used below)
from test_musr_recipe import files  # noqa: F401  (a fixture used below)
from test_musr_recipe import flags as musr_flags
from test_musr_recipe import run as run_musr
from test_onealigner_recipe import data_files, recipe_flags  # noqa: F401  (data_files: a fixture used below)
from transformers import TrainingArguments

from bitext_hf.training import ModelArguments, parse_args, run_recipe

# The slow set (`python -m pytest -m slow`, which CI also runs): every recipe run twice in subprocesses.
pytestmark = pytest.mark.slow


def _own_vocabulary(flags: list[str], vocab_size: int) -> list[str]:
    """``flags`` without ``--tokenizer PATH``: the recipe trains its vocabulary on the data."""
    at = flags.index("--tokenizer")
    return [*flags[:at], *flags[at + 2 :], "--vocab_size", str(vocab_size)]


def assert_same_weights(expected_dir: Path, actual_dir: Path) -> None:
    """Bit-identical ``model.safetensors``; the message names the tensor that differs most, and by how much."""
    expected, actual = load_file(expected_dir / "model.safetensors"), load_file(actual_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    differences = {
        (tensor.double() - actual[name].double()).abs().max().item(): name
        for name, tensor in expected.items()
        if not torch.equal(tensor, actual[name])
    }
    if differences:
        worst = max(differences)
        pytest.fail(f"{len(differences)} of {len(expected)} tensors differ, most {differences[worst]} by {worst:.3g}")


def test_contrastive_align(tmp_path: Path, uninterrupted_align: tuple[Path, dict]) -> None:
    # The first run is the session's uninterrupted one (conftest), which test_contrastive_align_resume uses too.
    first, _ = uninterrupted_align
    second, resumed = tmp_path / "second", tmp_path / "resumed"
    # The second run reads the first run's word alignments, with two dataloader workers.
    run_align(second, "--alignment_cache", str(first / "alignments"), "--dataloader_num_workers", "2")
    assert_same_weights(first, second)
    run_align(resumed, "--resume_from_checkpoint", str(first / "checkpoint-3"))
    assert_same_weights(first, resumed)


def test_distill_wolof(tmp_path: Path, corpus_files: list[str]) -> None:  # noqa: F811
    recipe = import_recipe("distill_wolof")
    first, second, resumed = tmp_path / "first", tmp_path / "second", tmp_path / "resumed"
    common = ("--eval_steps", "0", "--save_total_limit", "3")
    recipe.main(*tiny_args(recipe, corpus_files, first, *common))
    # The second run reads the first run's teacher embeddings.
    recipe.main(*tiny_args(recipe, corpus_files, second, *common, "--cache_dir", str(first / "teacher_cache")))
    assert_same_weights(first, second)
    recipe.main(
        *tiny_args(recipe, corpus_files, resumed, *common, "--resume_from_checkpoint", str(first / "checkpoint-4"))
    )
    assert_same_weights(first, resumed)


def test_train_onealigner(tmp_path: Path, data_files: dict) -> None:  # noqa: F811
    recipe = import_recipe("train_onealigner")
    first, second, resumed = tmp_path / "first", tmp_path / "second", tmp_path / "resumed"

    def main(output_dir: Path, *extra: str) -> None:
        flags = _own_vocabulary(recipe_flags(data_files, output_dir, "--ablation", "false", *extra), 150)
        recipe.main(*parse_args(recipe.ScriptArguments, TrainingArguments, ModelArguments, args=flags))

    main(first)
    main(second)
    assert_same_weights(first, second)
    main(resumed, "--resume_from_checkpoint", str(first / "checkpoint-2"), "--eval_before_training", "false")
    assert_same_weights(first, resumed)


def test_train_musr(tmp_path: Path, files: dict) -> None:  # noqa: F811
    recipe = import_recipe("train_musr")
    first, second, resumed = tmp_path / "first", tmp_path / "second", tmp_path / "resumed"
    saving = ("--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1")
    for output_dir in (first, second):
        run_musr(recipe, _own_vocabulary(musr_flags(files, output_dir, *saving), 150))
    assert_same_weights(first, second)
    # Only checkpoint-1 of stage 1 is kept (no vocabulary): the resumed run trains its vocabulary again.
    shutil.copytree(first / "stage1" / "checkpoint-1", resumed / "stage1" / "checkpoint-1")
    run_musr(recipe, _own_vocabulary(musr_flags(files, resumed, *saving, "--resume_from_checkpoint", "auto"), 150))
    assert_same_weights(first, resumed)


# The other process imports the tokenizer module alone (bare_packages), not the whole training package.
_VOCABULARY = (
    bare_packages("bitext_hf.training")
    + """
import hashlib, sys
from bitext_hf.training.tokenizer import train_tokenizer
texts = [line.strip() for line in open(sys.argv[1], encoding="utf-8")]
print(hashlib.sha256(train_tokenizer(texts, vocab_size=200).backend_tokenizer.to_str().encode()).hexdigest())
"""
)


def test_trained_vocabulary_is_the_same_in_every_process(tmp_path: Path, tiny_parallel_corpus) -> None:
    from bitext_hf.training import train_tokenizer

    texts = [text for pair in tiny_parallel_corpus for text in pair]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"{text}\n" for text in texts), encoding="utf-8")
    here = [train_tokenizer(texts, vocab_size=200).backend_tokenizer.to_str() for _ in range(2)]
    assert here[0] == here[1], "two trainings in one process"
    other = subprocess.run(
        [sys.executable, "-c", _VOCABULARY, str(corpus)], capture_output=True, text=True, check=True, timeout=120
    )
    assert other.stdout.strip() == hashlib.sha256(here[0].encode()).hexdigest(), "another process"


# The sampling module alone (bare_packages): the family's package would import torch and transformers.
_TASK_PROBABILITIES = (
    bare_packages("bitext_hf.families.laser3")
    + """
from bitext_hf.families.laser3.sampling import Stream, TaskSampler
streams = [Stream(task, task, 10 + index) for index, task in enumerate(("distil", "self", "mask"))]
weights = {"distil": 0.1, "self": 0.2, "mask": 0.3}
print(TaskSampler(streams, weights, task_sampling="probability").probabilities.tobytes().hex())
"""
)


def test_task_probabilities_do_not_depend_on_the_hash_seed() -> None:
    # Hash seeds 0 and 2 iterate {"distil", "self", "mask"} in two orders whose float sums of 0.1, 0.2, 0.3 differ.
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _TASK_PROBABILITIES],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("0", "2")
    }
    assert len(outputs) == 1


_DETERMINISM_VARIABLES = (
    "CUDA_LAUNCH_BLOCKING",
    "ASCEND_LAUNCH_BLOCKING",
    "HCCL_DETERMINISTIC",
    "FLASH_ATTENTION_DETERMINISTIC",
)


def test_full_determinism_is_on_before_the_recipe_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # cuBLAS reads CUBLAS_WORKSPACE_CONFIG when it starts: a recipe uses the device before its Trainer exists.
    for variable in ("CUBLAS_WORKSPACE_CONFIG", *_DETERMINISM_VARIABLES):  # set by the run: restored afterwards
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    for flag in ("deterministic", "benchmark"):
        monkeypatch.setattr(torch.backends.cudnn, flag, getattr(torch.backends.cudnn, flag))
    seen = {}

    def main(training_args: TrainingArguments) -> None:
        seen["deterministic"] = torch.are_deterministic_algorithms_enabled()
        seen["workspace"] = os.environ.get("CUBLAS_WORKSPACE_CONFIG")

    try:
        run_recipe(main, TrainingArguments, args=["--output_dir", "unused", "--full_determinism", "true"])
    finally:
        torch.use_deterministic_algorithms(False)
    assert seen == {"deterministic": True, "workspace": ":16:8"}
