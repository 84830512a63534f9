"""Every example of the README and of the documentation site (docs/) runs, and the site builds without a warning.

Each fenced ``bash``, ``console`` or ``python`` block of README.md and docs/**/*.md is one test, named by its page and
line, run in a fresh folder holding the files the pages use (the demo's sentences as ``corpus.en`` / ``corpus.de``,
``gold.tsv``, ``corpus.tsv``, ``test.en`` / ``test.de``, ``book.en`` / ``book.de``, and ``my-model/``, a tiny random
model, where a block names it), offline, with an encoding cache of its own. A ``console`` block is a session:
each ``$ command`` runs in turn and what it prints on stdout must be the lines below it (``[...]`` stands for any
text within a line, or for any lines when alone on one). A marker on the line before a block says how to treat it:

- ``<!-- docs-test: skip (REASON) -->``: not run here (an install, an upload, a GPU, a training run...); the reason
  is required;
- ``<!-- docs-test: slow -->``: it loads the encoder, or takes longer (every block runs under ``pytest -m slow``: each
  is a subprocess of its own, which the default set leaves to CI's slow run);
- ``<!-- docs-test: output of: COMMAND -->`` (or ``slow output of: COMMAND``) before a ``json`` or ``text`` block: the
  block is what COMMAND prints (JSON compared as data).

The default set checks the pages (markers, every option a block uses, the README's demo line against the page that
runs it); the slow set runs every block.
Blocks in other languages (``text``, ``json``...) are output shown to the reader and not run. The options each
``bitext-hf`` command line of a block uses must exist in that command's ``--help``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "bitext_hf" / "demo"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN = ("bash", "console", "python")
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"^<!-- docs-test: (.*?) -->$")
SKIP = re.compile(r"^skip \((.+)\)$")
OUTPUT_OF = re.compile(r"^(slow )?output of: (.+)$")
SUBCOMMANDS = ("encode", "mine", "align", "score", "eval", "push", "data gettext", "app")
DEFAULT_TIMEOUT, SLOW_TIMEOUT = 300, 1800


def _hooks():
    """docs/hooks.py, the mkdocs hooks (their ``command_help`` makes the --help the pages show)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # of the opening fence
    language: str
    code: str
    marker: str | None  # the docs-test marker on the line before, if any

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def slow(self) -> bool:
        return self.marker is not None and self.marker.startswith("slow")

    @property
    def skip_reason(self) -> str | None:
        match = SKIP.match(self.marker or "")
        return match.group(1).strip() if match else None

    @property
    def output_of(self) -> str | None:
        match = OUTPUT_OF.match(self.marker or "")
        return match.group(2).strip() if match else None


def collect_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marker = MARKER.match(before)
            blocks.append(
                Block(
                    page=page.relative_to(ROOT).as_posix(),
                    line=text.count("\n", 0, match.start()) + 1,
                    language=match.group(1),
                    code=match.group(2),
                    marker=marker.group(1).strip() if marker else None,
                )
            )
    return blocks


BLOCKS = collect_blocks()


def _params(select) -> list:
    params = []
    for block in BLOCKS:
        if not select(block):
            continue
        # Every block runs in a subprocess of its own: the slow set (CI runs it) holds them all; the default set keeps
        # the checks of the pages themselves (markers, options, the site's help) below.
        marks = [pytest.mark.slow]
        if block.skip_reason:
            marks.append(pytest.mark.skip(reason=f"docs-test: {block.skip_reason}"))
        params.append(pytest.param(block, id=block.id, marks=marks))
    return params


# ---------------------------------------------------------------------------------------------------------------
# the folder a block runs in


