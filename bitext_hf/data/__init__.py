"""Corpus readers that validate their input, gettext translation pairs, and the data specs of the recipes."""

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
from bitext_hf.data.specs import DataSpec, PairSet, is_english, load_monolingual, load_pairs, parse_spec

__all__ = [
    "DEFAULT_MAX_LINE_CHARS",
    "BitextTask",
    "DataSpec",
    "DataValidationError",
    "PairSet",
    "clean_message",
    "deduplicate",
    "find_catalogs",
    "gettext_pairs",
    "is_english",
    "load_monolingual",
    "load_pairs",
    "parse_spec",
    "read_bucc",
    "read_gettext",
    "read_lines",
    "read_moses",
    "read_mteb",
    "read_tsv_pairs",
]
