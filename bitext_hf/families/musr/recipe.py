"""The steps of ``recipes/train_musr.py`` between its arguments (:mod:`~bitext_hf.families.musr.arguments`) and its
outputs (:func:`bitext_hf.families.musr.export.save_outputs`): the checks run before any data is read, the data and
vocabulary preparation, the model configuration, one stage's Trainer run, both stages, and the evaluation. The recipe
itself only chains them."""

from __future__ import annotations

import dataclasses
import logging
import numbers
import os
import random
import reprlib
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch
from transformers import AutoTokenizer, TrainingArguments

from bitext_hf.data import parse_spec
from bitext_hf.data.collators import PairCollator
from bitext_hf.data.filters import tokenize_pairs
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.families.musr.arguments import DEFAULT_STAGE1_PLATEAU, ArchitectureArguments, ScriptArguments
from bitext_hf.families.musr.data import (
    check_vocabulary,
    english_copies,
    language_probabilities,
    load_data,
    sample_stage,
)
from bitext_hf.families.musr.evaluation import MuSREvaluator
from bitext_hf.families.musr.losses import CrossConSTLoss
from bitext_hf.families.musr.plateau import PlateauCallback
from bitext_hf.io.small_files import file_kind
from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder
from bitext_hf.training import BitextTrainer
from bitext_hf.training.tokenizer import train_or_reuse_tokenizer
from bitext_hf.training.trainer import check_resumable_checkpoint

__all__ = [
    "ArchitectureArguments",
    "ScriptArguments",
    "StageInputs",
    "build_tokenizer",
    "check_arguments",
    "check_stage_arguments",
    "evaluate",
    "is_resuming",
    "model_config",
    "prepare_stages",
    "run_stage",
    "stage1_plateau",
    "train_stages",
]

_MODEL_FIELDS = (
    "hidden_size",
    "num_encoder_layers",
    "num_decoder_layers",
    "num_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "dropout",
    "attention_dropout",
    "label_smoothing",
)


@dataclasses.dataclass
class StageInputs:
    """What both stages train and evaluate on: the vocabulary, each stage's tokenized examples, the held-out
    evaluator (``None`` without held-out set) and the results' ``data`` section."""

    tokenizer: Any
    examples: list[list[dict[str, list[int]]]]
    evaluator: MuSREvaluator | None
    data: dict[str, Any]


def check_arguments(
    script_args: ScriptArguments, training_args: TrainingArguments, model_args: ArchitectureArguments
) -> None:
    """Everything cheap, before any data is read."""
    try:
        MuSRConfig(vocab_size=8, **{name: getattr(model_args, name) for name in _MODEL_FIELDS})
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not script_args.train_pairs:
        raise UsageError("--train_pairs is empty: give at least one xx=SOURCE spec")
    for spec in script_args.train_pairs:
        parse_spec(spec)
    for name in ("train_examples", "vocab_size", "max_seq_length", "eval_batch_size", "tokenizer_training_texts"):
        if getattr(script_args, name) < 1:
            raise UsageError(f"--{name} must be >= 1, got {getattr(script_args, name)}")
    for name in ("held_out", "stage1_steps", "stage2_steps"):
        if getattr(script_args, name) < 0:
            raise UsageError(f"--{name} must be >= 0, got {getattr(script_args, name)}")
    if not script_args.temperature > 0 or script_args.alpha < 0 or not 0 <= script_args.max_unknown <= 1:
        raise UsageError("--temperature must be > 0, --alpha >= 0 and --max_unknown in [0, 1]")
    if training_args.max_steps <= 0 and not (script_args.stage1_steps and script_args.stage2_steps):
        raise UsageError("give --max_steps (or --stage1_steps and --stage2_steps): stages are counted in steps")
    if training_args.eval_strategy != "no" and not script_args.held_out:
        raise UsageError("--eval_strategy needs the held-out set: give --held_out")
    plateau = script_args.stage1_plateau
    if (plateau is not None and plateau < 0) or script_args.stage1_eval_steps < 1 or script_args.stage1_patience < 1:
        raise UsageError("--stage1_plateau must be >= 0, --stage1_eval_steps and --stage1_patience >= 1")
    if plateau and not script_args.held_out:
        raise UsageError("--stage1_plateau needs the held-out set: give --held_out (or --stage1_plateau 0)")
    smoothing = script_args.stage2_label_smoothing
    if smoothing is not None and not 0 <= smoothing < 1:
        raise UsageError(f"--stage2_label_smoothing must be in [0, 1), got {smoothing}")


