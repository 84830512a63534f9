"""The command line is generated from the jobs' configs: each option is declared once, on the config field it sets,
and a command given no option makes the config a Python user gets with no argument (the same defaults)."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest

from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.cli.parser import build_parser
from bitext_hf.jobs.align import AlignConfig
from bitext_hf.jobs.encode import EncodeConfig
from bitext_hf.jobs.evaluate import EvalConfig
from bitext_hf.jobs.gettext import GettextConfig
from bitext_hf.jobs.mine import MiningConfig
from bitext_hf.jobs.push import PushConfig
from bitext_hf.jobs.score import ScoreConfig

# Each command, its config, and what it must be given (the fields a config cannot do without).
COMMANDS = {
    ("encode",): (EncodeConfig, ["--input", "in.txt", "--out", "out.npy"]),
    ("mine",): (MiningConfig, ["--src", "a.txt", "--tgt", "b.txt"]),
    ("align",): (AlignConfig, ["--src", "a.txt", "--tgt", "b.txt"]),
    ("score",): (ScoreConfig, ["--pairs", "pairs.tsv", "--out", "scored.tsv"]),
    ("eval",): (EvalConfig, ["--src", "a.txt", "--tgt", "b.txt"]),
    ("data", "gettext"): (GettextConfig, ["--list"]),
    ("push",): (PushConfig, ["--model", "runs/x", "--repo", "me/x"]),
}
# The options that are the command line's own, not a job's: every command's general options, and those that shape
# what the command prints or bound what it reads.
COMMAND_LINE_OPTIONS = {"help", "quiet", "verbose", "debug", "threads", "demo", "show", "max_input_bytes"}


def _sub_parser(names: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("names", list(COMMANDS), ids=" ".join)
def test_every_option_is_a_field_of_the_config_or_the_command_lines_own(names):
    config, _ = COMMANDS[names]
    options = {action.dest for action in _sub_parser(names)._actions} - {"data_command"}
    declared = {field.name for field in dataclasses.fields(config) if "help" in field.metadata}
    assert options - COMMAND_LINE_OPTIONS == declared


@pytest.mark.parametrize("names", list(COMMANDS), ids=" ".join)
def test_a_command_without_options_makes_the_config_of_python_defaults(names):
    config, required = COMMANDS[names]
    arguments = build_parser().parse_args([*names, *required])
    given = {}
    for flag, value in zip(required[::2], required[1::2]):
        given[flag[2:].replace("-", "_")] = value
    if names == ("data", "gettext"):
        given = {"list": True}
    parsed = config_from_arguments(config, arguments)
    made = config(**given)
    # The command line's own record of itself (what the sidecar shows), which a Python caller gives or leaves out.
    # Parsed outside ``main`` (which alone knows what was typed), it records nothing, never pytest's own argv.
    recorded = dataclasses.asdict(parsed).pop("command", None)
    assert recorded is None
    assert {**dataclasses.asdict(parsed), "command": None} == {**dataclasses.asdict(made), "command": None}


def test_an_option_given_reaches_its_field():
    arguments = build_parser().parse_args(
        ["mine", "--src", "a", "--tgt", "b", "--k", "7", "--lid-min-prob", "0.5", "--lid", "--src-lang", "en"]
    )
    config = config_from_arguments(MiningConfig, arguments)
    assert (config.k, config.lid_min_prob, config.lid, config.src_lang) == (7, 0.5, True, "en")
    arguments = build_parser().parse_args(["align", "--src", "a", "--tgt", "b", "--no-length-prior", "--margin"])
    config = config_from_arguments(AlignConfig, arguments)
    assert (config.length_prior, config.margin) == (False, True)


def test_help_and_the_configs_import_no_torch():
    code = (
        "import sys; import bitext_hf.jobs.mine, bitext_hf.jobs.score, bitext_hf.jobs.align, "
        "bitext_hf.jobs.encode, bitext_hf.jobs.evaluate, bitext_hf.jobs.gettext, bitext_hf.jobs.push; "
        "from bitext_hf.cli.parser import build_parser; build_parser(); "
        "print(sorted(name for name in ('torch', 'numba', 'faiss', 'transformers', 'matplotlib') if name in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"


def _every_parser(parser: argparse.ArgumentParser, names: tuple[str, ...] = ()):
    yield names, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _every_parser(sub, (*names, name))


def _stated_defaults() -> list[tuple[str, str, object, str]]:
    """(command, option, its parser default, the default its help states) for every option whose help states a
    number or one of its choices as its default, and every flag whose help says it is off or on by default."""
    import re

    stated = []
    for names, parser in _every_parser(build_parser()):
        for action in parser._actions:
            if not action.help or action.default in (None, argparse.SUPPRESS):
                continue
            # The choices as --help shows them ({a,b}); the config checks them, so the parser holds them as metavar.
            shown = action.metavar if isinstance(action.metavar, str) and action.metavar.startswith("{") else "{}"
            choices = action.choices or shown[1:-1].split(",")
            for value in re.findall(r"\bdefault:? (-?[0-9][0-9.]*|[a-z0-9]+)\b", action.help):
                if re.fullmatch(r"-?[0-9][0-9.]*", value) or value in choices:
                    stated.append((" ".join(names), action.option_strings[-1], action.default, value))
            if re.search(r"\b(off|on) by default\b", action.help):
                flag = re.search(r"\b(off|on) by default\b", action.help).group(1) == "on"
                stated.append((" ".join(names), action.option_strings[-1], action.default, flag))
    return stated


@pytest.mark.parametrize(("command", "option", "default", "stated"), _stated_defaults())
def test_the_help_states_the_true_default(command, option, default, stated):
    if isinstance(stated, bool):
        assert default is stated
    elif isinstance(default, int | float) and not isinstance(default, bool):
        assert float(stated) == float(default)
    else:
        assert str(default) == stated


def test_the_help_states_defaults_that_are_checked():
    """The table above is not empty by accident: the options users tune most state their defaults."""
    checked = {(command, option) for command, option, _, _ in _stated_defaults()}
    assert {("mine", "--k"), ("align", "--top-k"), ("align", "--margin"), ("align", "--skip")} <= checked
    assert ("encode", "--dtype") in checked  # a default among the choices
