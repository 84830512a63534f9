"""Tests for ``bitext_hf.training.BitextTrainer`` (loss parts, retrieval evaluation, resume, rotation, hub, LoRA).

A tiny torch model on CPU; each test runs a few Trainer steps (a few seconds in all).
"""

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
from transformers import TrainingArguments

from bitext_hf.errors import UsageError
from bitext_hf.training import (
    BitextTrainer,
    ModelArguments,
    apply_peft,
    export_peft,
    parse_args,
)

REPO_ROOT = Path(__file__).resolve().parents[1]


class TinyRegressor(nn.Module):
    """8 -> 16 -> 1 with dropout, so that resumption must also restore randomness inside the model."""

    def __init__(self, dropout: float = 0.1, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.hidden = nn.Linear(8, 16)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.dropout(torch.relu(self.hidden(x)))).squeeze(-1)


def make_dataset(n: int = 40, seed: int = 1) -> list[dict[str, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=generator)
    y = x @ torch.linspace(-1, 1, 8) + 0.5
    return [{"x": x[i], "y": y[i]} for i in range(n)]


def mse_loss(model, batch):
    prediction = model(batch["x"])
    loss = torch.mean((prediction - batch["y"]) ** 2)
    return loss, {"abs_error": (prediction - batch["y"]).abs().mean()}


def training_args(tmp_path, **overrides) -> TrainingArguments:
    settings = {
        "output_dir": str(tmp_path),
        "learning_rate": 1e-2,
        "per_device_train_batch_size": 4,
        "max_steps": 12,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,
        "seed": 3,
        "use_cpu": True,
    }
    settings.update(overrides)
    return TrainingArguments(**settings)


def train(tmp_path, model=None, loss_fn=mse_loss, resume=None, **overrides) -> BitextTrainer:
    trainer = BitextTrainer(
        model or TinyRegressor(),
        training_args(tmp_path, **overrides),
        loss_fn=loss_fn,
        train_dataset=make_dataset(),
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer


def weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def test_loss_decreases_and_components_are_logged_per_window(tmp_path):
    data = make_dataset()
    x, y = torch.stack([row["x"] for row in data]), torch.stack([row["y"] for row in data])
    model = TinyRegressor(dropout=0.0)
    with torch.no_grad():
        before = float(torch.mean((model(x) - y) ** 2))
    trainer = train(tmp_path, model=model, max_steps=20, logging_steps=5, learning_rate=5e-2)
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in logs] == [5, 10, 15, 20]
    assert all("abs_error" in entry and entry["abs_error"] > 0 for entry in logs)
    with torch.no_grad():
        assert float(torch.mean((model(x) - y) ** 2)) < 0.5 * before


def test_component_reported_by_some_batches_is_averaged_over_those_only(tmp_path):
    calls = {"n": 0}

    def loss_fn(model, batch):
        calls["n"] += 1
        loss = torch.mean((model(batch["x"]) - batch["y"]) ** 2)
        # Only odd micro-batches carry the part; its average must be 1.0, not diluted to 0.5 by the others.
        return loss, ({"task_a": 1.0} if calls["n"] % 2 else {})

    trainer = train(tmp_path, loss_fn=loss_fn, max_steps=4, logging_steps=4)
    (entry,) = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert entry["task_a"] == pytest.approx(1.0)


def test_loss_fn_must_return_a_scalar(tmp_path):
    with pytest.raises(TypeError, match="scalar"):
        train(tmp_path, loss_fn=lambda model, batch: {"loss": 1.0}, max_steps=1)


def test_retrieval_evaluator_runs_at_eval_steps_and_picks_the_best_model(tmp_path):
    scores = iter([5.0, 1.0, 3.0, 4.0])  # the second evaluation (step 4) is the best (lowest) xsim
    seen_models = []

    def evaluator(model):
        seen_models.append(model.training)
        return {"xsim": next(scores), "accuracy": 0.5}

    model = TinyRegressor()
    trainer = BitextTrainer(
        model,
        training_args(
            tmp_path,
            max_steps=8,
            eval_strategy="steps",
            eval_steps=2,
            save_strategy="steps",
            save_steps=2,
            load_best_model_at_end=True,
            metric_for_best_model="eval_xsim",
            greater_is_better=False,
        ),
        loss_fn=mse_loss,
        train_dataset=make_dataset(),
        retrieval_evaluator=evaluator,
    )
    trainer.train()
    evaluations = [entry for entry in trainer.state.log_history if "eval_xsim" in entry]
    assert [(entry["step"], entry["eval_xsim"]) for entry in evaluations] == [(2, 5.0), (4, 1.0), (6, 3.0), (8, 4.0)]
    assert all(entry["eval_accuracy"] == 0.5 for entry in evaluations)
    assert seen_models == [False] * 4  # evaluated in eval mode
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-4")
    from safetensors.torch import load_file

    best = load_file(str(tmp_path / "checkpoint-4" / "model.safetensors"))
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(tensor, best[name]), name


class DeclaredDirection:
    """An evaluator with sentence-transformers' attributes (duck-typed: no base class needed), returning the next
    of ``values`` for its primary metric at each call."""

    def __init__(self, primary_metric: str, greater_is_better: bool, values: list[float]) -> None:
        self.primary_metric, self.greater_is_better, self.values = primary_metric, greater_is_better, iter(values)

    def __call__(self, model):
        return {self.primary_metric: next(self.values)}


@pytest.mark.parametrize("metric", ["xsim", "eval_xsim", None])
def test_best_model_follows_the_evaluators_direction(tmp_path, metric):
    # TrainingArguments alone would make greater_is_better True for "xsim" (any name not ending in "loss"), and
    # "loss" the metric when none is given: the evaluator knows better.
    settings = {} if metric is None else {"metric_for_best_model": metric}
    trainer = BitextTrainer(
        TinyRegressor(),
        training_args(
            tmp_path,
            max_steps=6,
            eval_strategy="steps",
            eval_steps=2,
            save_strategy="steps",
            save_steps=2,
            load_best_model_at_end=True,
            **settings,
        ),
        loss_fn=mse_loss,
        train_dataset=make_dataset(),
        retrieval_evaluator=DeclaredDirection("xsim", False, [50.0, 20.0, 40.0]),
    )
    trainer.train()
    assert trainer.args.greater_is_better is False
    assert trainer.args.metric_for_best_model == (metric or "xsim")
    assert trainer.state.best_metric == 20.0
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-4")


def test_explicit_greater_is_better_against_the_evaluator_is_kept_with_a_warning(tmp_path, caplog):
    def build(greater_is_better: bool) -> BitextTrainer:
        return BitextTrainer(
            TinyRegressor(),
            training_args(tmp_path, metric_for_best_model="accuracy", greater_is_better=greater_is_better),
            loss_fn=mse_loss,
            train_dataset=make_dataset(),
            retrieval_evaluator=DeclaredDirection("accuracy", True, []),
        )

    with caplog.at_level("WARNING", logger="bitext_hf.training.trainer"):
        assert build(False).args.greater_is_better is False
    (warning,) = [record.getMessage() for record in caplog.records if "greater_is_better" in record.getMessage()]
    assert "accuracy is better when higher" in warning
    caplog.clear()
    with caplog.at_level("WARNING", logger="bitext_hf.training.trainer"):
        assert build(True).args.greater_is_better is True
    assert not [record for record in caplog.records if "greater_is_better" in record.getMessage()]


def crash_after(calls: int):
    """mse_loss that raises once it has been called ``calls`` times (a run killed mid-training)."""
    counter = {"n": 0}

    def loss_fn(model, batch):
        counter["n"] += 1
        if counter["n"] > calls:
            raise KeyboardInterrupt
        return mse_loss(model, batch)

    return loss_fn


@pytest.mark.slow
@pytest.mark.parametrize("accumulation", [1, 2])
def test_resume_from_checkpoint_ends_with_the_same_weights(tmp_path, accumulation):
    # 40 examples / batch 4 = 10 micro-batches an epoch: with max_steps 12 the run crosses an epoch boundary.
    settings = {"save_strategy": "steps", "save_steps": 4, "gradient_accumulation_steps": accumulation}
    reference = train(tmp_path / "reference", **settings)
    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "run", loss_fn=crash_after(6 * accumulation + 1), **settings)
    assert sorted(path.name for path in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-4"]
    resumed = train(tmp_path / "run", resume=str(tmp_path / "run" / "checkpoint-4"), **settings)
    assert resumed.state.global_step == 12
    expected, actual = weights(reference.model), weights(resumed.model)
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name


def test_save_total_limit_rotates_checkpoints(tmp_path):
    train(tmp_path, save_strategy="steps", save_steps=2, save_total_limit=2)
    assert sorted(path.name for path in tmp_path.glob("checkpoint-*")) == ["checkpoint-10", "checkpoint-12"]


def test_report_to_tensorboard_writes_event_files_offline(tmp_path):
    pytest.importorskip("tensorboard")

    def evaluator(model):
        return {"xsim": 1.5}

    trainer = BitextTrainer(
        TinyRegressor(),
        training_args(tmp_path, max_steps=2, report_to="tensorboard", eval_strategy="steps", eval_steps=2),
        loss_fn=mse_loss,
        train_dataset=make_dataset(),
        retrieval_evaluator=evaluator,
    )
    trainer.train()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (events,) = list(tmp_path.rglob("events.out.tfevents.*"))  # under output_dir/runs/<date>_<host>
    accumulator = EventAccumulator(str(events.parent))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"train/loss", "train/abs_error", "eval/xsim"} <= tags  # the loss part and the retrieval metric


