"""Checks that the code copied between the modeling families is the code of its source, as transformers'
``utils/check_copies.py`` does for its models.

Every family folder under ``modeling/`` ships alone to the hub as remote code, so it cannot import what it shares
with the other families (``encode``'s loop, loading, saving, the tokenizer guard...): each holds a copy. A copy is
marked by a comment line right above the definition (above its decorators)::

    # Copied from modeling.onealigner.modeling_onealigner.OneAlignerModel._resolve_tokenizer with OneAligner->Laser3

The source is named by its dotted path from the repository root (a file, then a top-level function or class, then
methods or nested definitions); ``with A->B, C->D`` replaces, case-sensitively and in that order, text of the source
before the comparison. The copy must then be the source line for line: the whole definition, decorators and
docstring included, trailing whitespace aside (a source at another indentation level is re-indented first).

Usage::

    python tests/modeling_copies.py          # one line per problem (file:line: object: what differs), exit 1 if any
    python tests/modeling_copies.py --fix    # rewrite every differing copy from its source

The module is also the tests' helper (``tests/test_modeling_copies.py``): :func:`check`, :func:`fix` and
:func:`shared_definitions`, each for any root holding a ``modeling/`` folder. It needs only the standard library.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["ROOT", "Copy", "Definition", "Problem", "check", "find_copies", "fix", "main", "shared_definitions"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "modeling"

# Loose on purpose: a marker that does not parse is reported, never skipped.
_MARKER = re.compile(r"^(?P<indent>[ \t]*)#\s*Copied from\b(?P<rest>.*)$")
_MARKER_BODY = re.compile(r"^\s+(?P<source>\S+)(?:\s+with\s+(?P<replacements>\S.*?))?\s*$")
_REPLACEMENT = re.compile(r"^(?P<old>\S+)->(?P<new>\S+)$")
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Problem:
    """One finding, printed as one line: `file:line: object: message`."""

    path: Path
    line: int
    name: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.name}: {self.message}"


@dataclass(frozen=True)
class Copy:
    """A marked copy.

    Attributes:
        path: the file holding the copy.
        line: the marker's line (1-based).
        name: the copy's qualified name in its file (`Class.method`).
        source: the source's dotted path, as the marker writes it.
        replacements: the `with` pairs (old, new), applied in order.
        start: the copy's first line (its first decorator), 1-based.
        end: the copy's last line, 1-based.
        column: the copy's indentation, in characters.
    """

    path: Path
    line: int
    name: str
    source: str
    replacements: tuple[tuple[str, str], ...]
    start: int
    end: int
    column: int


@dataclass(frozen=True)
class Definition:
    """A function, class or method of a family's file, for the inventory of what the families share.

    Attributes:
        family: the family folder's name.
        path: the file.
        line: the definition's first line (its first decorator).
        name: its qualified name in the file.
        copied_from: the source's dotted path when the definition or one around it is a marked copy, else None.
        dotted: its own dotted path (what a marker names as a source).
        is_source: whether a marked copy names it, or one around it, as its source.
    """

    family: str
    path: Path
    line: int
    name: str
    copied_from: str | None
    dotted: str
    is_source: bool


def _first_line(node: ast.AST) -> int:
    return min([decorator.lineno for decorator in node.decorator_list] + [node.lineno])


def _walk(body: list[ast.stmt], prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every definition in `body`, nested ones included."""
    for node in body:
        if isinstance(node, _DEFINITIONS):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _walk(node.body, f"{name}.")


def _modeling_files(root: Path) -> list[Path]:
    return sorted((root / PACKAGE).rglob("*.py"))


def _dotted(root: Path, path: Path, name: str) -> str:
    return ".".join((*path.relative_to(root).with_suffix("").parts, name))


def _parse(path: Path) -> tuple[list[str], dict[str, ast.AST], dict[int, tuple[str, ast.AST]]]:
    """The file's lines, its definitions by qualified name and by first line."""
    return _parse_text(str(path), path.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=64)
def _parse_text(filename: str, text: str) -> tuple[list[str], dict[str, ast.AST], dict[int, tuple[str, ast.AST]]]:
    # Cached by content: every copy resolves its source, and a few files are the sources of most copies.
    found = dict(_walk(ast.parse(text, filename=filename).body))
    return text.splitlines(), found, {_first_line(node): (name, node) for name, node in found.items()}


def _parse_replacements(text: str | None) -> tuple[tuple[str, str], ...] | None:
    if text is None:
        return ()
    pairs = []
    for part in text.split(","):
        match = _REPLACEMENT.match(part.strip())
        if match is None:
            return None
        pairs.append((match["old"], match["new"]))
    return tuple(pairs)


