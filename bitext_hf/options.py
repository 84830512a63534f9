"""What makes a job's config field a command-line option: :func:`option` puts the option's help, value type,
choices and group into the field's ``metadata``, and ``bitext_hf.cli.arguments`` builds every command's parser from
those fields. An option is so declared once, beside the field it sets, and a Python user reads the same help in the
config's source as ``--help`` prints.

The value types here check a value when the command line is parsed (argparse calls them), so that a bad value is a
usage error (exit 2) naming the option before anything is read; the configs check the same again when made from
Python. This module imports only the standard library: ``--help`` reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "column_pair",
    "finite_float",
    "non_negative",
    "option",
    "positive_int",
    "probability",
    "ratio",
    "show_count",
]


def option(
    help: str,
    *,
    type: Callable[[str], Any] | None = None,
    choices: Sequence[str] | None = None,
    metavar: str | tuple[str, ...] | None = None,
    group: str | None = None,
    exclusive: str | None = None,
    flag: str | None = None,
    negative_flag: str | None = None,
    nargs: int | str | None = None,
    required: bool = False,
    action: str | None = None,
    parser_default: Any = dataclasses.MISSING,
) -> dict[str, Any]:
    """The ``metadata`` of a config field that is a command-line option.

    Args:
        help (str): what the option does, as ``--help`` shows it.
        type, choices, metavar, nargs, required, action: as ``argparse.ArgumentParser.add_argument`` takes them.
            A bool field defaulting to False is a ``store_true`` flag unless ``action`` says otherwise.
        group (str, optional): the ``--help`` section (the command's config names the sections' titles).
        exclusive (str, optional): the name of a set of options of which one at most is given (one exactly when
            its options are ``required``).
        flag (str, optional): the option's spelling when it is not ``--`` and the field's name with dashes.
        negative_flag (str, optional): for a bool field defaulting to True, the flag that turns it off
            (``--no-length-prior``).
        parser_default (optional): the value when the option is not given, where it differs from the field's default
            (None, for instance, to tell an option not given from one given with the default value).
    """
    metadata: dict[str, Any] = {"help": help}
    for key, value in (
        ("type", type),
        ("choices", tuple(choices) if choices is not None else None),
        ("metavar", metavar),
        ("group", group),
        ("exclusive", exclusive),
        ("flag", flag),
        ("negative_flag", negative_flag),
        ("nargs", nargs),
        ("action", action),
    ):
        if value is not None:
            metadata[key] = value
    if parser_default is not dataclasses.MISSING:
        metadata["parser_default"] = parser_default
    if required:
        metadata["required"] = True
    return metadata


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def show_count(text: str) -> int:
    value = int(text)
    if value < -1:
        raise argparse.ArgumentTypeError(f"must be -1 (all), 0 or more, got {value}")
    return value


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def probability(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a probability in (0, 1], got {text!r}")
    return value


def non_negative(text: str) -> float:
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text!r}")
    return value


def ratio(text: str) -> float:
    value = finite_float(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def column_pair(text: str) -> tuple[str, str]:
    names = tuple(name.strip() for name in text.split(","))
    if len(names) != 2 or not all(names):
        raise argparse.ArgumentTypeError(f"give two column names as A,B, got {text!r}")
    if names[0] == names[1]:  # a column scored against itself: xsim 0, accuracy 1, whatever the encoder
        raise argparse.ArgumentTypeError(f"give two different columns, got {names[0]!r} twice")
    return names


# argparse's messages for these types name the function; say what is expected instead.
positive_int.__name__ = "integer >= 1"
show_count.__name__ = "integer >= -1"
finite_float.__name__ = "finite number"
probability.__name__ = "probability"
non_negative.__name__ = "number"
ratio.__name__ = "ratio"
column_pair.__name__ = "A,B column names"