def test_push_to_hub_uploads_the_output_folder_without_network(tmp_path, monkeypatch):
    import huggingface_hub

    created, uploads = [], []

    def fake_create_repo(self, repo_id, *args, **kwargs):
        created.append(repo_id)
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def fake_upload_folder(self, *args, folder_path=None, repo_id=None, **kwargs):
        uploads.append(
            {
                "repo_id": repo_id,
                "files": sorted(str(path.relative_to(folder_path)) for path in Path(folder_path).rglob("*")),
                "ignore": kwargs.get("ignore_patterns"),
            }
        )

        class Commit:
            commit_url = oid = "fake"

        return Commit()

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", fake_create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", fake_upload_folder)
    monkeypatch.setenv("HF_TOKEN", "hf_fake_token_for_the_test")
    from transformers import PretrainedConfig

    model = TinyRegressor()
    model.config = PretrainedConfig()  # the Trainer's model card reads the model's config
    trainer = train(
        tmp_path / "out",
        model=model,
        max_steps=2,
        push_to_hub=True,
        hub_model_id="someone/tiny-aligner",
        hub_strategy="end",
    )
    trainer.push_to_hub(commit_message="end of training")
    assert created and created[-1] == "someone/tiny-aligner"
    assert uploads and all(upload["repo_id"] == "someone/tiny-aligner" for upload in uploads)
    assert "model.safetensors" in uploads[-1]["files"]


