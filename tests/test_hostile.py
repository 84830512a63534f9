"""Hostile inputs that every job reads alike, one table: text (NUL bytes, invalid UTF-8, empty lines, overlong lines, a
truncated gzip), untrusted checkpoints, inputs past their bound, hostile entries of the encoding cache, odd but valid
file names. The rows run ``mine``, which reads all of them.

Every case builds its files in a fresh folder, runs one command and asserts the same promises: the documented exit
code, one line on stderr without a traceback (on failure), every file that was there before byte-identical (links
still links, their targets untouched), no output but the expected ones (nothing partial: no temp file either), and
no marker of executed code. Each job's own table (its outputs, its options, the inputs only it reads) is
tests/test_hostile_<job>.py; the cases that need a second process (signals, concurrent runs, a full disk, a FIFO
that would block) are in tests/test_hostile_processes.py.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines
from hostile_support import MARKER, MakesMarker, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.timeout(300)  # a regression that blocks (a FIFO, a pipe) fails instead of hanging the suite


def _corpus(tmp: Path) -> tuple[str, str]:
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _model_folder(tmp: Path, *, auto_map: bool = False, pickle_weights: bool = False) -> str:
    """A model folder whose config asks for its own code (a module that creates the marker when imported), or
    whose weights are a pickle that creates it when unpickled."""
    folder = tmp / "model"
    folder.mkdir()
    config = {
        "model_type": "bert",
        "hidden_size": 8,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 16,
        "vocab_size": 32,
    }
    if auto_map:
        (folder / "modeling_evil.py").write_text(f"import os\nos.mkdir({str(tmp / MARKER)!r})\n")
        config.update(model_type="evil", auto_map={"AutoModel": "modeling_evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(config))
    if pickle_weights:
        (folder / "pytorch_model.bin").write_bytes(pickle.dumps(MakesMarker(tmp)))
    return str(folder)


@dataclass
class Case:
    """One hostile situation: ``setup`` builds it in a folder and returns the command line."""

    setup: Callable[[Path], list[str]]
    code: int
    message: str = ""  # part of the one stderr line (failures)
    creates: tuple[str, ...] = ()  # outputs allowed to appear (successes)
    env: dict[str, str] = field(default_factory=dict)
    real_encoders: bool = False  # load models for real (untrusted checkpoints), not the fake encoder
    then: Callable[[Path], None] | None = None  # more checks on what the run left (successes)


def _gzip_truncated(tmp: Path) -> list[str]:
    data = gzip.compress("".join(s + "\n" for s in SOURCES * 200).encode())
    (tmp / "src.txt.gz").write_bytes(data[: len(data) // 2])
    return ["mine", "--src", str(tmp / "src.txt.gz"), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _config_auto_map(tmp: Path) -> list[str]:
    return ["mine", *_mine(tmp)[1:], "--model", _model_folder(tmp, auto_map=True)]


def _weights_pickle(tmp: Path) -> list[str]:
    return ["mine", *_mine(tmp)[1:], "--model", _model_folder(tmp, pickle_weights=True)]


def _tokenizer_auto_map(tmp: Path) -> list[str]:
    folder = Path(_model_folder(tmp))
    (folder / "tokenization_evil.py").write_text(f"import os\nos.mkdir({str(tmp / MARKER)!r})\n")
    tokenizer = {
        "tokenizer_class": "EvilTokenizer",
        "auto_map": {"AutoTokenizer": [None, "tokenization_evil.EvilTokenizer"]},
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    return ["mine", *_mine(tmp)[1:], "--model", str(folder)]


def _cache(tmp: Path) -> Path:
    return tmp.parent / f"{tmp.name}-cache"


def _rotated_cache_entry(tmp: Path) -> list[str]:
    """A first run fills the cache; then the source entry's rows are rotated by one, its checksum left stale."""
    from bitext_hf.cli import main

    argv = _mine(tmp, "--out", str(tmp / "first.tsv"))
    assert main([*argv, "--quiet"]) == 0
    (entry,) = [path for path in _cache(tmp).rglob("*.npy") if np.load(path).shape[0] == len(SOURCES)][:1]
    array = np.load(entry)
    offset = entry.stat().st_size - 48 - array.nbytes  # the rows sit between the .npy header and the trailer
    with open(entry, "r+b") as handle:
        handle.seek(offset)
        handle.write(np.roll(array, 1, axis=0).tobytes())
    np.testing.assert_array_equal(np.load(entry), np.roll(array, 1, axis=0))  # valid .npy, wrong rows
    return [*argv[:-1], str(tmp / "again.tsv")]


def _fifo_cache_entry(tmp: Path) -> list[str]:
    from bitext_hf.cli import main

    argv = _mine(tmp, "--out", str(tmp / "first.tsv"))
    assert main([*argv, "--quiet"]) == 0
    for entry in _cache(tmp).rglob("*.npy"):
        entry.unlink()
        os.mkfifo(entry)
    return [*argv[:-1], str(tmp / "again.tsv")]


def _same_pairs_as_the_first_run(tmp: Path) -> None:
    assert (tmp / "again.tsv").read_bytes() == (tmp / "first.tsv").read_bytes()


def _odd_name(name: str, extra: tuple[str, ...] = ()) -> Callable[[Path], list[str]]:
    def setup(tmp: Path) -> list[str]:
        src = write_lines(tmp / name, SOURCES)
        return [
            "mine",
            f"--src={src}",
            "--tgt",
            write_lines(tmp / "tgt.txt", TARGETS),
            *extra,
            "--out",
            str(tmp / "p.tsv"),
        ]

    return setup


