"""Training pieces of the ContrastiveAlignedEncoder: examples, collator, the Trainer loss, the orthogonalization
callback and the held-out evaluator (its export and card are in :mod:`bitext_hf.families.contrastive_align.export`).

* :func:`build_examples`: tokenized pairs with their one-to-one links moved from words to first-subword positions.
* :class:`AlignmentCollator`: pads both sides and stacks the links as ``(example, source position, target
  position)`` rows (the model's ``alignments``), plus each example's language index.
* :func:`alignment_loss`: ``BitextTrainer(loss_fn=...)``; the model computes its own loss, the parts are logged;
  in a distributed job each rank's alignment term weighs by its share of the global batch's links.
* :class:`OrthogonalizeCallback`: Eq. 2 after every optimizer step of the ``linear`` objective.
* :class:`ReferenceCallback`: theta_0 of the parameter regularizer, saved in every checkpoint folder and set back
  from there when a run resumes, so that a resumed run regularizes towards the same weights as an uninterrupted one.
* :class:`AlignmentRetrievalEvaluator`: ``BitextTrainer(retrieval_evaluator=...)``: word-level retrieval accuracy
  and sentence-level xsim per held-out language (:mod:`bitext_hf.evaluation.retrieval`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from bitext_hf.data.collators import pad_sequences
from bitext_hf.data.words import first_subword_positions
from bitext_hf.errors import DataValidationError
from bitext_hf.evaluation.evaluator import RetrievalEvaluator
from bitext_hf.families.contrastive_align.symmetrize import Link
from bitext_hf.io import atomic_output
from bitext_hf.training.distributed import gather_with_grad, global_share, world_size

__all__ = [
    "THETA_0_FILE",
    "AlignmentCollator",
    "AlignmentEvalSet",
    "AlignmentRetrievalEvaluator",
    "OrthogonalizeCallback",
    "ReferenceCallback",
    "alignment_loss",
    "build_examples",
    "check_reference",
    "regularizes",
    "unwrap",
]

THETA_0_FILE = "theta_0.safetensors"


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The ContrastiveAlignedEncoder inside a ``PeftModel`` / DDP wrapper, or ``model`` itself."""
    model = getattr(model, "module", model)
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def build_examples(
    tokenizer: Any,
    source_words: Sequence[Sequence[str]],
    target_words: Sequence[Sequence[str]],
    word_links: Sequence[Sequence[Link]],
    language: int,
    max_length: int = 96,
) -> list[dict[str, Any]]:
    """One example per pair with at least one link left after truncation (pairs without links teach nothing)."""
    examples = []
    for src, tgt, links in zip(source_words, target_words, word_links):
        source_ids, source_positions = first_subword_positions(tokenizer, src, max_length)
        target_ids, target_positions = first_subword_positions(tokenizer, tgt, max_length)
        token_links = [
            (source_positions[i], target_positions[j])
            for i, j in links
            if source_positions[i] is not None and target_positions[j] is not None
        ]
        if token_links:
            examples.append(
                {"src_input_ids": source_ids, "tgt_input_ids": target_ids, "links": token_links, "language": language}
            )
    return examples


class AlignmentCollator:
    """Examples of :func:`build_examples` -> the keyword arguments of ``ContrastiveAlignedEncoder.forward``."""

    def __init__(self, pad_token_id: int) -> None:
        if pad_token_id is None:
            raise ValueError("AlignmentCollator needs a pad_token_id (the tokenizer has no pad token)")
        self.pad_token_id = int(pad_token_id)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = pad_sequences([e["src_input_ids"] for e in examples], self.pad_token_id)
        target_ids, target_mask = pad_sequences([e["tgt_input_ids"] for e in examples], self.pad_token_id)
        rows = [(index, i, j) for index, example in enumerate(examples) for i, j in example["links"]]
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "target_input_ids": target_ids,
            "target_attention_mask": target_mask,
            "alignments": torch.tensor(rows, dtype=torch.long).reshape(-1, 3),
            "languages": torch.tensor([int(example["language"]) for example in examples], dtype=torch.long),
        }


