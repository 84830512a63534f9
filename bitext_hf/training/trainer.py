"""``BitextTrainer``: ``transformers.Trainer`` with a family's loss function and retrieval evaluation.

Every recipe trains through this class, so users get what they know from ``transformers``: ``TrainingArguments``
(``--save_total_limit``, ``--resume_from_checkpoint``, ``--report_to``, ``--push_to_hub``, ``--bf16``,
``--gradient_checkpointing``, DeepSpeed/FSDP through ``accelerate launch --config_file``), callbacks and the
checkpoint layout. Two things are added:

* ``loss_fn(model, inputs) -> loss`` or ``-> (loss, {"name": value, ...})``: the family's loss, for models whose
  ``forward`` does not return the loss (or returns one without the parts worth watching). The named parts are
  averaged over the micro-batches of each logging window that reported them (a task's loss that only some batches
  carry is not diluted), summed and counted across processes, and logged with the Trainer's ``loss``.
* ``retrieval_evaluator(model) -> {"xsim": ..., "accuracy": ...}``: retrieval on held-out pairs, run by
  :meth:`BitextTrainer.evaluate` wherever the Trainer evaluates (``eval_strategy``/``eval_steps``,
  ``eval_on_start``, the end of training when asked). Its keys get the ``eval_`` prefix, are logged through
  ``report_to`` and passed to the callbacks' ``on_evaluate``, and feed the best-model bookkeeping
  (``load_best_model_at_end``, ``save_strategy="best"``). No ``eval_dataset`` is needed.

An evaluator that declares ``primary_metric`` and ``greater_is_better`` (a
:class:`~bitext_hf.evaluation.evaluator.RetrievalEvaluator`; read with ``getattr``, so a plain function is an evaluator
too) ranks checkpoints by itself: ``load_best_model_at_end`` (or ``save_strategy="best"``) without
``metric_for_best_model`` selects on its primary metric, and when ``metric_for_best_model`` names the primary metric
(with or without ``eval_``) the direction is the evaluator's, so ``greater_is_better`` need not be given. A
``greater_is_better`` given against the evaluator's direction is kept, with a warning. ``TrainingArguments`` keeps no
record of what was given: ``greater_is_better`` equal to the default that ``transformers`` derives from the metric's
name (``True`` unless the name ends with ``loss``) counts as not given, and ``metric_for_best_model="loss"`` counts
as not given when there is no ``eval_dataset`` (there is no evaluation loss to select on then).

Why ``evaluate()`` and not a ``TrainerCallback``: a callback's ``on_evaluate`` runs after the Trainer has logged the
metrics and cannot return new ones to the best-model logic (``_determine_best_metric`` reads what ``evaluate``
returns).

The evaluator runs on every process (each gets the same numbers) so that every process agrees on the best
checkpoint; it receives the model unwrapped from DDP (``self.model``: a ``PeftModel`` when LoRA is on) in eval mode
under ``torch.no_grad``.
"""

from __future__ import annotations

import json
import logging
import os
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset
from transformers import Trainer
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
from transformers.trainer_utils import get_last_checkpoint
from transformers.utils import SAFE_WEIGHTS_INDEX_NAME

from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.training.distributed import has_accelerator

__all__ = [
    "BitextTrainer",
    "LossFunction",
    "check_resumable_checkpoint",
    "resume_checkpoint",
    "unpack_loss",
]

logger = logging.getLogger(__name__)

LossFunction = Callable[[torch.nn.Module, Any], "torch.Tensor | tuple[torch.Tensor, Mapping[str, Any]]"]
# Weights a checkpoint may hold instead of .safetensors files: pickled (not opened here) or a DeepSpeed/FSDP layout.
_OTHER_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "adapter_model.bin", "pytorch_model_fsdp_0")


class _RetrievalOnly(Dataset):
    """Stands in for ``eval_dataset`` when retrieval is the only evaluation.

    ``Trainer.__init__`` refuses ``eval_strategy="steps"`` without an ``eval_dataset``; this placeholder satisfies
    that check and is never iterated (``BitextTrainer.evaluate`` does not call the Trainer's evaluation loop for it).
    """

    def __len__(self) -> int:
        return 0

    def __getitem__(self, index: int) -> Any:
        raise IndexError(index)


