"""The jobs ``bitext-hf score`` and ``bitext-hf eval`` run, as library calls: ``run_scoring(ScoreConfig)`` and
``run_evaluation(EvalConfig)`` write the same bytes as the commands and say what they did; ``run_mining`` writes the
threshold report itself; the configs refuse what the commands refuse, and import without torch."""

from __future__ import annotations

import json

import pytest
from cli_fakes import GOLD, SOURCES, TARGETS, FakeEncoders, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_OK
from bitext_hf.errors import UsageError
from bitext_hf.jobs import EvalConfig, MiningConfig, ScoreConfig, run_evaluation, run_mining, run_scoring

ALIGNED_TARGETS = [TARGETS[j] for _, j in sorted(GOLD)]  # line i is the translation of SOURCES[i]


@pytest.fixture
def parallel(tmp_path):
    return write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", ALIGNED_TARGETS)


def test_run_scoring_writes_the_commands_file_and_its_threshold_report(capsys, monkeypatch, tmp_path, parallel):
    install_fake_encoders(monkeypatch)
    src, tgt = parallel
    options = ["--src", src, "--tgt", tgt, "--threshold", "1.0", "--threshold-report", "--no-cache"]
    code, stdout, _ = run(capsys, "score", *options, "--out", str(tmp_path / "cli.tsv"))
    assert code == EXIT_OK
    config = ScoreConfig(
        src=src, tgt=tgt, out=str(tmp_path / "job.tsv"), threshold=1.0, threshold_report=True, no_cache=True
    )
    result = run_scoring(config)
    assert (tmp_path / "job.tsv").read_bytes() == (tmp_path / "cli.tsv").read_bytes()
    assert result.threshold_report_files == (tmp_path / "job.tsv.threshold.png", tmp_path / "job.tsv.threshold.md")
    assert (tmp_path / "job.tsv.threshold.png").read_bytes()[:4] == b"\x89PNG"
    assert "Just above (kept)" in (tmp_path / "job.tsv.threshold.md").read_text(encoding="utf-8")
    # What the command's report prints is in the result.
    assert len(result.candidates) == len(SOURCES) and result.k == 4 and result.filter_counts is None
    assert f"scored {len(SOURCES)} pairs (k=4, margin=ratio); wrote {len(result.pairs)} to" in stdout
    assert "score quantiles: 5% " in stdout and sorted(result.quantiles) == [0.05, 0.25, 0.5, 0.75, 0.95]
    assert (result.encoded, result.from_cache) == (2 * len(SOURCES), 0)


def test_run_evaluation_writes_the_commands_json(capsys, monkeypatch, tmp_path, parallel):
    install_fake_encoders(monkeypatch)
    src, tgt = parallel
    code, stdout, _ = run(
        capsys, "eval", "--src", src, "--tgt", tgt, "--no-cache", "--out", str(tmp_path / "cli.json")
    )
    assert code == EXIT_OK
    result = run_evaluation(EvalConfig(src=src, tgt=tgt, no_cache=True, out=str(tmp_path / "job.json")))
    assert (tmp_path / "job.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert result.path == str(tmp_path / "job.json") and result.to_json() == stdout.rstrip("\n")
    assert result.results["k"] == 4 and result.results["xsim"]["errors"] == 0
    assert json.loads(stdout) == result.results


def test_run_mining_writes_the_threshold_report(tmp_path, parallel):
    src, tgt = parallel
    out = tmp_path / "pairs.tsv"
    config = MiningConfig(src, tgt, out=str(out), threshold=1.0, threshold_report=True, no_cache=True)
    result = run_mining(config, load_encoder=FakeEncoders())
    figure, sample = out.with_name("pairs.tsv.threshold.png"), out.with_name("pairs.tsv.threshold.md")
    assert result.threshold_report_files == (figure, sample)
    assert figure.read_bytes()[:4] == b"\x89PNG"
    assert "Pairs just above and just below the threshold 1" in sample.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ScoreConfig(out="x.tsv"), "give --pairs FILE.tsv, or --src and --tgt"),
        (lambda: ScoreConfig(out="x.tsv", pairs="p.tsv", src="a"), "not both"),
        (lambda: ScoreConfig(out="x.tsv", pairs="p.tsv", src_lang="de"), "--src-lang acts only with --lid"),
        (
            lambda: ScoreConfig(out="x.tsv", pairs="p.tsv", margin="cosine"),
            r"margin='cosine' \(--margin\): must be one of",
        ),
        (lambda: EvalConfig(src="a", mteb="m.jsonl"), "give one of --pairs, --src/--tgt, --mteb or --bucc"),
        (lambda: EvalConfig(src="a", tgt="b", metrics=["accuracy"], k=3), "--k and --margin are xsim's"),
        (lambda: EvalConfig(src="a", tgt="b", mode="max"), "--mode picks the candidates of --bucc"),
        (lambda: EvalConfig(src="a"), "give --pairs FILE.tsv, or --src and --tgt"),
    ],
)
def test_the_configs_refuse_what_the_commands_refuse(make, message):
    with pytest.raises(UsageError, match=message):
        make()


def test_eval_config_resolves_k_margin_and_metrics():
    config = EvalConfig(src="a", tgt="b")
    assert (config.k, config.margin, config.metrics) == (4, "ratio", ["xsim", "accuracy", "mteb"])


def test_the_metadata_holds_the_command_lines_help():
    import dataclasses

    fields = {field.name: field for field in dataclasses.fields(ScoreConfig)}
    assert fields["margin"].metadata["choices"] == ("ratio", "distance", "absolute")
    assert fields["lid_min_prob"].metadata["metavar"] == "P"
    fields = {field.name: field for field in dataclasses.fields(EvalConfig)}
    assert fields["bucc"].metadata["metavar"] == ("SRC", "TGT", "GOLD")
    assert fields["metrics"].metadata["choices"] == ("xsim", "accuracy", "mteb")
