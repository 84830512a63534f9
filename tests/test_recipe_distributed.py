"""A recipe launched in two CPU processes is one distributed job (gloo): the Trainer's parallel mode is DISTRIBUTED,
each rank trains its shard of every global batch, rank 0 alone prepares the vocabulary and the word alignments and
writes the exports while the other waits and reads, and the output folder holds one model that loads. A launch that
cannot be one job is refused in one line before any work (exit 2).

The launches are those of recipes/README.md: ``accelerate launch --config_file recipes/accelerate/multi_cpu.yaml``
and ``torchrun --nproc_per_node 2``, on the smoke configurations cut to a few steps. The torchrun run is compared
with a single-process run of the same global batch and seed: equal within ``EQUAL_TOLERANCE``, where the
configuration makes the two the same computation up to float rounding (see ``test_two_processes_equal_one``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from bitext_hf.errors import UsageError
from bitext_hf.training.distributed import check_launch

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ["recipes/align_contrastive.py", "--config", "recipes/configs/align_contrastive-smoke.yaml"]
FEW_STEPS = ["--max_steps", "4", "--save_steps", "4", "--held_out", "20", "--eval_before_training", "false"]
LAUNCHER_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_CPU")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _clean_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    return {**environment, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def _launch(launcher: list[str], output_dir: Path, *extra: str, environment=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*launcher, *RECIPE, "--output_dir", str(output_dir), *FEW_STEPS, *extra],
        cwd=ROOT,
        env=environment or _clean_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )


ACCELERATE = [
    shutil.which("accelerate") or "accelerate",
    "launch",
    "--config_file",
    "recipes/accelerate/multi_cpu.yaml",
    "--num_processes",
    "2",
]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def _assert_one_job(result: subprocess.CompletedProcess, output_dir: Path, per_device: int) -> None:
    """Two ranks ran as one job on their shards, rank 0 alone prepared and exported, one model folder loads."""
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stderr
    for rank in (0, 1):
        assert f"distributed job: rank {rank} of 2 (gloo)" in log
        assert (
            f"rank {rank} of 2: shard {rank} of each global batch of {2 * per_device} ({per_device} examples per "
            "device)" in log
        )
    # Rank 0 trained the vocabulary and aligned each language once; rank 1 read both.
    assert log.count("reading the tokenizer rank 0 saved") == 1
    assert log.count("word alignments cached in") == 2
    assert log.count("word alignments read from") == 2
    assert log.count("Saved ContrastiveAlignedEncoder") == 1
    assert not list(output_dir.parent.glob(".*staging")) and not list(output_dir.glob(".*staging"))
    assert sorted(path.name for path in output_dir.glob("checkpoint-*")) == ["checkpoint-4"]

    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(output_dir), trust_remote_code=True)
    assert type(model).__name__ == "ContrastiveAlignedEncoder"
    vectors = SentenceTransformer(str(output_dir / "encoder"), device="cpu").encode(["Hallo Welt", "hello world"])
    assert vectors.shape == (2, 32)


def test_two_processes_train_one_model(tmp_path):
    command = [*ACCELERATE, "--main_process_port", str(_free_port())]
    output_dir = tmp_path / "run"
    _assert_one_job(_launch(command, output_dir), output_dir, per_device=32)


# Float rounding only: the two runs sum the same numbers in another order (recipes/README.md has the measure).
EQUAL_TOLERANCE = 1e-6
# What makes the two runs one computation: no dropout (each rank draws its own masks), the l2 objective (the
# contrastive ones take their negatives from the rank's own micro-batch), plain SGD (Adam divides each gradient
# coordinate by its own magnitude: see the test).
SAME_COMPUTATION = ["--objective", "l2", "--dropout", "0", "--optim", "sgd"]


def test_two_processes_equal_one(tmp_path):
    """torchrun with 2 x 16 examples against one process with 32, same seed: the same weights within
    EQUAL_TOLERANCE (measured: 3.7e-9 after four steps). Both see the same global batches (the ranks' shards are
    the two halves of the single-process batch), and each link of the global batch weighs the same (the alignment
    loss's link share).

    Not equal beyond SAME_COMPUTATION: with dropout each rank draws its own masks; the weak and strong objectives
    take their in-batch negatives from each rank's 16 examples, not from the 32; with Adam a coordinate whose
    gradient is zero but for rounding (attention key biases, and under l2 the last LayerNorm's bias, which adds the
    same to both sides of every link) moves by the sign of that rounding times the learning rate: 2.6e-4 apart after
    four steps, every other weight within 3e-8.
    """
    two, one = tmp_path / "two", tmp_path / "one"
    result = _launch(TORCHRUN, two, *SAME_COMPUTATION, "--per_device_train_batch_size", "16")
    _assert_one_job(result, two, per_device=16)
    single = _launch([sys.executable], one, *SAME_COMPUTATION, "--per_device_train_batch_size", "32")
    assert single.returncode == 0, single.stderr[-3000:]
    expected, actual = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    assert expected.keys() == actual.keys()
    worst = max((expected[name].double() - actual[name].double()).abs().max().item() for name in expected)
    assert worst <= EQUAL_TOLERANCE


@pytest.mark.slow  # three more 2-process launches (about 50 s); align_contrastive above covers the launch in the suite
@pytest.mark.parametrize(
    ("recipe", "config", "model_class"),
    [
        ("distill_wolof", "distill_wolof-smoke", "Laser3Student"),
        ("train_musr", "musr-smoke", "MuSREncoderDecoder"),
        ("train_onealigner", "onealigner-smoke", "OneAlignerModel"),
    ],
)
def test_every_family_trains_as_one_job(tmp_path, recipe, config, model_class):
    """The other families' smoke runs, cut to 4 steps, through multi_cpu.yaml: MuSR's stage 2 of every rank starts
    from the stage-1 folder that rank 0 wrote; distill_wolof's teacher cache is filled by rank 0."""
    output_dir = tmp_path / "run"
    command = [*ACCELERATE, "--main_process_port", str(_free_port()), f"recipes/{recipe}.py"]
    flags = ["--config", f"recipes/configs/{config}.yaml", "--output_dir", str(output_dir)]
    result = subprocess.run(
        [*command, *flags, "--max_steps", "4", "--save_steps", "4"],
        cwd=ROOT,
        env=_clean_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert f"distributed job: rank {rank} of 2 (gloo)" in result.stderr
        assert f"rank {rank} of 2: shard {rank} of each global batch" in result.stderr
    assert result.stderr.count("reading the tokenizer rank 0 saved") == 1
    assert result.stderr.count(f"Saved {model_class} to {output_dir} ") == 1
    assert not list(tmp_path.glob(".*staging"))

    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel

    assert type(AutoModel.from_pretrained(str(output_dir), trust_remote_code=True)).__name__ == model_class
    encoder = SentenceTransformer(str(output_dir), device="cpu", trust_remote_code=True)
    assert encoder.encode(["a sentence", "another one"]).shape[0] == 2


def test_accelerate_cpu_flag_starting_one_process_is_refused(tmp_path):
    """``accelerate launch --cpu --num_processes 2`` starts one process without MPI: refused, not run as one."""
    output_dir = tmp_path / "run"
    command = [shutil.which("accelerate") or "accelerate", "launch", "--cpu", "--num_processes", "2"]
    result = _launch(command, output_dir)
    assert result.returncode != 0
    refusal = [line for line in result.stderr.splitlines() if line.startswith("align_contrastive: error:")]
    assert refusal == [
        "align_contrastive: error: accelerate launch --cpu started one process where several were asked (without "
        "MPI it cannot start more): use accelerate launch --config_file recipes/accelerate/multi_cpu.yaml "
        "--num_processes N (recipes/README.md)"
    ]
    assert "exit status 2" in result.stderr  # accelerate reports the recipe's usage error (exit 2)
    assert not output_dir.exists()


def test_world_size_without_a_launcher_is_refused_before_any_work(tmp_path):
    output_dir = tmp_path / "run"
    environment = {**_clean_environment(), "WORLD_SIZE": "2"}
    result = _launch([sys.executable], output_dir, environment=environment)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("align_contrastive: error: WORLD_SIZE=2 but this process was not started by a launcher")
    )
    assert "Traceback" not in result.stderr
    assert not output_dir.exists()


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "started one process"),
        ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "not started by a launcher"),
        ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, "not started by a launcher"),
        ({"WORLD_SIZE": "two"}, "is not a number of processes"),
    ],
)
def test_launches_that_cannot_be_one_job(monkeypatch, variables, message):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=message):
        check_launch()


def test_a_launched_cpu_job_is_told_to_use_gloo(monkeypatch):
    """torchrun on a machine without GPUs: accelerate would see no distributed type unless told the job is on CPU."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    check_launch()
    assert os.environ["ACCELERATE_USE_CPU"] == "true"
