"""A small, resumable training loop on ``accelerate.Accelerator``, shared by the recipes.

The recipes differ in their models and losses, not in their plumbing, so the plumbing lives here once:
mixed precision, gradient accumulation, clipping, AdamW with a ``transformers`` scheduler, a tqdm bar on the main
process, logging to ``accelerate`` trackers, a periodic ``evaluate(model)`` callback, checkpoints, and resumption.

Usage::

    def compute_loss(model, batch):
        output = model(**batch)
        return output.loss, {"accuracy": output.accuracy}

    result = run_training_loop(model, train_dataset, args=LoopArguments(output_dir="runs/x", max_steps=1000),
                               compute_loss=compute_loss, collate_fn=collate, evaluate=evaluate_fn)

It runs unchanged under plain ``python`` (one process) and ``accelerate launch`` (several).

Reproducibility contract. A run interrupted after a checkpoint and resumed from it ends with the same parameters
as an uninterrupted run (tested bitwise on CPU). Three things make that hold:

* data order: the loop's sampler draws each epoch's permutation from ``seed + epoch`` (not from a generator that
  advances through the run), and resumption skips the batches already consumed in the current epoch with
  ``accelerator.skip_first_batches``;
* model randomness (dropout, ...): before every micro-batch the global RNGs are seeded from ``(seed, process,
  micro-step)``, so it depends on where the run is, not on what ran before (DataLoader iterators, evaluation
  callbacks and checkpoint loading all draw from the global RNG and would otherwise shift it);
* collation randomness (e.g. MLM masking in ``DataCollatorForLanguageModeling``): ``collate_fn`` runs with the
  global RNGs forked and seeded from ``(seed, epoch, batch index)`` when the loop builds the DataLoader with
  ``dataloader_num_workers=0``.

A ``DataLoader`` passed in instead of a dataset is used as it is: its order must then be a function of the epoch
(a sampler with ``set_epoch``, as ``accelerate`` calls it) for resumption to be exact.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import random
import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.tracking import GeneralTracker
from accelerate.utils import GradientAccumulationPlugin, gather_object
from torch.utils.data import DataLoader, IterableDataset, RandomSampler, SequentialSampler
from tqdm.auto import tqdm
from transformers import get_scheduler

__all__ = [
    "CHECKPOINT_PREFIX",
    "JsonlTracker",
    "LoopArguments",
    "TrainingResult",
    "find_last_checkpoint",
    "resolve_resume_checkpoint",
    "run_training_loop",
]

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "checkpoint-"
LOOP_STATE_FILE = "loop_state.json"
_CHECKPOINT_PATTERN = re.compile(rf"^{CHECKPOINT_PREFIX}(\d+)$")
_MIXED_PRECISION = ("no", "fp16", "bf16")
_SCHEDULERS = (
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "constant",
    "constant_with_warmup",
    "inverse_sqrt",
)  # transformers' cosine_with_min_lr and warmup_stable_decay need extra arguments this loop does not pass
# accelerate tracker names and the check that tells whether the library behind each one is installed.
_TRACKERS = {
    "tensorboard": "is_tensorboard_available",
    "wandb": "is_wandb_available",
    "mlflow": "is_mlflow_available",
    "comet_ml": "is_comet_ml_available",
    "aim": "is_aim_available",
    "clearml": "is_clearml_available",
    "dvclive": "is_dvclive_available",
    "swanlab": "is_swanlab_available",
    "trackio": "is_trackio_available",
}
JSONL_TRACKER = "jsonl"  # built in: one JSON object per logging step in <output_dir>/logs.jsonl

LossFunction = Callable[[torch.nn.Module, Any], "tuple[torch.Tensor, Mapping[str, Any]] | torch.Tensor"]
EvaluateFunction = Callable[[torch.nn.Module], Mapping[str, float]]


@dataclasses.dataclass
class LoopArguments:
    """Settings of :func:`run_training_loop`; parse them with ``bitext_hf.training.parse_args``.

    Steps are optimizer steps (one per ``gradient_accumulation_steps`` micro-batches), as in ``transformers``.
    """

    output_dir: str = dataclasses.field(metadata={"help": "Where checkpoints, logs and trackers write."})
    seed: int = dataclasses.field(default=42, metadata={"help": "Seeds data order, init-free randomness, dropout."})
    learning_rate: float = dataclasses.field(default=5e-5, metadata={"help": "Peak AdamW learning rate."})
    weight_decay: float = dataclasses.field(
        default=0.0, metadata={"help": "AdamW decoupled weight decay (not applied to biases and norm weights)."}
    )
    adam_beta1: float = dataclasses.field(default=0.9, metadata={"help": "AdamW beta1."})
    adam_beta2: float = dataclasses.field(default=0.999, metadata={"help": "AdamW beta2."})
    adam_epsilon: float = dataclasses.field(default=1e-8, metadata={"help": "AdamW epsilon."})
    warmup_ratio: float = dataclasses.field(
        default=0.0, metadata={"help": "Fraction of the training steps with a linear warm-up."}
    )
    warmup_steps: int = dataclasses.field(
        default=0, metadata={"help": "Warm-up steps; overrides warmup_ratio if > 0."}
    )
    lr_scheduler_type: str = dataclasses.field(
        default="linear", metadata={"help": f"A transformers scheduler: {', '.join(_SCHEDULERS)}."}
    )
    max_steps: int = dataclasses.field(
        default=-1, metadata={"help": "Total optimizer steps; overrides num_train_epochs if > 0."}
    )
    num_train_epochs: float = dataclasses.field(default=3.0, metadata={"help": "Epochs when max_steps <= 0."})
    per_device_train_batch_size: int = dataclasses.field(default=8, metadata={"help": "Micro-batch size per process."})
    gradient_accumulation_steps: int = dataclasses.field(
        default=1, metadata={"help": "Micro-batches whose gradients are summed into one optimizer step."}
    )
    max_grad_norm: float = dataclasses.field(
        default=1.0, metadata={"help": "Clip the global gradient norm to this; 0 disables clipping."}
    )
    mixed_precision: str = dataclasses.field(default="no", metadata={"help": "One of: no, fp16 (GPU), bf16."})
    logging_steps: int = dataclasses.field(default=10, metadata={"help": "Log every N steps; 0 disables."})
    eval_steps: int = dataclasses.field(
        default=0, metadata={"help": "Run the evaluate callback every N steps (and at the end); 0: only at the end."}
    )
    save_steps: int = dataclasses.field(
        default=500, metadata={"help": "Checkpoint every N steps (and at the end); 0 disables checkpoints."}
    )
    save_total_limit: int | None = dataclasses.field(
        default=None, metadata={"help": "Keep at most this many checkpoints (oldest deleted first)."}
    )
    resume_from_checkpoint: str | None = dataclasses.field(
        default=None,
        metadata={"help": "'auto' (latest checkpoint in output_dir, if any), a checkpoint folder, or None."},
    )
    report_to: str = dataclasses.field(
        default="none",
        metadata={"help": f"Comma-separated trackers: none, all, {JSONL_TRACKER}, {', '.join(_TRACKERS)}."},
    )
    run_name: str | None = dataclasses.field(default=None, metadata={"help": "Tracker run/project name."})
    dataloader_num_workers: int = dataclasses.field(default=0, metadata={"help": "DataLoader worker processes."})
    dataloader_drop_last: bool = dataclasses.field(default=False, metadata={"help": "Drop the last short batch."})
    disable_tqdm: bool = dataclasses.field(default=False, metadata={"help": "Hide the progress bar."})

    def __post_init__(self) -> None:
        if not self.output_dir:
            raise ValueError("output_dir must be a non-empty path")
        positive = ("learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        non_negative = (
            "weight_decay",
            "warmup_steps",
            "max_grad_norm",
            "logging_steps",
            "eval_steps",
            "save_steps",
            "dataloader_num_workers",
            "adam_epsilon",
        )
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1], got {self.warmup_ratio}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.max_steps <= 0 and self.num_train_epochs <= 0:
            raise ValueError("set max_steps > 0 or num_train_epochs > 0: there is nothing to train otherwise")
        if self.mixed_precision not in _MIXED_PRECISION:
            raise ValueError(f"mixed_precision must be one of {_MIXED_PRECISION}, got {self.mixed_precision!r}")
        if self.lr_scheduler_type not in _SCHEDULERS:
            raise ValueError(f"lr_scheduler_type must be one of {_SCHEDULERS}, got {self.lr_scheduler_type!r}")
        if self.save_total_limit is not None and self.save_total_limit < 1:
            raise ValueError(f"save_total_limit must be >= 1 or None, got {self.save_total_limit}")
        if self.resume_from_checkpoint in ("", "none", "None"):
            self.resume_from_checkpoint = None
        self.trackers()  # validates report_to

    def trackers(self) -> list[str]:
        """The tracker names in ``report_to`` ("all": every installed one, plus jsonl); unknown names raise."""
        names = [name.strip() for name in self.report_to.split(",") if name.strip()]
        if names in ([], ["none"]):
            return []
        import accelerate.utils

        if names == ["all"]:
            available = [name for name, check in _TRACKERS.items() if getattr(accelerate.utils, check)()]
            return [JSONL_TRACKER, *available]
        for name in names:
            if name == JSONL_TRACKER:
                continue
            if name not in _TRACKERS:
                raise ValueError(f"report_to: unknown tracker {name!r}; use none, all, {JSONL_TRACKER} or {_TRACKERS}")
            if not getattr(accelerate.utils, _TRACKERS[name])():
                raise ValueError(f"report_to: tracker {name!r} is not installed (pip install {name}) or use 'jsonl'")
        return names

    def to_loggable_dict(self) -> dict[str, Any]:
        """Hyperparameters as a flat dict of str/int/float/bool/None, for ``init_trackers``."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class TrainingResult:
    """What :func:`run_training_loop` returns.

    Attributes:
        model: the trained model, unwrapped from any distributed wrapper.
        global_step: optimizer steps done (including those of a resumed run).
        epoch: epochs done, fractional.
        log_history: every dict logged, each with its "step".
        eval_history: every dict returned by ``evaluate``, each with its "step".
        checkpoints: the checkpoint folders written by this call.
        resumed_from: the checkpoint the run resumed from, if any.
    """

    model: torch.nn.Module
    global_step: int
    epoch: float
    log_history: list[dict[str, float]]
    eval_history: list[dict[str, float]]
    checkpoints: list[str]
    resumed_from: str | None


