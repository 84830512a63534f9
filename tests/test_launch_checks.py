"""The launch checks of the recipes (``bitext_hf.training.distributed``), without launching anything: a launch of
several processes that would train one, or several that would each train alone, is refused before any work. The real
launches (accelerate, torchrun) are in tests/test_recipe_distributed.py, in the slow set."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from transformers.training_args import ParallelMode

from bitext_hf.errors import UsageError
from bitext_hf.training.distributed import check_launch, check_parallel_mode

LAUNCHER_VARIABLES = (
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "ACCELERATE_USE_CPU",
    "PMI_SIZE",
    "OMPI_COMM_WORLD_SIZE",
    "MV2_COMM_WORLD_SIZE",
)


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        # accelerate's simple launcher asked for several processes: --cpu, and plain --num_processes N (no config)
        ({"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "started one process"),
        ({"ACCELERATE_USE_CPU": "False", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, "started one process"),
        ({"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, "not started by a launcher"),
        ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}, "not started by a launcher"),
        ({"WORLD_SIZE": "two"}, "is not a number of processes"),
    ],
)
def test_launches_that_cannot_be_one_job(monkeypatch, variables, message):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UsageError, match=message):
        check_launch()


def test_a_launched_cpu_job_is_told_to_use_gloo(monkeypatch):
    """torchrun on a machine without GPUs: accelerate would see no distributed type unless told the job is on CPU."""
    for name, value in {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    check_launch()
    assert os.environ["ACCELERATE_USE_CPU"] == "true"


@pytest.mark.parametrize(
    "variables",
    [
        {},  # plain python
        {"ACCELERATE_USE_CPU": "False"},  # accelerate launch of one process: no MASTER_ADDR
        {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"},  # torchrun
        {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "OMPI_COMM_WORLD_SIZE": "2"},  # --cpu with mpirun
    ],
)
def test_launches_of_one_job_pass(monkeypatch, variables):
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    check_launch()


def _arguments(mode: ParallelMode, processes: int) -> SimpleNamespace:
    return SimpleNamespace(
        parallel_mode=mode,
        world_size=processes,
        process_index=0,
        distributed_state=SimpleNamespace(backend="gloo"),
    )


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"])
def test_processes_the_trainer_would_not_join_are_refused(monkeypatch, variable):
    """Whatever the launcher (torchrun's WORLD_SIZE, mpirun's own count): two processes that the Trainer would
    train each on its own, or as a job of another size, are refused."""
    monkeypatch.setenv(variable, "2")
    with pytest.raises(UsageError, match="the launcher started 2 processes, but the Trainer would not"):
        check_parallel_mode(_arguments(ParallelMode.NOT_DISTRIBUTED, 1))
    with pytest.raises(UsageError, match="1 process"):
        check_parallel_mode(_arguments(ParallelMode.DISTRIBUTED, 1))
    check_parallel_mode(_arguments(ParallelMode.DISTRIBUTED, 2))


def test_one_process_passes_the_parallel_mode_check():
    check_parallel_mode(_arguments(ParallelMode.NOT_DISTRIBUTED, 1))
