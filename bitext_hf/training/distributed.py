"""Data-parallel launches of the recipes (``torchrun``, ``accelerate launch``): one distributed job or a refusal.

``check_launch()`` runs before the arguments are parsed (before ``TrainingArguments`` sets up its devices),
``check_parallel_mode(training_args)`` right after, and ``main_process_first()`` wraps what is prepared once for
the whole job (tokenizers, word alignments, teacher caches): rank 0 prepares it, the other ranks wait and read it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import torch

from bitext_hf.errors import UsageError

__all__ = [
    "check_launch",
    "check_parallel_mode",
    "end_distributed_job",
    "gather_with_grad",
    "global_share",
    "has_accelerator",
    "is_main_process",
    "main_process_first",
    "world_size",
]

logger = logging.getLogger(__name__)

MULTI_CPU_COMMAND = "accelerate launch --config_file recipes/accelerate/multi_cpu.yaml --num_processes N"
# Set by MPI launchers: with them accelerate's `--cpu` launch does start several processes.
_MPI_WORLD_SIZE = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")
_inside = False  # within a main_process_first block of this process


def has_accelerator() -> bool:
    """A GPU (CUDA or XPU) this process can use."""
    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def _world_size() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise UsageError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number of processes") from None


def _requested_processes() -> int:
    """The processes the launcher says this job has: WORLD_SIZE, or an MPI launcher's own count (mpirun sets no
    WORLD_SIZE)."""
    counts = [_world_size()]
    for name in _MPI_WORLD_SIZE:
        with contextlib.suppress(ValueError):
            counts.append(int(os.environ.get(name, "1")))
    return max(counts)


def _several_processes_command() -> str:
    if has_accelerator():
        return "accelerate launch --multi_gpu --num_processes N, or torchrun --nproc_per_node N"
    return f"{MULTI_CPU_COMMAND}, or torchrun --nproc_per_node N (recipes/README.md)"


def check_launch() -> None:
    """Refuse a launch that cannot be one distributed job, and make a CPU-only launch of several processes one.

    * ``accelerate launch --num_processes N`` (or ``--num_machines M``) without ``--multi_gpu`` or a config file
      that asks for several processes, and ``accelerate launch --cpu --num_processes N`` without MPI: accelerate's
      simple launcher starts ONE process, silently; its only trace of the request is ``MASTER_ADDR``/``MASTER_PORT``
      (exported only when more than one process or machine was asked) beside ``ACCELERATE_USE_CPU`` (exported by
      that launcher alone). That process would train alone, as if N were 1.
    * ``WORLD_SIZE`` > 1 in a process that no launcher started (no ``RANK``/``LOCAL_RANK``/``MASTER_ADDR``).
    * torchrun (or ``accelerate launch`` with a multi-GPU config) on a machine without GPUs: accelerate's
      ``PartialState`` picks gloo only when told the run is on CPU; otherwise it reports no distributed type, and
      the Trainer trains each rank on its own, every rank writing the same output folder. Setting
      ``ACCELERATE_USE_CPU`` here, before ``TrainingArguments`` sets up its devices, makes it a gloo job.

    Any other launcher whose processes the Trainer would not join into one job (mpirun without accelerate, say) is
    refused by :func:`check_parallel_mode` once the arguments are parsed.
    """
    world_size = _world_size()
    launched = "LOCAL_RANK" in os.environ or "RANK" in os.environ
    mpi = any(name in os.environ for name in _MPI_WORLD_SIZE)
    simple_launcher = "ACCELERATE_USE_CPU" in os.environ
    if simple_launcher and "MASTER_ADDR" in os.environ and not launched and not mpi and world_size == 1:
        raise UsageError(
            "accelerate launch started one process where several were asked (--num_processes without --multi_gpu "
            f"or a multi-process config file, or --cpu without MPI, starts one): use {_several_processes_command()}"
        )
    if world_size > 1 and not (launched and "MASTER_ADDR" in os.environ):
        raise UsageError(
            f"WORLD_SIZE={world_size} but this process was not started by a launcher (no RANK, LOCAL_RANK or "
            "MASTER_ADDR): start the N processes with torchrun --nproc_per_node N or accelerate launch"
        )
    if world_size > 1 and not has_accelerator():
        os.environ["ACCELERATE_USE_CPU"] = "true"


def check_parallel_mode(training_args: Any) -> None:
    """Refuse (exit 2), before any data is read, a multi-process launch that the Trainer would not run as one
    distributed job of that many processes: each rank would train alone and write the same outputs."""
    from transformers.training_args import ParallelMode

    requested = _requested_processes()
    if requested > 1 and (
        training_args.parallel_mode != ParallelMode.DISTRIBUTED or training_args.world_size != requested
    ):
        raise UsageError(
            f"the launcher started {requested} processes, but the Trainer would not train them as one distributed "
            f"job (parallel mode {training_args.parallel_mode.value}, {training_args.world_size} process(es)): "
            f"launch with {_several_processes_command()}"
        )
    if requested > 1:
        logger.info(
            "distributed job: rank %d of %d (%s)",
            training_args.process_index,
            training_args.world_size,
            training_args.distributed_state.backend,
        )


@contextlib.contextmanager
def end_distributed_job() -> Iterator[None]:
    """Destroy this process's process group when the block ends, however it ends. A process that exits with its
    gloo group alive may abort in the group's destructor ("terminate called without an active exception",
    SIGABRT) after its work is done, which turns a finished job into a failed launch. A job that ends normally first
    waits at a barrier, which also waits for this process's own collectives still in flight: a process that tears its
    group down while a peer's last operation still runs aborted the same way (once in a slow DDP test). After an
    error there is no barrier: the other processes may never reach it."""
    try:
        yield
    except BaseException:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        raise
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def world_size() -> int:
    """The processes of this job: the process group's size, 1 without one."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return 1
    return torch.distributed.get_world_size()