# Case name -> the situation and what must come of it. The fake encoder (tests/cli_fakes.py) embeds; the
# checkpoint cases load for real through bitext_hf.encoders.load_encoder.
CASES: dict[str, Case] = {
    # --- hostile text (exit 3, naming the file)
    "NUL bytes in the text": Case(
        lambda t: (
            [*_mine(t)[:2], str(t / "bin.txt"), *_mine(t)[3:]] if (t / "bin.txt").write_bytes(b"a\x00b\n") else []
        ),
        EXIT_DATA,
        "bin.txt",
    ),
    "invalid UTF-8": Case(
        lambda t: (
            [*_mine(t)[:2], str(t / "latin.txt"), *_mine(t)[3:]]
            if (t / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
            else []
        ),
        EXIT_DATA,
        "latin.txt:1",
    ),
    "an empty file": Case(
        lambda t: (
            [*_mine(t)[:2], str(t / "empty.txt"), *_mine(t)[3:]]
            if (t / "empty.txt").write_bytes(b"") is not None
            else []
        ),
        EXIT_DATA,
        "empty.txt",
    ),
    "an empty line": Case(
        lambda t: [*_mine(t)[:2], write_lines(t / "holes.txt", ["a", "", "b"]), *_mine(t)[3:]],
        EXIT_DATA,
        "holes.txt:2",
    ),
    "an overlong line": Case(
        lambda t: [*_mine(t)[:2], write_lines(t / "long.txt", ["x" * 500]), *_mine(t)[3:], "--max-line-chars", "100"],
        EXIT_DATA,
        "long.txt:1",
    ),
    "a truncated gzip": Case(_gzip_truncated, EXIT_DATA, "src.txt.gz"),
    # --- untrusted checkpoints: nothing runs, one line (exit 4)
    "a config that asks for its own code": Case(
        _config_auto_map, EXIT_ENCODER, "trust_remote_code", real_encoders=True
    ),
    "weights that are a pickle": Case(_weights_pickle, EXIT_ENCODER, "model", real_encoders=True),
    "a tokenizer that asks for its own code": Case(
        _tokenizer_auto_map, EXIT_ENCODER, "tokenizer_config.json", real_encoders=True
    ),
    # --- inputs past their bound: refused in seconds, not read into memory (exit 3)
    "/dev/zero as a source": Case(
        lambda t: ["mine", "--src", "/dev/zero", "--tgt", _corpus(t)[1]], EXIT_DATA, "/dev/zero"
    ),
    "a text past --max-input-bytes": Case(
        lambda t: [
            *_mine(t)[:2],
            write_lines(t / "big.txt", ["word " * 50] * 100),
            *_mine(t)[3:],
            "--max-input-bytes",
            "1K",
        ],
        EXIT_DATA,
        "big.txt",
    ),
    "a gzip bomb past the bound": Case(
        lambda t: (
            [*_mine(t)[:2], str(t / "bomb.txt.gz"), *_mine(t)[3:]]
            if (t / "bomb.txt.gz").write_bytes(gzip.compress(b"a\n" * 5_000_000))
            else []
        ),
        EXIT_DATA,
        "bomb.txt.gz",
        env={"BITEXT_HF_MAX_INPUT_BYTES": "1M"},
    ),
    # --- hostile cache entries: the run is as if there were none
    "a cache entry with rotated rows": Case(
        _rotated_cache_entry, EXIT_OK, creates=("again.tsv", "again.tsv.meta.json"), then=_same_pairs_as_the_first_run
    ),
    "a FIFO at a cache entry": Case(
        _fifo_cache_entry, EXIT_OK, creates=("again.tsv", "again.tsv.meta.json"), then=_same_pairs_as_the_first_run
    ),
    # --- odd but valid names: the run works, the outputs are where they were asked for
    "a name with a newline": Case(_odd_name("a\nb.txt"), EXIT_OK, creates=("p.tsv", "p.tsv.meta.json")),
    "a name starting with a dash": Case(_odd_name("-src.txt"), EXIT_OK, creates=("p.tsv", "p.tsv.meta.json")),
    "a name that is not UTF-8": Case(
        _odd_name(os.fsdecode(b"\xff\xfe.txt")), EXIT_OK, creates=("p.tsv", "p.tsv.meta.json")
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_hostile_case(name, capsys, tmp_path, monkeypatch):
    case = CASES[name]
    for variable, value in case.env.items():
        monkeypatch.setenv(variable, value)
    fakes = None if case.real_encoders else install_fake_encoders(monkeypatch)
    monkeypatch.setenv("BITEXT_HF_EMBEDDING_CACHE", str(_cache(tmp_path)))
    argv = case.setup(tmp_path)
    encoded_by_setup = fakes.n_encoded if fakes is not None else 0
    capsys.readouterr()
    before = snapshot(tmp_path)
    try:
        code, _, err = run(capsys, *argv)
    except SystemExit as exit:  # argparse's own refusals
        code, err = exit.code, capsys.readouterr().err
    after = snapshot(tmp_path)

    assert code == case.code, err
    assert "Traceback" not in err
    if case.code != EXIT_OK:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0], err
        assert case.message in lines[0], lines[0]
        if case.code in (EXIT_USAGE, EXIT_DATA) and fakes is not None:
            assert (
                fakes.n_encoded == encoded_by_setup
            )  # refused before any encoding (a side may be embeddings already)
    for path, entry in before.items():
        assert after.get(path) == entry, f"{path} changed"
    created = sorted(set(after) - set(before))
    assert created == sorted(case.creates), created
    assert not (tmp_path / MARKER).exists(), "hostile code ran"
    if case.then is not None:
        case.then(tmp_path)
