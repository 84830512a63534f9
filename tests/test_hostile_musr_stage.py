"""Hostile calls of the MuSR recipe's ``run_stage`` (bitext_hf.families.musr.recipe), one table: a stage, a model, a
tokenizer, examples, a loss, steps, training arguments, an evaluator, callbacks and a checkpoint to resume from of the
wrong type or absurd; an ``output_dir`` that is no path, a file, a FIFO, a socket, a device or empty, and a file, a
FIFO, a link or a broken link where the stage's folder ``output_dir/stage<N>`` goes; then the run that works, with an
``output_dir`` given as a str and as a link to a folder.

Each row runs the call through tests/hostile_jobs.py's ``check_case`` (in a fresh folder: nothing may appear in it
but a success's stage folder) and asserts the contract of a library call: a refusal is one of the package's own errors
(``UsageError``, exit 2; ``DataValidationError``, exit 3, for a damaged checkpoint) naming the argument, raised before
the Trainer is made (no step run, no folder made).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import torch
from hostile_jobs import TIMEOUT, VICTIM, Case, check_case, params, special
from transformers import TrainingArguments

import bitext_hf.families.musr.recipe as recipe
import bitext_hf.modeling  # noqa: F401  (registers the Auto classes)
from bitext_hf.errors import EXIT_DATA, EXIT_OK, EXIT_USAGE, BitextError
from bitext_hf.families.musr import CrossConSTLoss
from bitext_hf.modeling.musr import MuSRConfig, MuSREncoderDecoder

pytestmark = TIMEOUT

OUT, STAGE = "out", "out/stage1"
# What one stage's run leaves in its folder: the model (its remote code beside it) and the Trainer's arguments.
WRITTEN = (OUT, STAGE, *(f"{STAGE}/{name}" for name in (
    "config.json", "configuration_musr.py", "model.safetensors", "modeling_musr.py", "training_args.bin",
)))  # fmt: skip
EXAMPLES = [{"src_input_ids": [0, 5 + i, 6, 2], "tgt_input_ids": [0, 20 + i, 2]} for i in range(8)]
NOT_FOLDERS = {  # what is put where a folder goes (hostile_jobs.special) -> the words of its refusal
    "link": "is a symbolic link",
    "broken link": "is a symbolic link",
    "FIFO": "is a FIFO, not a folder",
    "socket": "is a socket, not a folder",
    "device": "is a character device, not a folder",
    "file": "is a regular file, not a folder",
}


def _put(kind: str, path: Path) -> None:
    """``kind`` at ``path``: one of hostile_jobs.special's, a plain file, a link to nothing, or a link to the folder
    ``elsewhere``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        path.write_text("someone's file\n", encoding="utf-8")
    elif kind == "broken link":
        path.symlink_to("nowhere")
    elif kind == "link to a folder":
        path.symlink_to("elsewhere")
    else:
        special(kind, path)


def _model() -> MuSREncoderDecoder:
    torch.manual_seed(0)
    config = MuSRConfig(
        vocab_size=40,
        hidden_size=16,
        num_encoder_layers=1,
        num_decoder_layers=1,
        num_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=32,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=0,
    )
    return MuSREncoderDecoder(config)


