"""Tests for ``bitext_hf.training.run_training_loop`` with a tiny torch model (CPU, a few seconds in all)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from bitext_hf.training import LoopArguments, find_last_checkpoint, run_training_loop

REPO_ROOT = Path(__file__).resolve().parents[1]


class TinyRegressor(nn.Module):
    """8 -> 16 -> 1 with dropout, so that resumption must also restore randomness inside the model."""

    def __init__(self, dropout: float = 0.1, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.hidden = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.relu(self.norm(self.hidden(x))))).squeeze(-1)


def make_dataset(n: int = 40, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=generator)
    y = x @ torch.linspace(-1, 1, 8) + 0.5
    return [{"x": x[i], "y": y[i]} for i in range(n)]


def mse_loss(model, batch):
    prediction = model(batch["x"])
    loss = torch.mean((prediction - batch["y"]) ** 2)
    return loss, {"abs_error": (prediction - batch["y"]).abs().mean()}


def noisy_collate(samples):
    """A collate function with randomness of its own (like MLM masking)."""
    batch = torch.utils.data.default_collate(samples)
    batch["x"] = batch["x"] + 0.01 * torch.randn_like(batch["x"])
    return batch


def loop_args(tmp_path, **overrides) -> LoopArguments:
    settings = {
        "output_dir": str(tmp_path),
        "learning_rate": 1e-2,
        "per_device_train_batch_size": 4,
        "max_steps": 12,
        "logging_steps": 1,
        "save_steps": 0,
        "disable_tqdm": True,
        "seed": 3,
    }
    settings.update(overrides)
    return LoopArguments(**settings)


def parameters_of(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def test_loss_decreases_and_parameters_change(tmp_path):
    model = TinyRegressor()
    before = parameters_of(model)
    result = run_training_loop(
        model,
        make_dataset(),
        args=loop_args(tmp_path, max_steps=40, logging_steps=10, learning_rate=5e-2),
        compute_loss=mse_loss,
    )
    assert result.global_step == 40
    assert result.epoch == pytest.approx(4.0)  # 40 samples / batch 4 = 10 steps per epoch
    losses = [entry["loss"] for entry in result.log_history]
    assert len(losses) == 4
    assert losses[-1] < 0.5 * losses[0]
    assert all("abs_error" in entry and "learning_rate" in entry for entry in result.log_history)
    after = parameters_of(result.model)
    assert all(not torch.equal(before[name], after[name]) for name in before)
    assert result.model is model  # one CPU process: the module itself, trained in place


def test_a_value_reported_on_some_batches_is_averaged_over_those_batches(tmp_path):
    calls = {"n": 0}

    def loss_with_a_sometimes_value(model, batch):
        calls["n"] += 1
        extra = {"loss_even": float(calls["n"])} if calls["n"] % 2 == 0 else {}
        return mse_loss(model, batch)[0], extra

    result = run_training_loop(
        TinyRegressor(),
        make_dataset(),
        args=loop_args(tmp_path, max_steps=4, logging_steps=4),
        compute_loss=loss_with_a_sometimes_value,
    )
    assert result.log_history[0]["loss_even"] == pytest.approx(3.0)  # batches 2 and 4, not (2 + 4) / 4


def test_epochs_define_length_and_linear_schedule_decays(tmp_path):
    args = loop_args(tmp_path, max_steps=-1, num_train_epochs=2, warmup_ratio=0.25)
    result = run_training_loop(TinyRegressor(), make_dataset(n=20), args=args, compute_loss=mse_loss)
    assert result.global_step == 10  # 2 epochs x 5 batches
    rates = [entry["learning_rate"] for entry in result.log_history]
    peak = rates.index(max(rates))
    assert rates[0] < rates[peak] and peak in (2, 3)  # warm-up over 3 of 10 steps
    assert rates[-1] == pytest.approx(0.0)


def test_gradient_accumulation_matches_a_large_batch(tmp_path):
    common = {"max_steps": 6, "max_grad_norm": 0.0, "lr_scheduler_type": "constant", "weight_decay": 0.01}
    large = run_training_loop(
        TinyRegressor(dropout=0.0),
        make_dataset(n=32),
        args=loop_args(tmp_path / "large", per_device_train_batch_size=8, **common),
        compute_loss=mse_loss,
    )
    accumulated = run_training_loop(
        TinyRegressor(dropout=0.0),
        make_dataset(n=32),
        args=loop_args(tmp_path / "acc", per_device_train_batch_size=4, gradient_accumulation_steps=2, **common),
        compute_loss=mse_loss,
    )
    assert accumulated.global_step == large.global_step == 6
    large_params, accumulated_params = parameters_of(large.model), parameters_of(accumulated.model)
    for name, tensor in large_params.items():
        torch.testing.assert_close(accumulated_params[name], tensor, rtol=1e-5, atol=1e-6)
    # ... and accumulation really changes the result compared with plain small batches.
    small = run_training_loop(
        TinyRegressor(dropout=0.0),
        make_dataset(n=32),
        args=loop_args(tmp_path / "small", per_device_train_batch_size=4, **common),
        compute_loss=mse_loss,
    )
    assert not torch.allclose(parameters_of(small.model)["out.weight"], large_params["out.weight"])


class Interrupted(RuntimeError):
    """Raised by the loss function to simulate a crash."""


def loss_that_crashes_after(micro_steps: int):
    """mse_loss for ``micro_steps`` calls, then an Interrupted crash (a run killed mid-training)."""
    calls = {"n": 0}

    def crashing_loss(model, batch):
        calls["n"] += 1
        if calls["n"] > micro_steps:
            raise Interrupted
        return mse_loss(model, batch)

    return crashing_loss


@pytest.mark.parametrize("crash_at_micro_step", [11, 15])  # mid-epoch checkpoint (step 4) / epoch boundary (step 6)
def test_resume_reproduces_an_uninterrupted_run(tmp_path, crash_at_micro_step):
    # 22 samples, batch 4: 6 batches per epoch (the last one short); accumulation 2: 3 steps per epoch.
    settings = {
        "max_steps": 10,
        "gradient_accumulation_steps": 2,
        "save_steps": 2 if crash_at_micro_step == 15 else 4,
        "warmup_steps": 2,
        "weight_decay": 0.01,
        "max_grad_norm": 0.5,
    }
    reference = run_training_loop(
        TinyRegressor(),
        make_dataset(n=22),
        args=loop_args(tmp_path / "reference", **settings),
        compute_loss=mse_loss,
        collate_fn=noisy_collate,
    )

    crashing_loss = loss_that_crashes_after(crash_at_micro_step)

    interrupted_dir = tmp_path / "interrupted"
    with pytest.raises(Interrupted):
        run_training_loop(
            TinyRegressor(),
            make_dataset(n=22),
            args=loop_args(interrupted_dir, **settings),
            compute_loss=crashing_loss,
            collate_fn=noisy_collate,
        )
    last = find_last_checkpoint(interrupted_dir)
    expected_step = 4 if crash_at_micro_step == 11 else 6
    assert last is not None and last.endswith(f"checkpoint-{expected_step}")

    # A fresh model (different init): everything must come from the checkpoint.
    resumed = run_training_loop(
        TinyRegressor(seed=123),
        make_dataset(n=22),
        args=loop_args(interrupted_dir, resume_from_checkpoint="auto", **settings),
        compute_loss=mse_loss,
        collate_fn=noisy_collate,
    )
    assert resumed.resumed_from == last
    assert resumed.global_step == 10
    reference_params, resumed_params = parameters_of(reference.model), parameters_of(resumed.model)
    for name, tensor in reference_params.items():
        assert torch.equal(resumed_params[name], tensor), name
    # The logged losses after the checkpoint are the same too.
    reference_tail = {entry["step"]: entry["loss"] for entry in reference.log_history if entry["step"] > expected_step}
    resumed_tail = {entry["step"]: entry["loss"] for entry in resumed.log_history}
    assert resumed_tail == reference_tail


def test_resume_with_a_user_dataloader(tmp_path):
    # A plain DataLoader draws its base seed from the global RNG whenever an iterator starts; the loop's per-step
    # seeding keeps dropout independent of that.
    def make_loader():
        return torch.utils.data.DataLoader(make_dataset(n=22), batch_size=4)

    settings = {"max_steps": 9, "save_steps": 4}
    reference = run_training_loop(
        TinyRegressor(), make_loader(), args=loop_args(tmp_path / "reference", **settings), compute_loss=mse_loss
    )
    crashing_loss = loss_that_crashes_after(5)

    with pytest.raises(Interrupted):
        run_training_loop(
            TinyRegressor(), make_loader(), args=loop_args(tmp_path / "run", **settings), compute_loss=crashing_loss
        )
    resumed = run_training_loop(
        TinyRegressor(seed=7),
        make_loader(),
        args=loop_args(tmp_path / "run", resume_from_checkpoint="auto", **settings),
        compute_loss=mse_loss,
    )
    assert resumed.resumed_from.endswith("checkpoint-4")
    for name, tensor in parameters_of(reference.model).items():
        assert torch.equal(parameters_of(resumed.model)[name], tensor), name


def test_resume_with_an_iterable_dataset_and_random_collate(tmp_path):
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield from make_dataset(n=22)

    settings = {"max_steps": 9, "save_steps": 4}
    reference = run_training_loop(
        TinyRegressor(),
        Stream(),
        args=loop_args(tmp_path / "reference", **settings),
        compute_loss=mse_loss,
        collate_fn=noisy_collate,
    )
    crashing_loss = loss_that_crashes_after(5)

    with pytest.raises(Interrupted):
        run_training_loop(
            TinyRegressor(),
            Stream(),
            args=loop_args(tmp_path / "run", **settings),
            compute_loss=crashing_loss,
            collate_fn=noisy_collate,
        )
    resumed = run_training_loop(
        TinyRegressor(seed=5),
        Stream(),
        args=loop_args(tmp_path / "run", resume_from_checkpoint="auto", **settings),
        compute_loss=mse_loss,
        collate_fn=noisy_collate,
    )
    assert resumed.resumed_from.endswith("checkpoint-4")
    for name, tensor in parameters_of(reference.model).items():
        assert torch.equal(parameters_of(resumed.model)[name], tensor), name


def test_checkpoints_are_complete_and_limited(tmp_path):
    args = loop_args(tmp_path, max_steps=7, save_steps=3, save_total_limit=2)
    result = run_training_loop(TinyRegressor(), make_dataset(), args=args, compute_loss=mse_loss)
    names = sorted(path.name for path in tmp_path.iterdir() if path.name.startswith("checkpoint-"))
    assert names == ["checkpoint-6", "checkpoint-7"]  # every 3 steps and at the end; checkpoint-3 rotated out
    assert [Path(path).name for path in result.checkpoints] == ["checkpoint-3", "checkpoint-6", "checkpoint-7"]
    state = json.loads((tmp_path / "checkpoint-7" / "loop_state.json").read_text())
    assert state["global_step"] == 7 and state["epoch"] == 0 and state["batches_in_epoch"] == 7
    assert any(path.name.startswith("model") for path in (tmp_path / "checkpoint-7").iterdir())
    assert find_last_checkpoint(tmp_path).endswith("checkpoint-7")


def test_resume_from_finished_run_does_nothing(tmp_path):
    args = loop_args(tmp_path, max_steps=3, save_steps=3)
    first = run_training_loop(TinyRegressor(), make_dataset(), args=args, compute_loss=mse_loss)
    again = run_training_loop(
        TinyRegressor(seed=9),
        make_dataset(),
        args=loop_args(tmp_path, max_steps=3, save_steps=3, resume_from_checkpoint=first.checkpoints[-1]),
        compute_loss=mse_loss,
    )
    assert again.global_step == 3 and again.log_history == []
    for name, tensor in parameters_of(first.model).items():
        assert torch.equal(parameters_of(again.model)[name], tensor)


def test_evaluate_callback_and_jsonl_tracker(tmp_path):
    seen_modes = []

    def evaluate(model):
        seen_modes.append(model.training)
        data = make_dataset(n=8, seed=5)
        x = torch.stack([row["x"] for row in data])
        y = torch.stack([row["y"] for row in data])
        return {"mse": torch.mean((model(x) - y) ** 2)}

    model = TinyRegressor()
    args = loop_args(tmp_path, max_steps=5, eval_steps=2, logging_steps=2, report_to="jsonl", run_name="tiny")
    result = run_training_loop(model, make_dataset(), args=args, compute_loss=mse_loss, evaluate=evaluate)
    assert [entry["step"] for entry in result.eval_history] == [2, 4, 5]
    assert all(isinstance(entry["eval_mse"], float) for entry in result.eval_history)
    assert seen_modes == [False, False, False] and model.training
    records = [json.loads(line) for line in (tmp_path / "logs.jsonl").read_text().splitlines()]
    assert records[0]["run_name"] == "tiny" and records[0]["config"]["max_steps"] == 5
    logged_steps = [record["step"] for record in records[1:] if "loss" in record]
    assert logged_steps == [2, 4, 5]
    assert [record["step"] for record in records if "eval_mse" in record] == [2, 4, 5]


def test_after_optimizer_step_hook_sees_every_step(tmp_path):
    steps = []
    run_training_loop(
        TinyRegressor(),
        make_dataset(n=16),
        args=loop_args(tmp_path, max_steps=5, gradient_accumulation_steps=2),
        compute_loss=lambda model, batch: mse_loss(model, batch)[0],  # a bare loss is accepted too
        after_optimizer_step=lambda model, step: steps.append(step),
    )
    assert steps == [1, 2, 3, 4, 5]


def test_iterable_dataset_needs_max_steps(tmp_path):
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            yield from make_dataset()

    with pytest.raises(ValueError, match="max_steps"):
        run_training_loop(
            TinyRegressor(),
            Stream(),
            args=loop_args(tmp_path, max_steps=-1, num_train_epochs=1),
            compute_loss=mse_loss,
        )
    result = run_training_loop(
        TinyRegressor(), Stream(), args=loop_args(tmp_path, max_steps=15), compute_loss=mse_loss
    )
    assert result.global_step == 15  # crosses the end of the 10-batch stream into a second pass


def test_mixed_precision_can_change_between_runs_in_one_process(tmp_path):
    dtypes = []
    for precision in ("no", "bf16", "no"):
        model = TinyRegressor(dropout=0.0)
        handle = model.hidden.register_forward_hook(lambda module, inputs, output: dtypes.append(output.dtype))
        run_training_loop(
            model,
            make_dataset(n=8),
            args=loop_args(tmp_path / precision, max_steps=1, mixed_precision=precision),
            compute_loss=lambda model, batch: mse_loss(model, batch)[0].float(),
        )
        handle.remove()
    assert dtypes == [torch.float32, torch.bfloat16, torch.float32]


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a checkpoint folder"):
        run_training_loop(
            TinyRegressor(),
            make_dataset(),
            args=loop_args(tmp_path, resume_from_checkpoint=str(tmp_path / "missing")),
            compute_loss=mse_loss,
        )
    with pytest.raises(ValueError, match="empty"):
        run_training_loop(TinyRegressor(), [], args=loop_args(tmp_path), compute_loss=mse_loss)
    with pytest.raises(TypeError, match="scalar"):
        run_training_loop(
            TinyRegressor(), make_dataset(), args=loop_args(tmp_path), compute_loss=lambda m, b: m(b["x"])
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"mixed_precision": "fp8"}, "mixed_precision"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps"),
        ({"warmup_ratio": 1.5}, "warmup_ratio"),
        ({"max_steps": -1, "num_train_epochs": 0}, "nothing to train"),
        ({"lr_scheduler_type": "exponential"}, "lr_scheduler_type"),
        ({"save_total_limit": 0}, "save_total_limit"),
        ({"report_to": "nonsense"}, "unknown tracker"),
        ({"output_dir": ""}, "output_dir"),
    ],
)
def test_loop_arguments_validate(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        loop_args(tmp_path, **overrides)


def test_accelerate_launch_with_cpu_config(tmp_path):
    """`accelerate launch --config_file recipes/accelerate/cpu.yaml` runs the loop, here with bf16 autocast."""
    script = tmp_path / "train_tiny.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, sys
            import torch
            from bitext_hf.training import LoopArguments, parse_args, run_training_loop

            (args,) = parse_args(LoopArguments)
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            dtypes = set()
            model[0].register_forward_hook(lambda module, inputs, output: dtypes.add(str(output.dtype)))
            data = [{"x": torch.randn(4), "y": torch.tensor(1.0)} for _ in range(16)]

            def loss_fn(model, batch):
                return torch.mean((model(batch["x"]).squeeze(-1).float() - batch["y"]) ** 2)

            result = run_training_loop(model, data, args=args, compute_loss=loss_fn)
            print("RESULT", json.dumps({"step": result.global_step, "loss": result.log_history[-1]["loss"], "dtypes": sorted(dtypes)}))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(REPO_ROOT / "recipes/accelerate/cpu.yaml"),
        str(script),
        "--output_dir", str(tmp_path / "run"), "--max_steps", "4", "--per_device_train_batch_size", "4",
        "--logging_steps", "2", "--save_steps", "2", "--mixed_precision", "bf16", "--disable_tqdm",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.split("RESULT", 1)[1])
    assert result["step"] == 4 and result["loss"] > 0
    assert result["dtypes"] == ["torch.bfloat16"]  # autocast reached the layers
    assert (tmp_path / "run" / "checkpoint-4" / "loop_state.json").is_file()


DDP_SCRIPT = """
import json, os
import torch
from accelerate import PartialState
from bitext_hf.training import LoopArguments, parse_args, run_training_loop