def build_tokenizer(script_args: ScriptArguments, pools: list[list[Any]], output_dir: Path, reuse: bool) -> Any:
    """The given tokenizer, or a shared vocabulary trained on the sampled sentences of both sides."""
    if script_args.tokenizer:
        return AutoTokenizer.from_pretrained(script_args.tokenizer)
    texts = [text for pool in pools for pairs in pool for text in (*pairs.src, *pairs.tgt)]
    sample = random.Random(0).sample(texts, min(len(texts), script_args.tokenizer_training_texts))
    return train_or_reuse_tokenizer(
        sample,
        output_dir=output_dir,
        reuse=reuse,
        vocab_size=script_args.vocab_size,
        model_max_length=script_args.max_seq_length,
    )


def prepare_stages(script_args: ScriptArguments, seed: int, output_dir: Path, reuse_tokenizer: bool) -> StageInputs:
    """Load the many-to-one data with its multi-way held-out set, draw each stage's pairs by temperature (seeds
    ``seed + 1`` and ``seed + 2``), build and check the vocabulary, tokenize (stage 2 with its English -> English
    copies under ``--stage2_english_copies``), and set up the evaluator."""
    data = load_data(script_args, seed)
    languages = [pairs.src_lang for pairs in data.train]
    pivot = script_args.pivot or (languages[0] if len(languages) > 1 else None)
    if pivot is not None and pivot not in languages:
        raise UsageError(f"--pivot {pivot}: not a training language ({', '.join(languages)})")
    pools = [
        sample_stage(data.train, script_args.train_examples, script_args.temperature, seed + stage) for stage in (1, 2)
    ]
    tokenizer = build_tokenizer(script_args, pools, output_dir, reuse=reuse_tokenizer)
    check_vocabulary(
        tokenizer,
        {lang: pairs.src[:1000] for lang, pairs in zip(languages, data.train)} | {"en": data.train[0].tgt[:1000]},
        script_args.max_unknown,
    )
    # The copies join after the vocabulary is trained: the control's vocabulary is the one CrossConST's run has.
    copies = english_copies(pools[1]) if script_args.stage2_english_copies else None
    if copies is not None:
        pools[1] = [*pools[1], copies]
    examples = [
        [
            example
            for pairs in pool
            for example in tokenize_pairs(pairs, tokenizer, max_length=script_args.max_seq_length, min_tokens=1)
        ]
        for pool in pools
    ]
    if not all(examples):
        raise DataValidationError("no training example has a token besides <s> </s> on both sides")
    evaluator = (
        MuSREvaluator(
            tokenizer,
            data.held_out,
            pivot,
            batch_size=script_args.eval_batch_size,
            max_length=script_args.max_seq_length,
        )
        if data.held_out
        else None
    )
    summary = {
        "languages": languages,
        "pivot": pivot,
        "train_pairs": {p.src_lang: len(p) for p in data.train},
        "sampling_probabilities": language_probabilities(data.train, script_args.temperature),
        "train_examples": [len(stage) for stage in examples],
        **({"stage2_english_copies": len(copies)} if copies is not None else {}),
        "held_out": script_args.held_out,
    }
    return StageInputs(tokenizer, examples, evaluator, summary)


def stage1_plateau(script_args: ScriptArguments) -> float:
    """The fraction of ``--stage1_plateau`` that stops stage 1 (0: none): given, or the default with a held-out set to
    measure it on."""
    if script_args.stage1_plateau is not None:
        return script_args.stage1_plateau
    return DEFAULT_STAGE1_PLATEAU if script_args.held_out else 0.0


def model_config(script_args: ScriptArguments, model_args: ArchitectureArguments, tokenizer: Any) -> MuSRConfig:
    """The stage-1 model's configuration: the architecture flags, the vocabulary's size and special tokens."""
    return MuSRConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=script_args.max_seq_length,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        **{name: getattr(model_args, name) for name in _MODEL_FIELDS},
    )


def run_stage(
    stage: int,
    model: Any,
    tokenizer: Any,
    examples: list[dict[str, list[int]]],
    loss: CrossConSTLoss,
    steps: int,
    training_args: TrainingArguments,
    evaluator: Any,
    output_dir: Path,
    resume: str | None,
    callbacks: list[Any] | None = None,
) -> tuple[Any, list[dict[str, float]]]:
    """One Trainer run (its own optimizer and scheduler) in ``output_dir/stage<N>``, the final model saved there;
    returns the trained model and the Trainer's log history. ``callbacks``: the Trainer's, added to its own.

    Every argument is checked first, before the Trainer is made (nothing written, no step run): see
    :func:`check_stage_arguments`.

    Raises:
        UsageError: an argument of the wrong type or out of range, a ``stage<N>`` folder that cannot be written,
            a ``resume`` that is no Trainer checkpoint.
        DataValidationError: a ``resume`` checkpoint that is damaged (naming the file).
    """
    output_dir = check_stage_arguments(
        stage, model, tokenizer, examples, loss, steps, training_args, evaluator, output_dir, resume, callbacks
    )
    args = dataclasses.replace(
        training_args,
        output_dir=str(output_dir / f"stage{stage}"),
        max_steps=steps or training_args.max_steps,
        push_to_hub=False,
    )
    trainer = BitextTrainer(
        model,
        args,
        loss_fn=loss,
        train_dataset=examples,
        retrieval_evaluator=evaluator,
        data_collator=PairCollator(model.config.pad_token_id),
        processing_class=tokenizer,  # saved with every checkpoint
        callbacks=callbacks,
    )
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(args.output_dir)  # by rank 0 alone in a distributed job
    # Stage 2 of every rank starts from the folder rank 0 writes: none may read it before it is whole.
    trainer.accelerator.wait_for_everyone()
    return trainer.model, trainer.state.log_history


