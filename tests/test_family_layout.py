"""Every family folder has the same files and names the same roles alike; its modules import the recipe's steps
nowhere but in ``recipe.py``; every family's training loss has the same shape (an ``nn.Module`` whose
``forward(model, inputs)`` returns ``(loss, logged parts)``, with the paper's BibTeX as ``citation``); and
``recipes/`` holds one thin script per family under the name its card gives."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ROOT / "bitext_hf" / "families"
SHARED_FILES = ("__init__.py", "arguments.py", "data.py", "losses.py", "evaluation.py", "export.py", "recipe.py")
LOSSES = {
    "contrastive_align": "AlignmentLoss",
    "laser3": "DistillationLoss",
    "musr": "CrossConSTLoss",
    "onealigner": "OneAlignerLoss",
    "pair_quality": "PairQualityLoss",
}
# The recipe of each family, under the name its model card and docs give (recipes/<name>.py).
RECIPES = {
    "contrastive_align": "align_contrastive",
    "laser3": "distill_wolof",
    "musr": "train_musr",
    "onealigner": "train_onealigner",
    "pair_quality": ("train_pair_quality", "train_pair_quality_cross_encoder"),  # its two variants
}
RECIPE_NAMES = sorted(name for names in RECIPES.values() for name in ([names] if isinstance(names, str) else names))
# Each role, one name in every family: (module, name, the parameters it starts with; None: any).
ROLES = (
    ("arguments", "ScriptArguments", None),
    ("data", "load_data", ("script_args",)),
    ("recipe", "check_arguments", ("script_args", "training_args", "model_args")),
    ("export", "model_card", None),
    ("export", "card_figures", None),
    ("export", "save_outputs", ("model", "tokenizer", "script_args", "training_args", "results")),
)
# What the roles were called in one family or another before they had one name: none may come back.
RETIRED_NAMES = (
    "check_training_args",
    "export_outputs",
    "export_student",
    "prepare_data",
    "push_export",
    "save_student",
    "stage_figure",
    "student_card",
)
# What the scripts may define: the recipe is the library's steps chained, its entry point and nothing else.
RECIPE_FUNCTIONS = {"main", "cli"}
# "About 100 lines each": a recipe past this does work that belongs in its family's folder.
RECIPE_MAX_LINES = 140


def _family_modules(family: str) -> dict[str, Path]:
    return {path.stem: path for path in sorted((FAMILIES / family).glob("*.py"))}


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at any depth (``if TYPE_CHECKING`` and function bodies included), relative
    imports resolved; ``from package import name`` gives ``package.name`` as well as ``package``."""
    package = f"bitext_hf.families.{path.parent.name}"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (module -> the modules it imports), or None."""
    state: dict[str, str] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = "open"
        for following in sorted(graph[node]):
            if state.get(following) == "open":
                return [*trail[trail.index(following) :], following] if following in trail else [node, following]
            if following not in state and (found := visit(following, [*trail, following])):
                return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_every_family_folder_has_the_shared_files():
    folders = sorted(path.name for path in FAMILIES.iterdir() if (path / "__init__.py").is_file())
    assert folders == sorted(LOSSES)
    for folder in folders:
        missing = [name for name in SHARED_FILES if not (FAMILIES / folder / name).is_file()]
        assert not missing, f"{folder} lacks {missing}"


@pytest.mark.parametrize("family", sorted(LOSSES))
def test_only_recipe_py_imports_the_recipe_and_the_family_has_no_import_loop(family):
    """``recipe.py`` chains the steps of ``data``, ``export`` and the rest: none of them may import it back (for a
    type hint either: the shared dataclasses are in ``arguments.py``), and no two modules import each other."""
    modules = _family_modules(family)
    for name, path in modules.items():
        if name == "recipe":
            continue
        recipes = sorted(
            module for module in _imported(path) if re.fullmatch(r"bitext_hf\.families\.\w+\.recipe", module)
        )
        assert not recipes, f"bitext_hf/families/{family}/{path.name} imports {recipes}"
    prefix = f"bitext_hf.families.{family}."
    graph = {
        name: {module.removeprefix(prefix) for module in _imported(path) if module.removeprefix(prefix) in modules}
        - {name}
        for name, path in modules.items()
        if name != "__init__"
    }
    for imports in graph.values():
        imports.discard("__init__")
    assert _cycle(graph) is None, f"import loop in bitext_hf/families/{family}: {' -> '.join(_cycle(graph))}"


def test_the_import_loop_check_finds_a_loop():
    loop = _cycle({"recipe": {"data", "export"}, "data": set(), "export": {"recipe"}})
    assert loop is not None and loop[0] == loop[-1] and set(loop) == {"recipe", "export"}
    assert _cycle({"recipe": {"data", "export"}, "data": set(), "export": {"data"}}) is None


@pytest.mark.parametrize("family", sorted(LOSSES))
def test_every_family_names_the_same_roles_alike(family):
    for module_name, name, parameters in ROLES:
        module = importlib.import_module(f"bitext_hf.families.{family}.{module_name}")
        role = getattr(module, name, None)
        assert role is not None, f"bitext_hf.families.{family}.{module_name} has no {name}"
        assert role.__module__ == module.__name__, f"{family}: {name} is {role.__module__}'s, not {module_name}'s"
        if parameters is not None:
            names = list(inspect.signature(role).parameters)
            assert names[: len(parameters)] == list(parameters), f"{family}.{module_name}.{name}{tuple(names)}"
    save = inspect.signature(importlib.import_module(f"bitext_hf.families.{family}.export").save_outputs)
    assert save.parameters["push"].kind is inspect.Parameter.KEYWORD_ONLY and save.parameters["push"].default is None
    package = importlib.import_module(f"bitext_hf.families.{family}")
    export = importlib.import_module(f"bitext_hf.families.{family}.export")
    for name in ("model_card", "card_figures", "save_outputs"):
        assert getattr(package, name) is getattr(export, name) and name in package.__all__, (family, name)
    # The recipe's module uses the one argument class; it does not define a second.
    recipe = importlib.import_module(f"bitext_hf.families.{family}.recipe")
    assert recipe.ScriptArguments is importlib.import_module(f"bitext_hf.families.{family}.arguments").ScriptArguments
    defined = {
        node.name
        for path in _family_modules(family).values()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    assert not defined & set(RETIRED_NAMES), f"{family} defines {sorted(defined & set(RETIRED_NAMES))}"


@pytest.mark.parametrize("family", sorted(LOSSES))
def test_every_family_loss_has_one_shape(family):
    loss_class = getattr(importlib.import_module(f"bitext_hf.families.{family}.losses"), LOSSES[family])
    assert issubclass(loss_class, nn.Module)
    # (self, model, the collated batch): the model is passed at each call, so the Trainer can pass DDP's wrapper.
    parameters = list(inspect.signature(loss_class.forward).parameters)
    assert len(parameters) == 3 and parameters[1] == "model"
    assert loss_class.citation.startswith("@inproceedings{") and loss_class.citation.rstrip().endswith("}")
    assert getattr(importlib.import_module(f"bitext_hf.families.{family}"), LOSSES[family]) is loss_class


def test_recipes_are_one_script_per_family_under_the_cards_names():
    scripts = sorted(path.stem for path in (ROOT / "recipes").glob("*.py"))
    assert scripts == RECIPE_NAMES
    for family, name in (
        (family, name) for family, names in RECIPES.items() for name in RECIPE_NAMES if name in names
    ):
        path = ROOT / "recipes" / f"{name}.py"
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        assert len(source.splitlines()) <= RECIPE_MAX_LINES, f"{path.name}: {len(source.splitlines())} lines"
        # Nothing runs another file in its place (runpy, importlib): the script the user typed is the recipe.
        imported = _imported(path)
        assert not imported & {"runpy", "importlib", "importlib.util"}, f"{path.name} imports {sorted(imported)}"
        families = {module.split(".")[2] for module in imported if module.startswith("bitext_hf.families.")}
        assert families == {family}, f"{path.name} calls {sorted(families)}"
        functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        assert functions == RECIPE_FUNCTIONS, f"{path.name} defines {sorted(functions - RECIPE_FUNCTIONS)}"
        main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
        assert [arg.arg for arg in main.args.args] == ["script_args", "training_args", "model_args"], path.name
        entry = tree.body[-1]
        assert isinstance(entry, ast.If) and ast.unparse(entry) == "if __name__ == '__main__':\n    cli()", path.name
        # run_recipe's default configuration: configs/<name without train_>.yaml beside the script.
        assert (ROOT / "recipes" / "configs" / f"{name.removeprefix('train_')}.yaml").is_file(), name


def test_every_recipe_the_cards_and_docs_name_exists():
    texts = [*(ROOT / "model_cards").glob("*.md"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md"]
    texts += [ROOT / folder / "README.md" for folder in ("recipes", "experiments", "benchmarks")]
    named = {
        (text.relative_to(ROOT).as_posix(), match)
        for text in texts
        for match in re.findall(r"recipes/(\w+)\.py", text.read_text(encoding="utf-8"))
    }
    assert {name for _, name in named if name in RECIPE_NAMES} == set(RECIPE_NAMES)
    missing = sorted((where, name) for where, name in named if name not in RECIPE_NAMES)
    assert not missing, f"recipes named that do not exist: {missing}"
