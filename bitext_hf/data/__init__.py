"""Corpus readers that validate their input, gettext translation pairs, and the recipes' data layer (specs, samplers,
filters; the pair collator `bitext_hf.data.collators` and the word / first-subword helpers `bitext_hf.data.words`
are imported on their own because they need torch)."""

from __future__ import annotations

from bitext_hf.data.embeddings import read_embeddings
from bitext_hf.data.filters import drop_overlap, keep_pairs, min_tokens, min_words, split_held_out
from bitext_hf.data.gettext import (
    clean_message,
    find_catalogs,
    gettext_application_examples,
    gettext_pairs,
    read_gettext,
)
from bitext_hf.data.mteb import read_mteb
from bitext_hf.data.readers import (
    DEFAULT_MAX_LINE_CHARS,
    BitextTask,
    DataValidationError,
    deduplicate,
    read_bucc,
    read_lines,
    read_moses,
    read_tsv_pairs,
)
from bitext_hf.data.samplers import (
    budget_counts,
    sample_budget,
    sample_indices,
    size_alpha_weights,
    temperature_probabilities,
)
from bitext_hf.data.specs import DataSpec, PairSet, is_english, load_monolingual, load_pairs, parse_spec

__all__ = [
    "DEFAULT_MAX_LINE_CHARS",
    "BitextTask",
    "DataSpec",
    "DataValidationError",
    "PairSet",
    "budget_counts",
    "clean_message",
    "deduplicate",
    "drop_overlap",
    "find_catalogs",
    "gettext_application_examples",
    "gettext_pairs",
    "is_english",
    "keep_pairs",
    "load_monolingual",
    "load_pairs",
    "min_tokens",
    "min_words",
    "parse_spec",
    "read_bucc",
    "read_embeddings",
    "read_gettext",
    "read_lines",
    "read_moses",
    "read_mteb",
    "read_tsv_pairs",
    "sample_budget",
    "sample_indices",
    "size_alpha_weights",
    "split_held_out",
    "temperature_probabilities",
]
