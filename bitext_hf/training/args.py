"""Command-line parsing for the recipes: dataclasses from flags, from a YAML file, or both.

``parse_args(ScriptArguments, TrainingArguments)`` parses with TRL's :class:`trl.TrlParser` (a
:class:`transformers.HfArgumentParser` that also reads ``--config file.yaml``). The YAML supplies defaults (a flat
mapping of field names to values, shared by all the dataclasses); any flag given on the command line overrides it.
As in TRL, an ``env:`` mapping in the file sets environment variables of the process before parsing. A YAML key that
no dataclass has is an error naming the key and the file, so that a typo never silently falls back to a default.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import logging
import os
import sys
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from trl import TrlParser

from bitext_hf.io.logs import library_logs

__all__ = [
    "READS_FILES",
    "ConfigFileError",
    "arg_field",
    "check_output_dir",
    "input_paths",
    "load_yaml_config",
    "parse_args",
    "run_recipe",
    "run_reporting_errors",
]

CONFIG_FLAG = "--config"
# Metadata of a recipe argument whose values name files or folders the run reads (data specs, a tokenizer, an
# encoder): --output_dir may not be, nor hold, one of them (check_output_dir).
READS_FILES = "reads_files"


class ConfigFileError(ValueError):
    """A ``--config`` YAML file is missing, malformed, or holds keys that no argument dataclass knows."""

    exit_code = 2  # a usage error, as bitext_hf.errors.UsageError


def arg_field(default: Any, help: str, *, reads_files: bool = False) -> Any:
    """A recipe argument: its default (a list default is copied per instance) and the ``--help`` text;
    ``reads_files``: its values name inputs of the run (data specs, paths), which :func:`check_output_dir` keeps
    out of ``--output_dir``."""
    metadata = {"help": help, READS_FILES: True} if reads_files else {"help": help}
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def input_paths(value: str) -> list[str]:
    """The local files and folders an argument value names and that exist here: the files of a data spec
    (``xx=pairs.tsv``, ``xx-yy=a.xx,a.yy``), or the value itself as a path (a tokenizer or encoder folder); none for
    ``gettext``, ``hub:...`` or a Hub model id."""
    if os.path.exists(value):
        return [value]
    _, separator, source = value.partition("=")
    if not separator or source.strip() == "gettext" or source.strip().startswith("hub:"):
        return []
    return [path.strip() for path in source.split(",") if os.path.exists(path.strip())]


def check_output_dir(parsed: Sequence[Any]) -> None:
    """Refuse, before any data is read or model built, an ``--output_dir`` (of the parsed ``TrainingArguments``
    among ``parsed``) that is, or holds, a file or folder the run reads (the fields marked ``reads_files``), or that
    exists and is not a folder: the run would write its model and checkpoints over its inputs, or fail at its
    first save. ``UsageError`` (exit 2)."""
    from bitext_hf.errors import UsageError

    output_dir = next((values.output_dir for values in parsed if getattr(values, "output_dir", None)), None)
    if output_dir is None:
        return
    output_real = Path(os.path.realpath(output_dir))
    for values in parsed:
        for field in dataclasses.fields(values):
            if not field.metadata.get(READS_FILES):
                continue
            given = getattr(values, field.name)
            for value in given if isinstance(given, list) else [given]:
                for path in input_paths(value) if isinstance(value, str) else []:
                    real = Path(os.path.realpath(path))
                    if real == output_real or output_real in real.parents:
                        relation = "is" if real == output_real else "holds"
                        raise UsageError(
                            f"--output_dir {output_dir} {relation} {path}, an input (--{field.name} {value}): the run "
                            "writes its model and checkpoints there; choose another folder"
                        )
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise UsageError(f"--output_dir {output_dir}: exists and is not a folder")


def load_yaml_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML mapping of argument names to values; an empty file is an empty mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigFileError(f"config file {str(path)!r} does not exist")
    try:
        # safe_load: a `!!python/...` tag is refused, never run.
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigFileError(f"config file {str(path)!r} is not valid YAML: {error}") from error
    except OSError as error:
        raise ConfigFileError(f"config file {str(path)!r} cannot be read: {error.strerror or error}") from error
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ConfigFileError(
            f"config file {str(path)!r} must hold a mapping of argument names to values, got {type(content).__name__}"
        )
    non_string_keys = [key for key in content if not isinstance(key, str)]
    if non_string_keys:
        raise ConfigFileError(f"config file {str(path)!r} has non-string key {non_string_keys[0]!r}")
    return content


def _split_config_flag(args: Sequence[str]) -> tuple[str | None, list[str]]:
    """Take ``--config PATH`` / ``--config=PATH`` out of ``args`` (the last one wins, as with any flag)."""
    # TrlParser only finds the two-word `--config PATH` form, and only its first occurrence.
    pre_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre_parser.add_argument(CONFIG_FLAG, type=str, default=None)
    namespace, remaining = pre_parser.parse_known_args(list(args))
    return namespace.config, remaining


class _RecipeParser(TrlParser):
    """TrlParser that lists ``--config`` in ``--help`` and never reads a ``<script>.args`` file."""

    def __init__(self, dataclass_types: Sequence[type]) -> None:
        super().__init__(dataclass_types)
        # SUPPRESS: TrlParser takes --config out before parsing; this entry only documents it in --help.
        self.add_argument(
            CONFIG_FLAG,
            type=str,
            default=argparse.SUPPRESS,
            help="YAML file with default values for any of the arguments below; command-line flags override it.",
        )

    @staticmethod
    def _parse_dataclass_field(parser: argparse.ArgumentParser, field: dataclasses.Field) -> None:
        # HfArgumentParser passes a field's metadata to add_argument as keyword arguments: the package's own key
        # (READS_FILES) is taken out of a copy first.
        if READS_FILES in field.metadata:
            field = copy.copy(field)
            field.metadata = types.MappingProxyType({k: v for k, v in field.metadata.items() if k != READS_FILES})
        TrlParser._parse_dataclass_field(parser, field)

    def parse_args_into_dataclasses(self, args: Any = None, return_remaining_strings: bool = False, **kwargs: Any):
        # look_for_args_file=False: a stray `<script>.args` file next to a recipe must not change its arguments.
        kwargs["look_for_args_file"] = False
        return super().parse_args_into_dataclasses(args, return_remaining_strings, **kwargs)


def _check_config(config: dict[str, Any], config_path: str, dataclass_types: Sequence[type]) -> None:
    """Refuse, naming the file, what TrlParser would report without it: an unknown key (with the closest field), or
    an ``env`` entry that is not a mapping."""
    known_fields = {field.name for dtype in dataclass_types for field in dataclasses.fields(dtype) if field.init}
    for key in config:
        if key == "env":
            if not isinstance(config[key], dict) or not all(isinstance(name, str) for name in config[key]):
                raise ConfigFileError(f"config file {config_path!r}: env must map variable names to values")
        elif key not in known_fields:
            suggestions = difflib.get_close_matches(key, sorted(known_fields), n=1)
            hint = f" (did you mean {suggestions[0]!r}?)" if suggestions else ""
            class_names = ", ".join(dataclass_type.__name__ for dataclass_type in dataclass_types)
            raise ConfigFileError(
                f"unknown key {key!r} in config file {config_path!r}{hint}: not a field of {class_names}"
            )


def parse_args(*dataclass_types: type, args: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Parse command-line flags (and an optional ``--config file.yaml``) into instances of ``dataclass_types``.

    Args:
        *dataclass_types: the argument dataclasses, e.g. ``ScriptArguments, TrainingArguments, ModelArguments``; the
            result holds one instance of each, in this order.
        args: the flags to parse; defaults to ``sys.argv[1:]``.

    Values are taken, from lowest to highest priority, from the dataclass defaults, the YAML file, and the command
    line (``--config PATH`` or ``--config=PATH``). YAML strings such as ``3e-6`` are converted by the field's type.
    The file's ``env:`` mapping, if any, is set in ``os.environ`` (TRL's feature). Each dataclass's
    ``__post_init__`` validation runs on the merged values. ``--help`` lists every field.

    Raises:
        ConfigFileError: the YAML file is missing, malformed, or has a key that is not a field of any dataclass.
        SystemExit: (from argparse) a value of the wrong type on the command line.
        ValueError: (from the parser) an unknown flag on the command line.
    """
    if not dataclass_types:
        raise TypeError("parse_args needs at least one dataclass type")
    for dataclass_type in dataclass_types:
        if not dataclasses.is_dataclass(dataclass_type):
            raise TypeError(f"parse_args expects dataclass types, got {dataclass_type!r}")
    argv = list(sys.argv[1:] if args is None else args)
    config_path, argv = _split_config_flag(argv)
    parser = _RecipeParser(dataclass_types)
    if config_path is not None:
        # Checked here first: TrlParser's own errors would not name the file, nor suggest the field meant.
        config = load_yaml_config(config_path)
        _check_config(config, config_path, dataclass_types)
        if config:  # TrlParser refuses an empty file, which means "no defaults"
            argv = [CONFIG_FLAG, config_path, *argv]
    return parser.parse_args_and_config(argv)


