"""Inputs are bounded: an endless pipe, /dev/zero or a decompression bomb is refused quickly (exit 3, one line
naming the file, the bound and how to raise it) with bounded memory; deeply nested JSON is a data error naming the
file and line, not a RecursionError; a .npy header claiming a huge shape is refused before anything is allocated."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import install_fake_encoders, run

from bitext_hf.data import read_embeddings, read_lines, read_mteb
from bitext_hf.errors import DataValidationError, EncoderLoadError, UsageError
from bitext_hf.io import (
    DEFAULT_MAX_INPUT_BYTES,
    MAX_INPUT_BYTES_ENV,
    input_byte_limit,
    max_input_bytes,
    parse_byte_count,
    read_input_bytes,
)

DEEP = "[" * 100_000 + "]" * 100_000  # far past the interpreter's recursion limit
# A line of more than 64 bytes: the bound on bytes, not the one on lines (one per 64 bytes of it), is reached first.
LONG_LINE = "a sentence repeated without end, long enough to be a typical line of text"


def _cli(*args: str, stdin=None, env: dict[str, str] | None = None, cwd: Path) -> tuple[int, list[str], float]:
    """Run ``bitext-hf`` in a fresh process: (exit code, stderr lines, seconds)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    environment.pop("BITEXT_HF_DEBUG", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "bitext_hf.cli", *args],
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        cwd=cwd,
    )
    return done.returncode, done.stderr.strip().splitlines(), time.monotonic() - started