def _refuse(name: str, value: Any, what: str) -> NoReturn:
    raise UsageError(f"run_stage: {name}={reprlib.repr(value)}: {what}")


def _is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_stage_folder(output_dir: Any, stage: int) -> Path:
    """``output_dir`` as a Path, with what the stage writes in it: ``output_dir`` absent or a folder (a link to one
    followed, as the user named it), ``output_dir/stage<N>`` absent or a folder, never a link (a name the run
    makes, like a sidecar's)."""
    if not isinstance(output_dir, str | os.PathLike) or not isinstance(os.fspath(output_dir), str):
        _refuse("output_dir", output_dir, "must be a path (str or pathlib.Path)")
    if not os.fspath(output_dir).strip():
        _refuse("output_dir", output_dir, "an empty path")
    output_dir = Path(output_dir)
    folder = output_dir / f"stage{stage}"
    for path, follow in ((output_dir, True), (folder, False)):
        try:
            mode = os.stat(path, follow_symlinks=follow).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            raise UsageError(f"run_stage: {path}: cannot be used ({error.strerror})") from None
        if stat.S_ISLNK(mode):
            raise UsageError(f"run_stage: {path}: is a symbolic link; the stage writes its own folder there")
        if not stat.S_ISDIR(mode):
            raise UsageError(f"run_stage: {path}: is {file_kind(mode)}, not a folder; the stage writes a folder there")
    return output_dir


def check_stage_arguments(
    stage: Any,
    model: Any,
    tokenizer: Any,
    examples: Any,
    loss: Any,
    steps: Any,
    training_args: Any,
    evaluator: Any,
    output_dir: Any,
    resume: Any,
    callbacks: Any,
) -> Path:
    """What :func:`run_stage` is given, checked cheaply before the Trainer is made: ``stage`` 1 or 2; ``model`` a
    :class:`MuSREncoderDecoder` whose config has a pad token; ``tokenizer`` None or one that can be saved;
    ``examples`` a non-empty list of mappings that hold ``src_input_ids`` and ``tgt_input_ids``; ``loss`` and
    ``evaluator`` (or None) callables; ``training_args`` a ``TrainingArguments``; ``steps`` an integer >= 0 (0: the
    arguments' ``max_steps``), the stage run for at least one step; ``output_dir`` a path whose ``stage<N>`` can be a
    folder (:func:`_check_stage_folder`); ``resume`` None or a Trainer checkpoint folder, checked
    (:func:`~bitext_hf.training.trainer.check_resumable_checkpoint`); ``callbacks`` None or a list. Returns
    ``output_dir`` as a Path.

    Raises:
        UsageError: the first argument refused, as ``run_stage: name=value: what``; DataValidationError: a damaged
            checkpoint.
    """
    if not _is_integer(stage) or stage not in (1, 2):
        _refuse("stage", stage, "must be 1 or 2")
    if not isinstance(model, MuSREncoderDecoder) or model.config.pad_token_id is None:
        _refuse("model", model, "must be a MuSREncoderDecoder whose config has a pad_token_id")
    if tokenizer is not None and not callable(getattr(tokenizer, "save_pretrained", None)):
        _refuse("tokenizer", tokenizer, "must be a tokenizer (saved with every checkpoint) or None")
    if isinstance(examples, str | bytes | Mapping) or not isinstance(examples, Sequence) or not examples:
        _refuse("examples", examples, "must be a non-empty list of tokenized pairs")
    for number, example in enumerate(examples):
        if not isinstance(example, Mapping) or "src_input_ids" not in example or "tgt_input_ids" not in example:
            raise UsageError(
                f"run_stage: examples[{number}]={reprlib.repr(example)}: must be a mapping with src_input_ids and "
                "tgt_input_ids (token ids)"
            )
    if not callable(loss):
        _refuse("loss", loss, "must be a callable loss_fn(model, batch), a CrossConSTLoss")
    if not isinstance(training_args, TrainingArguments):
        _refuse("training_args", training_args, "must be a transformers.TrainingArguments")
    if not _is_integer(steps) or steps < 0:
        _refuse("steps", steps, "must be an integer >= 0 (0: training_args.max_steps)")
    if (steps or training_args.max_steps) < 1:
        raise UsageError(
            f"run_stage: steps=0 and training_args.max_steps={training_args.max_steps}: a stage is counted in steps; "
            "give steps >= 1 or max_steps >= 1"
        )
    if evaluator is not None and not callable(evaluator):
        _refuse("evaluator", evaluator, "must be a callable evaluator(model) -> metrics, or None")
    if callbacks is not None and not isinstance(callbacks, list | tuple):
        _refuse("callbacks", callbacks, "must be a list of Trainer callbacks, or None")
    folder = _check_stage_folder(output_dir, stage)
    if resume is not None:
        if not isinstance(resume, str | os.PathLike) or not isinstance(os.fspath(resume), str):
            _refuse("resume", resume, "must be a checkpoint folder (str or pathlib.Path), or None")
        if not (Path(resume) / "trainer_state.json").is_file():
            raise UsageError(
                f"run_stage: resume={os.fspath(resume)}: not a Trainer checkpoint folder (no trainer_state.json)"
            )
        check_resumable_checkpoint(resume)
    return folder


