"""Errors raised by the distillation package: one clear line naming the problem."""

from __future__ import annotations

__all__ = ["DistillationDataError"]


class DistillationDataError(ValueError):
    """Bad distillation input: misaligned files, empty lines, a language without data, an unusable cache."""
