"""Errors raised by the LASER3 family (teacher-student distillation): one clear line naming the problem."""

from __future__ import annotations

from bitext_hf.errors import DataValidationError

__all__ = ["DistillationDataError"]


class DistillationDataError(DataValidationError):
    """Bad distillation input: misaligned files, empty lines, a language without data, an unusable cache."""