def evaluate(model: Any, evaluator: Any) -> dict[str, float]:
    """``evaluator``'s held-out metrics of ``model``, rounded to four places (empty without an evaluator)."""
    if evaluator is None:
        return {}
    model.eval()
    with torch.no_grad():
        return {key: round(value, 4) for key, value in evaluator(model).items()}


def is_resuming(training_args: TrainingArguments) -> bool:
    """Whether ``--resume_from_checkpoint`` asks to continue a run (a folder or ``auto``)."""
    return (training_args.resume_from_checkpoint or "").strip().lower() not in ("", "none", "false")


def train_stages(
    script_args: ScriptArguments,
    training_args: TrainingArguments,
    model_args: ArchitectureArguments,
    inputs: StageInputs,
    resumes: dict[int, str | None],
) -> tuple[Any, dict[str, Any]]:
    """Stage 1 (label-smoothed cross-entropy) from a new model, unless a resumed run finished it, then stage 2
    (CrossConST, with ``--stage2_label_smoothing``) from the saved stage-1 model, each evaluated on the held-out set.
    Under ``--stage1_plateau`` stage 1 stops at the plateau (``plateau``: the criterion, every held-out
    cross-entropy and the step it stopped at, in the stage-1 results). ``resumes`` maps a stage to the checkpoint it
    continues from. Returns the stage-2 model and the results (``data``, ``stage1``, ``stage2``)."""
    logger = logging.getLogger("train_musr")
    output_dir = Path(training_args.output_dir)
    stage1_done = is_resuming(training_args) and (output_dir / "stage1" / "config.json").is_file()
    results: dict[str, Any] = {"data": inputs.data}
    steps = {1: script_args.stage1_steps, 2: script_args.stage2_steps}

    smoothing = {1: None, 2: script_args.stage2_label_smoothing}  # None: the model's

    def stage(number: int, model: Any, alpha: float, callbacks: Any = None) -> tuple[Any, list[dict[str, float]]]:
        loss = CrossConSTLoss(alpha, label_smoothing=smoothing[number])
        data = (inputs.tokenizer, inputs.examples[number - 1], loss, steps[number], training_args)
        return run_stage(number, model, *data, inputs.evaluator, output_dir, resumes[number], callbacks)

    history: list[dict[str, float]] = []
    plateau = None
    fraction = stage1_plateau(script_args)
    if fraction and inputs.evaluator is not None:
        plateau = PlateauCallback(
            inputs.tokenizer,
            inputs.evaluator.held_out,
            every=script_args.stage1_eval_steps,
            min_improvement=fraction,
            patience=script_args.stage1_patience,
            batch_size=script_args.eval_batch_size,
            max_length=script_args.max_seq_length,
        )
    if stage1_done:
        logger.info("stage 1 is finished in %s: starting from it", output_dir / "stage1")
    else:
        torch.manual_seed(training_args.seed)
        model = MuSREncoderDecoder(model_config(script_args, model_args, inputs.tokenizer))
        _, history = stage(1, model, 0.0, [plateau] if plateau else None)
    # Stage 2 starts from the saved stage-1 model with a new Trainer: fresh optimizer and scheduler.
    model = MuSREncoderDecoder.from_pretrained(output_dir / "stage1")
    results["stage1"] = {
        "final": evaluate(model, inputs.evaluator),
        **({} if stage1_done else {"log_history": history}),
        **({"plateau": plateau.summary()} if plateau and not stage1_done else {}),
    }
    model, history = stage(2, model, script_args.alpha)
    results["stage2"] = {"final": evaluate(model, inputs.evaluator), "log_history": history}
    return model, results
