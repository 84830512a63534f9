"""Per-step cost of ``bitext_hf.training.BitextTrainer`` against hand-written loops doing the same work.

Three loops train the same MLP on the same data (AdamW, linear schedule, gradient clipping, batch 32, CPU):

* ``plain``: a bare PyTorch loop (the floor);
* ``accelerate``: the minimal ``accelerate`` loop of its documentation (prepare, ``accelerator.backward``,
  ``accelerator.clip_grad_norm_``);
* ``BitextTrainer``: the recipes' ``transformers.Trainer`` subclass with a ``loss_fn`` that also returns a logged
  part (the recipes' case), logging every 50 steps, no checkpoints, no evaluation.

Each loop is timed from its first step to its last (the Trainer through a callback), so the Trainer's one-off set-up
(accelerator, dataloader, callbacks) is left out: it prints milliseconds per optimizer step (best of ``--repeats``)
and the ratios to ``plain``, all measured in this run. The fixed per-step overhead matters for tiny models and
vanishes for real ones.

    python benchmarks/bench_training_loop.py
    python benchmarks/bench_training_loop.py --widths 16 4096 --steps 500 --threads 2
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

import torch
from torch.utils.data import DataLoader
from transformers import get_scheduler

BATCH_SIZE = 32
INPUT_DIM = 64


def make_problem(width: int, n_examples: int = 3200) -> tuple[torch.nn.Module, list[dict[str, torch.Tensor]]]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(INPUT_DIM, width), torch.nn.ReLU(), torch.nn.Dropout(0.1), torch.nn.Linear(width, 1)
    )
    generator = torch.Generator().manual_seed(0)
    data = [
        {"x": torch.randn(INPUT_DIM, generator=generator), "y": torch.randn((), generator=generator)}
        for _ in range(n_examples)
    ]
    return model, data


def mse(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.mean((model(batch["x"]).squeeze(-1) - batch["y"]) ** 2)


def batches_forever(loader: DataLoader):
    while True:
        yield from loader


def plain_loop(width: int, steps: int) -> float:
    model, data = make_problem(width)
    loader = DataLoader(data, batch_size=BATCH_SIZE, shuffle=True, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    batches = batches_forever(loader)
    start = time.perf_counter()
    for _ in range(steps):
        loss = mse(model, next(batches))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
    return time.perf_counter() - start


def accelerate_loop(width: int, steps: int) -> float:
    from accelerate import Accelerator

    model, data = make_problem(width)
    accelerator = Accelerator()
    loader = DataLoader(data, batch_size=BATCH_SIZE, shuffle=True, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = get_scheduler("linear", optimizer, num_warmup_steps=0, num_training_steps=steps)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    batches = batches_forever(loader)
    start = time.perf_counter()
    for _ in range(steps):
        loss = mse(model, next(batches))
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss.item()
    return time.perf_counter() - start


def mse_with_part(model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
    prediction = model(batch["x"]).squeeze(-1)
    return torch.mean((prediction - batch["y"]) ** 2), {"abs_error": (prediction - batch["y"]).abs().mean().detach()}


def trainer_loop(width: int, steps: int) -> float:
    from transformers import TrainerCallback, TrainingArguments

    from bitext_hf.training import BitextTrainer

    class StepClock(TrainerCallback):
        """Wall time from the start of the first step to the end of the last one."""

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 0:
                self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.end = time.perf_counter()

    model, data = make_problem(width)
    clock = StepClock()
    with tempfile.TemporaryDirectory() as output_dir:
        args = TrainingArguments(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=BATCH_SIZE,
            learning_rate=1e-3,
            lr_scheduler_type="linear",
            max_grad_norm=1.0,
            save_strategy="no",
            logging_steps=50,
            report_to="none",
            disable_tqdm=True,
            use_cpu=True,
            log_level="warning",
        )
        trainer = BitextTrainer(model, args, loss_fn=mse_with_part, train_dataset=data, callbacks=[clock])
        trainer.train()
        return clock.end - clock.start


LOOPS: dict[str, Callable[[int, int], float]] = {
    "plain": plain_loop,
    "accelerate": accelerate_loop,
    "BitextTrainer": trainer_loop,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 1024, 8192], help="MLP hidden widths")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per loop; the best is kept")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"{'width':>6} " + " ".join(f"{name + ' ms/step':>24}" for name in LOOPS) + "   ratios to plain")
    for width in args.widths:
        for loop in LOOPS.values():
            loop(width, min(args.steps, 50))  # warm-up: imports, allocator, accelerate state
        # Round-robin repeats: a load spike on a shared machine then hits every loop alike; the best is kept.
        seconds: dict[str, list[float]] = {name: [] for name in LOOPS}
        for _ in range(args.repeats):
            for name, loop in LOOPS.items():
                seconds[name].append(loop(width, args.steps))
        per_step = {name: 1000 * min(values) / args.steps for name, values in seconds.items()}
        ratios = "  ".join(f"{name} x{per_step[name] / per_step['plain']:.2f}" for name in LOOPS if name != "plain")
        print(f"{width:>6} " + " ".join(f"{per_step[name]:>24.3f}" for name in LOOPS) + f"   {ratios}")


if __name__ == "__main__":
    main()
