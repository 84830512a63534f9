"""bitext-hf: multilingual sentence alignment and bitext mining, Hugging Face native.

Importing the package registers its model families with ``AutoConfig`` / ``AutoModel`` so that their
checkpoints load without ``trust_remote_code`` once ``bitext_hf`` is imported. The registration waits until
transformers is imported (see ``bitext_hf._auto_registration``), so that ``import bitext_hf`` and the CLI start
without loading torch.
"""

from __future__ import annotations

__version__ = "0.1.0"

from bitext_hf._auto_registration import register_when_transformers_is_imported
from bitext_hf.modeling import register_auto_classes

register_when_transformers_is_imported()

__all__ = ["__version__", "register_auto_classes"]