class JsonlTracker(GeneralTracker):
    """A dependency-free tracker: appends one JSON object per ``log`` call to ``<logging_dir>/logs.jsonl``."""

    name = JSONL_TRACKER
    requires_logging_directory = True
    main_process_only = True

    def __init__(self, run_name: str, logging_dir: str | os.PathLike):
        super().__init__()
        self.run_name = run_name
        self.path = Path(logging_dir) / "logs.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)

    @property
    def tracker(self) -> Path:
        return self.path

    def _append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")

    def store_init_configuration(self, values: dict) -> None:
        self._append({"run_name": self.run_name, "config": values})

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        self._append({"step": step, **values})


class EpochSeededRandomSampler(RandomSampler):
    """A random sampler whose permutation is a function of ``seed + epoch`` only (``set_epoch`` picks the epoch)."""

    def __init__(self, data_source, seed: int):
        super().__init__(data_source, generator=torch.Generator())
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        self.generator.manual_seed(self.seed + self.epoch)
        yield from super().__iter__()


@contextlib.contextmanager
def _forked_rng(seed: int) -> Iterator[None]:
    """Run a block with the CPU generators (torch, numpy, random) seeded from ``seed``; restore them afterwards.

    Collation runs on the CPU, so accelerator generators are left alone.
    """
    python_state, numpy_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    _seed_everything(seed)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)


