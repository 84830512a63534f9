"""``training.distributed.gather_with_grad`` in a real 2-process gloo group: ranks whose tensors differ in rows and
columns get every rank's rows in rank order, zero-padded columns, and the gradient of a loss every rank computes
from the gathered tensor back on their own rows (summed over the ranks, which DDP's average turns back into one)."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing
from ports import free_port

from bitext_hf.training.distributed import gather_with_grad, world_size

# Rank r holds ROWS[r] x COLUMNS[r] values r + 1, r + 2, ...
ROWS, COLUMNS = (2, 3), (4, 2)


def _local(rank: int) -> torch.Tensor:
    values = torch.arange(ROWS[rank] * COLUMNS[rank], dtype=torch.float64) + rank + 1
    return values.view(ROWS[rank], COLUMNS[rank]).requires_grad_()


def _expected() -> torch.Tensor:
    width = max(COLUMNS)
    parts = [torch.nn.functional.pad(_local(rank).detach(), (0, width - COLUMNS[rank])) for rank in (0, 1)]
    return torch.cat(parts)


def _weights() -> torch.Tensor:
    return torch.arange(sum(ROWS) * max(COLUMNS), dtype=torch.float64).view(sum(ROWS), max(COLUMNS)) / 7.0


def _rank(rank: int, port: int, results: dict) -> None:
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        local = _local(rank)
        gathered = gather_with_grad(local)
        (gathered * _weights()).sum().backward()
        results[rank] = (world_size(), gathered.detach().clone(), local.grad.clone())
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_ranks_get_every_rank_rows_in_order_and_gradients_on_their_own():
    with torch.multiprocessing.Manager() as manager:
        results = manager.dict()
        torch.multiprocessing.spawn(_rank, args=(free_port(), results), nprocs=2, join=True)
        results = dict(results)
    first_row = 0
    for rank in (0, 1):
        size, gathered, gradient = results[rank]
        assert size == 2
        torch.testing.assert_close(gathered, _expected(), rtol=0, atol=0)
        rows = slice(first_row, first_row + ROWS[rank])
        # Both ranks' losses reach this rank's rows: twice the weights of its rows and its own columns.
        torch.testing.assert_close(gradient, 2 * _weights()[rows, : COLUMNS[rank]], rtol=0, atol=0)
        first_row += ROWS[rank]


def test_outside_a_distributed_job_the_tensor_is_itself():
    local = _local(0)
    assert world_size() == 1
    assert gather_with_grad(local) is local
