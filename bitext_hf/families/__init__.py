"""One folder per model family, for everything that does not ship to the hub: data preparation, losses, evaluator,
export and card, and for OneAligner its two-stage retrieval.

- :mod:`bitext_hf.families.laser3`: LASER3 teacher-student distillation (``recipes/distill_wolof.py``).
- :mod:`bitext_hf.families.musr`: MuSR with the CrossConST loss (``recipes/train_musr.py``).
- :mod:`bitext_hf.families.contrastive_align`: the word-aligned contrastive encoder (``recipes/align_contrastive.py``).
- :mod:`bitext_hf.families.onealigner`: OneAligner's scoring, two-stage retrieval and training
  (``recipes/train_onealigner.py``).

What ships is in :mod:`bitext_hf.modeling` under the same family names. This package imports no family itself, so
importing one family loads only that one.
"""

from __future__ import annotations
