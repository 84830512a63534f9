"""Run a snippet in a fresh interpreter that cannot import bitext_hf, under transformers 5.x or 4.57.

A checkpoint's remote code is used by people who never install bitext-hf, with whatever transformers they have. The
tests save a checkpoint, then load it in a subprocess started with ``python -I -S`` (no site-packages processing, so
the editable install's path hook that makes ``bitext_hf`` importable never runs) whose ``sys.path`` is only the
virtual environment's site-packages (torch, numpy, safetensors, transformers 5.x) or, for transformers 4.x,
a separate folder with transformers 4.57 and the tokenizers / huggingface_hub it needs put first.

With ``sentence_transformers="5.x.y"`` the snippet also imports that sentence-transformers 5 release (the series
transformers 4.x users can install), from a folder of its own inside the 4.57 folder.

The 4.57 folder is ``$BITEXT_HF_TF4_DIR`` or ``<repo>/.cache/transformers-4.57``; ``python
tests/install_test_environments.py`` fills it before the tests (the README's test command and ``.ci/run`` run it).
The tests never install it themselves (an install part-way through a run made the skip count depend on test order):
when it is missing they skip, naming that command, except under ``CI=true`` where a missing folder fails the run.

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
    "ST5_VERSIONS",
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
# sentence-transformers 5.x beside transformers 4.57, each release in a folder of its own: 5.3 is the last with the
# `sentence_transformers.models` package itself (5.4 moved the classes and kept those names as aliases), 5.7 the
# newest 5.x (what pip picks beside transformers 4.x). Their other requirements (torch, numpy, scipy, scikit-learn,
# tqdm, typing_extensions) come from the venv, huggingface_hub from the 4.57 folder.
ST5_VERSIONS = ("5.3.0", "5.7.0")
_ENV_VARIABLE = "BITEXT_HF_TF4_DIR"
_REPO_ROOT = Path(__file__).resolve().parent.parent


def _target() -> Path:
    return Path(os.environ.get(_ENV_VARIABLE) or _REPO_ROOT / ".cache" / "transformers-4.57")


def _st5_folder(folder: Path, version: str) -> Path:
    return folder / f"sentence-transformers-{version}"  # a hyphen: not importable as a package from the 4.57 folder


def _st5_installed(folder: Path, version: str) -> bool:
    return (_st5_folder(folder, version) / f"sentence_transformers-{version}.dist-info").is_dir()


def _installed(folder: Path) -> bool:
    transformers_4 = (folder / f"transformers-{TF4_VERSION}.dist-info").is_dir() and (folder / "transformers").is_dir()
    return transformers_4 and all(_st5_installed(folder, version) for version in ST5_VERSIONS)


def install_transformers_4(folder: Path | None = None) -> Path:
    """Install transformers 4.57 and its differing requirements into ``folder``, and each sentence-transformers 5
    release of :data:`ST5_VERSIONS` into a folder of its own inside it (``pip install --no-deps --target``)."""
    folder = folder or _target()
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target"]
    if not ((folder / f"transformers-{TF4_VERSION}.dist-info").is_dir() and (folder / "transformers").is_dir()):
        subprocess.run([*pip, str(folder), *TF4_REQUIREMENTS], check=True, timeout=600)
    for version in ST5_VERSIONS:
        if not _st5_installed(folder, version):
            subprocess.run(
                [*pip, str(_st5_folder(folder, version)), f"sentence-transformers=={version}"], check=True, timeout=600
            )
    return folder


def transformers_4_dir() -> Path:
    """The 4.57 folder; skips the calling test when it is not installed (fails under CI)."""
    import pytest

    folder = _target()
    if _installed(folder):
        return folder
    missing = (
        f"transformers {TF4_VERSION} with sentence-transformers {', '.join(ST5_VERSIONS)} is not installed in "
        f"{folder}: run `python tests/install_test_environments.py` before the tests"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{missing} (CI=true)", pytrace=False)
    pytest.skip(missing)


def run_without_bitext_hf(
    code: str,
    *,
    cwd: Path,
    transformers_4: bool = False,
    sentence_transformers: str | None = None,
    env: dict[str, str] | None = None,
    timeout: int = 300,
) -> object:
    """Run ``code`` in an interpreter without bitext_hf (and with transformers 4.57 first when asked).

    The snippet must print one JSON value as its last line of output, which is returned. ``sentence_transformers``:
    a release of :data:`ST5_VERSIONS` to import instead of the venv's (with ``transformers_4`` only). ``env`` adds
    variables (e.g. ``HF_HUB_CACHE``); the Hugging Face home and module cache always point into ``cwd``, offline.
    """
    if sentence_transformers is not None and (not transformers_4 or sentence_transformers not in ST5_VERSIONS):
        raise ValueError(f"sentence_transformers must be one of {ST5_VERSIONS}, with transformers_4=True")
    paths = [str(transformers_4_dir())] if transformers_4 else []
    if sentence_transformers is not None:
        paths.insert(0, str(_st5_folder(Path(paths[0]), sentence_transformers)))
    paths += dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    prelude = textwrap.dedent(
        f"""
        import sys
        sys.path[:0] = {paths!r}
        import importlib.util
        assert importlib.util.find_spec("bitext_hf") is None, "bitext_hf is importable"
        """
    )
    if sentence_transformers is not None:
        # As `pip install sentence-transformers` leaves it: without `datasets` (its train extra), which it and
        # transformers import whenever it is installed, and the venv's needs a newer huggingface_hub than
        # transformers 4.57 allows. Hidden from the import system and from importlib.metadata, before both import.
        prelude += textwrap.dedent(
            """
            import importlib.metadata
            sys.modules["datasets"] = None
            _metadata = importlib.metadata.metadata
            def _without_datasets(name):
                if name == "datasets":
                    raise importlib.metadata.PackageNotFoundError(name)
                return _metadata(name)
            importlib.metadata.metadata = _without_datasets
            import sentence_transformers
            """
        )
        prelude += f"assert sentence_transformers.__version__ == {sentence_transformers!r}\n"
    prelude += "import transformers\n"
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