def _derive_seed(*entropy: int) -> int:
    """A well-mixed 32-bit seed from several integers (neighbouring inputs give unrelated streams)."""
    return int(np.random.SeedSequence([abs(int(value)) for value in entropy]).generate_state(1)[0])


def _seed_everything(seed: int, device: torch.device | None = None) -> None:
    """Seed random, numpy, torch's CPU generator and, for an accelerator ``device``, that device's generator.

    Not ``torch.manual_seed``: on a machine without CUDA it queues a lazy CUDA seeding with a formatted stack trace
    on every call, about 2 ms, which this loop would pay at every micro-batch.
    """
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)
    if device is not None and device.type != "cpu":
        device_module = getattr(torch, device.type, None)
        if device_module is not None and hasattr(device_module, "manual_seed"):
            device_module.manual_seed(seed)  # this process's current device


class _SeededCollate:
    """Wraps ``collate_fn`` so that batch ``index`` of ``epoch`` is collated under a seed of its own."""

    def __init__(self, collate_fn: Callable, seed: int):
        self.collate_fn = collate_fn
        self.seed = seed
        self.epoch = 0
        self.index = 0

    def start_epoch(self, epoch: int, first_batch_index: int) -> None:
        self.epoch, self.index = epoch, first_batch_index

    def __call__(self, samples: list) -> Any:
        with _forked_rng(_derive_seed(self.seed, 1, self.epoch, self.index)):
            self.index += 1
            return self.collate_fn(samples)


