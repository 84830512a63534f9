"""File input and output shared by every part of the package: outputs that appear complete or not at all and
never replace an input, alone (:mod:`bitext_hf.io.outputs`) or as a set committed together
(:mod:`bitext_hf.io.output_set`; their temporaries and the signals: :mod:`bitext_hf.io.temporary_files`), inputs read once as
streams, decompressed and bounded (:mod:`bitext_hf.io.inputs`)."""

from __future__ import annotations

from bitext_hf.io.inputs import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_INPUT_BYTES_ENV,
    compression_of,
    input_byte_limit,
    iter_input_chunks,
    max_input_bytes,
    open_input,
    parse_byte_count,
    read_input_bytes,
)
from bitext_hf.io.output_set import OutputSet
from bitext_hf.io.outputs import (
    atomic_output,
    check_inputs_and_output,
    check_output_path,
    non_regular_kind,
    protect_inputs,
    refuse_input,
    writes_in_place,
)

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "MAX_INPUT_BYTES_ENV",
    "OutputSet",
    "atomic_output",
    "check_inputs_and_output",
    "check_output_path",
    "compression_of",
    "input_byte_limit",
    "iter_input_chunks",
    "max_input_bytes",
    "non_regular_kind",
    "open_input",
    "parse_byte_count",
    "protect_inputs",
    "read_input_bytes",
    "refuse_input",
    "writes_in_place",
]