def prepare_workspace(folder: Path) -> None:
    """The files the pages' examples use, made from the bundled demo."""
    english = (DEMO / "en.txt").read_text(encoding="utf-8").splitlines()
    german = (DEMO / "de.txt").read_text(encoding="utf-8").splitlines()
    gold = [tuple(map(int, line.split("\t"))) for line in (DEMO / "gold.tsv").read_text().splitlines()[1:]]
    pairs = [(english[i], german[j]) for i, j in gold]
    shutil.copy(DEMO / "en.txt", folder / "corpus.en")
    shutil.copy(DEMO / "de.txt", folder / "corpus.de")
    shutil.copy(DEMO / "gold.tsv", folder / "gold.tsv")

    def write(name: str, lines) -> None:
        (folder / name).write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")

    write("corpus.tsv", (f"{en}\t{de}" for en, de in pairs))
    write("test.en", (en for en, _ in pairs[:60]))
    write("test.de", (de for _, de in pairs[:60]))
    write("book.en", (en for en, _ in pairs[60:90]))
    write("book.de", (de for _, de in pairs[60:90]))


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory) -> Path:
    """One encoding cache for the whole run: a text the examples share is encoded once."""
    return tmp_path_factory.mktemp("docs-embedding-cache")


@pytest.fixture
def workspace(tmp_path, shared_cache, request) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "work"
    folder.mkdir()
    prepare_workspace(folder)
    block = request.node.callspec.params.get("block")
    if block is not None and "my-model" in block.code:
        shutil.copytree(request.getfixturevalue("tiny_model_dir"), folder / "my-model")
    env = {key: value for key, value in os.environ.items() if not key.startswith("BITEXT_HF_DEBUG")}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        BITEXT_HF_EMBEDDING_CACHE=str(shared_cache),
        NO_MKDOCS_2_WARNING="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return folder, env


def _run(argv: list[str], folder: Path, env: dict[str, str], block: Block) -> subprocess.CompletedProcess:
    return subprocess.run(
        argv,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=SLOW_TIMEOUT if block.slow else DEFAULT_TIMEOUT,
    )


def _report(block: Block, what: str, done: subprocess.CompletedProcess) -> str:
    return f"{block.id}: {what} exited {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"


def console_session(code: str) -> list[tuple[str, list[str]]]:
    """``[(command, expected stdout lines), ...]`` of a console block."""
    session: list[tuple[str, list[str]]] = []
    for line in code.splitlines():
        if line.startswith("$ "):
            session.append((line[2:], []))
        elif session:
            session[-1][1].append(line.rstrip())
        elif line.strip():
            raise AssertionError(f"a console block must start with '$ ': {line!r}")
    return session


def matches(expected: list[str], actual: str) -> bool:
    """Whether stdout ``actual`` is the ``expected`` lines, ``[...]`` standing for any text (any lines when alone)."""
    pattern = ""
    for line in expected:
        if line.strip() == "[...]":
            pattern += r"(?:[^\n]*\n)*?"
        else:
            pattern += ".*".join(re.escape(part) for part in line.split("[...]")) + r"[ \t]*\n"
    lines = "".join(f"{line.rstrip()}\n" for line in actual.splitlines())
    return re.fullmatch(pattern, lines) is not None


# ---------------------------------------------------------------------------------------------------------------
# the blocks


@pytest.mark.parametrize("block", _params(lambda block: block.language in RUN))
def test_example_runs(block: Block, workspace) -> None:
    folder, env = workspace
    if block.language == "bash":
        done = _run(["bash", "-euo", "pipefail", "-c", block.code], folder, env, block)
        assert done.returncode == 0, _report(block, "the block", done)
    elif block.language == "python":
        done = _run([sys.executable, "-c", block.code], folder, env, block)
        assert done.returncode == 0, _report(block, "the block", done)
    else:
        for command, expected in console_session(block.code):
            done = _run(["bash", "-o", "pipefail", "-c", command], folder, env, block)
            assert done.returncode == 0, _report(block, f"$ {command}", done)
            assert matches(expected, done.stdout), (
                f"{block.id}: $ {command} printed\n{done.stdout}\nwhere the page shows\n" + "\n".join(expected)
            )


