"""Run a snippet in a fresh interpreter that cannot import bitext_hf, under transformers 5.x or 4.57.

A checkpoint's remote code is used by people who never install bitext-hf, with whatever transformers they have. The
tests save a checkpoint, then load it in a subprocess started with ``python -I -S`` (no site-packages processing, so
the editable install's path hook that makes ``bitext_hf`` importable never runs) whose ``sys.path`` is only the
virtual environment's site-packages (torch, numpy, safetensors, transformers 5.x) or, for transformers 4.x,
a separate folder with transformers 4.57 and the tokenizers / huggingface_hub it needs put first.

The 4.57 folder is ``$BITEXT_HF_TF4_DIR`` or ``<repo>/.cache/transformers-4.57``; ``.ci/run`` fills it with
``python tests/remote_code_tf4.py --install`` before the test command. When it is missing, the tests install it
with pip on first use; if that fails they skip, except under ``CI=true`` where a missing folder fails the run.

Not a test module (no ``test_`` prefix): a helper the model tests import, and a script for ``.ci/run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

__all__ = [
    "TF4_REQUIREMENTS",
    "TF4_VERSION",
    "install_transformers_4",
    "run_without_bitext_hf",
    "transformers_4_dir",
]

TF4_VERSION = "4.57.6"  # the newest 4.x release (pyproject allows transformers>=4.56)
# transformers 4.57 needs huggingface_hub < 1.0 and tokenizers <= 0.23.0, older than the venv's; the rest of its
# requirements (numpy, safetensors, regex, pyyaml, filelock, requests, tqdm, packaging) come from the venv.
TF4_REQUIREMENTS = (f"transformers=={TF4_VERSION}", "huggingface_hub>=0.34,<1.0", "tokenizers>=0.22,<=0.23.0")
_ENV_VARIABLE = "BITEXT_HF_TF4_DIR"
_REPO_ROOT = Path(__file__).resolve().parent.parent


def _target() -> Path:
    return Path(os.environ.get(_ENV_VARIABLE) or _REPO_ROOT / ".cache" / "transformers-4.57")


def _installed(folder: Path) -> bool:
    return (folder / f"transformers-{TF4_VERSION}.dist-info").is_dir() and (folder / "transformers").is_dir()


def install_transformers_4(folder: Path | None = None) -> Path:
    """Install transformers 4.57 and its differing requirements into ``folder`` (``pip install --target``)."""
    folder = folder or _target()
    if not _installed(folder):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(folder), *TF4_REQUIREMENTS],
            check=True,
            timeout=600,
        )
    return folder


def transformers_4_dir() -> Path:
    """The 4.57 folder, installed on first use; skips the calling test when it cannot be had (fails under CI)."""
    import pytest

    folder = _target()
    if _installed(folder):
        return folder
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            f"transformers {TF4_VERSION} is not installed in {folder} (CI=true): .ci/run must run "
            "`python tests/remote_code_tf4.py --install` before the tests"
        )
    try:
        return install_transformers_4(folder)
    except (subprocess.SubprocessError, OSError) as error:
        pytest.skip(
            f"transformers {TF4_VERSION} is not in {folder} and pip could not install it ({error}); set "
            f"{_ENV_VARIABLE} or run `python tests/remote_code_tf4.py --install`"
        )


def run_without_bitext_hf(
    code: str, *, cwd: Path, transformers_4: bool = False, env: dict[str, str] | None = None, timeout: int = 300
) -> object:
    """Run ``code`` in an interpreter without bitext_hf (and with transformers 4.57 first when asked).

    The snippet must print one JSON value as its last line of output, which is returned. ``env`` adds variables
    (e.g. ``HF_HUB_CACHE``); the Hugging Face home and module cache always point into ``cwd``, offline.
    """
    paths = [str(transformers_4_dir())] if transformers_4 else []
    paths += dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    prelude = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = {paths!r}
        import importlib.util
        assert importlib.util.find_spec("bitext_hf") is None, "bitext_hf is importable"
        import transformers
        """
    )
    if transformers_4:
        prelude += f"assert transformers.__version__ == {TF4_VERSION!r}, transformers.__version__\n"
    else:
        prelude += "assert int(transformers.__version__.split('.')[0]) >= 5, transformers.__version__\n"
    variables = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "HF_HOME": str(cwd / "hf_home"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
    }
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=variables,
        timeout=timeout,
        check=False,
    )
    if result.returncode != 0:
        raise AssertionError(f"the subprocess failed ({result.returncode}):\n{result.stderr[-3000:]}")
    try:
        return json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as error:
        raise AssertionError(f"no JSON result ({error}):\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}") from None


if __name__ == "__main__":
    if sys.argv[1:] != ["--install"]:
        sys.exit(f"usage: python {Path(__file__).name} --install  (installs into ${_ENV_VARIABLE} or {_target()})")
    print(install_transformers_4())