def test_lora_trains_only_adapters_saves_and_reloads_them(tmp_path):
    from peft import PeftModel

    base = TinyRegressor(dropout=0.0)
    before = weights(base)
    model = apply_peft(base, ModelArguments(use_peft=True, lora_r=4, lora_alpha=8, lora_target_modules=["hidden"]))
    trainable = [name for name, parameter in model.named_parameters() if parameter.requires_grad]
    assert trainable and all("lora_" in name for name in trainable)
    trainer = train(tmp_path, model=model, max_steps=6, save_strategy="steps", save_steps=6)
    assert (tmp_path / "checkpoint-6" / "adapter_config.json").is_file()
    x = torch.randn(5, 8)
    with torch.no_grad():
        trained_output = trainer.model.eval()(x)
    merged = export_peft(trainer.model, tmp_path / "adapter", merge=True)
    assert not isinstance(merged, PeftModel)
    with torch.no_grad():
        assert torch.allclose(merged(x), trained_output, atol=1e-6)

    reloaded = PeftModel.from_pretrained(TinyRegressor(dropout=0.0), str(tmp_path / "adapter")).eval()
    with torch.no_grad():
        assert torch.allclose(reloaded(x), trained_output, atol=1e-6)
        assert not torch.allclose(TinyRegressor(dropout=0.0)(x), trained_output)
    assert torch.equal(before["out.weight"], weights(merged)["out.weight"])  # not a target: untouched


