"""transformers' own common model tests (``ModelTesterMixin``, ``ConfigTester``), from the installed release's sdist.

transformers' ``tests/`` folder is not in its wheel, and it is not copied into this repository either: ``python
tests/transformers_common_tests.py --install`` downloads the sdist of the transformers release that the tests will
run under (``pip download --no-deps --no-binary :all: transformers==X``), and extracts its ``tests/*.py`` into
``$BITEXT_HF_TRANSFORMERS_TESTS_DIR`` or ``<repo>/.cache/transformers-tests-<X>/``, as the importable package
``transformers_tests`` (a name of its own: this repository's test folder is also called ``tests``).
``tests/install_test_environments.py`` runs it before the tests; ``tests/test_transformers_common.py`` imports from that folder and never touches the network.

The sdist ships only the top-level test files, not the sub-packages that ``test_modeling_common.py`` and
``test_configuration_common.py`` import a few names from. For those (and only when the sdist lacks them) the install
writes stand-ins, each saying so in its docstring:

* ``exporters/test_export.py``: an empty ``ExportTesterMixin`` (the torch.export / ONNX / ExecuTorch / TensorRT
  export suite that ``ModelTesterMixin`` inherits is not shipped, so those tests do not run);
* ``generation/test_utils.py``: an empty ``GenerationTesterMixin`` (no family here is a ``GenerationMixin`` model;
  ``test_generation_tester_mixin_inheritance`` checks exactly that);
* ``utils/test_configuration_utils.py``: ``config_common_kwargs``, the common ``PretrainedConfig`` arguments that
  ``ConfigTester.check_config_arguments_init`` passes and reads back (transformers 5's values).

``parameterized`` (which ``test_modeling_common.py`` imports) is installed into the folder too, so the project's
environment needs nothing more.

Not a test module (no ``test_`` prefix): a helper the test imports, and a script for ``.ci/run``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

__all__ = ["INSTALL_COMMAND", "PACKAGE", "install", "installed_folder", "resolved_version", "tests_folder"]

PACKAGE = "transformers_tests"
INSTALL_COMMAND = "python tests/transformers_common_tests.py --install"
_ENV_VARIABLE = "BITEXT_HF_TRANSFORMERS_TESTS_DIR"
_REPO_ROOT = Path(__file__).resolve().parent.parent
_MARKER = "INSTALLED"  # written last: a folder without it is an interrupted install, never used

# Modules the common test files import that the sdist does not ship, and what stands in for each.
_STAND_INS = {
    "exporters/test_export.py": '''
        """Stand-in: transformers' sdist does not ship tests/exporters/; its export suite does not run here."""


        class ExportTesterMixin:
            pass
        ''',
    "generation/test_utils.py": '''
        """Stand-in: transformers' sdist does not ship tests/generation/; no bitext_hf model is a GenerationMixin."""


        class GenerationTesterMixin:
            pass
        ''',
    "utils/test_configuration_utils.py": '''
        """Stand-in: transformers' sdist does not ship tests/utils/. The common config arguments of transformers 5's
        tests/utils/test_configuration_utils.py, which ConfigTester.check_config_arguments_init sets and reads back."""

        config_common_kwargs = {
            "return_dict": False,
            "output_hidden_states": True,
            "output_attentions": True,
            "dtype": "float16",
            "chunk_size_feed_forward": 5,
            "architectures": ["BertModel"],
            "id2label": {0: "label"},
            "label2id": {"label": "0"},
            "problem_type": "regression",
        }
        ''',
}


def tests_folder(version: str) -> Path:
    """Where the tests of transformers ``version`` live (the folder that holds the ``transformers_tests`` package)."""
    return Path(os.environ.get(_ENV_VARIABLE) or _REPO_ROOT / ".cache" / f"transformers-tests-{version}")


def installed_folder(version: str) -> Path | None:
    """The folder for ``version`` when a complete install is there, else None."""
    folder = tests_folder(version)
    return folder if (folder / _MARKER).is_file() else None


def resolved_version() -> str:
    """The transformers release the tests run under: the installed one, else the one that ``.ci/run``'s install of
    the project will pick (``.ci/run`` calls this script before the project is installed), as pip resolves it."""
    try:
        return importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        pass
    ci_run = (_REPO_ROOT / ".ci" / "run").read_text(encoding="utf-8")
    torch_pin = next(word for word in ci_run.split() if word.startswith("torch=="))  # the same pin as .ci/run
    pip, project = [sys.executable, "-m", "pip"], f"{_REPO_ROOT}[dev]"
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        subprocess.run(
            [
                *pip,
                "install",
                "-q",
                "--dry-run",
                "--ignore-installed",
                "--report",
                str(report),
                torch_pin,
                "-e",
                project,
            ],
            check=True,
            timeout=900,
        )
        for item in json.loads(report.read_text(encoding="utf-8"))["install"]:
            if item["metadata"]["name"].lower() == "transformers":
                return str(item["metadata"]["version"])
    raise RuntimeError("pip's resolution of the project installs no transformers")


def install(version: str | None = None) -> Path:
    """Download the sdist of transformers ``version`` (default: :func:`resolved_version`) and extract its tests."""
    version = version or resolved_version()
    folder = tests_folder(version)
    if installed_folder(version):
        return folder
    pip = [sys.executable, "-m", "pip"]
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Built beside the target and renamed into place, so that an interrupted install leaves no half folder behind.
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{folder.name}.") as scratch:
        staging = Path(scratch) / "staging"
        downloads = Path(scratch) / "downloads"
        subprocess.run(
            [*pip, "download", "-q", "--no-deps", "--no-binary", ":all:", f"transformers=={version}", "-d", downloads],
            check=True,
            timeout=900,
        )
        (sdist,) = downloads.glob("transformers-*.tar.gz")
        _extract_tests(sdist, staging / PACKAGE)
        subprocess.run([*pip, "install", "-q", "--no-deps", "--target", str(staging), "parameterized"], check=True)
        (staging / _MARKER).write_text(f"transformers=={version} tests from {sdist.name}\n", encoding="utf-8")
        if folder.exists():  # an interrupted earlier install (no marker)
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder


def _extract_tests(sdist: Path, package: Path) -> None:
    """The sdist's ``tests/*.py`` (and any sub-package it has) into ``package``, plus the stand-ins it lacks."""
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        prefix = f"{root}/tests/"
        members = [member for member in archive.getmembers() if member.name.startswith(prefix) and member.isfile()]
        for member in members:
            member.name = member.name[len(prefix) :]
        # The "data" filter refuses links, absolute paths and paths that leave the folder.
        archive.extractall(package, members=members, filter="data")
    if not (package / "test_modeling_common.py").is_file():
        raise RuntimeError(f"{sdist.name} has no tests/test_modeling_common.py")
    for relative, source in _STAND_INS.items():
        path = package / relative
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    for directory in [package, *(path for path in package.rglob("*") if path.is_dir())]:
        (directory / "__init__.py").touch()


if __name__ == "__main__":
    if sys.argv[1:] != ["--install"]:
        sys.exit(f"usage: {INSTALL_COMMAND}  (installs into ${_ENV_VARIABLE} or .cache/transformers-tests-<version>)")
    print(install())