(args,) = parse_args(LoopArguments)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.ReLU(), torch.nn.Linear(8, 1))
generator = torch.Generator().manual_seed(1)
data = [{"x": torch.randn(4, generator=generator), "y": torch.tensor(1.0)} for _ in range(40)]
calls = {"n": 0}
crash_at = int(os.environ.get("CRASH_AT", "0"))

def loss_fn(model, batch):
    calls["n"] += 1
    if crash_at and calls["n"] > crash_at:
        raise SystemExit(3)
    return torch.mean((model(batch["x"]).squeeze(-1) - batch["y"]) ** 2)

result = run_training_loop(model, data, args=args, compute_loss=loss_fn)
state = PartialState()
if state.is_main_process:
    parameters = [p.detach().flatten().tolist() for p in result.model.parameters()]
    print("RESULT", json.dumps({"processes": state.num_processes, "step": result.global_step, "params": parameters}))
"""


@pytest.mark.slow  # three torchrun launches of two processes: about a minute on two cores
def test_two_process_ddp_run_resumes_exactly(tmp_path):
    """Two CPU processes (gloo DDP via torchrun): checkpoints hold every process's RNG state; resume is exact."""
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    flags = ["--max_steps", "6", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"]
    flags += ["--save_steps", "2", "--logging_steps", "2", "--disable_tqdm"]

    def launch(output_dir, *extra, crash_at=0):
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
        command += ["--output_dir", str(output_dir), *flags, *extra]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=240, cwd=tmp_path, env={**env, "CRASH_AT": str(crash_at)}
        )

    def result_of(completed):
        assert completed.returncode == 0, completed.stderr[-3000:]
        return json.loads(completed.stdout.split("RESULT", 1)[1])

    reference = result_of(launch(tmp_path / "reference"))
    assert reference["processes"] == 2 and reference["step"] == 6
    checkpoint = tmp_path / "reference" / "checkpoint-6"
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= {path.name for path in checkpoint.iterdir()}

    # Per process: 5 batches per epoch, so steps end at micro-steps 2, 4, 5 (end of epoch), 7, 9, 10. Dying at
    # micro-step 8 leaves checkpoint-4, in the middle of the second epoch.
    assert launch(tmp_path / "run", crash_at=7).returncode != 0
    assert find_last_checkpoint(tmp_path / "run").endswith("checkpoint-4")
    resumed = result_of(launch(tmp_path / "run", "--resume_from_checkpoint", "auto"))
    assert resumed["params"] == reference["params"]
