"""Hostile situations at run time: Ray addresses that answer but are not Ray, signals
during a Ray run, model folders whose config.json and weights disagree, sidecars and manifests of gigabytes, and
stdout on a full device.

Two tables, one parametrized test each: ``CASES`` run the CLI in this process; ``PROCESS_CASES`` need a process of
their own (a signal, a stdout that is /dev/full). Every case asserts what tests/test_hostile.py asserts: the
documented exit code, one line on stderr without a traceback, every file that was there before unchanged, no output
but the expected ones (no temp file either), no marker of executed code, no hang (the timeout), and where the
README promises a bound, the time taken.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from hostile_support import MARKER, refusal_line, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_USAGE

pytestmark = pytest.mark.timeout(300)

SPARSE_SIZE = 3 << 30  # 3 GiB that take no disk: a file truncated up to this size
TESTS = os.path.dirname(os.path.abspath(__file__))


def _corpus(tmp: Path) -> tuple[str, str]:
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _sparse(path: Path, size: int = SPARSE_SIZE) -> Path:
    """``path`` grown to ``size`` bytes without writing them (a sparse file): huge to stat, nothing on disk."""
    path.touch()
    os.truncate(path, size)
    return path


# ----------------------------------------------------------------------------------------------------- listeners


class _QuietHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, format, *args):  # the test's output is not the place for the server's log
        pass


@pytest.fixture(scope="module")
def listeners():
    """Ports on 127.0.0.1 that answer but are not Ray: an HTTP server, and a TCP listener that never says a word."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # the kernel completes the connections; nothing reads or answers them
    yield {"HTTP": server.server_address[1], "SILENT": silent.getsockname()[1]}
    server.shutdown()
    server.server_close()
    silent.close()


def _ray_mine(tmp: Path, address: str) -> list[str]:
    return _mine(tmp, "--out", str(tmp / "p.tsv"), "--distributed", "ray", "--ray-address", address)


def _ray_encode(tmp: Path, address: str) -> list[str]:
    src, _ = _corpus(tmp)
    return ["encode", "--input", src, "--out", f"{tmp / 'emb'}/", "--distributed", "ray", "--ray-address", address]


# ----------------------------------------------------------------------------------------------------- models


def _model_folder(tmp: Path, *, layers: int = 1, files: tuple[str, ...] = ("model.safetensors",), **config) -> str:
    """A BERT folder of one layer, width 8 and 32 tokens, whose config.json says what ``layers`` and ``config``
    say instead; the weights are written as ``files`` (one, or shards that split them)."""
    from safetensors.numpy import save_file

    folder = tmp / "model"
    folder.mkdir()
    claimed = {
        "model_type": "bert",
        "hidden_size": 8,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "vocab_size": 32,
        **config,
    }
    (folder / "config.json").write_text(json.dumps(claimed))
    weights = {
        "embeddings.word_embeddings.weight": np.zeros((32, 8), np.float32),
        "encoder.layer.0.attention.self.query.weight": np.zeros((8, 8), np.float32),
        "encoder.layer.0.output.dense.weight": np.zeros((8, 16), np.float32),
    }
    names = sorted(weights)
    for number, file in enumerate(files):
        save_file({name: weights[name] for name in names[number :: len(files)]}, str(folder / file))
    if len(files) > 1:  # shards come with the index transformers reads them by
        weight_map = {name: files[names.index(name) % len(files)] for name in names}
        index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return str(folder)


def _model_mine(tmp: Path, folder: str) -> list[str]:
    return _mine(tmp, "--out", str(tmp / "p.tsv"), "--model", folder)


