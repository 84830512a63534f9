"""How a job declares its options: :func:`option` puts the option's help, value type, choices and group into the
field's ``metadata``, and ``bitext_hf.cli.arguments`` builds every command's parser from those fields. An option is so
declared once, beside the field it sets, and a Python user reads the same help in the config's source as ``--help``
prints. :func:`check_fields`, called first in every config's ``__post_init__``, checks each field against its
annotation and that metadata (type, choices, range), so that a Python caller and the command line get the same
refusal, one :class:`~bitext_hf.errors.UsageError` naming the field and its option, before anything is read. The value
types here (:class:`ValueType`) are split in two for that: argparse calls them to convert the text only (``--k abc``
stays argparse's one-line usage error), and the config checks the range.

The options several jobs share are declared with these in :mod:`bitext_hf.jobs.options`. This module imports nothing
of the package but its errors: ``--help`` reads it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bitext_hf.errors import UsageError

__all__ = [
    "FieldRule",
    "ValueType",
    "check_fields",
    "check_value",
    "checked",
    "column_pair",
    "field_rules",
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
    type: ValueType | None = None,
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
        type (ValueType, optional): the option's value type: how argparse converts the text, and the range
            :func:`check_fields` enforces. A field without one is checked by its annotation alone.
        choices (sequence of str, optional): the values allowed (each item's, for a list); checked by the config,
            and shown by ``--help``.
        metavar, nargs, required, action: as ``argparse.ArgumentParser.add_argument`` takes them. A bool field
            defaulting to False is a ``store_true`` flag unless ``action`` says otherwise.
        group (str, optional): the ``--help`` section (the command's config names the sections' titles).
        exclusive (str, optional): the name of a set of options of which one at most is given (one exactly when
            its options are ``required``).
        flag (str, optional): the option's spelling when it is not ``--`` and the field's name with dashes.
        negative_flag (str, optional): for a bool field defaulting to True, the flag that turns it off
            (``--no-length-prior``).
        parser_default (optional): the value when the option is not given, where it differs from the field's default
            (None, for instance, to tell an option not given from one given with the default value).

    Returns:
        dict: the field's ``metadata``.
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


def checked(*, type: ValueType | None = None, flag: str | None = None) -> dict[str, Any]:
    """The ``metadata`` of a config field that is not an option of its command (no ``--help`` line of its own), for
    :func:`check_fields`: the range of its value, and the spelling of the general option that sets it, if one does.

    Args:
        type (ValueType, optional): the range of the value (``threads``: :data:`positive_int`).
        flag (str, optional): the general option that sets the field (``--threads``, ``-q``), named in messages.

    Returns:
        dict: the field's ``metadata``.
    """
    metadata: dict[str, Any] = {}
    if type is not None:
        metadata["type"] = type
    if flag is not None:
        metadata["flag"] = flag
    return metadata


class ValueType:
    """The value type of an option: what argparse converts the command line's text with (calling it), and what
    :func:`check_fields` requires of a value, from the command line and from Python alike.

    Args:
        name (str): what argparse's message calls a text it cannot convert (``invalid integer value: 'abc'``).
        parse (callable): text -> value; raises ValueError for a text that is no such value. Converts only: the
            range is the config's to check, once.
        expected (str): what a value must be, completing "must be ..." (``"an integer >= 1"``).
        accepts (callable, optional): value -> whether it is in range (a value of the field's annotated type).
        finite (bool, defaults to True): for a float field, whether NaN and infinities are refused.
    """

    def __init__(
        self,
        name: str,
        parse: Callable[[str], Any],
        expected: str,
        accepts: Callable[[Any], bool] | None = None,
        *,
        finite: bool = True,
    ) -> None:
        self.__name__ = name  # argparse names a type by its __name__ in "invalid <name> value"
        self.parse = parse
        self.expected = expected
        self.accepts = accepts or (lambda value: True)
        self.finite = finite

    def __call__(self, text: str) -> Any:
        return self.parse(text)

    def __repr__(self) -> str:
        return f"ValueType({self.expected!r})"


def _column_names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(","))


positive_int = ValueType("integer", int, "an integer >= 1", lambda value: value >= 1)
show_count = ValueType("integer", int, "an integer >= -1 (-1: all)", lambda value: value >= -1)
finite_float = ValueType("number", float, "a finite number")
probability = ValueType("number", float, "a probability in (0, 1]", lambda value: 0 < value <= 1)
non_negative = ValueType("number", float, "a number >= 0", lambda value: value >= 0)
ratio = ValueType("number", float, "a number >= 1", lambda value: value >= 1)
# Two different columns: a column scored against itself gives xsim 0 and accuracy 1, whatever the encoder.
column_pair = ValueType(
    "A,B column names",
    _column_names,
    "two different column names, A,B",
    lambda names: len(names) == 2 and all(names) and names[0] != names[1],
)

_KINDS = {bool: "True or False", int: "an integer", float: "a finite number", str: "a string"}


@dataclasses.dataclass(frozen=True)
class FieldRule:
    """What :func:`check_fields` requires of one field, from its annotation and its ``metadata``.

    Attributes:
        name (str): the field's name.
        flag (str, optional): the option that sets it on the command line (None: none does).
        kind (type): ``bool``, ``int``, ``float`` or ``str``: the value's type, or its items' for a list.
        container (type, optional): ``list`` or ``tuple`` for a field of several strings; None for one value.
        optional (bool): whether None is allowed (the annotation says ``| None``).
        length (int, optional): the items a list must have exactly; None for any number.
        at_least_one (bool): whether a list must have an item (``nargs="+"``).
        choices (tuple of str, optional): the values allowed (each item's, for a list).
        value_type (ValueType, optional): the range of the value (of each item, for a list of ``nargs`` items).
        whole (bool): whether ``value_type`` applies to the whole list (``column_pair``) rather than to each item.
    """

    name: str
    flag: str | None
    kind: type
    container: type | None = None
    optional: bool = False
    length: int | None = None
    at_least_one: bool = False
    choices: tuple[str, ...] | None = None
    value_type: ValueType | None = None
    whole: bool = False

    @classmethod
    def of(cls, name: str, annotation: Any, metadata: Mapping[str, Any], default: Any = None) -> FieldRule:
        """The rule of a field ``name`` annotated ``annotation`` with ``metadata`` (``default`` decides which flag a
        bool option has).

        Raises:
            TypeError: an annotation or a metadata ``type`` that the checker does not understand (a programming
                error: a field that could not be checked is not made).
        """
        optional, annotation = _without_none(name, annotation)
        container, length, kind = None, None, annotation
        origin = typing.get_origin(annotation)
        if origin in (list, tuple):
            container, items = origin, typing.get_args(annotation)
            if origin is tuple and len(items) == 2 and items[1] is Ellipsis:
                items = items[:1]
            elif origin is tuple:
                length = len(items)
            if len(set(items)) != 1 or items[0] is not str:
                raise TypeError(f"check_fields cannot check field {name!r}: a list must be of str, not {annotation}")
            kind = str
        if kind not in _KINDS:
            raise TypeError(f"check_fields cannot check field {name!r} of type {annotation!r}")
        value_type = metadata.get("type")
        if value_type is not None and not isinstance(value_type, ValueType):
            raise TypeError(
                f"the type of field {name!r} must be a bitext_hf.jobs.option_fields.ValueType, not {value_type!r}"
            )
        nargs = metadata.get("nargs")
        if isinstance(nargs, int) and container is not None:
            length = nargs
        choices = metadata.get("choices")
        if choices is not None and kind is not str:
            raise TypeError(f"field {name!r} has choices, so it must hold str, not {annotation}")
        return cls(
            name=name,
            flag=_flag(name, metadata, default),
            kind=kind,
            container=container,
            optional=optional,
            length=length,
            at_least_one=nargs == "+",
            choices=tuple(choices) if choices is not None else None,
            value_type=value_type,
            # A value type converts each item argparse collects (nargs, append), else the whole value (A,B).
            whole=container is not None and value_type is not None and not {"nargs", "action"} & set(metadata),
        )

    @property
    def expected(self) -> str:
        """What a value must be, completing "must be ..."."""
        if self.value_type is not None and (self.container is None or self.whole):
            return self.value_type.expected
        if self.choices is not None and self.container is None:
            return "one of " + ", ".join(self.choices)
        if self.container is None:
            return _KINDS[self.kind]
        count = f"{self.length} strings" if self.length is not None else "strings"
        return f"a list of {count}"

    def check(self, value: Any) -> Any:
        """``value`` if it suits this field, as the field's type (a numpy number as the Python one, a path as its
        str, a tuple of strings as a list where the annotation says list).

        Raises:
            UsageError: ``name=value (--flag): must be ...``.
        """
        if value is None:
            if self.optional:
                return None
            self.refuse(value, f"must be {self.expected}")
        if self.container is None:
            return self._check_one(value)
        if isinstance(value, str | bytes):  # iterated, one string would be its characters
            if self.length in (None, 1):
                self.refuse(value, f"give a list, {self.name}={[value]!r}, not one string")
            self.refuse(value, f"give a list of {self.length} strings, not one string")
        if not isinstance(value, list | tuple):
            self.refuse(value, f"must be {self.expected}")
        items = [_as_str(item) for item in value]
        if any(item is None for item in items) or (self.length is not None and len(items) != self.length):
            self.refuse(value, f"must be {self.expected}")
        if self.at_least_one and not items:
            choices = f" of {', '.join(self.choices)}" if self.choices else ""
            self.refuse(value, f"give at least one{choices}")
        if self.choices is not None and any(item not in self.choices for item in items):
            self.refuse(value, f"each must be one of {', '.join(self.choices)}")
        if self.value_type is not None:
            if self.whole and not self.value_type.accepts(tuple(items)):
                self.refuse(value, f"must be {self.expected}")
            if not self.whole and not all(self.value_type.accepts(item) for item in items):
                self.refuse(value, f"each must be {self.value_type.expected}")
        return self.container(items)

    def _check_one(self, value: Any) -> Any:
        kind = self.kind
        if kind is bool:
            if not isinstance(value, bool):
                self.refuse(value, f"must be {self.expected}")
            return value
        if kind is str:
            text = _as_str(value)
            if text is None or (self.choices is not None and text not in self.choices):
                self.refuse(value, f"must be {self.expected}")
            if self.value_type is not None and not self.value_type.accepts(text):
                self.refuse(value, f"must be {self.expected}")
            return text
        number = _as_number(value, integer=kind is int)
        if number is None:
            self.refuse(value, f"must be {self.expected}")
        finite = self.value_type is None or self.value_type.finite
        if kind is float and finite and not math.isfinite(number):
            self.refuse(value, f"must be {self.expected}")
        if self.value_type is not None and not self.value_type.accepts(number):
            self.refuse(value, f"must be {self.expected}")
        return number

    def refuse(self, value: Any, what: str) -> typing.NoReturn:
        """Raise the one message shape of a refused value: ``name=value (--flag): what``."""
        spelling = f" ({self.flag})" if self.flag else ""
        raise UsageError(f"{self.name}={value!r}{spelling}: {what}")


def _without_none(name: str, annotation: Any) -> tuple[bool, Any]:
    """(whether the annotation allows None, the annotation without it)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        if len(members) != 1:
            raise TypeError(f"check_fields cannot check field {name!r} of type {annotation!r}")
        return len(members) < len(typing.get_args(annotation)), members[0]
    return False, annotation


def _flag(name: str, metadata: Mapping[str, Any], default: Any) -> str | None:
    """The option that sets a field, as the command line spells it (None for a field no option sets)."""
    if default is True and "negative_flag" in metadata:
        return metadata["negative_flag"]
    if "flag" in metadata:
        return metadata["flag"]
    return "--" + name.replace("_", "-") if "help" in metadata else None


def _as_str(value: Any) -> str | None:
    """``value`` as a str: itself, or a path's (``pathlib.Path``, as path options are often given); else None."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return value if isinstance(value, str) else None


def _as_number(value: Any, *, integer: bool) -> int | float | None:
    """``value`` as a Python int (``integer``) or a number (an int stays an int), numpy's scalars included; None for
    anything else, a bool above all (``k=True`` is no count)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if integer:
        return None
    return value if type(value) is float else float(value)


@functools.cache
def field_rules(config: type) -> tuple[FieldRule, ...]:
    """The rule of every field of the dataclass ``config`` that ``__init__`` takes, in the order of the fields.

    Raises:
        TypeError: a field the checker does not understand (so that no field goes unchecked).
    """
    hints = typing.get_type_hints(config)
    return tuple(
        FieldRule.of(field.name, hints[field.name], field.metadata, field.default)
        for field in dataclasses.fields(config)
        if field.init
    )


def check_fields(config: Any) -> None:
    """Check every field of the dataclass instance ``config`` against its annotation and its metadata (the value
    type's range, the choices, the number of items), the first thing each config's ``__post_init__`` does, so that a
    wrong type or an absurd value from Python is refused as the command line's is, before anything is read.

    The rules: None only where the annotation allows it; a bool exactly a bool; an int an integer (numpy's too, a
    bool not); a float a number (an int or numpy's too, a bool not), finite unless its value type says otherwise; a
    str a str (a path too, stored as its str); a ``list[str]`` / ``tuple[str, ...]`` a list or tuple of str (never
    one str), of the length ``nargs`` or the annotation gives, at least one item with ``nargs="+"``, stored as the
    annotated container; ``choices`` (each item's, for a list) and the value type's range. A numpy number is stored
    as the Python one.

    Raises:
        UsageError: the first field refused, as ``name=value (--flag): must be ...``.
        TypeError: a field whose annotation or value type the checker does not understand.
    """
    for rule in field_rules(type(config)):
        value = getattr(config, rule.name)
        checked_value = rule.check(value)
        if checked_value is not value:
            object.__setattr__(config, rule.name, checked_value)


def check_value(name: str, value: Any, annotation: Any, metadata: Mapping[str, Any]) -> Any:
    """Check one value as :func:`check_fields` checks a field ``name`` of that ``annotation`` and ``metadata``: for
    the command line's own options, that no config holds (``--show``), and the general ones applied before a config
    is made (``--threads``).

    Returns:
        the value, as :meth:`FieldRule.check` returns it.

    Raises:
        UsageError: as :func:`check_fields`.
    """
    return FieldRule.of(name, annotation, metadata).check(value)
