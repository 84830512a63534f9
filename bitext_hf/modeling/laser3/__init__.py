"""LASER3 student encoder: configuration and model (self-contained, shippable as hub remote code)."""

from __future__ import annotations

from .configuration_laser3 import Laser3StudentConfig
from .modeling_laser3 import Laser3PreTrainedModel, Laser3Student, Laser3StudentOutput

__all__ = ["Laser3PreTrainedModel", "Laser3Student", "Laser3StudentConfig", "Laser3StudentOutput"]