def test_lora_unknown_target_module_is_a_usage_error():
    with pytest.raises(UsageError, match=r"lora_target_modules nope.*hidden"):
        apply_peft(TinyRegressor(), ModelArguments(use_peft=True, lora_target_modules=["nope"]))


@pytest.mark.parametrize(("flags", "message"), [(["--lora_r", "0"], "lora_r"), (["--lora_dropout", "1"], "dropout")])
def test_model_arguments_validate(flags, message):
    with pytest.raises(UsageError, match=message):
        parse_args(ModelArguments, args=flags)


def test_training_arguments_from_yaml_with_overrides(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("output_dir: out\nlearning_rate: 3e-6\nmax_steps: 7\nsave_total_limit: 2\nuse_peft: true\n")
    training, model_args = parse_args(
        TrainingArguments, ModelArguments, args=["--config", str(config), "--max_steps", "9", "--lora_r", "4"]
    )
    assert training.learning_rate == pytest.approx(3e-6) and training.max_steps == 9 and training.save_total_limit == 2
    assert model_args.use_peft and model_args.lora_r == 4


@pytest.mark.slow
def test_accelerate_launch_with_cpu_config(tmp_path):
    """`accelerate launch --config_file recipes/accelerate/cpu.yaml` runs a BitextTrainer script."""
    script = tmp_path / "train_tiny.py"
    script.write_text(
        textwrap.dedent(
            """
            import json
            import torch
            from transformers import TrainingArguments
            from bitext_hf.training import BitextTrainer, parse_args

            (args,) = parse_args(TrainingArguments)
            torch.manual_seed(0)
            model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
            data = [{"x": torch.randn(4), "y": torch.tensor(1.0)} for _ in range(16)]

            def loss_fn(model, batch):
                return torch.mean((model(batch["x"]).squeeze(-1).float() - batch["y"]) ** 2)

            trainer = BitextTrainer(model, args, loss_fn=loss_fn, train_dataset=data)
            trainer.train()
            print("RESULT", json.dumps({"step": trainer.state.global_step}))
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO_ROOT / "recipes/accelerate/cpu.yaml"),
        str(script),
        "--output_dir",
        str(tmp_path / "run"),
        "--max_steps",
        "4",
        "--per_device_train_batch_size",
        "4",
        "--logging_steps",
        "2",
        "--save_steps",
        "2",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
    ]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads(completed.stdout.split("RESULT", 1)[1])["step"] == 4
    assert (tmp_path / "run" / "checkpoint-4" / "trainer_state.json").is_file()


@pytest.mark.parametrize("name", ["cpu", "multi_gpu", "deepspeed_zero2", "fsdp"])
def test_accelerate_configs_load(name):
    """Every shipped accelerate config is one that `accelerate launch --config_file` accepts (the GPU ones cannot
    run here: this checks their schema only)."""
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(REPO_ROOT / "recipes" / "accelerate" / f"{name}.yaml"))
    expected = {"cpu": "NO", "multi_gpu": "MULTI_GPU", "deepspeed_zero2": "DEEPSPEED", "fsdp": "FSDP"}[name]
    assert str(config.distributed_type).rsplit(".", 1)[-1] == expected


DDP_SCRIPT = """
import json, os
import torch
from transformers import TrainingArguments
from bitext_hf.training import BitextTrainer, parse_args

(args,) = parse_args(TrainingArguments)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.1), torch.nn.ReLU(), torch.nn.Linear(8, 1))
generator = torch.Generator().manual_seed(1)
data = [{"x": torch.randn(4, generator=generator), "y": torch.tensor(1.0)} for _ in range(40)]
calls = {"n": 0}
crash_at = int(os.environ.get("CRASH_AT", "0"))
rank = int(os.environ.get("RANK", "0"))

def loss_fn(model, batch):
    calls["n"] += 1
    if crash_at and calls["n"] > crash_at:
        raise SystemExit(3)
    # Only rank 0 reports this part: the logged average must count rank 0's micro-batches only.
    return torch.mean((model(batch["x"]).squeeze(-1) - batch["y"]) ** 2), ({"rank0_part": 2.0} if rank == 0 else {})

trainer = BitextTrainer(model, args, loss_fn=loss_fn, train_dataset=data)
trainer.train(resume_from_checkpoint=args.resume_from_checkpoint)
if trainer.is_world_process_zero():
    parameters = [p.detach().flatten().tolist() for p in trainer.model.parameters()]
    parts = [entry["rank0_part"] for entry in trainer.state.log_history if "rank0_part" in entry]
    print("RESULT", json.dumps({"processes": args.world_size, "step": trainer.state.global_step,
                                "params": parameters, "parts": parts}))
if torch.distributed.is_initialized():  # as the recipes end (bitext_hf.training.distributed.end_distributed_job)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
"""


@pytest.mark.slow  # three torchrun launches of two processes: about a minute on two cores
def test_two_process_ddp_run_resumes_exactly(tmp_path):
    """Two CPU processes (gloo DDP via torchrun): logged parts agree across processes; resume is exact."""
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    flags = ["--max_steps", "6", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "2"]
    flags += ["--save_steps", "2", "--logging_steps", "2", "--report_to", "none", "--disable_tqdm", "true"]
    flags += ["--use_cpu", "true", "--seed", "5"]

    def launch(output_dir, *extra, crash_at=0):
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
        command += ["--output_dir", str(output_dir), *flags, *extra]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**env, "CRASH_AT": str(crash_at)}
        )

    def result_of(completed):
        assert completed.returncode == 0, completed.stderr[-3000:]
        return json.loads(completed.stdout.split("RESULT", 1)[1])

    reference = result_of(launch(tmp_path / "reference"))
    assert reference["processes"] == 2 and reference["step"] == 6
    assert reference["parts"] == [2.0, 2.0, 2.0]  # averaged over the micro-batches that reported it, on any rank
    # 40 examples / 2 processes / batch 4 = 5 micro-batches an epoch per process: steps end at micro-steps 2, 4, 5
    # (end of epoch), 7, 9, 10. Dying after micro-step 7 leaves checkpoint-4, in the middle of the second epoch.
    assert launch(tmp_path / "run", crash_at=7).returncode != 0
    assert sorted(path.name for path in (tmp_path / "run").glob("checkpoint-*"))[-1] == "checkpoint-4"
    resumed = result_of(launch(tmp_path / "run", "--resume_from_checkpoint", str(tmp_path / "run" / "checkpoint-4")))
    assert resumed["params"] == reference["params"]


def test_cpu_training_does_not_warn_about_pinned_memory(tmp_path):
    """Trainer pins memory by default; without an accelerator torch warned at every dataloader of every run."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer = train(tmp_path, max_steps=2)
    assert not trainer.args.dataloader_pin_memory
    assert not [w for w in caught if "pin_memory" in str(w.message)]