def run_reporting_errors(program: str, call: Callable[[], Any]) -> Any:
    """Run ``call()`` as a script's entry point: logging to stderr at INFO; an error is one line
    ``<program>: error: <message>`` on stderr and an exit code, classified as the ``bitext-hf`` command line does it
    (recipes/README.md): the error's own (2 usage and ``ConfigFileError``, 3 bad data or a damaged checkpoint, 4 an
    encoder that cannot be loaded), 1 anything else, 130 interrupted. ``BITEXT_HF_DEBUG=1`` shows the traceback."""
    from bitext_hf.errors import EXIT_INTERRUPTED, debug_requested, describe_error

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return call()
    except KeyboardInterrupt:
        print(f"{program}: interrupted", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None
    except Exception as error:
        if debug_requested():
            raise
        # One classification for the CLI and every script. TrainingArguments has a --debug of its own: the
        # scripts' switch for the traceback is the variable.
        code, message = describe_error(error, debug_hint="BITEXT_HF_DEBUG=1 shows the traceback")
        print(f"{program}: error: {message}", file=sys.stderr)
        raise SystemExit(error.exit_code if isinstance(error, ConfigFileError) else code) from None


def _apply_full_determinism(parsed: Sequence[Any]) -> None:
    """``--full_determinism true``: deterministic kernels from the start of the run, not from the Trainer's start.

    The Trainer calls ``transformers.enable_full_determinism`` in its ``__init__``, but a recipe has used the device
    before that (the teacher's embeddings, the word aligner's encoder, the evaluation before training), and cuBLAS
    reads ``CUBLAS_WORKSPACE_CONFIG`` when it first starts: set later, GPU matrix products stay non-deterministic.
    """
    for values in parsed:
        if getattr(values, "full_determinism", False):
            from transformers import enable_full_determinism

            enable_full_determinism(values.seed)


def run_recipe(
    main: Callable[..., Any],
    *dataclass_types: type,
    args: Sequence[str] | None = None,
    default_config: str | os.PathLike | None = None,
) -> Any:
    """A recipe's ``if __name__ == "__main__"``: parse ``dataclass_types``, call ``main(*parsed)``, with the
    one-line errors and exit codes of :func:`run_reporting_errors`.

    With no arguments at all the recipe runs its default configuration, the paper's setup: ``default_config``, else
    (on the command line) ``configs/<name>.yaml`` beside the script, ``<name>`` being the script's name without a
    leading ``train_``: ``train_onealigner.py`` runs ``configs/onealigner.yaml``, ``train_musr.py``
    ``configs/musr.yaml``, ``distill_wolof.py`` ``configs/distill_wolof.yaml`` and ``align_contrastive.py``
    ``configs/align_contrastive.yaml``, so no recipe names its configuration itself. Where that setup needs what
    this machine lacks (the Hugging Face Hub for data or models that are not cached, with downloads off or the hub
    unreachable; a GPU for bf16; eflomal), it runs the offline configuration that runs here (its ``-gettext``, else
    its ``-smoke`` configuration), its first line naming what was missing and which configuration runs instead, the
    model card saying the same; with no such configuration it stops before any work with one line naming what is
    missing: exit 2 (:mod:`bitext_hf.training.default_config` says why it runs rather than stops).

    A multi-process launch must be one distributed job (:mod:`bitext_hf.training.distributed`), or it is refused
    (exit 2). Before ``main`` runs, :func:`check_output_dir` refuses an ``--output_dir`` that is or holds one of the run's
    inputs, or is not a folder (exit 2).

    The libraries' logs and progress bars stay hidden (:mod:`bitext_hf.io.logs`) unless ``--log_level`` is
    ``info`` or ``debug``; the Trainer's own progress bar and loss lines are the recipe's output and stay.
    """
    script = Path(sys.argv[0])
    program = script.stem or "recipe"
    argv = list(sys.argv[1:] if args is None else args)
    if default_config is None and args is None:
        derived = script.resolve().parent / "configs" / f"{program.removeprefix('train_')}.yaml"
        default_config = derived if derived.is_file() else None

    def run() -> Any:
        from bitext_hf.training.default_config import choose_default_config, record_substitution

        arguments, reason = argv, None
        if not arguments and default_config is not None:
            config, reason = choose_default_config(script, Path(default_config))
            if reason and os.environ.get("RANK", "0") == "0":  # once per job, before anything else is printed
                print(f"{program}: {reason}", file=sys.stderr, flush=True)
            arguments = [CONFIG_FLAG, str(config)]
        record_substitution(reason)  # the card of this run says it, the card of a later run in this process not
        from bitext_hf.training.distributed import check_launch, check_parallel_mode, end_distributed_job

        check_launch()  # before TrainingArguments sets up its devices: it may make a CPU launch a gloo job
        # Parsed before the libraries are quietened: TrainingArguments takes its default disable_tqdm from the
        # transformers logger's level, and the training progress bar must stay.
        parsed = parse_args(*dataclass_types, args=arguments)
        check_output_dir(parsed)
        for values in parsed:
            if hasattr(values, "parallel_mode"):
                check_parallel_mode(values)
        _apply_full_determinism(parsed)
        verbose = any(getattr(values, "log_level", None) in ("debug", "info") for values in parsed)
        with library_logs(verbose), end_distributed_job():
            return main(*parsed)

    return run_reporting_errors(program, run)
