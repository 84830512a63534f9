"""Corpus readers that validate their input, and translation pairs from gettext catalogs."""

from __future__ import annotations

from bitext_hf.data.gettext import clean_message, find_catalogs, gettext_pairs, read_gettext
from bitext_hf.data.readers import (
    DEFAULT_MAX_LINE_CHARS,
    BitextTask,
    DataValidationError,
    deduplicate,
    read_bucc,
    read_lines,
    read_moses,
    read_mteb,
    read_tsv_pairs,
)

__all__ = [
    "DEFAULT_MAX_LINE_CHARS",
    "BitextTask",
    "DataValidationError",
    "clean_message",
    "deduplicate",
    "find_catalogs",
    "gettext_pairs",
    "read_bucc",
    "read_gettext",
    "read_lines",
    "read_moses",
    "read_mteb",
    "read_tsv_pairs",
]