def resume_checkpoint(resume_from_checkpoint: str | None, output_dir: str | os.PathLike) -> str | None:
    """The checkpoint a run resumes from, for ``Trainer.train(resume_from_checkpoint=...)``.

    ``None`` / ``""`` / ``"none"``: a fresh start. ``"auto"`` (or ``"true"``): the latest ``checkpoint-N`` in
    ``output_dir`` if there is one, else a fresh start (so one command line both starts and continues a run).
    Anything else must be a checkpoint folder (with ``trainer_state.json``). Either way the checkpoint is checked
    before any expensive work (:func:`check_resumable_checkpoint`).

    Raises:
        UsageError: the path is not a Trainer checkpoint.
        DataValidationError: the checkpoint is damaged or incomplete (the message names the file).
    """
    value = (resume_from_checkpoint or "").strip()
    if value.lower() in ("", "none", "false"):
        return None
    if value.lower() in ("auto", "true"):
        found = get_last_checkpoint(str(output_dir)) if Path(output_dir).is_dir() else None
        if found is not None:
            check_resumable_checkpoint(found)
        return found
    if not (Path(value) / "trainer_state.json").is_file():
        raise UsageError(f"--resume_from_checkpoint {value}: not a Trainer checkpoint folder (no trainer_state.json)")
    check_resumable_checkpoint(value)
    return value


def _damaged(path: Path, what: str) -> DataValidationError:
    return DataValidationError(
        f"{path}: {what}; this checkpoint cannot be resumed: resume from another one or start afresh"
    )


