"""What the command line prints besides its results: its own lines and its speed by
default, the libraries' logs (faiss's loader, transformers' load report) only with ``-v``, nothing extra with
``-q``."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from cli_fakes import install_fake_encoders, write_lines

from bitext_hf.cli import EXIT_OK, main
from bitext_hf.io.logs import library_logs, settle_imported_libraries

LIBRARY_LINES = ("faiss.loader", "LOAD REPORT", "Token indices", "Loading weights")


@pytest.fixture(scope="module")
def tiny_mlm_folder(tmp_path_factory):
    """A BERT saved with its MLM head: loaded as an encoder, its head is unused and its pooler missing (what makes
    transformers print its load report); 16 positions, so a long sentence is truncated."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    path = tmp_path_factory.mktemp("tiny-bert-mlm")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "short", "one", "text", "here"]
    (path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(words),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    BertForMaskedLM(config).eval().save_pretrained(path)
    BertTokenizer(vocab_file=str(path / "vocab.txt"), model_max_length=16).save_pretrained(path)
    return path


def _mine(tmp_path, model, *flags: str) -> subprocess.CompletedProcess:
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("a short text\none text here\n" + "one text " * 12 + "\nhere one\n", encoding="utf-8")
    tgt.write_text("short a text\nhere text one\none here\ntext a\n", encoding="utf-8")
    command = [sys.executable, "-m", "bitext_hf.cli", *flags, "mine", "--src", str(src), "--tgt", str(tgt)]
    command += ["--model", str(model), "--index", "Flat", "--no-cache", "--out", str(tmp_path / "pairs.tsv")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for variable in ("TRANSFORMERS_VERBOSITY", "DATASETS_VERBOSITY", "CI"):  # the libraries' defaults, as a user's
        env.pop(variable, None)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.slow
def test_library_logs_are_hidden_by_default_and_shown_with_verbose(tmp_path, tiny_mlm_folder):
    # The two commands run side by side, each in a folder of its own: each spends its time importing, on one core.
    (tmp_path / "quiet").mkdir()
    (tmp_path / "verbose").mkdir()
    with ThreadPoolExecutor(2) as pool:
        quiet_run = pool.submit(_mine, tmp_path / "quiet", tiny_mlm_folder)
        verbose_run = pool.submit(_mine, tmp_path / "verbose", tiny_mlm_folder, "-v")
        quiet, verbose = quiet_run.result(), verbose_run.result()
    assert quiet.returncode == EXIT_OK, quiet.stderr
    assert not [line for line in LIBRARY_LINES if line in quiet.stderr], quiet.stderr
    # The command's own lines stay: its progress, the truncation said once, the index, the speed.
    assert "1 of 4 sentences exceed 16 tokens and are truncated" in quiet.stderr
    assert "index Flat" in quiet.stderr and "mine: 8 sentences (4 source + 4 target; 8 encoded) in " in quiet.stderr

    assert verbose.returncode == EXIT_OK, verbose.stderr
    assert "faiss.loader" in verbose.stderr and "LOAD REPORT" in verbose.stderr, verbose.stderr
    # The results do not depend on the logs (the summary names each run's own output file).
    assert verbose.stdout.replace(str(tmp_path / "verbose"), str(tmp_path / "quiet")) == quiet.stdout
    pairs = (tmp_path / "quiet" / "pairs.tsv").read_text(encoding="utf-8")
    assert pairs and (tmp_path / "verbose" / "pairs.tsv").read_text(encoding="utf-8") == pairs


def test_a_missing_weight_the_embeddings_use_is_one_warning(tiny_mlm_folder, tmp_path, caplog):
    from safetensors.torch import load_file, save_file

    from bitext_hf.encoders import HFEncoder

    folder = tmp_path / "cut"
    folder.mkdir()
    for item in tiny_mlm_folder.iterdir():
        (folder / item.name).write_bytes(item.read_bytes())
    weights = load_file(folder / "model.safetensors")
    cut = {name: tensor for name, tensor in weights.items() if "layer.0.output.dense" not in name}
    save_file(cut, folder / "model.safetensors", metadata={"format": "pt"})

    def ours() -> list[logging.LogRecord]:
        return [record for record in caplog.records if record.name == "bitext_hf.encoders"]

    with caplog.at_level(logging.WARNING, logger="bitext_hf.encoders"):
        HFEncoder(str(tiny_mlm_folder))
    assert not ours()  # an unused head and the unused pooler are not worth a line
    with caplog.at_level(logging.WARNING, logger="bitext_hf.encoders"):
        HFEncoder(str(folder))
    [record] = ours()
    assert "2 weights are not in the checkpoint and start at random" in record.getMessage()
    assert "encoder.layer.0.output.dense.bias" in record.getMessage()


@pytest.fixture
def embeddings(tmp_path):
    rows = np.random.default_rng(0).standard_normal((2, 6, 8)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=-1, keepdims=True)
    np.save(tmp_path / "src.npy", rows[0])
    np.save(tmp_path / "tgt.npy", rows[1])
    return str(tmp_path / "src.npy"), str(tmp_path / "tgt.npy")


def test_mine_reports_its_speed_on_stderr_unless_quiet(embeddings, tmp_path, capsys):
    src, tgt = embeddings
    argv = ["mine", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "pairs.tsv"), "--show", "0"]
    assert main(argv) == EXIT_OK
    out, err = capsys.readouterr()
    [speed] = [line for line in err.splitlines() if line.startswith("mine: ")]
    # Embeddings given: nothing encoded, and no rate that would count them as if they were.
    assert speed.startswith("mine: 12 sentences (6 source + 6 target) in ") and speed.endswith("; nothing encoded")
    assert all(f"{part} " in speed for part in ("read", "encode", "search", "write"))
    assert "mine: " not in out and out.splitlines()[-1].startswith("mined ")  # the report keeps its format

    assert main([*argv, "-q"]) == EXIT_OK
    out_quiet, err_quiet = capsys.readouterr()
    assert "mine: " not in err_quiet and out_quiet == out


def test_mine_rate_counts_only_what_was_encoded(tmp_path, capsys, monkeypatch):
    install_fake_encoders(monkeypatch)
    src = write_lines(tmp_path / "src.txt", ["cat|en", "dog|en", "tree|en"])
    tgt = write_lines(tmp_path / "tgt.txt", ["chat|fr", "chien|fr", "arbre|fr"])
    argv = ["mine", "--src", src, "--tgt", tgt, "--show", "0", "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == EXIT_OK
    [first] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mine: ")]
    assert "(3 source + 3 target; 6 encoded) in " in first and first.endswith(" sentences/s")
    assert main(argv) == EXIT_OK  # the same sentences again: both sides from the cache
    [again] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mine: ")]
    assert "(3 source + 3 target; 6 from the cache) in " in again and again.endswith("; nothing encoded")


def test_encode_reports_its_speed(tmp_path, capsys, monkeypatch):
    install_fake_encoders(monkeypatch)
    text = write_lines(tmp_path / "in.txt", ["cat|en", "dog|en", "tree|en"])
    assert main(["encode", "--input", text, "--out", str(tmp_path / "out.npy"), "--no-cache"]) == EXIT_OK
    assert "encode: 3 sentences in " in capsys.readouterr().err


def test_library_logs_set_the_libraries_and_restore_the_environment(monkeypatch):
    from transformers.utils import logging as transformers_logging

    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    monkeypatch.setenv("DATASETS_VERBOSITY", "debug")  # the user's own choice
    before, faiss_level = transformers_logging.get_verbosity(), logging.getLogger("faiss").level
    try:
        with library_logs(verbose=False):
            assert transformers_logging.get_verbosity() == logging.ERROR
            assert not transformers_logging.is_progress_bar_enabled()
            assert logging.getLogger("faiss").level == logging.WARNING
            assert os.environ["DATASETS_VERBOSITY"] == "debug"  # kept
        assert "TRANSFORMERS_VERBOSITY" not in os.environ and os.environ["DATASETS_VERBOSITY"] == "debug"
        assert logging.getLogger("faiss").level == faiss_level
        with library_logs(verbose=True):
            assert transformers_logging.get_verbosity() == logging.INFO
            assert logging.getLogger("faiss").level == logging.INFO
        # Outside an entry point nothing is changed: a Python user keeps the libraries' settings.
        transformers_logging.set_verbosity(logging.WARNING)
        settle_imported_libraries()
        assert transformers_logging.get_verbosity() == logging.WARNING
    finally:
        transformers_logging.set_verbosity(before)
        transformers_logging.enable_progress_bar()
