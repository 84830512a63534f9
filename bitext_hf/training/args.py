"""Command-line parsing for the recipes: dataclasses from flags, from a YAML file, or both.

``parse_args(ScriptArguments, TrainingArguments)`` builds a :class:`transformers.HfArgumentParser` that also accepts
``--config file.yaml``. The YAML supplies defaults (a flat mapping of field names to values, shared by all the
dataclasses); any flag given on the command line overrides it. A YAML key that no dataclass has is an error naming
the key and the file, so that a typo never silently falls back to a default.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml
from transformers import HfArgumentParser

__all__ = ["ConfigFileError", "arg_field", "load_yaml_config", "parse_args", "run_recipe", "run_reporting_errors"]

CONFIG_FLAG = "--config"


class ConfigFileError(ValueError):
    """A ``--config`` YAML file is missing, malformed, or holds keys that no argument dataclass knows."""

    exit_code = 2  # a usage error, as bitext_hf.errors.UsageError


def arg_field(default: Any, help: str) -> Any:
    """A recipe argument: its default (a list default is copied per instance) and the ``--help`` text."""
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def load_yaml_config(path: str | os.PathLike) -> dict[str, Any]:
    """Read a flat YAML mapping of argument names to values; an empty file is an empty mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigFileError(f"config file {str(path)!r} does not exist")
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigFileError(f"config file {str(path)!r} is not valid YAML: {error}") from error
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
    pre_parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre_parser.add_argument(CONFIG_FLAG, type=str, default=None)
    namespace, remaining = pre_parser.parse_known_args(list(args))
    return namespace.config, remaining


def parse_args(*dataclass_types: type, args: Sequence[str] | None = None) -> tuple[Any, ...]:
    """Parse command-line flags (and an optional ``--config file.yaml``) into instances of ``dataclass_types``.

    Args:
        *dataclass_types: the argument dataclasses, e.g. ``ScriptArguments, TrainingArguments, ModelArguments``; the result holds one
            instance of each, in this order.
        args: the flags to parse; defaults to ``sys.argv[1:]``.

    Values are taken, from lowest to highest priority, from the dataclass defaults, the YAML file, and the command
    line. Each dataclass's ``__post_init__`` validation runs on the merged values. ``--help`` lists every field.

    Raises:
        ConfigFileError: the YAML file is missing, malformed, or has a key that is not a field of any dataclass.
        SystemExit: (from argparse) an unknown flag or a value of the wrong type on the command line.
    """
    if not dataclass_types:
        raise TypeError("parse_args needs at least one dataclass type")
    for dataclass_type in dataclass_types:
        if not dataclasses.is_dataclass(dataclass_type):
            raise TypeError(f"parse_args expects dataclass types, got {dataclass_type!r}")
    argv = list(sys.argv[1:] if args is None else args)
    config_path, argv = _split_config_flag(argv)

    parser = HfArgumentParser(dataclass_types)
    parser.add_argument(
        CONFIG_FLAG,
        type=str,
        # SUPPRESS: the flag is consumed before parsing and must not reach the dataclasses as an extra namespace.
        default=argparse.SUPPRESS,
        help="YAML file with default values for any of the arguments below; command-line flags override it.",
    )
    if config_path is not None:
        config = load_yaml_config(config_path)
        known_fields = {action.dest for action in parser._actions if action.dest not in ("help", "config")}
        for key in config:
            if key not in known_fields:
                suggestions = difflib.get_close_matches(key, sorted(known_fields), n=1)
                hint = f" (did you mean {suggestions[0]!r}?)" if suggestions else ""
                class_names = ", ".join(dataclass_type.__name__ for dataclass_type in dataclass_types)
                raise ConfigFileError(
                    f"unknown key {key!r} in config file {config_path!r}{hint}: not a field of {class_names}"
                )
        # A value from the file satisfies a required field; the command line can still override it. argparse runs
        # string defaults through the field's type, so YAML strings such as `3e-6` (a str for PyYAML) become floats.
        for action in parser._actions:
            if action.dest in config:
                action.required = False
        parser.set_defaults(**config)
    # look_for_args_file=False: a stray `<script>.args` file next to a recipe must not change its arguments.
    return parser.parse_args_into_dataclasses(args=argv, look_for_args_file=False)


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


def run_recipe(main: Callable[..., Any], *dataclass_types: type, args: Sequence[str] | None = None) -> Any:
    """A recipe's ``if __name__ == "__main__"``: parse ``dataclass_types``, call ``main(*parsed)``, with the
    one-line errors and exit codes of :func:`run_reporting_errors`."""
    program = Path(sys.argv[0]).stem or "recipe"
    return run_reporting_errors(program, lambda: main(*parse_args(*dataclass_types, args=args)))
