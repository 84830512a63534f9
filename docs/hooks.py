"""mkdocs hooks of the documentation site (``hooks:`` in mkdocs.yml): what the pages show that must not drift from the
code or from the READMEs beside it is filled in when the site is built.

Three markers, each alone on a line of a page under docs/:

- ``<!-- help: COMMAND -->`` becomes the full ``bitext-hf COMMAND --help`` output, made by the real argparse parser
  (:func:`bitext_hf.cli.parser.build_parser`) at a fixed width, so a page can never show an option the command lacks.
- ``<!-- include: PATH -->`` becomes the text of the repository file PATH (benchmarks/README.md, experiments/README.md,
  recipes/README.md: single-sourced, not copied). Its relative links are rewritten for the page: the three READMEs
  become their pages, the figures and cards beside them are published with the site (:func:`on_files`), and any other
  repository file becomes a link to it in the repository. Text of the page before the marker goes right after the
  included file's title.
- ``<!-- api: PACKAGE -->`` becomes mkdocstrings directives for the package's public names (its ``__all__``): the
  package's docstring, then each name from the module that defines it. Packages whose names are imported on first
  access (PEP 562, :mod:`bitext_hf.lazy_imports`) are invisible to static analysis, so their name -> submodule map is
  read here.

tests/test_docs.py uses :func:`command_help` to check what the pages are built from.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import posixpath
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPO_URL = "https://github.com/bitext-hf/bitext-hf"
HELP_COLUMNS = 110

MARKER = re.compile(r"^<!-- (help|include|api): (.+?) -->[ \t]*$", re.MULTILINE)
LINK = re.compile(r"(!?\[[^\]]*\])\(([^)\s]+)\)")

# Repository files published as pages of their own (the READMEs) or as they are (figures, cards), at these site paths.
INCLUDED_PAGES = {
    "benchmarks/README.md": "benchmarks/index.md",
    "experiments/README.md": "experiments/index.md",
    "recipes/README.md": "recipes/index.md",
}
ASSET_FOLDERS = ("benchmarks/figures", "experiments/cards", "recipes/figures")


def command_help(command: str, columns: int = HELP_COLUMNS) -> str:
    """``bitext-hf COMMAND --help`` as the parser prints it at ``columns`` characters (COMMAND may be ``data gettext``;
    ``bitext-hf`` or an empty COMMAND is the top-level help)."""
    from bitext_hf.cli.parser import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    output = io.StringIO()
    try:
        with contextlib.redirect_stdout(output), contextlib.suppress(SystemExit):
            words = [] if command.strip() in ("", "bitext-hf") else shlex.split(command)
            build_parser().parse_args([*words, "--help"])
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    return output.getvalue().rstrip() + "\n"


def _help_block(command: str) -> str:
    shown = "bitext-hf --help" if command == "bitext-hf" else f"bitext-hf {command} --help"
    return f"```text\n$ {shown}\n{command_help(command)}```\n"


def _site_path(repo_path: str) -> str | None:
    """Where the repository file ``repo_path`` is published on the site, or None."""
    if repo_path in INCLUDED_PAGES:
        return INCLUDED_PAGES[repo_path]
    if any(repo_path.startswith(f"{folder}/") for folder in ASSET_FOLDERS):
        return repo_path
    return None


def _rewrite_links(text: str, included: str, page: str) -> str:
    """The links of ``included`` (a repository path) as seen from the site page ``page`` (its src path)."""
    source_folder = posixpath.dirname(included)
    page_folder = posixpath.dirname(page)

    def rewrite(match: re.Match) -> str:
        label, target = match.groups()
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repo_path = posixpath.normpath(posixpath.join(source_folder, path))
        if repo_path.startswith("../"):
            return match.group(0)
        site = _site_path(repo_path)
        if site is None:
            new = f"{REPO_URL}/blob/main/{repo_path}"
        else:
            new = posixpath.relpath(site, page_folder or ".")
        return f"{label}({new}{'#' + anchor if anchor else ''})"

    return LINK.sub(rewrite, text)


def _include(path: str, page: str, before: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    text = _rewrite_links(text, path, page)
    if before.strip() and text.startswith("# "):
        title, _, rest = text.partition("\n")
        return f"{title}\n\n{before.strip()}\n\n{rest.lstrip()}"
    return f"{before}{text}"


def public_names(package: str) -> list[tuple[str, str]]:
    """``[(name, dotted path to document), ...]`` for the ``__all__`` of ``package``: the path through the package for
    names it imports itself (static analysis follows those), through the defining module for names it imports on first
    access (PEP 562: its name -> submodule map says which)."""
    module = importlib.import_module(package)
    mapping = getattr(module, "_SUBMODULE_OF", None) or getattr(module, "_MODULES", None) or {}
    names = []
    for name in module.__all__:
        where = mapping.get(name)
        if where is None:
            names.append((name, f"{package}.{name}"))
        else:
            names.append((name, f"{where if '.' in where else f'{package}.{where}'}.{name}"))
    return names


def _api_block(package: str) -> str:
    blocks = [f"::: {package}\n    options:\n      members: false\n"]
    for _name, path in public_names(package):
        options = ["heading_level: 3", "show_root_full_path: false"]
        blocks.append(f"::: {path}\n    options:\n" + "".join(f"      {option}\n" for option in options))
    return "\n".join(blocks)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace every marker of the page (see the module docstring)."""
    page_path = page.file.src_uri
    parts: list[str] = []
    position = 0
    for match in MARKER.finditer(markdown):
        kind, argument = match.group(1), match.group(2).strip()
        before = markdown[position : match.start()]
        if kind == "include":
            parts.append(_include(argument, page_path, before))
        else:
            parts.append(before)
            parts.append(_help_block(argument) if kind == "help" else _api_block(argument))
        position = match.end()
    parts.append(markdown[position:])
    return "".join(parts)


def on_files(files, config):
    """Publish the figures and cards the included READMEs link to, at their repository paths."""
    from mkdocs.structure.files import File

    for folder in ASSET_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file():
                src_uri = path.relative_to(ROOT).as_posix()
                files.append(File.generated(config, src_uri, abs_src_path=str(path), inclusion=_not_in_nav()))
    return files


def _not_in_nav():
    from mkdocs.structure.files import InclusionLevel

    return InclusionLevel.NOT_IN_NAV