def find_copies(root: Path = ROOT) -> tuple[list[Copy], list[Problem]]:
    """Every marked copy under `root/modeling`, and the markers that mark nothing or do not parse."""
    copies, problems = [], []
    for path in _modeling_files(root):
        lines, _, by_line = _parse(path)
        for index, text in enumerate(lines):
            match = _MARKER.match(text)
            if match is None:
                continue
            line = index + 1
            body = _MARKER_BODY.match(match["rest"])
            replacements = _parse_replacements(body["replacements"]) if body else None
            if body is None or replacements is None:
                message = (
                    f"cannot read the marker {text.strip()!r}: write '# Copied from <dotted path>[ with A->B, C->D]'"
                )
                problems.append(Problem(path, line, "# Copied from", message))
                continue
            found = by_line.get(line + 1)
            if found is None or found[1].col_offset != len(match["indent"]):
                problems.append(
                    Problem(
                        path, line, body["source"], "the marker is not right above a definition at its indentation"
                    )
                )
                continue
            name, node = found
            copies.append(
                Copy(path, line, name, body["source"], replacements, line + 1, node.end_lineno, node.col_offset)
            )
    return copies, problems


def _resolve(root: Path, dotted: str) -> tuple[list[str], ast.AST] | None:
    """The lines of the file that defines `dotted` and its node, or None when there is no such object."""
    parts = dotted.split(".")
    if parts[0] != PACKAGE:
        return None
    for cut in range(len(parts) - 1, 0, -1):
        path = root.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            lines, found, _ = _parse(path)
            node = found.get(".".join(parts[cut:]))
            return None if node is None else (lines, node)
    return None


def _expected(root: Path, copy: Copy) -> list[str] | None:
    """The copy's code as its source and replacements give it, or None when the source does not exist."""
    resolved = _resolve(root, copy.source)
    if resolved is None:
        return None
    lines, node = resolved
    code = lines[_first_line(node) - 1 : node.end_lineno]
    if node.col_offset != copy.column:
        # A source at another depth (a function copied as a method): re-indent the lines that carry its indentation.
        old, new = " " * node.col_offset, " " * copy.column
        code = [new + line[len(old) :] if line.startswith(old) and line.strip() else line for line in code]
    text = "\n".join(code)
    for old, new in copy.replacements:
        text = text.replace(old, new)
    return text.split("\n")


def _difference(expected: list[str], observed: list[str]) -> tuple[int, str] | None:
    """Where the copy first differs (0-based line of the definition) and how, in one line; None when the copy is the
    source, trailing whitespace aside."""
    expected = [line.rstrip() for line in expected]
    observed = [line.rstrip() for line in observed]
    for index, (want, got) in enumerate(zip(expected, observed, strict=False)):
        if want != got:
            return index, f"the copy has {got.strip()!r} where the source gives {want.strip()!r}"
    if len(expected) == len(observed):
        return None
    more = len(observed) - len(expected)
    index = min(len(expected), len(observed))
    return index, f"the copy has {abs(more)} line(s) {'more' if more > 0 else 'fewer'} than the source"


def _describe(copy: Copy) -> str:
    pairs = ", ".join(f"{old}->{new}" for old, new in copy.replacements)
    return copy.source + (f" with {pairs}" if pairs else "")


def _check_copy(root: Path, copy: Copy, lines: list[str]) -> tuple[Problem | None, list[str] | None]:
    """The copy's problem (if any) and the code it should have (None when its source is unknown)."""
    expected = _expected(root, copy)
    if expected is None:
        return Problem(copy.path, copy.line, copy.name, f"unknown source {copy.source!r}"), None
    difference = _difference(expected, lines[copy.start - 1 : copy.end])
    if difference is None:
        return None, expected
    index, message = difference
    return Problem(copy.path, copy.start + index, copy.name, f"differs from {_describe(copy)}: {message}"), expected


def check(root: Path = ROOT) -> list[Problem]:
    """Every problem with the copies under `root/modeling`: unreadable or misplaced markers, unknown sources,
    copies that differ from their source."""
    copies, problems = find_copies(root)
    cache: dict[Path, list[str]] = {}
    for copy in copies:
        lines = cache.setdefault(copy.path, copy.path.read_text(encoding="utf-8").splitlines())
        problem, _ = _check_copy(root, copy, lines)
        if problem is not None:
            problems.append(problem)
    return problems


