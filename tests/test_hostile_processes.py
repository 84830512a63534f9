"""Hostile situations that need a second process, each with a timeout so that a regression fails instead of
hanging: signals at several points of ``mine``, ``encode`` and a recipe's training, concurrent runs on one output
and one shard folder, a full disk (a tmpfs, as root), a FIFO among a folder's shards, a recipe YAML tag. The same
promises as the table of tests/test_hostile.py: the documented exit code, one line without a traceback, inputs
untouched, no partial output, nothing executed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from hostile_support import MARKER, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

# The slow set (`python -m pytest -m slow`, which CI also runs): signals, kills and concurrent runs against real subprocesses.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

# The CLI with the fake encoder in a fresh interpreter; each encoder call sleeps, so signals land mid-run.
_SLOW_CLI = """
import os, sys, time
sys.path.insert(0, sys.argv.pop(1))
delay = float(sys.argv.pop(1))
import numpy as np
import bitext_hf.encoders
from cli_fakes import fake_embedding
from bitext_hf.cli import main

class Slow:
    def encode(self, sentences, batch_size=64, show_progress=False):
        open(os.environ["SLOW_CLI_ENCODING"], "a").close()  # the test's sign that encoding has started
        time.sleep(delay)
        return np.stack([fake_embedding(s) for s in sentences])

bitext_hf.encoders.load_encoder = lambda spec=None, **kwargs: Slow()
sys.exit(main(sys.argv[1:]))
"""
_TESTS = os.path.dirname(os.path.abspath(__file__))
_MANY = [f"{word}-{i}|en" for i in range(40) for word in ("cat", "dog")]


def _slow_cli(*argv: str, delay: float = 0.0, **kwargs) -> subprocess.Popen:
    cache = kwargs.pop("cache")
    env = {**os.environ, "BITEXT_HF_EMBEDDING_CACHE": cache, "SLOW_CLI_ENCODING": f"{cache}.encoding"}
    command = [sys.executable, "-c", _SLOW_CLI, _TESTS, str(delay), *argv, "--quiet"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs)


def _wait_for(condition: Callable[[], bool], process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None and not condition():
        time.sleep(0.02)
    assert process.poll() is None, f"the run ended before the signal: {process.communicate()}"


@pytest.mark.parametrize(
    ("point", "signum", "status"),
    [
        ("mine, while encoding", 2, EXIT_INTERRUPTED),
        ("mine, while encoding", 15, -15),
        ("encode to shards, after the first shard", 2, EXIT_INTERRUPTED),
        ("encode to shards, after the first shard", 15, -15),
        ("encode to one .npy, while encoding", 2, EXIT_INTERRUPTED),
    ],
)
def test_a_signal_leaves_inputs_and_no_partial_output(tmp_path, point, signum, status):
    src = write_lines(tmp_path / "src.txt", _MANY)
    tgt = write_lines(tmp_path / "tgt.txt", [s.replace("|en", "|de") for s in _MANY])
    cache = str(tmp_path / "cache")
    encoding = lambda: os.path.exists(f"{cache}.encoding")  # noqa: E731
    if point.startswith("mine"):
        argv, outputs = ["mine", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "p.tsv"), "--batch-size", "8"], ()
        ready = encoding
        delay = 0.5
    elif point.startswith("encode to shards"):
        folder = tmp_path / "emb"
        argv = ["encode", "--input", src, "--out", f"{folder}/", "--shard-size", "16", "--batch-size", "8"]
        outputs = ("emb",)  # complete shards and their progress record stay, for --resume
        ready = lambda: (folder / "progress.json").exists()  # noqa: E731
        delay = 0.3
    else:
        argv, outputs = ["encode", "--input", src, "--out", str(tmp_path / "x.npy"), "--batch-size", "8"], ()
        ready = encoding
        delay = 0.5
    before = snapshot(tmp_path)
    process = _slow_cli(*argv, delay=delay, cache=cache)
    try:
        _wait_for(ready, process)
        process.send_signal(signum)
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == status, err
    assert "Traceback" not in err
    if status == EXIT_INTERRUPTED:
        assert len(err.strip().splitlines()) == 1 and "interrupted" in err
    after = snapshot(tmp_path)
    assert {path: after[path] for path in before} == before
    created = {path.split(os.sep)[0] for path in set(after) - set(before)} - {"cache", "cache.encoding"}
    assert created <= set(outputs), created
    leftovers = [path for path in after if ".bitext-hf-" in path]
    assert not leftovers, leftovers
    if outputs:  # what stays is resumable to the uninterrupted result
        code = _slow_cli(*argv, "--resume", cache=cache).wait(timeout=120)
        fresh = tmp_path / "fresh"
        fresh_code = _slow_cli(*argv[:4], f"{fresh}/", *argv[5:], cache=cache).wait(timeout=120)
        assert code == fresh_code == EXIT_OK
        assert snapshot(tmp_path / "emb") == snapshot(fresh)


# A fresh interpreter that gets a Ctrl-C as the import of ``module`` starts, then runs the CLI; it prints at exit
# whether that import was completed.
_SIGNAL_AT_IMPORT = """
import atexit, importlib.abc, os, signal, sys
sys.path.insert(0, sys.argv.pop(1))
module = sys.argv.pop(1)

class SignalAtImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == module:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, SignalAtImport())
atexit.register(lambda: print(module in sys.modules))
from bitext_hf.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(("module", "imported"), [("bitext_hf.cli.parser", False), ("torch", True)])
def test_a_ctrl_c_during_the_commands_imports_ends_it_as_interrupted(tmp_path, module, imported):
    """The parser's imports are the command's (130 and one line, not a traceback); torch's import runs to its end
    first (a KeyboardInterrupt inside torch's C++ initialisation aborts the process: bitext_hf.interrupts)."""
    src = write_lines(tmp_path / "src.txt", SOURCES)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    argv = ["mine", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "p.tsv")]
    done = subprocess.run(
        [sys.executable, "-c", _SIGNAL_AT_IMPORT, _TESTS, module, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == EXIT_INTERRUPTED, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "interrupted" in done.stderr, done.stderr
    assert done.stdout.strip() == str(imported)
    assert sorted(os.listdir(tmp_path)) == ["src.txt", "tgt.txt"]


def test_concurrent_runs_on_one_output_leave_one_whole_file(tmp_path):
    src = write_lines(tmp_path / "src.txt", _MANY)
    tgt = write_lines(tmp_path / "tgt.txt", [s.replace("|en", "|de") for s in _MANY])
    out = tmp_path / "p.tsv"
    argv = ["mine", "--src", src, "--tgt", tgt, "--out", str(out), "--no-cache"]
    runs = [_slow_cli(*argv, delay=0.05, cache=str(tmp_path / "cache")) for _ in range(3)]
    results = [process.communicate(timeout=120) for process in runs]
    assert [process.returncode for process in runs] == [EXIT_OK] * 3, results
    single = tmp_path / "single.tsv"
    assert _slow_cli(*argv[:-3], "--out", str(single), "--no-cache", cache=str(tmp_path / "c")).wait(120) == 0
    assert out.read_bytes() == single.read_bytes()
    assert not [name for name in os.listdir(tmp_path) if ".bitext-hf-" in name]


def test_concurrent_encodings_into_one_shard_folder_end_whole_or_refused(tmp_path):
    src = write_lines(tmp_path / "src.txt", _MANY)
    folder = tmp_path / "emb"
    argv = ["encode", "--input", src, "--out", f"{folder}/", "--shard-size", "16", "--no-cache"]
    runs = [_slow_cli(*argv, delay=0.05, cache=str(tmp_path / "cache")) for _ in range(2)]
    results = [process.communicate(timeout=120) for process in runs]
    codes = sorted(process.returncode for process in runs)
    assert codes in ([EXIT_OK, EXIT_OK], [EXIT_OK, EXIT_USAGE]), results
    for (_, err), process in zip(results, runs):
        assert "Traceback" not in err and (process.returncode == 0 or len(err.strip().splitlines()) == 1)
    fresh = tmp_path / "fresh"
    assert _slow_cli(*argv[:4], f"{fresh}/", *argv[5:], cache=str(tmp_path / "c")).wait(120) == 0
    assert snapshot(folder) == snapshot(fresh)


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs (root only: skipped elsewhere)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("what", ["encode to .npy", "mine to .tsv", "encode to shards"])
def test_a_full_disk_is_one_line_and_no_partial_output(capsys, monkeypatch, tmp_path, full_disk, what):
    install_fake_encoders(monkeypatch)
    many = [f"{word} number {i} with some words to fill the disk|en" for i in range(600) for word in ("cat", "dog")]
    src = write_lines(tmp_path / "src.txt", many)
    tgt = write_lines(tmp_path / "tgt.txt", [s.replace("|en", "|de") for s in many])
    if what == "encode to .npy":
        argv = ["encode", "--input", src, "--out", str(full_disk / "x.npy"), "--no-cache"]
    elif what == "mine to .tsv":
        argv = ["mine", "--src", src, "--tgt", tgt, "--out", str(full_disk / "p.tsv"), "--no-cache"]
    else:
        argv = ["encode", "--input", src, "--out", f"{full_disk}/emb/", "--shard-size", "500", "--no-cache"]
    code, _, err = run(capsys, *argv)
    assert code == EXIT_ERROR and "no space left on device" in err and len(err.strip().splitlines()) == 1, err
    left = sorted(os.listdir(full_disk))
    if what == "encode to shards":  # complete shards only, for --resume; no temp file
        assert left in ([], ["emb"]) and not [n for n in os.listdir(full_disk / "emb") if ".bitext-hf-" in n]
    else:
        assert left == []


def test_a_recipe_config_with_a_python_tag_runs_nothing(tmp_path):
    config = tmp_path / "evil.yaml"
    config.write_text(f"output_dir: !!python/object/apply:os.mkdir [{str(tmp_path / MARKER)!r}]\n")
    recipe = Path(_TESTS).parent / "recipes" / "distill_wolof.py"
    done = subprocess.run(
        [sys.executable, str(recipe), "--config", str(config)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == EXIT_USAGE and "Traceback" not in done.stderr
    assert len([line for line in done.stderr.splitlines() if "error" in line]) == 1
    assert not (tmp_path / MARKER).exists()


def test_a_shards_fifo_never_blocks_mining(tmp_path):
    folder = Path(tmp_path / "emb")
    src = write_lines(tmp_path / "src.txt", SOURCES)
    assert (
        _slow_cli(
            "encode", "--input", src, "--out", f"{folder}/", "--shard-size", "2", cache=str(tmp_path / "c")
        ).wait(120)
        == 0
    )
    os.unlink(folder / "shard-00001.npy")
    os.mkfifo(folder / "shard-00001.npy")
    process = _slow_cli(
        "mine", "--src", str(folder), "--tgt", write_lines(tmp_path / "tgt.txt", TARGETS), cache=str(tmp_path / "c")
    )
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_DATA and "shard-00001.npy" in err and len(err.strip().splitlines()) == 1, err


def test_a_signal_during_a_recipe_is_one_line_and_exports_nothing(
    tmp_path, tiny_parallel_corpus_by_language, tiny_tokenizer
):
    """Ctrl-C while a recipe trains: exit 130, one error line after the logs, no export, inputs untouched."""
    data = tmp_path / "data"
    data.mkdir()
    for language, pairs in tiny_parallel_corpus_by_language.items():
        (data / f"en-{language}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    tiny_tokenizer.save_pretrained(data / "tokenizer")
    before = snapshot(data)
    run = tmp_path / "run"
    flags = [
        "--train_pairs",
        f"en-fr={data / 'en-fr.tsv'}",
        f"en-de={data / 'en-de.tsv'}",
        "--held_out",
        "4",
        "--min_tokens",
        "1",
        "--encoder",
        "random",
        "--tokenizer",
        str(data / "tokenizer"),
        "--hidden_size",
        "32",
        "--num_hidden_layers",
        "2",
        "--num_attention_heads",
        "2",
        "--intermediate_size",
        "64",
        "--layer",
        "2",
        "--max_seq_length",
        "32",
        "--output_dir",
        str(run),
        "--use_cpu",
        "true",
        "--per_device_train_batch_size",
        "8",
        "--max_steps",
        "100000",
        "--save_steps",
        "2",
        "--eval_strategy",
        "no",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
    ]
    env = {key: value for key, value in os.environ.items() if key != "BITEXT_HF_DEBUG"}
    recipe = Path(_TESTS).parent / "recipes" / "train_onealigner.py"
    process = subprocess.Popen(
        [sys.executable, str(recipe), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        _wait_for(lambda: run.is_dir() and any(p.name.startswith("checkpoint-") for p in run.iterdir()), process, 240)
        process.send_signal(2)
        _, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == EXIT_INTERRUPTED, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "train_onealigner: interrupted"
    assert snapshot(data) == before
    exported = {"README.md", "model.safetensors", "config.json", "modules.json"} & {p.name for p in run.iterdir()}
    assert not exported and not [p for p in tmp_path.iterdir() if p.name.endswith(".staging")]