def alignment_loss(
    model: torch.nn.Module, inputs: Mapping[str, torch.Tensor], *, gather_across_devices: bool = True
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The model's loss and its parts (alignment term, regularizer, links per batch) for the Trainer's logs.

    In a distributed job every link of the global batch weighs the same, as in one process given the whole batch:

    * ``l2`` and ``linear`` are means over the micro-batch's links, and DDP averages the ranks' gradients, so a rank's
      term is scaled by its share of the global batch's links (:func:`~bitext_hf.training.distributed.global_share`;
      so are ``weak`` and ``strong`` without ``gather_across_devices``, over each rank's own negatives);
    * ``weak`` and ``strong`` take every other link of the batch as a negative: with ``gather_across_devices`` each
      rank gathers every rank's linked token states with their gradients and scores the global batch's links, the
      same loss on every rank, whose gradient DDP's average gives back
      (:func:`~bitext_hf.training.distributed.gather_with_grad`). The rank's own term stays in the graph with a
      zero gradient (it is added and taken away), so the parameters get their gradients in the same places.

    The logged alignment term is then the global one; the other parts stay the rank's own.
    """
    output = model(**inputs)
    links = inputs["alignments"].shape[0]
    parts: dict[str, Any] = {"alignment_loss": output.alignment_loss.detach(), "links": links}
    if output.regularization_loss is not None:
        parts["regularization_loss"] = output.regularization_loss.detach()
    loss = output.loss
    if not model.training or world_size() == 1:
        return loss, parts
    core = unwrap(model)
    if gather_across_devices and core.config.objective in ("weak", "strong"):
        examples, source_positions, target_positions = inputs["alignments"].unbind(1)
        source = gather_with_grad(output.last_hidden_state[examples, source_positions])
        target = gather_with_grad(output.target_last_hidden_state[examples, target_positions])
        if source.shape[0]:  # no rank has a link: the model's own zero term stands
            term = core.contrastive_link_loss(source, target)
            loss = loss - output.alignment_loss + term
            parts["alignment_loss"] = term.detach()
        return loss, parts
    share = global_share(links, inputs["alignments"].device)  # every rank calls it at the same step
    if share != 1.0:
        loss = loss + output.alignment_loss * (share - 1.0)
    return loss, parts


class OrthogonalizeCallback(TrainerCallback):
    """W <- (1 + beta) W - beta (W W^T) W after each optimizer step (``on_step_end`` follows ``optimizer.step``)."""

    def on_step_end(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs: Any):
        if model is not None:
            unwrap(model).orthogonalize_()
        return control


def regularizes(model: torch.nn.Module) -> bool:
    """Whether the model's loss carries the parameter regularizer (l2 / weak / strong with a weight above 0)."""
    config = unwrap(model).config
    return config.objective != "linear" and float(config.regularization_weight) > 0


def check_reference(checkpoint: str | os.PathLike | None, regularized: bool) -> None:
    """Before any expensive work: a regularized run resumes only from a checkpoint that carries its theta_0.

    Raises:
        DataValidationError: naming the missing file (a checkpoint saved before theta_0 was saved with it).
    """
    if checkpoint is not None and regularized and not (Path(checkpoint) / THETA_0_FILE).is_file():
        raise DataValidationError(
            f"{Path(checkpoint) / THETA_0_FILE}: missing, and the parameter regularizer needs the run's initial "
            "weights; this checkpoint cannot be resumed: start afresh (or resume with --regularization_weight 0)"
        )


class ReferenceCallback(TrainerCallback):
    """theta_0 belongs to the run: taken when a fresh run begins, written into every checkpoint folder (a hard link to
    the previous checkpoint's copy where the file system allows, so that it costs its size once), and set back from
    ``resume_from_checkpoint`` when a run resumes. Without it a resumed run would regularize towards the checkpoint's
    weights, not the run's initial ones. A model without the regularizer is left alone.
    """

    def __init__(self, resume_from_checkpoint: str | os.PathLike | None = None) -> None:
        self.resume_from_checkpoint = resume_from_checkpoint
        self._written: Path | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs):
        if model is None or not regularizes(model):
            return control
        if self.resume_from_checkpoint is None:
            unwrap(model).reset_reference()
            return control
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        path = Path(self.resume_from_checkpoint) / THETA_0_FILE
        check_reference(self.resume_from_checkpoint, True)
        try:
            unwrap(model).reset_reference(load_file(str(path)))
        except (SafetensorError, OSError, ValueError) as error:  # the model's mismatch error is a ValueError
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise DataValidationError(
                f"{path}: {reason}; this checkpoint cannot be resumed with these arguments"
            ) from None
        return control

    def on_save(self, args: Any, state: Any, control: Any, model: torch.nn.Module | None = None, **kwargs):
        if model is None or not regularizes(model) or not state.is_world_process_zero:
            return control
        target = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}" / THETA_0_FILE
        if not self._link(target):
            from safetensors.torch import save

            reference = {name: value.cpu() for name, value in unwrap(model).regularization_reference().items()}
            with atomic_output(target, "wb", follow_symlinks=False) as handle:
                handle.write(save(reference, metadata={"format": "pt"}))
        self._written = target
        return control

    def _link(self, target: Path) -> bool:
        """Hard-link the copy written last (rotation may have removed it), replacing ``target`` atomically."""
        if self._written is None or self._written == target or not self._written.is_file():
            return False
        staged = target.with_name(f".{target.name}.link")
        try:
            staged.unlink(missing_ok=True)
            os.link(self._written, staged)
            os.replace(staged, target)
        except OSError:
            staged.unlink(missing_ok=True)
            return False
        return True