def _gzip_bomb(path: Path, line: bytes, mebibytes: int) -> Path:
    """``mebibytes`` MiB of ``line`` repeated, as that many copies of one compressed 1 MiB gzip member: about
    1 KiB on disk per MiB of text (concatenated members are one gzip stream)."""
    member = gzip.compress(line * ((1 << 20) // len(line)), compresslevel=9)
    with open(path, "wb") as handle:
        for _ in range(mebibytes):
            handle.write(member)
    return path


@pytest.fixture()
def english(tmp_path) -> Path:
    path = tmp_path / "en.txt"
    path.write_text("hello\nworld\n", encoding="utf-8")
    return path


def _assert_refused(code: int, lines: list[str], seconds: float, *expected: str) -> None:
    assert code == 3, lines
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    for text in expected:
        assert text in lines[0], lines
    assert seconds < 60, f"refused after {seconds:.0f} s"


@pytest.mark.slow
def test_dev_zero_is_refused_at_its_first_chunk(tmp_path):
    code, lines, seconds = _cli("encode", "--input", "/dev/zero", "--out", "zero.npy", cwd=tmp_path)
    _assert_refused(code, lines, seconds, "/dev/zero:1: NUL byte")
    assert not (tmp_path / "zero.npy").exists()


@pytest.mark.slow
def test_an_endless_pipe_is_refused_at_the_bound(tmp_path, english):
    endless = subprocess.Popen(["yes", LONG_LINE], stdout=subprocess.PIPE)
    try:
        code, lines, seconds = _cli(
            "mine",
            "--src",
            "-",
            "--tgt",
            str(english),
            "--out",
            "pairs.tsv",
            "--max-input-bytes",
            "1M",
            stdin=endless.stdout,
            cwd=tmp_path,
        )
    finally:
        endless.kill()
        endless.wait()
    _assert_refused(code, lines, seconds, "<stdin>: holds more than 1048576 bytes", "--max-input-bytes")
    assert not (tmp_path / "pairs.tsv").exists()


@pytest.mark.slow
def test_a_gzip_bomb_is_refused_at_the_bound_set_by_the_environment(tmp_path, english):
    bomb = _gzip_bomb(tmp_path / "bomb.txt.gz", LONG_LINE.encode() + b"\n", 256)
    assert bomb.stat().st_size < 2 << 20  # 256 MiB of text in under 2 MiB
    code, lines, seconds = _cli(
        "score",
        "--src",
        str(bomb),
        "--tgt",
        str(english),
        "--out",
        "scored.tsv",
        env={MAX_INPUT_BYTES_ENV: "16M"},
        cwd=tmp_path,
    )
    _assert_refused(code, lines, seconds, f"{bomb}: holds more than 16777216 bytes once decompressed")
    assert MAX_INPUT_BYTES_ENV in lines[0]
    assert not (tmp_path / "scored.tsv").exists()


@pytest.mark.slow
def test_a_bomb_of_short_lines_is_refused_under_the_default_bound(tmp_path, english):
    # 1 GiB of `a` lines is under the default 2 GiB, but as 537M strings it would fill the memory many times over.
    bomb = _gzip_bomb(tmp_path / "lines.txt.gz", b"a\n", 1024)
    code, lines, seconds = _cli("mine", "--src", str(bomb), "--tgt", str(english), "--out", "p.tsv", cwd=tmp_path)
    most = DEFAULT_MAX_INPUT_BYTES // 64
    _assert_refused(code, lines, seconds, f"{bomb}: holds more than {most} lines", "--max-input-bytes")


@pytest.mark.slow
def test_a_gzip_bomb_of_zeros_is_refused_as_binary(tmp_path, english):
    # 8 GiB once decompressed, in 8 MiB: read whole, as before the bound, it would not fit the memory.
    bomb = _gzip_bomb(tmp_path / "zeros.txt.gz", b"\x00" * 1024, 8192)
    code, lines, seconds = _cli("eval", "--src", str(bomb), "--tgt", str(english), cwd=tmp_path)
    _assert_refused(code, lines, seconds, f"{bomb}:1: NUL byte")


@pytest.mark.slow
def test_a_malformed_bound_is_a_usage_error(tmp_path, english):
    code, lines, _ = _cli(
        "mine",
        "--src",
        str(english),
        "--tgt",
        str(english),
        "--out",
        "p.tsv",
        env={MAX_INPUT_BYTES_ENV: "lots"},
        cwd=tmp_path,
    )
    assert code == 2 and len(lines) == 1 and MAX_INPUT_BYTES_ENV in lines[0], lines


@pytest.mark.parametrize(
    ("text", "value"), [("1000", 1000), ("64K", 65536), ("512M", 512 << 20), ("2G", 2 << 30), ("1GiB", 1 << 30)]
)
def test_byte_counts(text, value):
    assert parse_byte_count(text) == value


@pytest.mark.parametrize("text", ["0", "-5", "2X", "", "1.5G"])
def test_bad_byte_counts(text):
    with pytest.raises(ValueError):
        parse_byte_count(text)


def test_the_bound_comes_from_the_option_then_the_environment_then_the_default(monkeypatch):
    monkeypatch.delenv(MAX_INPUT_BYTES_ENV, raising=False)
    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "3M")
    assert max_input_bytes() == 3 << 20
    with input_byte_limit(1000):
        assert max_input_bytes() == 1000
    assert max_input_bytes() == 3 << 20
    monkeypatch.setenv(MAX_INPUT_BYTES_ENV, "many")
    with pytest.raises(UsageError, match=MAX_INPUT_BYTES_ENV):
        max_input_bytes()


@pytest.mark.parametrize("compressed", [False, True])
def test_an_input_of_exactly_the_bound_is_read_and_one_byte_more_refused(tmp_path, compressed):
    text = b"".join(b"%s %04d\n" % (LONG_LINE.encode(), i) for i in range(100))
    path = tmp_path / ("t.txt.gz" if compressed else "t.txt")
    path.write_bytes(gzip.compress(text) if compressed else text)
    with input_byte_limit(len(text)):
        assert len(read_lines(path)) == 100
        assert read_input_bytes(path) == text
    with input_byte_limit(len(text) - 1), pytest.raises(DataValidationError, match=r"t\.txt(\.gz)?: holds more than"):
        read_lines(path)


def test_the_option_reaches_every_reader(tmp_path, monkeypatch, capsys):
    install_fake_encoders(monkeypatch)
    source = tmp_path / "src.txt"
    source.write_text("".join(f"sentence {i}\n" for i in range(200)), encoding="utf-8")
    monkeypatch.delenv(MAX_INPUT_BYTES_ENV, raising=False)
    code, _, err = run(
        capsys, "encode", "--input", str(source), "--out", str(tmp_path / "a.npy"), "--max-input-bytes", "1K"
    )
    assert code == 3 and "holds more than 1024 bytes" in err
    assert not (tmp_path / "a.npy").exists()
    code, _, err = run(
        capsys, "encode", "--input", str(source), "--out", str(tmp_path / "b.npy"), "--max-input-bytes", "1M"
    )
    assert code == 0, err
    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES  # the option's bound ends with its command


# ---- .npy headers


def _npy_claiming(shape: tuple[int, ...]) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return header.getvalue() + b"\x00" * 64


@pytest.mark.parametrize("name", ["huge.npy", "huge.npy.gz"])
def test_a_npy_header_claiming_a_huge_shape_is_refused_before_allocating(tmp_path, name):
    data = _npy_claiming((10**9, 10**6))  # 4 PB of float32
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(DataValidationError, match=r"huge\.npy(\.gz)?: truncated \.npy file: its header announces"):
        read_embeddings(path)


def test_a_npy_stream_is_bounded(tmp_path):
    path = tmp_path / "e.npy.gz"
    buffer = io.BytesIO()
    np.save(buffer, np.ones((100, 16), np.float32))
    path.write_bytes(gzip.compress(buffer.getvalue()))
    assert read_embeddings(path).shape == (100, 16)
    with input_byte_limit(1000), pytest.raises(DataValidationError, match=r"e\.npy\.gz: holds more than 1000 bytes"):
        read_embeddings(path)


# ---- deeply nested JSON


@pytest.mark.parametrize(
    ("name", "content", "location"),
    [
        ("deep.jsonl", '{"sentence1": "a", "sentence2": "b"}\n{"sentence1": "a", "sentence2": ' + DEEP + "}\n", 2),
        (
            "deep.json",
            '[\n{"sentence1": "a", "sentence2": "b"},\n{"sentence1": "a",\n"sentence2": ' + DEEP + "}]\n",
            4,
        ),
    ],
)
def test_deeply_nested_mteb_json_names_the_file_and_line(tmp_path, monkeypatch, capsys, name, content, location):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataValidationError, match=rf"{name}:{location}: JSON nested too deeply"):
        read_mteb(path)
    install_fake_encoders(monkeypatch)
    code, _, err = run(capsys, "eval", "--mteb", str(path))
    assert code == 3
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{name}:{location}: JSON nested too deeply" in lines[0], lines


def test_deeply_nested_gold_cell_is_a_data_error(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("sentence1,sentence2,gold\na,b," + "[" * 995 + "]" * 995 + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"gold\.csv:2: gold must be a list of \[i, j\] index pairs"):
        read_mteb(path)


def test_deeply_nested_manifest_and_model_config(tmp_path):
    from bitext_hf.encoders.sources import read_json
    from bitext_hf.encoding.shards import read_manifest

    path = tmp_path / "manifest.json"
    path.write_text(DEEP, encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"manifest\.json: not valid JSON"):
        read_manifest(path)
    with pytest.raises(EncoderLoadError, match=r"manifest\.json: cannot be read as JSON"):
        read_json(path)
    assert json.loads("[[1]]")  # the parser itself is untouched