def find_last_checkpoint(output_dir: str | os.PathLike) -> str | None:
    """The ``checkpoint-<step>`` folder with the highest step in ``output_dir`` (complete ones only), or None."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return None
    candidates = []
    for path in output_dir.iterdir():
        match = _CHECKPOINT_PATTERN.match(path.name)
        if match and (path / LOOP_STATE_FILE).is_file():
            candidates.append((int(match.group(1)), path))
    return str(max(candidates)[1]) if candidates else None


def _allow_new_mixed_precision(mixed_precision: str) -> None:
    """Let one single-process Python session run the loop again with another ``mixed_precision``.

    accelerate keeps its state in a process-wide singleton and refuses a second ``Accelerator`` with another
    precision ("restart your runtime"); in a single process nothing else depends on it (a test session, a
    notebook), so the accelerator part of it is cleared, the process group (PartialState) kept.
    """
    from accelerate.state import AcceleratorState

    if not AcceleratorState._shared_state:
        return
    state = AcceleratorState()
    if state.num_processes == 1 and str(state.mixed_precision) != mixed_precision:
        logger.info("Resetting accelerate's state: mixed precision %s -> %s", state.mixed_precision, mixed_precision)
        AcceleratorState._reset_state(reset_partial_state=False)


def _build_accelerator(args: LoopArguments) -> Accelerator:
    _allow_new_mixed_precision(args.mixed_precision)
    log_with: list[str | GeneralTracker] = []
    for name in args.trackers():
        log_with.append(JsonlTracker(args.run_name or "bitext-hf", args.output_dir) if name == JSONL_TRACKER else name)
    return Accelerator(
        mixed_precision=args.mixed_precision,
        gradient_accumulation_plugin=GradientAccumulationPlugin(
            num_steps=args.gradient_accumulation_steps, sync_with_dataloader=True
        ),
        log_with=log_with or None,
        project_dir=args.output_dir,
    )


def _build_optimizer(model: torch.nn.Module, args: LoopArguments) -> torch.optim.Optimizer:
    # The usual transformers practice: no weight decay on biases and normalization weights (the 1-d tensors).
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.ndim >= 2 else no_decay).append(parameter)
    if not decay and not no_decay:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    groups = [
        {"params": decay, "weight_decay": args.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [group for group in groups if group["params"]],
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
    )


def _build_dataloader(
    data: Any, args: LoopArguments, collate_fn: Callable | None, shuffle: bool
) -> tuple[DataLoader, _SeededCollate | None]:
    if isinstance(data, DataLoader):
        if collate_fn is not None:
            raise ValueError(
                "pass collate_fn to your DataLoader, not to run_training_loop, when you give a DataLoader"
            )
        return data, None
    collate = (
        _SeededCollate(collate_fn or torch.utils.data.default_collate, args.seed)
        if args.dataloader_num_workers == 0
        else None
    )
    common = {
        "batch_size": args.per_device_train_batch_size,
        "collate_fn": collate or collate_fn or torch.utils.data.default_collate,
        "drop_last": args.dataloader_drop_last,
        "num_workers": args.dataloader_num_workers,
        # A generator of its own: creating the iterator must not draw from the global RNG.
        "generator": torch.Generator().manual_seed(args.seed),
    }
    if isinstance(data, IterableDataset):
        return DataLoader(data, **common), collate
    if not hasattr(data, "__len__") or not hasattr(data, "__getitem__"):
        raise TypeError(
            f"train data must be a map-style dataset (len + indexing), an IterableDataset or a DataLoader, "
            f"got {type(data).__name__}"
        )
    if len(data) == 0:
        raise ValueError("the training dataset is empty")
    sampler = EpochSeededRandomSampler(data, args.seed) if shuffle else SequentialSampler(data)
    return DataLoader(data, sampler=sampler, **common), collate


def _unpack_loss(output: Any) -> tuple[torch.Tensor, dict[str, float]]:
    if isinstance(output, tuple) and len(output) == 2:
        loss, logs = output
    else:
        loss, logs = output, {}
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        raise TypeError("compute_loss must return a scalar tensor, or (scalar tensor, dict of logs)")
    values = {}
    for key, value in dict(logs or {}).items():
        values[key] = float(value.detach().float().mean()) if isinstance(value, torch.Tensor) else float(value)
    return loss, values


def _save_checkpoint(accelerator: Accelerator, output_dir: Path, state: dict[str, Any], limit: int | None) -> str:
    """``save_state`` into ``checkpoint-<step>.tmp`` and rename: auto-resume never sees a half-written checkpoint."""
    final = output_dir / f"{CHECKPOINT_PREFIX}{state['global_step']}"
    partial = output_dir / f"{final.name}.tmp"
    if accelerator.is_main_process and partial.exists():
        shutil.rmtree(partial)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(partial))
    accelerator.wait_for_everyone()  # every process writes its own RNG state file: all must be done before the rename
    if accelerator.is_main_process:
        (partial / LOOP_STATE_FILE).write_text(json.dumps(state, indent=2), encoding="utf-8")
        if final.exists():
            shutil.rmtree(final)
        os.replace(partial, final)
        if limit is not None:
            steps = sorted(
                (int(m.group(1)), path)
                for path in output_dir.iterdir()
                if (m := _CHECKPOINT_PATTERN.match(path.name)) and path != final
            )
            for _, stale in steps[: max(0, len(steps) - (limit - 1))]:
                shutil.rmtree(stale, ignore_errors=True)
    accelerator.wait_for_everyone()
    return str(final)


def resolve_resume_checkpoint(args: LoopArguments) -> str | None:
    """The checkpoint folder a run with these arguments resumes from, or None for a fresh start."""
    if args.resume_from_checkpoint is None:
        return None
    if args.resume_from_checkpoint == "auto":
        return find_last_checkpoint(args.output_dir)
    path = Path(args.resume_from_checkpoint)
    if not (path / LOOP_STATE_FILE).is_file():
        raise FileNotFoundError(
            f"resume_from_checkpoint={str(path)!r} is not a checkpoint folder of this loop (no {LOOP_STATE_FILE})"
        )
    return str(path)


def run_training_loop(
    model: torch.nn.Module,
    train_data: Any,
    *,
    args: LoopArguments,
    compute_loss: LossFunction,
    collate_fn: Callable[[list], Any] | None = None,
    evaluate: EvaluateFunction | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    lr_scheduler: Any | None = None,
    accelerator: Accelerator | None = None,
    shuffle: bool = True,
    after_optimizer_step: Callable[[torch.nn.Module, int], None] | None = None,
) -> TrainingResult:
    """Train ``model`` on ``train_data`` with ``compute_loss``; checkpoint, log, evaluate and resume as configured.

    Args:
        model: any ``torch.nn.Module`` (a ``PreTrainedModel`` included); it is put in train mode.
        train_data: a map-style dataset (``datasets.Dataset``, a list, a torch ``Dataset``) batched by the loop with
            ``args.per_device_train_batch_size`` and ``collate_fn``; an ``IterableDataset`` (needs ``max_steps``);
            or a ready ``DataLoader`` (see the module docstring about resumption).
        args: the :class:`LoopArguments`.
        compute_loss: ``compute_loss(model, batch) -> loss`` or ``-> (loss, {"name": value, ...})``; the batch is
            already on the model's device. Extra values are averaged over the logging window and logged.
        collate_fn: turns a list of dataset items into a batch (default: ``torch.utils.data.default_collate``).
        evaluate: ``evaluate(model) -> {"metric": value}``, called on every process (so it may use collectives)
            with the unwrapped model in eval mode every ``eval_steps`` and at the end; logged with an ``eval_``
            prefix.
        optimizer, lr_scheduler: replace the default AdamW (no decay on 1-d parameters) and the
            ``args.lr_scheduler_type`` schedule with warm-up.
        accelerator: an ``Accelerator`` you configured; by default one is built from ``args``.
        shuffle: shuffle map-style datasets (by ``seed + epoch``).
        after_optimizer_step: ``hook(unwrapped_model, global_step)`` called after each optimizer step (e.g. the
            orthogonality update of a linear mapping).

    Returns:
        A :class:`TrainingResult`.
    """
    if not callable(compute_loss):
        raise TypeError("compute_loss must be callable: compute_loss(model, batch) -> (loss, logs)")
    output_dir = Path(args.output_dir)
    resume_path = resolve_resume_checkpoint(args)
    owns_accelerator = accelerator is None
    if accelerator is None:
        accelerator = _build_accelerator(args)
    elif accelerator.gradient_accumulation_steps != args.gradient_accumulation_steps:
        raise ValueError(
            f"the accelerator accumulates {accelerator.gradient_accumulation_steps} steps but "
            f"args.gradient_accumulation_steps={args.gradient_accumulation_steps}: make them equal"
        )
    if accelerator.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    # Initial seeding covers anything random before the first micro-batch (e.g. an optimizer's lazy state).
    _seed_everything(_derive_seed(args.seed, 0, accelerator.process_index), accelerator.device)

    dataloader, seeded_collate = _build_dataloader(train_data, args, collate_fn, shuffle)
    try:
        batches_per_epoch: int | None = len(dataloader)
    except TypeError:
        batches_per_epoch = None
    if batches_per_epoch is None and args.max_steps <= 0:
        raise ValueError("the training data has no length (an iterable dataset): set max_steps > 0")
    if batches_per_epoch == 0:
        raise ValueError("the training data yields no batch (dataset smaller than the batch size with drop_last?)")

    model.train()
    if optimizer is None:
        optimizer = _build_optimizer(model, args)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    # After prepare: the length is now per process.
    if batches_per_epoch is not None:
        batches_per_epoch = len(dataloader)
    if args.max_steps > 0:
        total_steps = args.max_steps
    else:
        total_steps = math.ceil(
            args.num_train_epochs * math.ceil(batches_per_epoch / args.gradient_accumulation_steps)
        )
    if lr_scheduler is None:
        warmup = args.warmup_steps or math.ceil(args.warmup_ratio * total_steps)
        # accelerate steps a prepared scheduler once per process and optimizer step: count in those units.
        lr_scheduler = get_scheduler(
            args.lr_scheduler_type,
            optimizer=optimizer,
            num_warmup_steps=warmup * accelerator.num_processes,
            num_training_steps=total_steps * accelerator.num_processes,
        )
    lr_scheduler = accelerator.prepare(lr_scheduler)

    state: dict[str, Any] = {"global_step": 0, "epoch": 0, "batches_in_epoch": 0, "micro_step": 0}
    # Per logged key: [sum, number of micro-batches that reported it]. A value compute_loss returns only on some
    # batches (e.g. the loss of one task) is averaged over those batches, not over the whole window.
    window: dict[str, list[float]] = {}
    if resume_path is not None:
        accelerator.load_state(resume_path)
        saved = json.loads((Path(resume_path) / LOOP_STATE_FILE).read_text(encoding="utf-8"))
        state.update({key: saved[key] for key in state})
        window = {key: list(entry) for key, entry in saved.get("log_window", {}).items()}
        logger.info("Resumed from %s at step %d", resume_path, state["global_step"])
    elif find_last_checkpoint(output_dir) is not None:
        logger.warning("%s holds checkpoints that this run does not resume from; they may be overwritten", output_dir)

    started_trackers = bool(accelerator.log_with) and not accelerator.trackers
    if started_trackers:
        accelerator.init_trackers(args.run_name or output_dir.name or "bitext-hf", config=args.to_loggable_dict())

    unwrapped = accelerator.unwrap_model(model)
    log_history: list[dict[str, float]] = []
    eval_history: list[dict[str, float]] = []
    checkpoints: list[str] = []

    def fractional_epoch() -> float:
        if not batches_per_epoch:
            return 0.0
        return state["epoch"] + state["batches_in_epoch"] / batches_per_epoch

    def run_evaluation() -> None:
        if evaluate is None:
            return
        model.eval()
        with torch.no_grad():
            metrics = {f"eval_{key}": float(value) for key, value in dict(evaluate(unwrapped)).items()}
        model.train()
        metrics["step"] = state["global_step"]
        eval_history.append(metrics)
        accelerator.log({k: v for k, v in metrics.items() if k != "step"}, step=state["global_step"])
        logger.info("step %d: %s", state["global_step"], metrics)

    def flush_logs(progress: tqdm) -> None:
        if not window:
            return
        keys = sorted(window)
        if accelerator.num_processes > 1:
            # Processes may have seen different keys (one drew no batch of some task): agree on their union.
            keys = sorted({key for process_keys in gather_object([keys]) for key in process_keys})
        totals = torch.tensor(
            [window.get(key, [0.0, 0]) for key in keys], device=accelerator.device, dtype=torch.float64
        )
        totals = accelerator.reduce(totals, "sum")  # sums and counts over processes
        logs = {key: total / count for key, (total, count) in zip(keys, totals.tolist()) if count > 0}
        logs["learning_rate"] = float(lr_scheduler.get_last_lr()[0])
        logs["epoch"] = round(fractional_epoch(), 4)
        accelerator.log(logs, step=state["global_step"])
        log_history.append({**logs, "step": state["global_step"]})
        progress.set_postfix(loss=f"{logs.get('loss', float('nan')):.4g}")
        window.clear()

    progress = tqdm(
        total=total_steps,
        initial=state["global_step"],
        disable=args.disable_tqdm or not accelerator.is_local_main_process,
        desc="training",
    )
    finished = state["global_step"] >= total_steps
    while not finished:
        epoch_loader = dataloader
        if hasattr(dataloader, "set_epoch"):
            dataloader.set_epoch(state["epoch"])
        if seeded_collate is not None:
            # Skipping skips sampling for map-style data, but an iterable dataset has its skipped batches
            # collated (and dropped) again: then the collate count starts from the epoch's first batch.
            skipped_by_sampler = not isinstance(train_data, IterableDataset)
            seeded_collate.start_epoch(state["epoch"], state["batches_in_epoch"] if skipped_by_sampler else 0)
        if state["batches_in_epoch"]:
            epoch_loader = accelerator.skip_first_batches(dataloader, state["batches_in_epoch"])
        for batch in epoch_loader:
            _seed_everything(
                _derive_seed(args.seed, 2, accelerator.process_index, state["micro_step"]), accelerator.device
            )
            with accelerator.accumulate(model):
                loss, extra_logs = _unpack_loss(compute_loss(model, batch))
                accelerator.backward(loss)
                if accelerator.sync_gradients and args.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            state["micro_step"] += 1
            state["batches_in_epoch"] += 1
            for key, value in {"loss": float(loss.detach().float()), **extra_logs}.items():
                entry = window.setdefault(key, [0.0, 0])
                entry[0] += value
                entry[1] += 1
            if not accelerator.sync_gradients:
                continue
            state["global_step"] += 1
            progress.update(1)
            if after_optimizer_step is not None:
                after_optimizer_step(unwrapped, state["global_step"])
            step = state["global_step"]
            finished = step >= total_steps
            if args.logging_steps and (step % args.logging_steps == 0 or finished):
                flush_logs(progress)
            if evaluate is not None and ((args.eval_steps and step % args.eval_steps == 0) or finished):
                run_evaluation()
            if args.save_steps and (step % args.save_steps == 0 or finished):
                checkpoint_state = {**state, "log_window": window}
                checkpoints.append(_save_checkpoint(accelerator, output_dir, checkpoint_state, args.save_total_limit))
            if finished:
                break
        if not finished:
            if state["batches_in_epoch"] == 0:  # reset only at an epoch's end: this epoch yielded nothing
                raise ValueError("the training data yielded no batch in a whole epoch")
            state["epoch"] += 1
            state["batches_in_epoch"] = 0
    progress.close()
    accelerator.wait_for_everyone()
    if owns_accelerator or started_trackers:
        accelerator.end_training()  # closes the trackers this call opened
    return TrainingResult(
        model=unwrapped,
        global_step=state["global_step"],
        epoch=fractional_epoch(),
        log_history=log_history,
        eval_history=eval_history,
        checkpoints=checkpoints,
        resumed_from=resume_path,
    )