def check_resumable_checkpoint(folder: str | os.PathLike) -> None:
    """Check cheaply that the Trainer can resume from ``folder``, before any expensive work: ``trainer_state.json``
    parses; every ``.safetensors`` weights file has a header that parses and sizes that match the file (the
    ``safetensors`` library reads the header only); sharded weights have every shard; the optimizer, scheduler and
    RNG states are there and their zip directories (``torch.save``'s format) are intact. DeepSpeed and FSDP
    checkpoints keep their optimizer states in their own layout, which is left to them.

    Raises:
        DataValidationError: naming the first damaged or missing file.
    """
    from safetensors import SafetensorError, safe_open

    folder = Path(folder)
    state = folder / "trainer_state.json"
    try:
        json.loads(state.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise _damaged(state, f"not a readable trainer state ({_first_line(error)})") from None
    index = folder / SAFE_WEIGHTS_INDEX_NAME
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as error:
            raise _damaged(index, f"not a readable weights index ({_first_line(error)})") from None
        missing = sorted(name for name in shards if not (folder / str(name)).is_file())
        if missing:
            raise _damaged(folder / str(missing[0]), "missing, although the weights index lists it")
    weights = sorted(folder.glob("*.safetensors"))
    if not weights and not any((folder / name).exists() for name in _OTHER_WEIGHTS):
        raise _damaged(folder, "no model weights (model.safetensors)")
    for path in weights:
        try:
            with safe_open(str(path), framework="pt") as handle:
                handle.keys()
        except (SafetensorError, OSError) as error:
            raise _damaged(path, f"not a complete safetensors file ({_first_line(error)})") from None
    names = [entry.name for entry in folder.iterdir()]
    if any(name.startswith(("global_step", "optimizer_0", "pytorch_model_fsdp")) for name in names):
        return  # DeepSpeed / FSDP: their own optimizer layout
    states = [folder / OPTIMIZER_NAME, folder / SCHEDULER_NAME]
    rng_states = sorted(folder.glob("rng_state*.pth"))
    states += rng_states or [folder / "rng_state.pth"]
    for path in states:
        if not path.is_file():
            raise _damaged(path, "missing (a checkpoint saved with --save_only_model holds only the weights)")
        try:
            zipfile.ZipFile(path).close()
        except (zipfile.BadZipFile, OSError) as error:
            raise _damaged(path, f"truncated or not a torch.save file ({_first_line(error)})") from None


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def unpack_loss(output: Any) -> tuple[torch.Tensor, dict[str, Any]]:
    """``loss`` or ``(loss, components)`` -> ``(loss, components)``, checking that the loss is a scalar tensor."""
    if isinstance(output, tuple) and len(output) == 2:
        loss, components = output
    else:
        loss, components = output, {}
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        raise TypeError("loss_fn must return a scalar tensor, or (scalar tensor, dict of floats or tensors)")
    return loss, dict(components or {})


def _rank_by_evaluator(args: Any, evaluator: Any, retrieval_only: bool) -> None:
    """Set ``args.metric_for_best_model`` / ``args.greater_is_better`` from the evaluator's ``primary_metric`` /
    ``greater_is_better`` where the user left them to ``transformers``' defaults (the module docstring says how that
    is told); warn when an explicit ``greater_is_better`` contradicts the evaluator.

    ``retrieval_only``: the Trainer has no ``eval_dataset``, so its evaluation reports no loss.
    """
    primary = getattr(evaluator, "primary_metric", None)
    greater_is_better = getattr(evaluator, "greater_is_better", None)
    if not isinstance(primary, str) or not primary or not isinstance(greater_is_better, bool):
        return
    metric = args.metric_for_best_model
    selects = args.load_best_model_at_end or args.save_strategy == "best"
    # TrainingArguments.__post_init__ turns a missing metric into "loss" when load_best_model_at_end is on.
    if (metric is None and selects) or (metric == "loss" and retrieval_only):
        args.metric_for_best_model = primary
        args.greater_is_better = greater_is_better
        return
    if metric not in (primary, f"eval_{primary}"):
        return  # another metric: transformers' rule by name applies
    name_default = not metric.endswith("loss")  # what TrainingArguments.__post_init__ derives when not given
    if args.greater_is_better is None or args.greater_is_better == name_default:
        args.greater_is_better = greater_is_better
    elif args.greater_is_better != greater_is_better:
        logger.warning(
            "greater_is_better=%s, but the retrieval evaluator's primary metric %s is better when %s: keeping %s",
            args.greater_is_better,
            primary,
            "higher" if greater_is_better else "lower",
            args.greater_is_better,
        )


class BitextTrainer(Trainer):
    """``transformers.Trainer`` with ``loss_fn`` and ``retrieval_evaluator`` (see the module docstring).

    Args:
        model (PreTrainedModel): as for ``Trainer``.
        args (TrainingArguments): as for ``Trainer``.
        loss_fn: ``loss_fn(model, inputs)`` -> scalar loss, or (loss, dict of named parts to log). ``None``: the
            model's own loss (``Trainer.compute_loss``). With a ``loss_fn`` the Trainer keeps every dataset column
            (``remove_unused_columns`` is turned off: the columns are the loss's inputs, not ``forward``'s).
        retrieval_evaluator: ``evaluator(model) -> {metric: value}``, run at every evaluation; its
            ``primary_metric`` and ``greater_is_better``, when it has them, rank the checkpoints (module docstring).
        **kwargs: every other ``Trainer`` argument (``train_dataset``, ``data_collator``, ``callbacks``, ...),
            by keyword.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        args: Any = None,
        *,
        loss_fn: LossFunction | None = None,
        retrieval_evaluator: Callable[[torch.nn.Module], Mapping[str, float]] | None = None,
        **kwargs: Any,
    ) -> None:
        if loss_fn is not None and not callable(loss_fn):
            raise TypeError("loss_fn must be callable: loss_fn(model, inputs) -> loss or (loss, dict)")
        if retrieval_evaluator is not None and not callable(retrieval_evaluator):
            raise TypeError("retrieval_evaluator must be callable: evaluator(model) -> dict of metrics")
        self.loss_fn = loss_fn
        self.retrieval_evaluator = retrieval_evaluator
        if retrieval_evaluator is not None and kwargs.get("eval_dataset") is None:
            kwargs["eval_dataset"] = _RetrievalOnly()
        if retrieval_evaluator is not None and args is not None:
            _rank_by_evaluator(args, retrieval_evaluator, isinstance(kwargs["eval_dataset"], _RetrievalOnly))
        if loss_fn is not None and args is not None and args.remove_unused_columns:
            args.remove_unused_columns = False
        if args is not None and args.dataloader_pin_memory and not has_accelerator():
            # Pinned memory only helps host-to-GPU copies; on a CPU-only machine torch warns at every dataloader.
            args.dataloader_pin_memory = False
        # Per logged component: [sum (a float or a detached tensor: no device sync per step), micro-batch count].
        self._component_window: dict[str, list[Any]] = {}
        super().__init__(model=model, args=args, **kwargs)

    def get_train_dataloader(self) -> Any:
        dataloader = super().get_train_dataloader()
        if self.args.world_size > 1:
            # Each rank says which part of every global batch it trains on: a launch that silently trained every
            # rank on the whole data (or on one process only) shows here.
            logger.info(
                "rank %d of %d: shard %d of each global batch of %d (%d examples per device)",
                self.args.process_index,
                self.args.world_size,
                self.args.process_index,
                self.args.train_batch_size * self.args.world_size,
                self.args.train_batch_size,
            )
        return dataloader

    # -- loss ---------------------------------------------------------------------------------------------------------

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        if self.loss_fn is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        loss, components = unpack_loss(self.loss_fn(model, inputs))
        if model.training:
            for key, value in components.items():
                value = value.detach().float().mean() if isinstance(value, torch.Tensor) else float(value)
                entry = self._component_window.setdefault(key, [0.0, 0])
                entry[0] = entry[0] + value
                entry[1] += 1
        return (loss, {"loss": loss.detach()}) if return_outputs else loss

    def _flush_components(self) -> dict[str, float]:
        """The window's component averages, over the micro-batches (of every process) that reported each one."""
        keys = sorted(self._component_window)
        if self.args.world_size > 1:
            from accelerate.utils import gather_object

            # Processes may have seen different keys (one drew no batch of some task): agree on their union.
            keys = sorted({key for process_keys in gather_object([keys]) for key in process_keys})
        if not keys:
            return {}
        totals = torch.tensor(
            [
                [float(self._component_window.get(key, [0.0, 0])[0]), self._component_window.get(key, [0.0, 0])[1]]
                for key in keys
            ],
            dtype=torch.float64,
            device=self.args.device,
        )
        if self.args.world_size > 1:
            totals = self.accelerator.reduce(totals, "sum")
        self._component_window.clear()
        return {key: total / count for key, (total, count) in zip(keys, totals.tolist()) if count > 0}

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        # The Trainer's periodic training log is the one with "loss" (the end-of-training summary has "train_loss").
        if "loss" in logs and (self._component_window or self.args.world_size > 1):
            logs = {**logs, **self._flush_components()}
        super().log(logs, start_time)

    # -- evaluation ---------------------------------------------------------------------------------------------------

    def evaluate(
        self,
        eval_dataset: Any = None,
        ignore_keys: list[str] | None = None,
        metric_key_prefix: str = "eval",
    ) -> dict[str, float]:
        if self.retrieval_evaluator is None:
            return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        metrics: dict[str, float] = {}
        if eval_dataset is not None or not isinstance(self.eval_dataset, _RetrievalOnly):
            metrics.update(super().evaluate(eval_dataset, ignore_keys, metric_key_prefix))
        retrieval = self.run_retrieval_evaluation(metric_key_prefix)
        self.log(retrieval)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, retrieval)
        metrics.update(retrieval)
        return metrics

    def run_retrieval_evaluation(self, metric_key_prefix: str = "eval") -> dict[str, float]:
        """Run the retrieval evaluator once on the current model; keys prefixed, plus ``<prefix>_runtime``."""
        if self.retrieval_evaluator is None:
            raise ValueError("this trainer has no retrieval_evaluator")
        model = self.model
        was_training = model.training
        started = time.perf_counter()
        model.eval()
        try:
            with torch.no_grad():
                values = dict(self.retrieval_evaluator(model))
        finally:
            model.train(was_training)
        metrics = {f"{metric_key_prefix}_{key}": float(value) for key, value in values.items()}
        metrics[f"{metric_key_prefix}_runtime"] = round(time.perf_counter() - started, 4)
        return metrics
