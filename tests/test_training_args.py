"""Tests for ``bitext_hf.training.parse_args``: YAML config, command-line overrides, clear errors."""

from __future__ import annotations

import dataclasses
import os
import sys

import pytest

from bitext_hf.training import ConfigFileError, parse_args, run_recipe


@dataclasses.dataclass
class ScriptArguments:
    """A recipe's own arguments, with one required field."""

    model_name_or_path: str
    languages: list[str] = dataclasses.field(default_factory=lambda: ["fr"])
    max_length: int = 100


@dataclasses.dataclass
class OptimArguments:
    """Stands in for TrainingArguments; validates like the real dataclasses do."""

    learning_rate: float = 1e-3
    use_bias: bool = False
    warmup_ratio: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1], got {self.warmup_ratio}")


def write_yaml(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_command_line_only():
    script, optim = parse_args(
        ScriptArguments, OptimArguments, args=["--model_name_or_path", "m", "--learning_rate", "0.5", "--use_bias"]
    )
    assert script == ScriptArguments(model_name_or_path="m")
    assert optim.learning_rate == 0.5 and optim.use_bias is True


def test_yaml_fills_required_and_is_typed(tmp_path):
    # PyYAML reads `3e-6` (no dot) as a string: it must still arrive as a float.
    config = write_yaml(
        tmp_path, "model_name_or_path: tiny\nlanguages: [de, es]\nlearning_rate: 3e-6\nuse_bias: true\n"
    )
    script, optim = parse_args(ScriptArguments, OptimArguments, args=["--config", config])
    assert script.model_name_or_path == "tiny"
    assert script.languages == ["de", "es"]
    assert script.max_length == 100
    assert optim.learning_rate == pytest.approx(3e-6) and isinstance(optim.learning_rate, float)
    assert optim.use_bias is True


@pytest.mark.parametrize("config_first", [True, False])
def test_command_line_overrides_yaml(tmp_path, config_first):
    config = write_yaml(tmp_path, "model_name_or_path: tiny\nmax_length: 50\nlearning_rate: 0.1\n")
    flags = ["--max_length", "7", "--languages", "wo", "fr"]
    args = ["--config", config, *flags] if config_first else [*flags, f"--config={config}"]
    script, optim = parse_args(ScriptArguments, OptimArguments, args=args)
    assert script.max_length == 7
    assert script.languages == ["wo", "fr"]
    assert script.model_name_or_path == "tiny"
    assert optim.learning_rate == pytest.approx(0.1)


def test_unknown_yaml_key_names_key_and_file(tmp_path):
    config = write_yaml(tmp_path, "model_name_or_path: tiny\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigFileError, match=r"learning_rat.*config\.yaml.*did you mean 'learning_rate'"):
        parse_args(ScriptArguments, OptimArguments, args=["--config", config])


@pytest.mark.parametrize(
    ("content", "message"),
    [("- a\n- b\n", "must hold a mapping"), ("a: [1,\n", "not valid YAML")],
)
def test_malformed_yaml(tmp_path, content, message):
    with pytest.raises(ConfigFileError, match=message):
        parse_args(ScriptArguments, args=["--config", write_yaml(tmp_path, content)])


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigFileError, match="does not exist"):
        parse_args(ScriptArguments, args=["--config", str(tmp_path / "nope.yaml")])


def test_empty_yaml_is_allowed(tmp_path):
    (script,) = parse_args(ScriptArguments, args=["--config", write_yaml(tmp_path, ""), "--model_name_or_path", "x"])
    assert script.model_name_or_path == "x"


def test_validation_runs_on_merged_values(tmp_path):
    config = write_yaml(tmp_path, "warmup_ratio: 2.0\n")
    with pytest.raises(ValueError, match="warmup_ratio"):
        parse_args(OptimArguments, args=["--config", config])
    # ... and the command line can repair a bad file value.
    (optim,) = parse_args(OptimArguments, args=["--config", config, "--warmup_ratio", "0.1"])
    assert optim.warmup_ratio == pytest.approx(0.1)


def test_missing_required_field_exits():
    with pytest.raises(SystemExit):
        parse_args(ScriptArguments, args=[])


def test_unknown_flag_is_rejected():
    with pytest.raises((SystemExit, ValueError)):
        parse_args(OptimArguments, args=["--no_such_flag", "1"])


def test_rejects_non_dataclass():
    with pytest.raises(TypeError, match="dataclass"):
        parse_args(dict, args=[])


def test_the_last_config_flag_wins_in_either_form(tmp_path):
    first = write_yaml(tmp_path, "model_name_or_path: first\n")
    second = tmp_path / "second.yaml"
    second.write_text("model_name_or_path: second\n", encoding="utf-8")
    (script,) = parse_args(ScriptArguments, args=[f"--config={first}", "--config", str(second)])
    assert script.model_name_or_path == "second"
    (script,) = parse_args(ScriptArguments, args=["--config", str(second), f"--config={first}"])
    assert script.model_name_or_path == "first"


def test_a_stray_args_file_beside_the_script_is_ignored(tmp_path, monkeypatch):
    # transformers' parser would read <script>.args and prepend its flags to the command line.
    (tmp_path / "recipe.args").write_text("--model_name_or_path from_args_file --max_length 3\n", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "recipe.py")])
    (script,) = parse_args(ScriptArguments, args=["--model_name_or_path", "m"])
    assert script == ScriptArguments(model_name_or_path="m")


def test_env_mapping_sets_environment_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("BITEXT_HF_TEST_VARIABLE", "before")  # restored after the test
    config = write_yaml(tmp_path, "model_name_or_path: tiny\nenv:\n  BITEXT_HF_TEST_VARIABLE: 7\n")
    (script,) = parse_args(ScriptArguments, args=["--config", config])
    assert script.model_name_or_path == "tiny"
    assert os.environ["BITEXT_HF_TEST_VARIABLE"] == "7"


def test_env_that_is_not_a_mapping_names_the_file(tmp_path):
    config = write_yaml(tmp_path, "env: [A, B]\n")
    with pytest.raises(ConfigFileError, match=r"config\.yaml.*env must map"):
        parse_args(ScriptArguments, args=["--config", config, "--model_name_or_path", "m"])


def test_python_tags_are_refused_not_run(tmp_path):
    config = write_yaml(tmp_path, "model_name_or_path: !!python/object/apply:os.getcwd []\n")
    with pytest.raises(ConfigFileError, match=r"config\.yaml.*not valid YAML"):
        parse_args(ScriptArguments, args=["--config", config])


def test_config_errors_exit_2_in_one_line(tmp_path, capsys):
    missing = str(tmp_path / "nope.yaml")
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(lambda script: None, ScriptArguments, args=["--config", missing])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "nope.yaml" in lines[0] and "does not exist" in lines[0], lines


def test_help_lists_the_config_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(ScriptArguments, args=["--help"])
    assert exit_info.value.code == 0
    assert "--config CONFIG" in capsys.readouterr().out
