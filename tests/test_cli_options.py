"""The command line is generated from the jobs' configs: each option is declared once, on the config field it sets,
and a command given no option makes the config a Python user gets with no argument (the same defaults)."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest

from bitext_hf.alignment.config import AlignConfig
from bitext_hf.cli.arguments import config_from_arguments
from bitext_hf.cli.parser import build_parser
from bitext_hf.data.gettext_job import GettextConfig
from bitext_hf.encoding.job import EncodeConfig
from bitext_hf.evaluation.job import EvalConfig
from bitext_hf.hub.push import PushConfig
from bitext_hf.mining.config import MiningConfig
from bitext_hf.mining.scoring import ScoreConfig

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
    assert dataclasses.asdict(parsed) == dataclasses.asdict(made)


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
        "import sys; import bitext_hf.mining.config, bitext_hf.mining.scoring, bitext_hf.alignment.config, "
        "bitext_hf.encoding.job, bitext_hf.evaluation.job, bitext_hf.data.gettext_job, bitext_hf.hub.push; "
        "from bitext_hf.cli.parser import build_parser; build_parser(); "
        "print(sorted(name for name in ('torch', 'numba', 'faiss', 'transformers', 'matplotlib') if name in sys.modules))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
