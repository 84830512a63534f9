"""``python -m bitext_hf.cli``: the same as the ``bitext-hf`` console script."""

from __future__ import annotations

import sys

from bitext_hf.cli import main

sys.exit(main())