@pytest.mark.parametrize("block", _params(lambda block: block.output_of is not None))
def test_shown_output_is_what_the_command_prints(block: Block, workspace) -> None:
    folder, env = workspace
    done = _run(["bash", "-o", "pipefail", "-c", block.output_of], folder, env, block)
    assert done.returncode == 0, _report(block, block.output_of, done)
    if block.language == "json":
        assert json.loads(done.stdout) == json.loads(block.code), (
            f"{block.id}: {block.output_of} printed {done.stdout}"
        )
    else:
        assert matches(block.code.splitlines(), done.stdout), f"{block.id}: {block.output_of} printed {done.stdout}"


def test_every_marker_is_known_and_every_skip_says_why() -> None:
    for block in BLOCKS:
        if block.marker is None:
            continue
        assert block.marker == "slow" or block.skip_reason or block.output_of, f"{block.id}: marker {block.marker!r}"
        if block.marker.startswith("skip"):
            assert block.skip_reason and len(block.skip_reason) > 10, f"{block.id}: a skip needs a reason"
        if block.output_of:
            assert block.language in ("json", "text"), f"{block.id}: output of a {block.language} block"
    counted = [block for block in BLOCKS if block.language in RUN]
    assert len(counted) > 40 and any(block.page == "README.md" for block in counted)


def _bitext_hf_lines(block: Block) -> list[str]:
    lines = []
    for line in block.code.replace("\\\n", " ").splitlines():
        line = line[2:] if line.startswith("$ ") else line
        for part in re.split(r"\|\||&&|\||;", line.split(" #")[0]):
            if part.strip().startswith("bitext-hf "):
                lines.append(part.strip())
    return lines


def test_every_option_shown_exists() -> None:
    """A ``bitext-hf`` command line in a block uses only options its command's --help lists."""
    hooks = _hooks()
    helps = {command: hooks.command_help(command) for command in (*SUBCOMMANDS, "bitext-hf")}
    checked = 0
    for block in BLOCKS:
        if block.language not in RUN:
            continue
        for line in _bitext_hf_lines(block):
            words = shlex.split(line)[1:]
            while words and words[0] in ("-q", "-v", "--quiet", "--verbose", "--debug", "--threads"):
                words = words[2:] if words[0] == "--threads" else words[1:]  # before the command, as after it
            command = next((c for c in SUBCOMMANDS if words[: len(c.split())] == c.split()), None)
            help_text = helps[command or "bitext-hf"]
            for word in words:
                if word.startswith("--"):
                    option = word.split("=")[0]
                    assert re.search(rf"{re.escape(option)}\b", help_text), f"{block.id}: {line}: no {option}"
                    checked += 1
    assert checked > 50


def test_every_command_page_shows_its_help() -> None:
    hooks = _hooks()
    for command in SUBCOMMANDS:
        page = ROOT / "docs" / "commands" / f"{command.replace(' ', '-')}.md"
        assert f"<!-- help: {command} -->" in page.read_text(encoding="utf-8"), page
        assert hooks.command_help(command).startswith(f"usage: bitext-hf {command} ")


def test_readme_quotes_the_demo_as_the_docs_check_it() -> None:
    """The README's demo line is the one the getting-started page's demo session asserts (run above)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"`(precision [\d.]+  recall [\d.]+  F1 [\d.]+)`", readme).group(1)
    demo = next(b for b in BLOCKS if b.page == "docs/getting-started.md" and "--demo" in b.code)
    assert demo.language == "console" and not demo.marker
    assert any(line.endswith(quoted) for line in demo.code.splitlines())


@pytest.mark.slow  # a whole site build (CI also builds it in .ci/run's docs step)
def test_the_site_builds_without_warnings(tmp_path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "WARNING" not in output, output[-6000:]
    assert (tmp_path / "site" / "commands" / "align" / "index.html").is_file()