def _sentence_transformers_folder(tmp: Path) -> list[str]:
    inner = Path(_model_folder(tmp, layers=48))
    root = tmp / "st"
    root.mkdir()
    inner.rename(root / "0_Transformer")
    modules = [{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]
    (root / "modules.json").write_text(json.dumps(modules))
    return _model_mine(tmp, str(root))


def _huge_config(tmp: Path) -> list[str]:
    folder = Path(_model_folder(tmp))
    os.truncate(folder / "config.json", SPARSE_SIZE)
    return _model_mine(tmp, str(folder))


# ----------------------------------------------------------------------------------------------------- sidecars


def _mined(tmp: Path) -> Path:
    """pairs.tsv and its sidecar, as ``mine`` writes them (fake encoder)."""
    from bitext_hf.cli import main

    assert main([*_mine(tmp), "--out", str(tmp / "pairs.tsv"), "--quiet"]) == 0
    return tmp / "pairs.tsv"


def _huge_sidecar(tmp: Path) -> list[str]:
    pairs = _mined(tmp)
    _sparse(Path(f"{pairs}.meta.json"))
    return ["push", "--pairs", str(pairs), "--repo", "someone/pairs", "--dry-run"]


def _huge_meta_option(tmp: Path) -> list[str]:
    pairs = _mined(tmp)
    meta = _sparse(tmp / "other.meta.json")
    return ["push", "--pairs", str(pairs), "--meta", str(meta), "--repo", "someone/pairs", "--dry-run"]


def _shard_folder(tmp: Path) -> Path:
    from bitext_hf.cli import main

    src = write_lines(tmp / "src.txt", SOURCES)
    assert main(["encode", "--input", src, "--out", f"{tmp / 'emb'}/", "--shard-size", "2", "--quiet"]) == 0
    return tmp / "emb"


def _huge_manifest(tmp: Path) -> list[str]:
    folder = _shard_folder(tmp)
    os.truncate(folder / "manifest.json", SPARSE_SIZE)
    return ["mine", "--src", str(folder), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _huge_progress(tmp: Path) -> list[str]:
    src = write_lines(tmp / "src.txt", SOURCES)
    folder = tmp / "emb"
    folder.mkdir()
    _sparse(folder / "progress.json")
    return ["encode", "--input", src, "--out", f"{folder}/", "--shard-size", "2", "--resume"]


@dataclass
class Case:
    """One hostile situation: ``setup`` builds it in a folder and returns the command line, where ``{HTTP}`` and
    ``{SILENT}`` stand for the ports of the :func:`listeners`."""

    setup: Callable[[Path], list[str]]
    code: int
    message: str  # part of the one stderr line
    seconds: float = 60.0  # the most the command may take (the README's bound where it gives one)
    real_encoders: bool = False  # load models for real (model folders), not the fake encoder
    needs: str | None = None  # a module without which the case cannot be run (skipped)
    slow: bool = False  # in the slow set (`pytest -m slow`): it waits out a timeout


NOT_RAY = "answers but is not a Ray"
CASES = {
    # --- addresses that answer but are not Ray: exit 2 within 10 s (+ this machine's slack), not a hang
    "an HTTP server as --ray-address (mine)": Case(
        lambda t: _ray_mine(t, "127.0.0.1:{HTTP}"), EXIT_USAGE, NOT_RAY, seconds=15, needs="ray"
    ),
    "an HTTP server as --ray-address (encode)": Case(
        lambda t: _ray_encode(t, "127.0.0.1:{HTTP}"), EXIT_USAGE, NOT_RAY, seconds=15, needs="ray"
    ),
    "an HTTP server as a ray:// address": Case(
        lambda t: _ray_mine(t, "ray://127.0.0.1:{HTTP}"), EXIT_USAGE, "is not a Ray Client server", 15, needs="ray"
    ),
    "a TCP listener that never answers as --ray-address": Case(
        lambda t: _ray_encode(t, "127.0.0.1:{SILENT}"),
        EXIT_USAGE,
        "no Ray answer within",
        15,
        needs="ray",
        slow=True,
    ),
    # --- model folders whose config.json is not their weights': exit 4 before the model is built
    "a config claiming 1,000,000 layers": Case(
        lambda t: _model_mine(t, _model_folder(t, layers=1_000_000)),
        EXIT_ENCODER,
        "num_hidden_layers is 1,000,000 but the weights (model.safetensors) hold 1 layer",
        seconds=10,
        real_encoders=True,
    ),
    "a config claiming more layers than its weight shards hold": Case(
        lambda t: _model_mine(
            t,
            _model_folder(
                t, layers=24, files=("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
            ),
        ),
        EXIT_ENCODER,
        "num_hidden_layers is 24",
        real_encoders=True,
    ),
    "a config whose hidden size is not its weights'": Case(
        lambda t: _model_mine(t, _model_folder(t, hidden_size=65536, intermediate_size=65536)),
        EXIT_ENCODER,
        "hidden_size is 65,536 but model.safetensors holds embeddings.word_embeddings.weight of shape 32 x 8",
        real_encoders=True,
    ),
    "a config whose vocabulary is not its weights'": Case(
        lambda t: _model_mine(t, _model_folder(t, vocab_size=250_000)),
        EXIT_ENCODER,
        "vocab_size is 250,000",
        real_encoders=True,
    ),
    "a sentence-transformers folder whose config claims 48 layers": Case(
        _sentence_transformers_folder, EXIT_ENCODER, "0_Transformer/config.json: num_hidden_layers is 48", 10, True
    ),
    "a config.json of 3 GB": Case(
        _huge_config, EXIT_ENCODER, "config.json: cannot be read as JSON (3,072 MiB", 5, True
    ),
    # --- sidecars and manifests of gigabytes: refused before they are read (exit 3)
    # (the size in the message: refused for it, not for what reading 3 GB of zeros found)
    "a 3 GB sidecar": Case(_huge_sidecar, EXIT_DATA, "pairs.tsv.meta.json: 3,072 MiB, more than the 4 MiB", 5),
    "a 3 GB sidecar given as --meta": Case(
        _huge_meta_option, EXIT_DATA, "other.meta.json: 3,072 MiB, more than the 4 MiB", 5
    ),
    "a 3 GB shard manifest": Case(_huge_manifest, EXIT_DATA, "manifest.json: 3,072 MiB", seconds=5),
    "a 3 GB progress.json of a folder to resume": Case(_huge_progress, EXIT_DATA, "progress.json: 3,072 MiB", 5),
}


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if case.slow else name for name, case in CASES.items()]
)
def test_hostile_runtime_case(name, capsys, tmp_path, monkeypatch, listeners):
    case = CASES[name]
    if case.needs:
        pytest.importorskip(case.needs)
    fakes = None if case.real_encoders else install_fake_encoders(monkeypatch)
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    argv = [part.format(**listeners) for part in case.setup(tmp_path)]
    encoded_by_setup = fakes.n_encoded if fakes is not None else 0
    capsys.readouterr()
    before = snapshot(tmp_path)
    start = time.monotonic()
    code, _, err = run(capsys, *argv)
    elapsed = time.monotonic() - start
    after = snapshot(tmp_path)

    assert code == case.code, err
    line = refusal_line(err)
    assert ": error: " in line and case.message in line, line
    assert elapsed < case.seconds, f"{elapsed:.1f} s"
    if fakes is not None:
        assert fakes.n_encoded == encoded_by_setup  # refused before any encoding
    for path, entry in before.items():
        assert after.get(path) == entry, f"{path} changed"
    assert sorted(set(after) - set(before)) == [], "an output appeared"
    assert not (tmp_path / MARKER).exists(), "hostile code ran"


# ----------------------------------------------------------------------------------------------------- processes

# The CLI in a fresh interpreter with the fake encoder, slowed down, that marks (a file outside the case's folder)
# when it first encodes: in a Ray run that is a worker, so the marker says Ray is up and the driver waits on it.
_SLOW_CLI = """
import sys, time
sys.path.insert(0, sys.argv.pop(1))
started = sys.argv.pop(1)
import numpy as np
import bitext_hf.encoders
from cli_fakes import fake_embedding
from bitext_hf.cli import main

class Slow:
    def encode(self, sentences, batch_size=64, show_progress=False):
        open(started, "a").close()
        time.sleep(0.5)
        return np.stack([fake_embedding(s) for s in sentences])

bitext_hf.encoders.load_encoder = lambda spec=None, **kwargs: Slow()
sys.exit(main(sys.argv[1:]))
"""
_MANY = [f"{word}-{i}|en" for i in range(40) for word in ("cat", "dog")]


def _many(tmp: Path) -> list[str]:
    src = write_lines(tmp / "src.txt", _MANY)
    tgt = write_lines(tmp / "tgt.txt", [line.replace("|en", "|de") for line in _MANY])
    return ["mine", "--src", src, "--tgt", tgt, "--batch-size", "8"]


@dataclass
class ProcessCase:
    """A command in its own process: stdout to ``stdout`` (a path; a pipe when None), and ``signum`` sent once it
    encodes. ``status`` is the process's return code (-N: killed by signal N, as a run without Ray is)."""

    setup: Callable[[Path], list[str]]
    status: int
    message: str | None  # part of the one stderr line; None: stderr stays empty
    stdout: str | None = None
    signum: int | None = None
    needs: str | None = None
    env: dict[str, str] = field(default_factory=dict)


PROCESS_CASES = {
    "pairs to stdout (--out -) on a full device": ProcessCase(
        lambda t: [*_mine(t), "--out", "-"], EXIT_ERROR, "writing to stdout failed: no space left", "/dev/full"
    ),
    "pairs printed to stdout on a full device": ProcessCase(
        lambda t: _mine(t), EXIT_ERROR, "writing to stdout failed: no space left", "/dev/full"
    ),
    "a Parquet file to stdout on a full device": ProcessCase(
        lambda t: [*_mine(t), "--out", "-", "--format", "parquet"], EXIT_ERROR, "writing to stdout failed", "/dev/full"
    ),
    "an evaluation report to stdout on a full device": ProcessCase(
        lambda t: ["eval", "--src", _corpus(t)[0], "--tgt", _corpus(t)[1]],
        EXIT_ERROR,
        "writing to stdout failed",
        "/dev/full",
    ),
    "SIGINT during a Ray run": ProcessCase(
        lambda t: [*_many(t), "--out", str(t / "p.tsv"), "--distributed", "ray", "--workers", "1"],
        EXIT_INTERRUPTED,
        "interrupted",
        signum=2,
        needs="ray",
    ),
    "SIGTERM during a Ray run": ProcessCase(
        lambda t: [*_many(t), "--out", str(t / "p.tsv"), "--distributed", "ray", "--workers", "1"],
        -15,
        None,
        signum=15,
        needs="ray",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", PROCESS_CASES)
def test_hostile_runtime_process(name, tmp_path):
    case = PROCESS_CASES[name]
    if case.needs:
        pytest.importorskip(case.needs)
    started = tmp_path.parent / f"{tmp_path.name}-started"
    env = {
        **os.environ,
        **case.env,
        "BITEXT_HF_EMBEDDING_CACHE": str(tmp_path.parent / f"{tmp_path.name}-cache"),
        "PYTHONPATH": os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH")) if p),  # Ray's workers
    }
    argv = case.setup(tmp_path)
    before = snapshot(tmp_path)
    command = [sys.executable, "-c", _SLOW_CLI, TESTS, str(started), *argv, "--quiet"]
    with open(case.stdout or os.devnull, "w") as stdout:
        process = subprocess.Popen(
            command, stdout=stdout if case.stdout else subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            if case.signum is not None:
                deadline = time.monotonic() + 180
                while not started.exists() and process.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert process.poll() is None and started.exists(), process.communicate()
                time.sleep(0.5)  # the driver is waiting on Ray's tasks
                process.send_signal(case.signum)
            _, err = process.communicate(timeout=120)
        finally:
            process.kill()
    after = snapshot(tmp_path)

    assert process.returncode == case.status, err
    if case.message is None:
        assert err.strip() == "", err
    else:
        assert case.message in refusal_line(err), err
    for path, entry in before.items():
        assert after.get(path) == entry, f"{path} changed"
    assert sorted(set(after) - set(before)) == [], "an output appeared"
    assert not (tmp_path / MARKER).exists(), "hostile code ran"