def fix(root: Path = ROOT) -> tuple[list[Problem], list[Problem]]:
    """Rewrite every differing copy from its source; (what was rewritten, the problems left).

    A copy may itself be the source of another: the passes repeat until nothing changes, so a chain settles.
    """
    rewritten: list[Problem] = []
    for _ in range(10):
        copies, _ = find_copies(root)
        changed = False
        for path in sorted({copy.path for copy in copies}):
            text = path.read_text(encoding="utf-8")
            lines = text.splitlines()
            # Bottom-up, so that the line numbers of the copies above stay valid; a copy around one rewritten in this
            # pass waits for the next pass (its end moved).
            done_from = None
            for copy in sorted((copy for copy in copies if copy.path == path), key=lambda copy: -copy.start):
                if done_from is not None and copy.end >= done_from:
                    continue
                problem, expected = _check_copy(root, copy, lines)
                if problem is not None and expected is not None:
                    lines[copy.start - 1 : copy.end] = expected
                    rewritten.append(problem)
                    changed = True
                    done_from = copy.start
            new_text = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
            if new_text != text:
                path.write_text(new_text, encoding="utf-8")
        if not changed:
            break
    return rewritten, check(root)


def _family_prefix(names: list[str]) -> str | None:
    """The family's class-name prefix, from its `<Prefix>PreTrainedModel` base class."""
    bases = [name[: -len("PreTrainedModel")] for name in names if name.endswith("PreTrainedModel") and "." not in name]
    return bases[0] if len(bases) == 1 else None


def _registered_classes(root: Path) -> dict[str, str]:
    """Class name -> `{Model}` / `{Config}` for the classes that `modeling/__init__.py` registers per family."""
    tree = ast.parse((root / PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    roles = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "MODEL_FAMILIES":
            for _, config_class, model_class in ast.literal_eval(node.value):
                roles[config_class], roles[model_class] = "{Config}", "{Model}"
    return roles


def _neutral(name: str, prefix: str | None, roles: dict[str, str]) -> str:
    parts = []
    for part in name.split("."):
        part = roles.get(part, part)
        if prefix and part.startswith(prefix) and part != prefix:
            part = "{Family}" + part[len(prefix) :]
        parts.append(part)
    return ".".join(parts)


def shared_definitions(root: Path = ROOT) -> dict[str, list[Definition]]:
    """The definitions of the families' shipped files by a family-neutral key, for the keys that two families or
    more hold.

    The key is the qualified name with each family's own names made neutral: its registered model and config
    classes become `{Model}` and `{Config}`, its class-name prefix (`OneAligner`, `Laser3`...) `{Family}`; so
    `Laser3Student.encode` and `MuSREncoderDecoder.encode` are both `{Model}.encode`, `Laser3InputError` and
    `MuSRInputError` both `{Family}InputError`.
    """
    copies, _ = find_copies(root)
    marked = {(copy.path, copy.start): copy.source for copy in copies}
    sources = {copy.source for copy in copies}
    roles = _registered_classes(root)
    families: dict[Path, list[Path]] = {}
    for path in _modeling_files(root):
        if path.parent.parent == root / PACKAGE and path.name != "__init__.py":  # the families' shipped files
            families.setdefault(path.parent, []).append(path)
    by_key: dict[str, list[Definition]] = {}
    for folder, paths in families.items():
        parsed = {path: _parse(path)[1] for path in paths}
        prefix = _family_prefix([name for found in parsed.values() for name in found])
        for path, found in parsed.items():
            for name, node in found.items():
                start = _first_line(node)
                # A definition inside a copy (or inside a source) is part of it: itself first, then outwards.
                around = [name.rsplit(".", cut)[0] for cut in range(name.count(".") + 1)]
                lines = [(path, _first_line(found[outer])) for outer in around]
                copied_from = next((marked[line] for line in lines if line in marked), None)
                is_source = any(_dotted(root, path, outer) in sources for outer in around)
                definition = Definition(
                    folder.name, path, start, name, copied_from, _dotted(root, path, name), is_source
                )
                by_key.setdefault(_neutral(name, prefix, roles), []).append(definition)
    return {key: found for key, found in by_key.items() if len({item.family for item in found}) >= 2}


def main(argv: list[str] | None = None) -> int:
    """The command line: report (exit 1 on any problem) or, with `--fix`, rewrite the copies."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix", action="store_true", help="rewrite every differing copy from its source")
    parser.add_argument("--root", type=Path, default=ROOT, help="the folder holding modeling/ (default: this repo)")
    args = parser.parse_args(argv)
    root = args.root.resolve()

    def shown(problem: Problem) -> Problem:  # paths from the root: shorter, and the same on every machine
        return replace(problem, path=problem.path.relative_to(root)) if problem.path.is_relative_to(root) else problem

    if args.fix:
        rewritten, problems = fix(root)
        for problem in rewritten:
            print(f"fixed {shown(problem)}")
    else:
        problems = check(root)
    for problem in problems:
        print(shown(problem))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
