"""Install what some tests need beyond the dev extra, before the tests run: ``python tests/install_test_environments.py``.

Two environments, each in a folder of its own under ``<repo>/.cache/`` (or the folder its variable names), fetched
from PyPI once and reused:

* transformers 4.57 with sentence-transformers 5.3 and 5.7 (``tests/remote_code_tf4.py``): the remote-code and
  sentence-transformers export tests load every family's checkpoint under it, as users of transformers 4 do;
* transformers' own common model tests, from the sdist of the installed transformers release
  (``tests/transformers_common_tests.py``).

The tests never install anything themselves: without these folders those tests skip, each naming this command, and
under ``CI=true`` they fail. The README's test command runs this script first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from remote_code_tf4 import install_transformers_4
from transformers_common_tests import install

COMMAND = "python tests/install_test_environments.py"


def main() -> int:
    for name, installer in (
        ("transformers 4.57 with sentence-transformers 5.x", install_transformers_4),
        ("transformers' common model tests", install),
    ):
        started = time.monotonic()
        print(f"{name}: installing (once; reused afterwards)...", file=sys.stderr, flush=True)
        folder = installer()
        print(f"{name}: {folder} ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:]:
        sys.exit(f"usage: {COMMAND}  (no arguments)")
    sys.exit(main())