@functools.cache
def _training_args(**changes) -> TrainingArguments:
    """One CPU step of 4 examples, nothing saved but the final model, no logs (run_stage replaces output_dir)."""
    values = dict(
        output_dir=OUT,
        use_cpu=True,
        per_device_train_batch_size=4,
        max_steps=1,
        save_strategy="no",
        logging_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    return TrainingArguments(**{**values, **changes})


def _stage(*, at: tuple[str, str] | None = None, make: str | None = None, **given):
    """A setup: ``run_stage`` from Python on a tiny MuSR model, 8 tokenized pairs, stage 1's loss, one step of
    :func:`_training_args`, into ``out``, with ``given`` in their place (a callable given is called in the case's
    folder: ``training_args``, ``model``). ``at``: (kind, name), what :func:`_put` puts at that name first;
    ``make``: a folder made first. The Trainer's making is counted: a refusal comes before."""

    def setup(tmp: Path):
        (tmp / VICTIM).write_text("a file outside the stage's folder\n", encoding="utf-8")
        if make:
            (tmp / make).mkdir(parents=True)
        if at:
            _put(at[0], tmp / at[1])
        made: list[object] = []

        def call():
            arguments = dict(
                stage=1,
                model=_model,
                tokenizer=None,
                examples=EXAMPLES,
                loss=CrossConSTLoss(0.0),
                steps=1,
                training_args=_training_args,
                evaluator=None,
                output_dir=OUT,
                resume=None,
            )
            arguments.update(given)
            for name in ("model", "training_args"):  # made in the call: a fresh model per row
                if callable(arguments[name]) and not isinstance(arguments[name], torch.nn.Module):
                    arguments[name] = arguments[name]()
            real = recipe.BitextTrainer

            def counted(*args, **kwargs):
                made.append(args)
                return real(*args, **kwargs)

            recipe.BitextTrainer = counted
            try:
                model, history = recipe.run_stage(**arguments)
            except BitextError:
                assert not made, "refused after the Trainer was made"
                raise
            finally:
                recipe.BitextTrainer = real
            assert isinstance(model, MuSREncoderDecoder) and history, history
            return model

        return call

    return setup


def _damaged_checkpoint(tmp: Path) -> None:
    (tmp / "checkpoint-1").mkdir()
    (tmp / "checkpoint-1" / "trainer_state.json").write_text("{", encoding="utf-8")


def _with_damaged_checkpoint(**given):
    stage = _stage(**given)

    def setup(tmp: Path):
        _damaged_checkpoint(tmp)
        return stage(tmp)

    return setup


CASES: dict[str, Case] = {
    # --- what works: output_dir as a str, as a link to a folder
    "one step of stage 1 into out": Case(_stage(), EXIT_OK, creates=WRITTEN),
    "output_dir a link to a folder": Case(
        _stage(output_dir="alias", make="elsewhere", at=("link to a folder", "alias")),
        EXIT_OK,
        creates=tuple(name.replace(OUT, "elsewhere", 1) for name in WRITTEN[1:]),
    ),
    # --- the stage, the model, the data, the loss and the steps: refused before the Trainer is made
    "stage 0": Case(_stage(stage=0), EXIT_USAGE, "run_stage: stage=0: must be 1 or 2"),
    "stage 3": Case(_stage(stage=3), EXIT_USAGE, "stage=3: must be 1 or 2"),
    "stage '1'": Case(_stage(stage="1"), EXIT_USAGE, "stage='1': must be 1 or 2"),
    "stage True": Case(_stage(stage=True), EXIT_USAGE, "stage=True: must be 1 or 2"),
    "stage 1.0": Case(_stage(stage=1.0), EXIT_USAGE, "stage=1.0: must be 1 or 2"),
    "model None": Case(_stage(model=None), EXIT_USAGE, "model=None: must be a MuSREncoderDecoder"),
    "model another torch module": Case(
        _stage(model=torch.nn.Linear(2, 2)), EXIT_USAGE, "must be a MuSREncoderDecoder whose config has a pad_token_id"
    ),
    "tokenizer a number": Case(_stage(tokenizer=5), EXIT_USAGE, "tokenizer=5: must be a tokenizer"),
    "examples empty": Case(
        _stage(examples=[]), EXIT_USAGE, "examples=[]: must be a non-empty list of tokenized pairs"
    ),
    "examples None": Case(_stage(examples=None), EXIT_USAGE, "examples=None: must be a non-empty list"),
    "examples a string": Case(_stage(examples="pairs.tsv"), EXIT_USAGE, "examples='pairs.tsv': must be a non-empty"),
    "examples one mapping": Case(_stage(examples=EXAMPLES[0]), EXIT_USAGE, "must be a non-empty list"),
    "an example without its target": Case(
        _stage(examples=[*EXAMPLES[:3], {"src_input_ids": [0, 2]}]),
        EXIT_USAGE,
        "run_stage: examples[3]={'src_input_ids': [0, 2]}: must be a mapping with src_input_ids and tgt_input_ids",
    ),
    "an example that is text": Case(_stage(examples=["a sentence"]), EXIT_USAGE, "examples[0]='a sentence': must be"),
    "loss None": Case(_stage(loss=None), EXIT_USAGE, "loss=None: must be a callable loss_fn(model, batch)"),
    "loss a name": Case(_stage(loss="crossconst"), EXIT_USAGE, "loss='crossconst': must be a callable"),
    "steps -1": Case(_stage(steps=-1), EXIT_USAGE, "steps=-1: must be an integer >= 0"),
    "steps 1.5": Case(_stage(steps=1.5), EXIT_USAGE, "steps=1.5: must be an integer >= 0"),
    "steps NaN": Case(_stage(steps=math.nan), EXIT_USAGE, "steps=nan: must be an integer >= 0"),
    "steps '1'": Case(_stage(steps="1"), EXIT_USAGE, "steps='1': must be an integer >= 0"),
    "steps True": Case(_stage(steps=True), EXIT_USAGE, "steps=True: must be an integer >= 0"),
    "steps 0 and no max_steps": Case(
        _stage(steps=0, training_args=lambda: _training_args(max_steps=-1)),
        EXIT_USAGE,
        "steps=0 and training_args.max_steps=-1: a stage is counted in steps",
    ),
    "training_args None": Case(_stage(training_args=None), EXIT_USAGE, "training_args=None: must be a transformers"),
    "training_args as a dict": Case(
        _stage(training_args=lambda: _training_args().to_dict()),
        EXIT_USAGE,
        "must be a transformers.TrainingArguments",
    ),
    "evaluator a number": Case(_stage(evaluator=5), EXIT_USAGE, "evaluator=5: must be a callable evaluator(model)"),
    "callbacks a string": Case(_stage(callbacks="plateau"), EXIT_USAGE, "callbacks='plateau': must be a list"),
    # --- output_dir and the stage's folder in it: refused before the Trainer is made, nothing written
    "output_dir None": Case(_stage(output_dir=None), EXIT_USAGE, "output_dir=None: must be a path"),
    "output_dir bytes": Case(_stage(output_dir=b"out"), EXIT_USAGE, "output_dir=b'out': must be a path"),
    "output_dir empty": Case(_stage(output_dir=""), EXIT_USAGE, "output_dir='': an empty path"),
    "output_dir /dev/null": Case(
        _stage(output_dir="/dev/null"), EXIT_USAGE, "/dev/null: is a character device, not a folder"
    ),
    **{
        f"output_dir a {kind}": Case(_stage(at=(kind, "target"), output_dir="target"), EXIT_USAGE, f"target: {words}")
        for kind, words in NOT_FOLDERS.items()
        if kind not in ("link", "broken link")  # output_dir a link: followed, as the user named it
    },
    "output_dir a link to a file": Case(
        _stage(at=("link", "target"), output_dir="target"), EXIT_USAGE, "target: is a regular file, not a folder"
    ),
    **{
        f"a {kind} at the stage's folder": Case(_stage(at=(kind, STAGE)), EXIT_USAGE, f"{STAGE}: {words}")
        for kind, words in NOT_FOLDERS.items()
    },
    # --- the checkpoint to resume from
    "resume a missing folder": Case(
        _stage(resume="checkpoint-9"), EXIT_USAGE, "resume=checkpoint-9: not a Trainer checkpoint folder"
    ),
    "resume a folder that is no checkpoint": Case(
        _stage(resume="out", make="out"), EXIT_USAGE, "resume=out: not a Trainer checkpoint folder"
    ),
    "resume True": Case(_stage(resume=True), EXIT_USAGE, "resume=True: must be a checkpoint folder"),
    "resume a number": Case(_stage(resume=1), EXIT_USAGE, "resume=1: must be a checkpoint folder"),
    "resume a FIFO": Case(
        _stage(at=("FIFO", "fifo"), resume="fifo"), EXIT_USAGE, "resume=fifo: not a Trainer checkpoint folder"
    ),
    "resume a damaged checkpoint": Case(
        _with_damaged_checkpoint(resume="checkpoint-1"), EXIT_DATA, "trainer_state.json: not a readable trainer state"
    ),
}


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_musr_stage(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)