def is_main_process() -> bool:
    """True in a single-process run and on rank 0 of a distributed job."""
    return not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0


def global_share(count: int, device: torch.device) -> float:
    """``count`` x ranks / the sum of every rank's ``count``: the weight of a rank's mean over its own ``count``
    items (links, target tokens) that makes DDP's average of the ranks' gradients the gradient of the mean over the
    global batch, as in one process given the whole batch. 1.0 outside a distributed job, and when no rank has an
    item. Every rank must call it at the same step (a collective sum)."""
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return 1.0
    world = torch.distributed.get_world_size()
    if world == 1:
        return 1.0
    total = torch.tensor([float(count)], dtype=torch.float64, device=device)
    torch.distributed.all_reduce(total)
    return count * world / total.item() if total.item() > 0 else 1.0


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Every rank's ``tensor`` concatenated along dimension 0 in rank order, gradients flowing back to each rank's
    own rows: the global batch's in-batch negatives, as sentence-transformers' ``gather_across_devices`` gives them.

    The ranks' tensors may differ in every dimension (a last batch with fewer rows, longer sentences on one rank):
    dimensions after the first are zero-padded to the largest rank's, and each rank's padded rows are cut again.
    torch.distributed.nn's ``all_gather`` does the gathering with gradients (its backward sums the gradients every
    rank computed for a part); it needs equal shapes, hence the padding, which it does not do. A caller that
    computes the same loss from the gathered tensors on every rank gets the single-process gradient back from
    DDP's average. ``tensor`` itself outside a distributed job. Every rank must call it at the same step.
    """
    world = world_size()
    if world == 1:
        return tensor
    import torch.distributed.nn.functional as distributed_functional

    shape = torch.tensor(tensor.shape, dtype=torch.int64, device=tensor.device)
    shapes = [torch.empty_like(shape) for _ in range(world)]
    torch.distributed.all_gather(shapes, shape)
    largest = torch.stack(shapes).amax(dim=0).tolist()
    padding: list[int] = []
    for dim in reversed(range(tensor.ndim)):  # F.pad lists the last dimension first
        padding += [0, largest[dim] - tensor.shape[dim]]
    parts = distributed_functional.all_gather(torch.nn.functional.pad(tensor, padding))
    return torch.cat([part[: int(rows[0])] for part, rows in zip(parts, shapes)], dim=0)


@contextlib.contextmanager
def main_process_first() -> Iterator[bool]:
    """Rank 0 runs the block first, the other ranks after it (reading what it wrote); yields ``is_main_process()``.

    accelerate's ``PartialState.main_process_first`` does the same but would create a state in a process that has
    none yet (a recipe's steps called outside the Trainer, the tests): this one is a no-op without a process group.
    """
    global _inside
    if not torch.distributed.is_initialized() or _inside:
        # Nested (a recipe's block around a step that has its own): the outer block already orders the ranks, and
        # inner barriers would pair with the outer ones of the other ranks.
        yield is_main_process()
        return
    main = torch.distributed.get_rank() == 0
    if not main:
        torch.distributed.barrier()
    _inside = True
    try:
        yield main
    finally:
        _inside = False
    # Not in a `finally`: when rank 0 fails, the others must not go on to read what it did not write (the launcher
    # stops them when rank 0 exits).
    if main:
        torch.distributed.barrier()
