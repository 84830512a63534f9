"""LASER3 student encoder: configuration and model (self-contained, shippable as hub remote code)."""

from __future__ import annotations

from bitext_hf.modeling import register_auto_classes

from .configuration_laser3 import Laser3StudentConfig
from .modeling_laser3 import (
    Laser3InputError,
    Laser3PreTrainedModel,
    Laser3Student,
    Laser3StudentOutput,
    cosine_distillation_loss,
)

__all__ = [
    "Laser3InputError",
    "Laser3PreTrainedModel",
    "Laser3Student",
    "Laser3StudentConfig",
    "Laser3StudentOutput",
    "cosine_distillation_loss",
]

# Importing the family registers it (see bitext_hf.modeling.register_auto_classes), also when this module is
# imported while bitext_hf.modeling itself is still being imported (its own call then runs before the family exists).
register_auto_classes(only="laser3")
