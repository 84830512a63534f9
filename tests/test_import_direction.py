"""The import direction of the package (docs/layout.md, "The import direction"): data flows down, never back up.

A module may import its own top-level package and the packages of lower layers, never a higher layer or another
package of its own layer. `modeling/` ships to the hub as remote code and imports nothing of ours. Function-level
imports count as much as module-level ones: they hide cycles, they do not remove them.

The imports that go against the direction are listed in KNOWN_DEBTS (none today): the test fails on any import
against the direction that is not listed, and on a listed one that is gone, so the list can only shrink.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "bitext_hf"

# Layer of each top-level part of bitext_hf; a higher layer may import a lower one. Parts of one layer do not import
# each other.
LAYERS = {
    "errors": 0,
    "blas_kernels": 0,  # sets FAISS's OpenBLAS kernels at `import bitext_hf`; imports nothing of ours
    "lazy_imports": 0,  # PEP 562 namespaces of the packages; imports nothing of ours
    "interrupts": 0,  # a Ctrl-C held over an import (torch's); imports nothing of ours
    "io": 1,
    "threads": 1,  # caps the thread pools; imports only errors and interrupts
    "data": 2,
    "encoders": 2,
    "modeling": 1.5,  # imports nothing of ours; below encoders, whose loaders import it to register the families
    "bitext_hf": 3.5,  # the package's __init__: the version and FAISS's OpenBLAS kernels
    "encoding": 3.75,  # the encoder engine, encoding cache, shard folders, Ray sessions; under every job
    "mining": 4,
    "alignment": 4.5,  # sentence alignment of documents: uses mining's kNN and the encoding package, used by evaluation and cli
    "evaluation": 5,
    "hub": 5,
    "training": 5,
    "families": 6,
    "jobs": 6.5,  # one module per command: config, run_*, result; they call the engines below and import no family
    "app": 6.75,  # the review app (Gradio, the app extra): above the jobs, under the CLI that starts it
    "cli": 7,
}

# importer module -> imported module, against the direction: a debt to repay, never a place for a new one.
KNOWN_DEBTS: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every bitext_hf module ``path`` imports, at any depth of the file (relative imports resolved)."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                parent = ".".join([*base, node.module] if node.module else base)
            else:
                parent = node.module or ""
            # `from bitext_hf import encoders` imports the module bitext_hf.encoders, not the package's __init__.
            names = [_submodule(parent, alias.name) for alias in node.names]
        else:
            continue
        found.update(name for name in names if name == "bitext_hf" or name.startswith("bitext_hf."))
    return found


def _submodule(parent: str, name: str) -> str:
    """``parent.name`` when that is a module of the package, else ``parent`` (the name is an attribute of it)."""
    candidate = PACKAGE.parent.joinpath(*parent.split("."), name)
    return f"{parent}.{name}" if candidate.is_dir() or candidate.with_suffix(".py").is_file() else parent


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "bitext_hf"


def _package_files() -> list[Path]:
    """Every module of the package, through the links that put the top-level modeling/ and model_cards/ folders in
    it (Path.rglob does not follow links to folders)."""
    files = []
    for folder, _, names in os.walk(PACKAGE, followlinks=True):
        files.extend(Path(folder) / name for name in names if name.endswith(".py"))
    return files


def _against_the_direction() -> set[tuple[str, str]]:
    edges = set()
    for path in _package_files():
        importer = _module_name(path)
        for imported in _imports(path):
            source, target = _part(importer), _part(imported)
            if source == target:
                continue
            assert source in LAYERS and target in LAYERS, f"{importer} -> {imported}: give the part a layer"
            if source == "modeling" or LAYERS[source] <= LAYERS[target]:
                edges.add((importer, imported))
    return edges


def test_no_import_goes_against_the_direction_beyond_the_known_debts():
    found = _against_the_direction()
    new = sorted(found - KNOWN_DEBTS)
    assert not new, f"imports against the direction (docs/layout.md): {new}"


def test_the_shipped_modeling_code_is_checked_too():
    # modeling/ sits at the top level and enters the package through a link: it must not escape the check.
    modules = {_module_name(path) for path in _package_files()}
    assert "bitext_hf.modeling.laser3.modeling_laser3" in modules and "bitext_hf.mining.knn" in modules


def test_every_known_debt_still_exists_so_the_list_only_shrinks():
    gone = sorted(KNOWN_DEBTS - _against_the_direction())
    assert not gone, f"repaid: remove these from KNOWN_DEBTS: {gone}"


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    folder = tmp_path / "bitext_hf" / "data"
    folder.mkdir(parents=True)
    (folder / "readers.py").write_text("def f():\n    from bitext_hf.cli import main\n\nfrom . import specs\n")
    (folder / "specs.py").write_text("")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "bitext_hf"
    try:
        assert _imports(folder / "readers.py") == {"bitext_hf.cli", "bitext_hf.data.specs"}
        assert ("bitext_hf.data.readers", "bitext_hf.cli") in _against_the_direction()
    finally:
        PACKAGE = saved


# The modules of the commands (bitext_hf/jobs/__init__.py): each holds one job, and none imports another's.
JOB_MODULES = ("align", "encode", "evaluate", "gettext", "mine", "push", "score")


def test_no_job_imports_another_jobs_module():
    for name in JOB_MODULES:
        others = {f"bitext_hf.jobs.{other}" for other in JOB_MODULES if other != name}
        found = sorted(_imports(PACKAGE / "jobs" / f"{name}.py") & others)
        assert not found, f"bitext_hf.jobs.{name} imports {found}: what two jobs share goes in a lower module"


def test_the_imports_the_jobs_docstrings_show_work():
    import importlib

    for path in sorted((PACKAGE / "jobs").glob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        for line in docstring.splitlines():
            if line.startswith(">>> from "):
                module, _, names = line.removeprefix(">>> from ").partition(" import ")
                imported = importlib.import_module(module)
                missing = [name for name in names.split(", ") if not hasattr(imported, name)]
                assert not missing, f"{path.name}: `{line}`: {module} has no {missing}"
