"""The mining job as a library function: ``run_mining(MiningConfig(...))`` is what ``bitext-hf mine`` runs, the
config checks its options when made (one actionable line each), and the sidecar record comes from the dataclass."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import math
import shlex
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import GOLD, SOURCES, TARGETS, FakeEncoders, fake_embedding, install_fake_encoders, run, write_lines

import bitext_hf.cli
from bitext_hf.cli import EXIT_OK
from bitext_hf.cli.parser import build_parser
from bitext_hf.data.pair_files import MiningRecord
from bitext_hf.errors import UsageError
from bitext_hf.hub.dataset_card import METADATA_KEYS, metadata_path, read_sidecar, write_mining_metadata
from bitext_hf.jobs import MiningConfig, run_mining


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative paths: the sidecar names the inputs as given
    write_lines(tmp_path / "src.txt", [*SOURCES, SOURCES[0]])  # a duplicate line: mined once, at its first line
    write_lines(tmp_path / "tgt.txt", TARGETS)
    write_lines(tmp_path / "src.docs", ["a", "a", "b", "b", "b", "a"])
    write_lines(tmp_path / "tgt.docs", ["b", "b", "a", "b", "a"])
    write_lines(tmp_path / "gold.tsv", [f"{i}\t{j}" for i, j in sorted(GOLD)])
    return tmp_path


@pytest.mark.parametrize(
    ("out", "options"),
    [
        ("pairs.tsv", {}),
        ("pairs.jsonl", {"threshold": 1.0, "mode": "intersect", "k": 2}),
        ("pairs.csv", {"margin": "distance", "keep_duplicates": True, "gold": "gold.tsv"}),
        ("pairs.parquet", {"src_docs": "src.docs", "tgt_docs": "tgt.docs", "mode": "union"}),
    ],
)
def test_the_python_job_writes_the_files_of_the_command_line_byte_for_byte(capsys, corpus, monkeypatch, out, options):
    install_fake_encoders(monkeypatch)
    argv = ["mine", "--src", "src.txt", "--tgt", "tgt.txt", "--out", f"cli-{out}", "--no-cache"]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    code, stdout, err = run(capsys, *argv)
    assert code == EXIT_OK, err

    encoders = FakeEncoders()  # injected, not monkeypatched: the Python job takes any loader
    config = MiningConfig(
        "src.txt",
        "tgt.txt",
        out=out,
        no_cache=True,
        quiet=True,
        command=shlex.join(["bitext-hf", *argv, "--quiet"]),
        **options,
    )
    result = run_mining(config, load_encoder=encoders)
    assert encoders.loaded == [None]  # one encoder, and each distinct sentence encoded once (unless kept)
    assert encoders.n_encoded == (11 if options.get("keep_duplicates") else 10)
    for cli_file, python_file in ((f"cli-{out}", out), (metadata_path(f"cli-{out}"), metadata_path(out))):
        assert Path(python_file).read_bytes() == Path(cli_file).read_bytes(), python_file
    assert f"wrote {len(result.pairs)} pairs to cli-{out}" in stdout
    assert f"mined {len(result.pairs)} pairs from {result.src_sentences} source x" in stdout
    if "gold" in options:
        assert str(result.gold) in stdout and result.gold.gold_pairs == len(GOLD)
    else:
        assert result.gold is None and "gold pairs" not in stdout


def test_without_out_the_job_writes_nothing_and_returns_the_pairs(corpus):
    before = sorted(path.name for path in corpus.iterdir())
    result = run_mining(MiningConfig.demo(no_cache=True, quiet=True), load_encoder=FakeEncoders())
    assert sorted(path.name for path in corpus.iterdir()) == before
    # The fake encoder knows no German: the gold pairs are read and counted, not found.
    assert len(result.pairs) > 0 and result.gold is not None and result.gold.gold_pairs == 120
    assert result.src_texts[int(result.pairs.src_indices[0])]  # the sentences of the pairs come with them


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"src": None}, "give --src and --tgt (text or .npy files), or --demo"),
        ({"tgt": ""}, "give --src and --tgt (text or .npy files), or --demo"),
        ({"src_docs": "src.docs"}, "document-level mining needs both --src-docs and --tgt-docs"),
        ({"src": "src.npy", "src_model": "student"}, "--src-model has nothing to encode: --src holds embeddings"),
        ({"distributed": "ray", "index": "auto", "check_recall": 100}, "--check-recall searches in one process"),
        ({"distributed": "ray", "src_docs": "a", "tgt_docs": "b"}, "--distributed ray mines whole corpora"),
        ({"workers": 2}, "--ray-address and --workers go with --distributed ray"),
        ({"ray_address": "auto"}, "--ray-address and --workers go with --distributed ray"),
        ({"margin": "cosine"}, "margin='cosine' (--margin): must be one of ratio, distance, absolute"),
        ({"mode": "best"}, "mode='best' (--mode): must be one of forward, backward, intersect, union, max"),
        ({"threshold": math.nan}, "threshold=nan (--threshold): must be a finite number"),
        ({"threshold": "1.05"}, "threshold='1.05' (--threshold): must be a finite number"),
        ({"k": 0}, "k=0 (--k): must be an integer >= 1"),
        ({"k": True}, "k=True (--k): must be an integer >= 1"),
        ({"batch_size": 0}, "batch_size=0 (--batch-size): must be an integer >= 1"),
        ({"max_line_chars": -5}, "max_line_chars=-5 (--max-line-chars): must be an integer >= 1"),
        ({"nprobe": 2.5}, "nprobe=2.5 (--nprobe): must be an integer >= 1"),
        ({"check_recall": 0}, "check_recall=0 (--check-recall): must be an integer >= 1"),
        ({"format": "xlsx"}, "format='xlsx' (--format): must be one of tsv, csv, jsonl, parquet"),
        ({"pooling": "avg"}, "pooling='avg' (--pooling): must be one of mean, max, cls"),
        ({"distributed": "dask"}, "distributed='dask' (--distributed): must be one of ray"),
        ({"index": 1024}, "index=1024 (--index): must be a string"),
    ],
)
def test_a_bad_option_is_one_actionable_usage_error_when_the_config_is_made(tmp_path, options, message):
    # The files do not exist: a bad option is refused before anything is read.
    fields = {"src": str(tmp_path / "missing.en"), "tgt": str(tmp_path / "missing.de"), **options}
    with pytest.raises(UsageError) as raised:
        MiningConfig(**fields)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_the_defaults_are_the_command_lines():
    defaults = MiningConfig("a.txt", "b.txt")
    args = build_parser().parse_args(["mine"])
    shared = [field.name for field in dataclasses.fields(MiningConfig) if hasattr(args, field.name)]
    assert len(shared) >= 28  # every option of the job is a field (args.command is the sub-command)
    differing = {
        name: (getattr(args, name), getattr(defaults, name))
        for name in shared
        if name not in ("src", "tgt", "command") and getattr(args, name) != getattr(defaults, name)
    }
    # --mode is unset on the command line (None means the default mode) and --no-cache / --quiet are flags.
    assert differing == {"mode": (None, "max")}


def test_the_sidecar_record_comes_from_the_config_and_round_trips(corpus):
    config = MiningConfig(
        "src.txt",
        "tgt.txt",
        out="pairs.tsv",
        k=3,
        threshold=1.02,
        src_model="student",
        tgt_model="teacher",
        src_lang="en",
        tgt_lang="de",
        quantize="none",  # the fakes compute in float32; "auto" would name bfloat16 on a CPU that has it
        no_cache=True,
        quiet=True,
        command="bitext-hf mine ...",
    )
    result = run_mining(config, load_encoder=FakeEncoders())
    expected = {
        "src_model": "student",
        "tgt_model": "teacher",
        "margin": "ratio",
        "mode": "max",
        "k": 3,
        "threshold": 1.02,
        "index": "exact",
        "src": "src.txt",
        "tgt": "tgt.txt",
        "src_lang": "en",
        "tgt_lang": "de",
        "src_sentences": 5,
        "tgt_sentences": 5,
        "command": "bitext-hf mine ...",
    }
    assert read_sidecar(metadata_path("pairs.tsv")) == expected  # as push reads it
    assert {key: value for key, value in dataclasses.asdict(result.record).items() if value is not None} == expected
    # The keys are the record's fields, in the order they are written; a dict and the record give the same bytes.
    assert tuple(field.name for field in dataclasses.fields(MiningRecord)) == METADATA_KEYS
    assert list(expected) == [key for key in METADATA_KEYS if key in expected]
    # Written from Python beside pairs of one's own: the same bytes as the job's.
    assert write_mining_metadata("again.tsv", expected).read_text("utf-8") == result.record.to_json()
    assert metadata_path("pairs.tsv").read_text("utf-8") == result.record.to_json()
    with pytest.raises(ValueError, match="unknown mining metadata keys"):
        write_mining_metadata("typo.tsv", {"margn": "ratio"})
    assert not metadata_path("typo.tsv").exists()


def test_the_runs_use_the_filters_their_config_checked(corpus, monkeypatch):
    import bitext_hf.jobs.options as options
    from bitext_hf.jobs import ScoreConfig, run_scoring

    mining = MiningConfig("src.txt", "tgt.txt", out="pairs.tsv", dedup=True, no_cache=True, quiet=True)
    scoring = ScoreConfig(
        src="src.txt", tgt="src.txt", out="scored.tsv", dedup=True, classifier="none", no_cache=True, quiet=True
    )

    class Again(options.FilterSettings):
        def __post_init__(self) -> None:
            pytest.fail("the filters were built again")

    monkeypatch.setattr(options, "FilterSettings", Again)
    assert run_mining(mining, load_encoder=FakeEncoders()).filter_counts["duplicates_src"] == 1
    assert run_scoring(scoring, load_encoder=FakeEncoders()).filter_counts["duplicate_pairs"] == 1


def test_the_sidecar_text_is_the_format_push_reads():
    record = MiningRecord(encoder="use-multilingual-v3", margin="ratio", k=4, threshold=None, src="en\udcff.txt")
    assert record.to_json() == (
        '{\n  "encoder": "use-multilingual-v3",\n  "margin": "ratio",\n  "k": 4,\n  "src": "en\\\\xff.txt"\n}\n'
    )


def test_npy_embeddings_are_validated_once(capsys, corpus, monkeypatch):
    from bitext_hf.data import embeddings

    np.save(corpus / "src.npy", np.stack([fake_embedding(s) for s in SOURCES]))
    np.save(corpus / "tgt.npy", np.stack([fake_embedding(t) for t in TARGETS]))
    validated = []
    real_row_norms = embeddings.row_norms
    monkeypatch.setattr(embeddings, "row_norms", lambda array: validated.append(array.shape) or real_row_norms(array))
    code, _, err = run(capsys, "mine", "--src", "src.npy", "--tgt", "tgt.npy", "--out", "pairs.tsv")
    assert code == EXIT_OK, err
    assert validated == [(5, 16), (5, 16)]  # once per side, when read; the search trusts them


def test_the_mine_command_is_a_thin_caller_of_the_library():
    from bitext_hf.cli.commands import cmd_mine

    assert len(inspect.getsource(cmd_mine).splitlines()) < 60
    private = []
    for path in Path(bitext_hf.cli.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bitext_hf.mining"):
                private += [f"{path.name}: {alias.name}" for alias in node.names if alias.name.startswith("_")]
    assert private == []