class AlignmentEvalSet(NamedTuple):
    """A held-out set of one language: sentences, their words and their word links (English first)."""

    sources: list[str]
    targets: list[str]
    source_words: list[list[str]]
    target_words: list[list[str]]
    links: list[list[Link]]


class AlignmentRetrievalEvaluator(RetrievalEvaluator):
    """``evaluator(model) -> metrics``: per language ``<lang>/word_accuracy``, ``<lang>/xsim``,
    ``<lang>/sentence_accuracy`` and their means over languages (``word_accuracy``, ``xsim``, ...).

    Primary metric: ``word_accuracy`` (what the alignment objectives train), higher is better. For ``linear`` the
    language's W maps the target side, as in the model's own use.
    """

    def __init__(
        self, tokenizer: Any, eval_sets: Mapping[str, AlignmentEvalSet], max_length: int = 96, *, name: str = ""
    ) -> None:
        super().__init__(primary_metric="word_accuracy", greater_is_better=True, name=name)
        self.tokenizer, self.eval_sets, self.max_length = tokenizer, dict(eval_sets), max_length

    def compute_metrics(self, model: torch.nn.Module) -> dict[str, float]:
        from bitext_hf.evaluation.retrieval import sentence_retrieval, word_retrieval_accuracy

        aligned = unwrap(model)
        results: dict[str, float] = {}
        for language, data in self.eval_sets.items():
            target_map = aligned.linear_map(language) if aligned.config.objective == "linear" else None
            words = word_retrieval_accuracy(
                aligned.encoder,
                self.tokenizer,
                data.source_words,
                data.target_words,
                data.links,
                target_map=target_map,
                layer=aligned.config.layer,
                max_length=self.max_length,
            )
            sentences = sentence_retrieval(
                aligned.encoder,
                self.tokenizer,
                data.sources,
                data.targets,
                target_map=target_map,
                max_length=self.max_length,
            )
            results[f"{language}/word_accuracy"] = words["accuracy"]
            results.update({f"{language}/{key}": value for key, value in sentences.items()})
        for metric in ("word_accuracy", "xsim", "sentence_accuracy"):
            values = [results[f"{language}/{metric}"] for language in self.eval_sets]
            if values:
                results[metric] = sum(values) / len(values)
        return results
