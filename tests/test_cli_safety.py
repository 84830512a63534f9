"""The command line checks everything cheap before any encoding, never writes over an input, and reports every
failure as one line with its documented exit code."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from cli_fakes import GOLD, SOURCES, TARGETS, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_ERROR, EXIT_OK, EXIT_USAGE, main


@pytest.fixture
def fake_encoders(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.fixture
def files(tmp_path):
    paths = {
        "src": write_lines(tmp_path / "src.txt", SOURCES),
        "tgt": write_lines(tmp_path / "tgt.txt", TARGETS),
        "gold": write_lines(tmp_path / "gold.tsv", [f"{i}\t{j}" for i, j in sorted(GOLD)]),
        "src_docs": write_lines(tmp_path / "src.docs", ["d1"] * 5),
        "tgt_docs": write_lines(tmp_path / "tgt.docs", ["d1"] * 5),
        "pairs": write_lines(tmp_path / "pairs.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)]),
        "mteb": write_lines(
            tmp_path / "mteb.jsonl", [json.dumps({"sentence1": s, "sentence2": t}) for s, t in zip(SOURCES, TARGETS)]
        ),
        "npy": str(tmp_path / "src.npy"),
    }
    np.save(paths["npy"], np.eye(5, 16, dtype=np.float32))
    return paths


def _mine(f, *extra):
    return ("mine", "--src", f["src"], "--tgt", f["tgt"], *extra)


# Each case: the command line (with the output path inside) and the input it names as --out.
OUT_IS_INPUT = {
    "mine --src": lambda f: _mine(f, "--out", f["src"]),
    "mine --tgt": lambda f: _mine(f, "--out", f["tgt"]),
    "mine --gold": lambda f: _mine(f, "--gold", f["gold"], "--out", f["gold"]),
    "mine --src-docs": lambda f: _mine(
        f, "--src-docs", f["src_docs"], "--tgt-docs", f["tgt_docs"], "--out", f["src_docs"]
    ),
    "mine --src-text": lambda f: (
        "mine",
        "--src",
        f["npy"],
        "--src-text",
        f["src"],
        "--tgt",
        f["tgt"],
        "--out",
        f["src"],
    ),
    "encode --input": lambda f: ("encode", "--input", f["src"], "--out", f["src"]),
    "score --pairs": lambda f: ("score", "--pairs", f["pairs"], "--out", f["pairs"]),
    "score --src": lambda f: ("score", "--src", f["src"], "--tgt", f["tgt"], "--out", f["tgt"]),
    "eval --src": lambda f: ("eval", "--src", f["src"], "--tgt", f["tgt"], "--out", f["src"]),
    "eval --mteb": lambda f: ("eval", "--mteb", f["mteb"], "--out", f["mteb"]),
}


@pytest.mark.parametrize("case", OUT_IS_INPUT)
def test_out_naming_an_input_is_refused_before_any_work(capsys, files, fake_encoders, case):
    argv = OUT_IS_INPUT[case](files)
    victim = argv[argv.index("--out") + 1]
    with open(victim, "rb") as handle:
        before = handle.read()
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE and "input" in err and len(err.strip().splitlines()) == 1
    with open(victim, "rb") as handle:
        assert handle.read() == before and fake_encoders.loaded == []


def test_output_folder_is_checked_before_encoding(capsys, files, fake_encoders, tmp_path):
    code, _, err = run(capsys, *_mine(files, "--out", str(tmp_path / "missing" / "pairs.tsv")))
    assert code == EXIT_USAGE and "does not exist" in err and fake_encoders.loaded == []


@pytest.mark.parametrize(
    ("gold", "message"),
    [("0\t2\n1\tfour\n", "gold.tsv:2: expected"), ("0\t2\n9\t1\n", "gold.tsv:2: pair (9, 1) is out of range")],
)
def test_bad_gold_leaves_no_output_and_encodes_nothing(capsys, files, fake_encoders, tmp_path, gold, message):
    (tmp_path / "gold.tsv").write_text(gold)
    out = tmp_path / "mined.tsv"
    code, _, err = run(capsys, *_mine(files, "--gold", files["gold"], "--out", str(out)))
    assert code == EXIT_DATA and message in err
    assert not out.exists() and fake_encoders.loaded == []


def test_a_tab_in_a_sentence_with_tsv_output_is_refused_before_encoding(capsys, files, fake_encoders, tmp_path):
    write_lines(tmp_path / "tgt.txt", [*TARGETS[:3], "house|de\twith a tab", TARGETS[4]])
    out = tmp_path / "mined.tsv"
    code, _, err = run(capsys, *_mine(files, "--out", str(out)))
    assert code == EXIT_DATA and f"{files['tgt']}:4:" in err and "tab" in err
    assert not out.exists() and fake_encoders.loaded == []
    # The same sentences go to CSV, which quotes them.
    assert run(capsys, *_mine(files, "--out", str(tmp_path / "pairs.csv")))[0] == EXIT_OK


@pytest.mark.parametrize(
    "option",
    [
        ("--threshold", "nan"),
        ("--threshold", "inf"),
        ("--max-line-chars", "0"),
        ("--batch-size", "0"),
        ("--k", "0"),
        ("--show", "-2"),
    ],
)
def test_insane_options_are_usage_errors(capsys, files, fake_encoders, option):
    code, _, err = run(capsys, *_mine(files, *option), "--quiet")
    assert code == EXIT_USAGE and fake_encoders.loaded == []
    assert f"({option[0]}): must be" in err  # the config's refusal, as a Python caller gets it
    assert len(err.strip().splitlines()) == 1, err  # one line, not argparse's usage block


def test_only_one_input_can_be_stdin(capsys, fake_encoders):
    code, _, err = run(capsys, "mine", "--src", "-", "--tgt", "-")
    assert code == EXIT_USAGE and "stdin" in err


def _broken_encoder(error):
    def load(spec=None, **kwargs):
        raise error

    return load


def test_an_unexpected_error_is_one_line_with_exit_1(capsys, files, monkeypatch):
    monkeypatch.delenv("BITEXT_HF_DEBUG", raising=False)
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", _broken_encoder(RuntimeError("boom\nsecond line")))
    code, _, err = run(capsys, *_mine(files))
    assert code == EXIT_ERROR and len(err.strip().splitlines()) == 1
    assert err.startswith("bitext-hf mine: error: RuntimeError: boom second line")
    assert err.strip().endswith("(run with --debug for the traceback)")


def test_debug_flag_and_variable_show_the_traceback(capsys, files, monkeypatch):
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", _broken_encoder(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="boom"):
        main(["--debug", *_mine(files)])
    with pytest.raises(RuntimeError, match="boom"):
        main([*_mine(files), "--debug"])
    monkeypatch.setenv("BITEXT_HF_DEBUG", "1")
    with pytest.raises(RuntimeError, match="boom"):
        main(list(_mine(files)))


def test_interrupt_while_writing_exits_130_and_leaves_nothing(capsys, files, fake_encoders, tmp_path, monkeypatch):
    import csv

    class InterruptedWriter:
        def __init__(self, handle):
            self.handle = handle

        def writerow(self, row):
            self.handle.write(",".join(row) + "\n")

        def writerows(self, rows):
            raise KeyboardInterrupt

    monkeypatch.setattr(csv, "writer", InterruptedWriter)
    before = set(os.listdir(tmp_path))
    code, _, err = run(capsys, *_mine(files, "--out", str(tmp_path / "pairs.csv")))
    assert code == 130 and "interrupted" in err
    assert set(os.listdir(tmp_path)) == before


def test_every_help_says_the_exit_codes_and_explains_each_option(capsys):
    for command in ("encode", "mine", "score", "eval"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert "exit codes" in text and "130" in text and "  3  bad input data" in text, command
    with pytest.raises(SystemExit):
        main(["mine", "--help"])
    text = capsys.readouterr().out
    for option in ("--src-text", "--src-model", "--format", "--keep-duplicates", "--show", "--gold"):
        assert option in text


@pytest.mark.parametrize("out", ["", "{tmp}", "{tmp}/src.txt/pairs.tsv"])
def test_unusable_output_paths_are_usage_errors_before_encoding(capsys, files, fake_encoders, tmp_path, out):
    code, _, err = run(capsys, *_mine(files, "--out", out.format(tmp=tmp_path)))
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1 and fake_encoders.loaded == []


def test_a_model_folder_without_config_is_exit_4(capsys, files, tmp_path):
    (tmp_path / "model").mkdir()
    code, _, err = run(capsys, *_mine(files, "--model", str(tmp_path / "model")))
    assert code == EXIT_ENCODER and str(tmp_path / "model") in err and len(err.strip().splitlines()) == 1


def test_a_k_beyond_the_bound_is_refused_before_encoding(capsys, fake_encoders, tmp_path):
    from bitext_hf.mining import MAX_K

    lines = [f"sentence {i}" for i in range(MAX_K + 10)]
    src, tgt = write_lines(tmp_path / "a.txt", lines), write_lines(tmp_path / "b.txt", lines)
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--k", str(MAX_K + 5))
    assert (code == EXIT_USAGE and "--k" in err) or "k=" in err
    assert fake_encoders.loaded == []
    with pytest.raises(SystemExit):
        main(["mine", "--help"])
    assert f"at most {MAX_K}" in capsys.readouterr().out
