"""The command line's options, generated from the jobs' config dataclasses: every field whose ``metadata`` holds an
option's help (:func:`bitext_hf.jobs.option_fields.option`) becomes that option, so an option is declared once,
beside the field it sets, and the parsed values build the config by field name (:func:`config_from_arguments`).

The parser only converts the text (``--k abc`` is argparse's usage error); the values' ranges and choices are
checked when the config is made (:func:`bitext_hf.jobs.option_fields.check_fields`), so the command line and a
Python caller get the same refusal, one line, exit 2.

Hand-written rather than transformers' ``HfArgumentParser``: that one adds a dataclass's fields to a parser of its
own, without sub-commands, groups or argparse types whose messages name the option; and importing it imports
transformers, which ``--help`` must not.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
from collections.abc import Iterable
from typing import Any

__all__ = ["GENERAL_FIELDS", "add_config_options", "config_from_arguments"]


def _option_groups(config: type) -> dict[str, tuple[str, str | None]]:
    """The ``--help`` sections' titles and descriptions: each class of the config's bases names its own, and a
    class nearer the config overrides a base's."""
    groups: dict[str, tuple[str, str | None]] = {}
    for cls in reversed(config.__mro__):
        groups.update(vars(cls).get("option_groups", {}))
    return groups


def add_config_options(parser: argparse.ArgumentParser, config: type, *, skip: Iterable[str] = ()) -> None:
    """Add an option to ``parser`` for every field of the dataclass ``config`` that declares one, but those in
    ``skip``: the config's own fields first, then those of its bases, nearest first (``--help`` lists the options
    without a section first, then each section in the order its first option comes)."""
    titles, sections, exclusive = _option_groups(config), {}, {}
    skipped = set(skip)
    for field in _own_fields_first(config):
        metadata = field.metadata
        if "help" not in metadata or field.name in skipped:
            continue
        target: Any = parser
        section = metadata.get("group")
        if section is not None:
            if section not in sections:
                title, description = titles.get(section, (section, None))
                sections[section] = parser.add_argument_group(title, description)
            target = sections[section]
        argument = _argument(field)
        if "exclusive" in metadata:  # one of the set at most; one exactly when its options are required
            required = argument.pop("required", False)
            if metadata["exclusive"] not in exclusive:
                exclusive[metadata["exclusive"]] = target.add_mutually_exclusive_group(required=required)
            target = exclusive[metadata["exclusive"]]
        target.add_argument(*_flags(field), **argument)


def _own_fields_first(config: type) -> list[dataclasses.Field]:
    def declared_by(field: dataclasses.Field) -> int:
        return next(
            depth for depth, cls in enumerate(config.__mro__) if field.name in vars(cls).get("__annotations__", {})
        )

    fields = dataclasses.fields(config)
    return sorted(fields, key=lambda field: (declared_by(field), fields.index(field)))


def _flags(field: dataclasses.Field) -> list[str]:
    if field.default is True:  # a switch on by default is turned off by its negative flag
        return [field.metadata["negative_flag"]]
    return [field.metadata.get("flag") or "--" + field.name.replace("_", "-")]


def _argument(field: dataclasses.Field) -> dict[str, Any]:
    metadata = field.metadata
    argument: dict[str, Any] = {"dest": field.name, "help": metadata["help"]}
    if isinstance(field.default, bool):
        argument["action"] = metadata.get("action") or ("store_false" if field.default else "store_true")
        return argument
    if "action" in metadata:
        argument["action"] = metadata["action"]
    for key in ("type", "metavar", "nargs", "required"):
        if key in metadata:
            argument[key] = metadata[key]
    if "choices" in metadata and "metavar" not in metadata:
        # Shown as argparse shows choices, but not checked here: the config refuses a value outside them, with the
        # same message for the command line and Python (bitext_hf.jobs.option_fields.check_fields).
        argument["metavar"] = "{" + ",".join(metadata["choices"]) + "}"
    if "parser_default" in metadata:
        argument["default"] = metadata["parser_default"]
    elif field.default is not dataclasses.MISSING:
        argument["default"] = field.default
    elif field.default_factory is not dataclasses.MISSING:
        argument["default"] = field.default_factory()
    else:
        argument["default"] = None  # a required field the config itself asks for, with the option's name
    return argument


# The fields that the general options set (``-q``, ``--threads``: every command takes them, before its name or after
# it, so the parser declares them once for all commands, not from a config).
GENERAL_FIELDS = frozenset({"quiet", "threads"})


def config_from_arguments(config: type, arguments: argparse.Namespace, **values: Any) -> Any:
    """The ``config`` dataclass made from the parsed ``arguments`` (each field that declares an option, or that a
    general option sets, from the value parsed for it) and ``values`` (the fields the command line sets otherwise).
    A config with a ``command`` field records the command line as typed (``bitext-hf mine --src ...``): what its
    sidecar and dataset card show, recorded here once for every job. Only ``main`` knows what was typed (it sets
    ``arguments.argv``); arguments parsed elsewhere record nothing rather than the calling process's own argv."""
    fields = {field.name for field in dataclasses.fields(config)}
    if "command" in fields and "command" not in values and hasattr(arguments, "argv"):
        values["command"] = shlex.join(["bitext-hf", *arguments.argv])
    given = {
        field.name: getattr(arguments, field.name)
        for field in dataclasses.fields(config)
        if field.init
        and field.name not in values
        and ("help" in field.metadata or field.name in GENERAL_FIELDS)
        and hasattr(arguments, field.name)
    }
    return config(**given, **values)
