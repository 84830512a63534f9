"""The model families. Each lives in its own self-contained folder (configuration, modeling and, for some, the pure
tensor functions: losses and pooling).

A folder imports only its own files, torch and transformers, so that ``save_pretrained`` can ship it as
hub remote code. This module is the one place that knows all of them: importing it registers every family with
``AutoConfig`` / ``AutoModel`` (and so imports torch and transformers), after which a bitext-hf checkpoint loads with
``AutoModel.from_pretrained(path)`` without ``trust_remote_code``. ``import bitext_hf`` alone does not register.
"""

from __future__ import annotations

import importlib

__all__ = ["MODEL_FAMILIES", "register_auto_classes"]

# (subpackage, config class, model class)
MODEL_FAMILIES: list[tuple[str, str, str]] = [
    ("laser3", "Laser3StudentConfig", "Laser3Student"),
    ("onealigner", "OneAlignerConfig", "OneAlignerModel"),
    ("musr", "MuSRConfig", "MuSREncoderDecoder"),
    ("contrastive_align", "ContrastiveAlignConfig", "ContrastiveAlignedEncoder"),
    ("pair_quality", "PairQualityConfig", "PairQualityClassifier"),
]

_registered: set[str] = set()


def register_auto_classes(only: str | None = None) -> None:
    """Register every model family (or the ``only`` one) with AutoConfig / AutoModel (idempotent).

    Called at the end of this module, so importing ``bitext_hf.modeling`` (or any family under it, which imports
    this module first) registers them all. A family whose classes are not defined yet is skipped rather than failing
    the import: each family package calls this function again at the end of its own ``__init__``.
    """
    from transformers import AutoConfig, AutoModel

    for subpackage, config_name, model_name in MODEL_FAMILIES:
        if subpackage in _registered or only not in (None, subpackage):
            continue
        module = importlib.import_module(f"bitext_hf.modeling.{subpackage}")
        config_class = getattr(module, config_name, None)
        model_class = getattr(module, model_name, None)
        if config_class is None or model_class is None:
            continue
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        _registered.add(subpackage)


register_auto_classes()
