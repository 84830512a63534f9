"""Every job's config checks its fields when it is made (``bitext_hf.jobs.option_fields.check_fields``): a wrong type or an
absurd value from Python is one ``UsageError`` naming the field and its option, before any file is read, and the
command line gives the same value the same refusal (exit 2, one line), since it makes the same config."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pytest

import bitext_hf.jobs.option_fields
from bitext_hf.cli import EXIT_USAGE, main
from bitext_hf.errors import UsageError
from bitext_hf.jobs.align import AlignConfig
from bitext_hf.jobs.encode import EncodeConfig
from bitext_hf.jobs.evaluate import EvalConfig
from bitext_hf.jobs.gettext import GettextConfig
from bitext_hf.jobs.mine import MiningConfig
from bitext_hf.jobs.option_fields import check_fields, field_rules, option
from bitext_hf.jobs.push import PushConfig
from bitext_hf.jobs.score import ScoreConfig

# Inputs and outputs that do not exist: a refusal that came after anything was read would be another error.
MISSING = "/nonexistent/bitext-hf-config-checks"

# Each config with the fields it cannot do without, and its command with the same.
CONFIGS = {
    EncodeConfig: (dict(input=f"{MISSING}/in.txt", out=f"{MISSING}/out.npy"), ["encode"]),
    MiningConfig: (dict(src=f"{MISSING}/a.txt", tgt=f"{MISSING}/b.txt"), ["mine"]),
    ScoreConfig: (dict(pairs=f"{MISSING}/pairs.tsv", out=f"{MISSING}/scored.tsv"), ["score"]),
    AlignConfig: (dict(src=f"{MISSING}/a.txt", tgt=f"{MISSING}/b.txt"), ["align"]),
    EvalConfig: (dict(src=f"{MISSING}/a.txt", tgt=f"{MISSING}/b.txt"), ["eval"]),
    GettextConfig: (dict(lang=["fr"], out=f"{MISSING}/pairs.tsv"), ["data", "gettext"]),
    PushConfig: (dict(model=f"{MISSING}/model", repo="me/model"), ["push"]),
}


def _command_line(config: type, given: dict) -> list[str]:
    """The command of ``config`` given ``given`` as its options (every value a string or a list of strings)."""
    argv = list(CONFIGS[config][1])
    for name, value in given.items():
        argv.append("--" + name.replace("_", "-"))
        argv.extend(value if isinstance(value, list) else [value])
    return argv


def _make(config: type, **values):
    return config(**{**CONFIGS[config][0], **values})


def _refusal(config: type, **values) -> str:
    with pytest.raises(UsageError) as raised:
        _make(config, **values)
    return str(raised.value)


@pytest.fixture(autouse=True, scope="module")
def _nothing_there():
    assert not os.path.exists(MISSING)


# (config, the field's value from Python, the message): wrong types and absurd values.
PYTHON_CASES = [
    (EncodeConfig, dict(dtype="int8"), "dtype='int8' (--dtype): must be one of float32, float16"),
    (EncodeConfig, dict(shard_size=0), "shard_size=0 (--shard-size): must be an integer >= 1"),
    (EncodeConfig, dict(resume="yes"), "resume='yes' (--resume): must be True or False"),
    (EncodeConfig, dict(input=None), "input=None (--input): must be a string"),
    (EncodeConfig, dict(workers=0), "workers=0 (--workers): must be an integer >= 1"),
    (EvalConfig, dict(metrics=[]), "metrics=[] (--metrics): give at least one of xsim, accuracy, mteb"),
    (EvalConfig, dict(metrics=["bleu"]), "metrics=['bleu'] (--metrics): each must be one of xsim, accuracy, mteb"),
    (EvalConfig, dict(metrics="xsim"), "metrics='xsim' (--metrics): give a list, metrics=['xsim'], not one string"),
    (EvalConfig, dict(k=0), "k=0 (--k): must be an integer >= 1"),
    (EvalConfig, dict(bucc=["a", "b"]), "bucc=['a', 'b'] (--bucc): must be a list of 3 strings"),
    (
        EvalConfig,
        dict(mteb="m.jsonl", src=None, tgt=None, columns=("a", "a")),
        "columns=('a', 'a') (--columns): must be two different column names, A,B",
    ),
    (
        EvalConfig,
        dict(mteb="m.jsonl", src=None, tgt=None, columns="a,b"),
        "columns='a,b' (--columns): give a list of 2 strings, not one string",
    ),
    (
        PushConfig,
        dict(include="x*.txt"),
        "include='x*.txt' (--include): give a list, include=['x*.txt'], not one string",
    ),
    (PushConfig, dict(exclude=["ok", 3]), "exclude=['ok', 3] (--exclude): must be a list of strings"),
    (PushConfig, dict(dry_run=1), "dry_run=1 (--dry-run): must be True or False"),
    (
        PushConfig,
        dict(model=None, pairs="p.tsv", languages="en"),
        "languages='en' (--languages): give a list of 2 strings, not one string",
    ),
    (MiningConfig, dict(k="4"), "k='4' (--k): must be an integer >= 1"),
    (MiningConfig, dict(k=2.5), "k=2.5 (--k): must be an integer >= 1"),
    (MiningConfig, dict(k=True), "k=True (--k): must be an integer >= 1"),
    (MiningConfig, dict(k=None), "k=None (--k): must be an integer >= 1"),
    (MiningConfig, dict(threshold=math.nan), "threshold=nan (--threshold): must be a finite number"),
    (MiningConfig, dict(threshold=-math.inf), "threshold=-inf (--threshold): must be a finite number"),
    (MiningConfig, dict(threshold=True), "threshold=True (--threshold): must be a finite number"),
    (MiningConfig, dict(batch_size=0), "batch_size=0 (--batch-size): must be an integer >= 1"),
    (MiningConfig, dict(max_line_chars=-1), "max_line_chars=-1 (--max-line-chars): must be an integer >= 1"),
    (MiningConfig, dict(threads=0), "threads=0 (--threads): must be an integer >= 1"),
    (MiningConfig, dict(quiet="no"), "quiet='no' (-q): must be True or False"),
    (MiningConfig, dict(nprobe=np.int64(0)), "nprobe=np.int64(0) (--nprobe): must be an integer >= 1"),
    (MiningConfig, dict(check_recall=-3), "check_recall=-3 (--check-recall): must be an integer >= 1"),
    (MiningConfig, dict(lid_min_prob=1.5), "lid_min_prob=1.5 (--lid-min-prob): must be a probability in (0, 1]"),
    (MiningConfig, dict(min_chars=-1), "min_chars=-1 (--min-chars): must be a number >= 0"),
    (
        MiningConfig,
        dict(max_length_ratio=math.nan),
        "max_length_ratio=nan (--max-length-ratio): must be a number >= 1",
    ),
    (MiningConfig, dict(max_length_ratio=0.5), "max_length_ratio=0.5 (--max-length-ratio): must be a number >= 1"),
    (MiningConfig, dict(command=["bitext-hf"]), "command=['bitext-hf']: must be a string"),
    (ScoreConfig, dict(margin="cosine"), "margin='cosine' (--margin): must be one of ratio, distance, absolute"),
    (ScoreConfig, dict(lid="yes"), "lid='yes' (--lid): must be True or False"),
    (AlignConfig, dict(max_align=65), "max_align=65 (--max-align): must be an integer from 2 to 64"),
    (AlignConfig, dict(skip=math.inf), "skip=inf (--skip): must be a finite number"),
    (AlignConfig, dict(length_prior="no"), "length_prior='no' (--no-length-prior): must be True or False"),
    (AlignConfig, dict(anchor_window=0), "anchor_window=0: must be an integer >= 1"),
    (AlignConfig, dict(window=-1), "window=-1 (--window): must be an integer >= 1"),
    (MiningConfig, dict(max_chars="50"), "max_chars='50' (--max-chars): must be a number >= 0"),
    (GettextConfig, dict(lang="fr"), "lang='fr' (--lang): give a list, lang=['fr'], not one string"),
    (GettextConfig, dict(lang=["fr", 3]), "lang=['fr', 3] (--lang): must be a list of strings"),
    (
        GettextConfig,
        dict(lang=["../fr"]),
        "lang=['../fr'] (--lang): each must be a language folder name such as fr, pt_BR or sr@latin (never a path)",
    ),
    (
        GettextConfig,
        dict(catalogs="locale"),
        "catalogs='locale' (--catalogs): give a list, catalogs=['locale'], not one string",
    ),
    (GettextConfig, dict(min_words=0), "min_words=0 (--min-words): must be an integer >= 1"),
    (GettextConfig, dict(max_pairs=1.0), "max_pairs=1.0 (--max-pairs): must be an integer >= 1"),
]


@pytest.mark.parametrize(("config", "values", "message"), PYTHON_CASES, ids=lambda case: str(case)[:40])
def test_a_wrong_value_from_python_is_one_usage_error_naming_the_field(config, values, message):
    assert _refusal(config, **values) == message


# (config, the option as the command line gives it, the same value from Python, the message both give).
COMMAND_LINE_CASES = [
    (MiningConfig, dict(k="0"), dict(k=0), "k=0 (--k): must be an integer >= 1"),
    (
        MiningConfig,
        dict(threshold="nan"),
        dict(threshold=math.nan),
        "threshold=nan (--threshold): must be a finite number",
    ),
    (MiningConfig, dict(batch_size="0"), dict(batch_size=0), "batch_size=0 (--batch-size): must be an integer >= 1"),
    (
        MiningConfig,
        dict(max_line_chars="-1"),
        dict(max_line_chars=-1),
        "max_line_chars=-1 (--max-line-chars): must be an integer >= 1",
    ),
    (
        MiningConfig,
        dict(lid_min_prob="0"),
        dict(lid_min_prob=0.0),
        "lid_min_prob=0.0 (--lid-min-prob): must be a probability in (0, 1]",
    ),
    (MiningConfig, dict(min_chars="-2"), dict(min_chars=-2.0), "min_chars=-2.0 (--min-chars): must be a number >= 0"),
    (
        MiningConfig,
        dict(max_length_ratio="0.5"),
        dict(max_length_ratio=0.5),
        "max_length_ratio=0.5 (--max-length-ratio): must be a number >= 1",
    ),
    (
        MiningConfig,
        dict(mode="best"),
        dict(mode="best"),
        "mode='best' (--mode): must be one of forward, backward, intersect, union, max",
    ),
    (MiningConfig, dict(nprobe="0"), dict(nprobe=0), "nprobe=0 (--nprobe): must be an integer >= 1"),
    (MiningConfig, dict(threads="0"), dict(threads=0), "threads=0 (--threads): must be an integer >= 1"),
    (EncodeConfig, dict(dtype="int8"), dict(dtype="int8"), "dtype='int8' (--dtype): must be one of float32, float16"),
    (EncodeConfig, dict(shard_size="0"), dict(shard_size=0), "shard_size=0 (--shard-size): must be an integer >= 1"),
    (
        EncodeConfig,
        dict(quantize="fp16"),
        dict(quantize="fp16"),
        "quantize='fp16' (--quantize): must be one of auto, none, bf16, int8",
    ),
    (
        ScoreConfig,
        dict(threshold="inf"),
        dict(threshold=math.inf),
        "threshold=inf (--threshold): must be a finite number",
    ),
    (ScoreConfig, dict(k="0"), dict(k=0), "k=0 (--k): must be an integer >= 1"),
    (
        AlignConfig,
        dict(max_align="1"),
        dict(max_align=1),
        "max_align=1 (--max-align): must be an integer from 2 to 64",
    ),
    (AlignConfig, dict(skip="nan"), dict(skip=math.nan), "skip=nan (--skip): must be a finite number"),
    (AlignConfig, dict(window="0"), dict(window=0), "window=0 (--window): must be an integer >= 1"),
    (
        AlignConfig,
        dict(format="xml"),
        dict(format="xml"),
        "format='xml' (--format): must be one of vecalign, tsv, jsonl, parquet, tmx",
    ),
    (
        EvalConfig,
        dict(metrics=["xsim", "bleu"]),
        dict(metrics=["xsim", "bleu"]),
        "metrics=['xsim', 'bleu'] (--metrics): each must be one of xsim, accuracy, mteb",
    ),
    (
        EvalConfig,
        dict(mteb="m.jsonl", columns="a,a"),
        dict(src=None, tgt=None, mteb="m.jsonl", columns=("a", "a")),
        "columns=('a', 'a') (--columns): must be two different column names, A,B",
    ),
    (
        GettextConfig,
        dict(lang=["fr", "../de"]),
        dict(lang=["fr", "../de"]),
        "lang=['fr', '../de'] (--lang): each must be a language folder name such as fr, pt_BR or sr@latin (never a "
        "path)",
    ),
    (GettextConfig, dict(max_pairs="0"), dict(max_pairs=0), "max_pairs=0 (--max-pairs): must be an integer >= 1"),
]


@pytest.mark.parametrize(("config", "typed", "values", "message"), COMMAND_LINE_CASES, ids=lambda case: str(case)[:40])
def test_the_command_line_gives_the_configs_refusal(capsys, config, typed, values, message):
    assert _refusal(config, **values) == message
    argv = _command_line(config, {**_as_options(CONFIGS[config][0], typed), **typed})
    assert main(argv) == EXIT_USAGE
    assert capsys.readouterr().err == f"bitext-hf {argv[0]}: error: {message}\n"


def _as_options(required: dict, typed: dict) -> dict:
    """The required fields as the command line gives them (those the case replaces, such as --src for --mteb, left
    out)."""
    replaced = {"src", "tgt"} if "mteb" in typed else set()
    return {name: value for name, value in required.items() if name not in replaced}


def test_the_command_lines_own_options_are_checked_the_same_way(capsys):
    argv = [*_command_line(MiningConfig, CONFIGS[MiningConfig][0]), "--show", "-2"]
    assert main(argv) == EXIT_USAGE
    assert capsys.readouterr().err == "bitext-hf mine: error: show=-2 (--show): must be an integer >= -1 (-1: all)\n"
    assert main(["--threads", "-1", *_command_line(EncodeConfig, CONFIGS[EncodeConfig][0])]) == EXIT_USAGE
    assert capsys.readouterr().err == "bitext-hf encode: error: threads=-1 (--threads): must be an integer >= 1\n"


@pytest.mark.parametrize(
    ("option", "text", "name"),
    [("--k", "abc", "integer"), ("--threshold", "high", "number"), ("--threads", "2.5", "integer")],
)
def test_text_that_is_no_value_stays_the_parsers_one_line_error(capsys, option, text, name):
    with pytest.raises(SystemExit) as raised:
        main([*_command_line(MiningConfig, CONFIGS[MiningConfig][0]), option, text])
    err = capsys.readouterr().err
    assert raised.value.code == EXIT_USAGE and f"argument {option}: invalid {name} value: '{text}'" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("config", list(CONFIGS), ids=lambda config: config.__name__)
def test_every_field_of_every_config_is_checked(config):
    """A value of no type a field could take is refused by name, for every field ``__init__`` takes: a field the
    checker skipped, or a config that does not call it first, fails here."""
    names = [field.name for field in dataclasses.fields(config) if field.init]
    assert [rule.name for rule in field_rules(config)] == names
    for name in names:
        message = _refusal(config, **{name: object()})
        assert message.startswith(f"{name}=<object object at "), message


@pytest.mark.parametrize("config", list(CONFIGS), ids=lambda config: config.__name__)
def test_a_config_checks_each_field_once(monkeypatch, config):
    """Each config checks its fields once when made, whatever its bases (a config may make its filters' settings,
    another object, checked on its own)."""
    checked: list[type] = []
    rules = bitext_hf.jobs.option_fields.field_rules

    def counting(cls):
        checked.append(cls)
        return rules(cls)

    monkeypatch.setattr(bitext_hf.jobs.option_fields, "field_rules", counting)
    _make(config)
    assert checked.count(config) == 1


def test_a_field_the_checker_does_not_understand_is_a_programming_error():
    @dataclasses.dataclass
    class Weights:
        weights: dict[str, float] = dataclasses.field(default_factory=dict, metadata=option("weights"))

        def __post_init__(self) -> None:
            check_fields(self)

    with pytest.raises(TypeError, match="cannot check field 'weights'"):
        Weights()

    @dataclasses.dataclass
    class Parsed:
        count: int = dataclasses.field(default=1, metadata=option("a count", type=int))

        def __post_init__(self) -> None:
            check_fields(self)

    with pytest.raises(TypeError, match=r"must be a bitext_hf\.jobs\.option_fields\.ValueType"):
        Parsed()


def test_values_of_the_right_kind_are_kept_as_the_fields_type():
    """numpy's numbers are Python's, a path is its str, a tuple of patterns a list: what the command line makes."""
    config = _make(
        MiningConfig, src=Path(f"{MISSING}/a.txt"), k=np.int64(3), threshold=np.float32(1.5), min_chars=np.int32(2)
    )
    assert (config.src, config.k, config.threshold, config.min_chars) == (f"{MISSING}/a.txt", 3, 1.5, 2)
    assert (type(config.k), type(config.threshold), type(config.min_chars)) == (int, float, int)
    push = _make(PushConfig, include=("*.md",), exclude=[Path("logs")])
    assert (push.include, push.exclude) == (["*.md"], ["logs"])
    evaluation = _make(EvalConfig, src=None, tgt=None, mteb="m.jsonl", columns=["a", "b"])
    assert evaluation.columns == ("a", "b")
    assert _make(ScoreConfig, threshold=1).threshold == 1  # an int is a number


def test_the_jobs_options_declare_the_engines_settings_with_the_same_defaults():
    """The engines' settings know no command line; the jobs declare their options once, with the same names and
    defaults, and hand them over: a field added to one side only would never reach the other."""
    from bitext_hf.alignment.settings import AlignSettings
    from bitext_hf.jobs.align import AlignSearchOptions
    from bitext_hf.jobs.options import FilterOptions
    from bitext_hf.mining.filters import FilterSettings

    for options, settings in ((AlignSearchOptions, AlignSettings), (FilterOptions, FilterSettings)):
        declared = {field.name: field.default for field in dataclasses.fields(options)}
        engine = {field.name: field.default for field in dataclasses.fields(settings)}
        assert declared == engine, (options.__name__, settings.__name__)


@pytest.mark.parametrize("config", [MiningConfig, ScoreConfig], ids=lambda config: config.__name__)
def test_the_filters_are_built_and_checked_once_when_the_config_is_made(monkeypatch, config):
    """FilterOptions.filters: the engine's settings, made and checked with the config, then kept (every later read is
    the same object); a filter option changed since is built and checked again."""
    import bitext_hf.jobs.options as options

    built = []

    class Counted(options.FilterSettings):
        def __post_init__(self) -> None:
            built.append(self)
            super().__post_init__()

    monkeypatch.setattr(options, "FilterSettings", Counted)
    made = _make(config, min_chars=2, dedup=True)
    assert len(built) == 1 and made.filters is made.filters and len(built) == 1
    assert (made.filters.min_chars, made.filters.dedup, made.filters.max_chars) == (2, True, None)
    made.max_chars = 1
    with pytest.raises(UsageError, match="--min-chars 2 is above --max-chars 1"):
        _ = made.filters
    made.max_chars = 50
    assert made.filters.max_chars == 50 and len(built) == 3
    # What is kept is no field: not an option, not in the config's repr or equality.
    assert made == _make(config, min_chars=2, dedup=True, max_chars=50) and "_filters" not in repr(made)


@pytest.mark.parametrize("config", [EncodeConfig, MiningConfig], ids=lambda config: config.__name__)
@pytest.mark.parametrize("ray", [dict(workers=2), dict(ray_address="auto")], ids=["workers", "ray_address"])
def test_the_ray_options_without_distributed_are_refused_when_the_config_is_made(config, ray):
    """RayOptions.check_ray_options, in every job that takes them: refused when made, not when run."""
    assert _refusal(config, **ray) == "--ray-address and --workers go with --distributed ray"
    assert _make(config, distributed="ray", **ray).distributed == "ray"
