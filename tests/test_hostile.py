"""Hostile inputs, paths, checkpoints and caches, one table.

Every case builds its files in a fresh folder, runs one command and asserts the same promises: the documented exit
code, one line on stderr without a traceback (on failure), every file that was there before byte-identical (links
still links, their targets untouched), no output but the expected ones (nothing partial: no temp file either), and
no marker of executed code. The cases that need a second process (signals, concurrent runs, a full disk, a FIFO
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
from cli_fakes import SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines
from hostile_support import MARKER, MakesMarker, snapshot

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_OK, EXIT_USAGE

pytestmark = pytest.mark.timeout(300)  # a regression that blocks (a FIFO, a pipe) fails instead of hanging the suite


def _corpus(tmp: Path) -> tuple[str, str]:
    return write_lines(tmp / "src.txt", SOURCES), write_lines(tmp / "tgt.txt", TARGETS)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = _corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _npy(path: Path, array: np.ndarray, **kwargs) -> str:
    np.save(path, array, **kwargs)
    return str(path)


def _shard_folder(tmp: Path) -> str:
    """A folder of shards made by ``encode`` (the fake encoder) of src.txt, for cases that tamper with it."""
    from bitext_hf.cli import main

    src = write_lines(tmp / "src.txt", SOURCES)
    assert main(["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--shard-size", "2", "--quiet"]) == 0
    return str(tmp / "emb")


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


def _symlink(tmp: Path, name: str, target: str) -> Path:
    link = tmp / name
    os.symlink(target, link)
    return link


def _hardlink(tmp: Path, name: str, target: str) -> Path:
    link = tmp / name
    os.link(target, link)
    return link


def _sidecar_is_input(tmp: Path) -> list[str]:
    # `mine --src run.meta.json --out run`: the sidecar of `run` is run.meta.json, the input itself.
    write_lines(tmp / "run.meta.json", SOURCES)
    _, tgt = _corpus(tmp)
    return ["mine", "--src", str(tmp / "run.meta.json"), "--tgt", tgt, "--out", str(tmp / "run"), "--format", "tsv"]


def _sidecar_hardlinked_to_input(tmp: Path) -> list[str]:
    argv = _mine(tmp, "--out", str(tmp / "pairs.tsv"))
    _hardlink(tmp, "pairs.tsv.meta.json", str(tmp / "tgt.txt"))
    return argv


def _shard_linked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.symlink("../corpus.txt", tmp / "emb" / "shard-00000.npy")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/"]


def _manifest_linked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.symlink("../corpus.txt", tmp / "emb" / "progress.json")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _shard_hardlinked_to_input(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.link(src, tmp / "emb" / "shard-00000.npy")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _fifo_in_shard_folder(tmp: Path) -> list[str]:
    src = write_lines(tmp / "corpus.txt", SOURCES)
    (tmp / "emb").mkdir()
    os.mkfifo(tmp / "emb" / "shard-00000.npy")
    return ["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--resume"]


def _out_through_linked_folder(tmp: Path) -> list[str]:
    # A folder link that leads back to the inputs' folder: --out alias/src.txt is src.txt.
    argv = _mine(tmp)
    _symlink(tmp, "alias", str(tmp))
    return [*argv, "--out", str(tmp / "alias" / "src.txt")]


def _npy_pickle(tmp: Path) -> list[str]:
    payload = np.empty(5, dtype=object)
    payload[:] = [MakesMarker(tmp)] * 5
    src = _npy(tmp / "src.npy", payload, allow_pickle=True)
    return ["mine", "--src", src, "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _npy_nan(tmp: Path) -> list[str]:
    array = np.stack([fake_embedding(s) for s in SOURCES])
    array[2, 3] = np.nan
    return ["mine", "--src", _npy(tmp / "src.npy", array), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _npy_truncated(tmp: Path) -> list[str]:
    path = Path(_npy(tmp / "src.npy", np.stack([fake_embedding(s) for s in SOURCES])))
    path.write_bytes(path.read_bytes()[:-7])
    return ["mine", "--src", str(path), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _npy_zero_rows(tmp: Path) -> list[str]:
    array = np.stack([fake_embedding(s) for s in SOURCES])
    array[1] = 0.0
    return ["mine", "--src", _npy(tmp / "src.npy", array), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _npy_dimensions_differ(tmp: Path) -> list[str]:
    src = _npy(tmp / "src.npy", np.eye(5, 8, dtype=np.float32))
    tgt = _npy(tmp / "tgt.npy", np.eye(5, 9, dtype=np.float32))
    return ["mine", "--src", src, "--tgt", tgt]


def _manifest_tampered(tmp: Path) -> list[str]:
    folder = Path(_shard_folder(tmp))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["shards"][0]["sha256"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return ["mine", "--src", str(folder), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _manifest_not_json(tmp: Path) -> list[str]:
    folder = Path(_shard_folder(tmp))
    (folder / "manifest.json").write_text("[" * 100_000)
    return ["mine", "--src", str(folder), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _shard_swapped(tmp: Path) -> list[str]:
    folder = Path(_shard_folder(tmp))
    first, second = folder / "shard-00000.npy", folder / "shard-00001.npy"
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    return ["mine", "--src", str(folder), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _wrong_text_for_shards(tmp: Path) -> list[str]:
    folder = _shard_folder(tmp)
    other = write_lines(tmp / "other.txt", [s.upper() for s in SOURCES])
    return ["mine", "--src", folder, "--src-text", other, "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _gzip_truncated(tmp: Path) -> list[str]:
    data = gzip.compress("".join(s + "\n" for s in SOURCES * 200).encode())
    (tmp / "src.txt.gz").write_bytes(data[: len(data) // 2])
    return ["mine", "--src", str(tmp / "src.txt.gz"), "--tgt", write_lines(tmp / "tgt.txt", TARGETS)]


def _mteb_deeply_nested(tmp: Path) -> list[str]:
    rows = [json.dumps({"sentence1": s, "sentence2": t}) for s, t in zip(SOURCES, TARGETS)]
    rows.insert(2, '{"sentence1": ' + "[" * 200_000 + "]" * 200_000 + ', "sentence2": "x"}')
    (tmp / "mteb.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return ["eval", "--mteb", str(tmp / "mteb.jsonl")]


def _mteb_not_objects(tmp: Path) -> list[str]:
    (tmp / "mteb.jsonl").write_text('{"sentence1": "a", "sentence2": "b"}\n[1, 2]\n', encoding="utf-8")
    return ["eval", "--mteb", str(tmp / "mteb.jsonl")]


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
    # --- paths that lead to an input: refused before any work (exit 2)
    "out is a symlink to an input": Case(
        lambda t: [*_mine(t), "--out", str(_symlink(t, "p.tsv", str(t / "src.txt")))], EXIT_USAGE, "input"
    ),
    "out is a hard link of an input": Case(
        lambda t: [*_mine(t), "--out", str(_hardlink(t, "p.tsv", _corpus(t)[1]))], EXIT_USAGE, "input"
    ),
    "out reaches an input through ..": Case(
        lambda t: [*_mine(t), "--out", str(t / "sub" / ".." / "tgt.txt")] if (t / "sub").mkdir() is None else [],
        EXIT_USAGE,
        "input",
    ),
    "out reaches an input through a folder link": Case(_out_through_linked_folder, EXIT_USAGE, "input"),
    "the sidecar would be an input": Case(_sidecar_is_input, EXIT_USAGE, "input"),
    "the sidecar is a hard link of an input": Case(_sidecar_hardlinked_to_input, EXIT_USAGE, "input"),
    "a shard named link to the input": Case(_shard_linked_to_input, EXIT_USAGE, "symbolic link"),
    "a progress file linked to the input": Case(_manifest_linked_to_input, EXIT_USAGE, "symbolic link"),
    "a shard hard-linked to the input": Case(_shard_hardlinked_to_input, EXIT_USAGE, "is the input"),
    "a FIFO named like a shard": Case(_fifo_in_shard_folder, EXIT_USAGE, "not a regular file"),
    "encode --out names its input": Case(
        lambda t: ["encode", "--input", _corpus(t)[0], "--out", str(t / "src.txt")], EXIT_USAGE, "input"
    ),
    "score --out is a hard link of --tgt": Case(
        lambda t: [
            "score",
            "--src",
            _corpus(t)[0],
            "--tgt",
            str(t / "tgt.txt"),
            "--out",
            str(_hardlink(t, "o.tsv", str(t / "tgt.txt"))),
        ],
        EXIT_USAGE,
        "input",
    ),
    # --- unusable outputs and options (exit 2)
    "out is a folder": Case(lambda t: [*_mine(t), "--out", str(t)], EXIT_USAGE, "is a directory"),
    "out in a missing folder": Case(
        lambda t: [*_mine(t), "--out", str(t / "no" / "p.tsv")], EXIT_USAGE, "does not exist"
    ),
    "out under a file": Case(lambda t: [*_mine(t), "--out", str(t / "src.txt" / "p.tsv")], EXIT_USAGE, "not a folder"),
    "out is empty": Case(lambda t: [*_mine(t), "--out", ""], EXIT_USAGE, "empty output path"),
    "out has an unknown extension": Case(lambda t: [*_mine(t), "--out", str(t / "p.xyz")], EXIT_USAGE, "--format"),
    "two inputs from stdin": Case(lambda t: ["mine", "--src", "-", "--tgt", "-"], EXIT_USAGE, "stdin"),
    "threshold nan": Case(lambda t: [*_mine(t), "--threshold", "nan"], EXIT_USAGE, "threshold"),
    "k is zero": Case(lambda t: [*_mine(t), "--k", "0"], EXIT_USAGE, "k"),
    "shard folder holds a foreign file": Case(
        lambda t: (
            ["encode", "--input", _corpus(t)[0], "--out", str(t / "emb") + "/"]
            if (t / "emb").mkdir() is None and (t / "emb" / "notes.txt").write_text("mine")
            else []
        ),
        EXIT_USAGE,
        "not a shard",
    ),
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
    "a tab for TSV output": Case(
        lambda t: [
            "mine",
            "--src",
            write_lines(t / "tab.txt", ["a\tb", *SOURCES[1:]]),
            "--tgt",
            _corpus(t)[1],
            "--out",
            str(t / "p.tsv"),
        ],
        EXIT_DATA,
        "tab.txt:1",
    ),
    "gold pair out of range": Case(
        lambda t: [*_mine(t), "--gold", write_lines(t / "gold.tsv", ["0\t99"])], EXIT_DATA, "gold.tsv:1"
    ),
    "gold not numbers": Case(
        lambda t: [*_mine(t), "--gold", write_lines(t / "gold.tsv", ["0\t1", "x\ty"])], EXIT_DATA, "gold.tsv:2"
    ),
    "documents of another length": Case(
        lambda t: [
            *_mine(t),
            "--src-docs",
            write_lines(t / "s.docs", ["d"] * 4),
            "--tgt-docs",
            write_lines(t / "t.docs", ["d"] * 5),
        ],
        EXIT_DATA,
        "s.docs",
    ),
    "score sides of different lengths": Case(
        lambda t: [
            "score",
            "--src",
            _corpus(t)[0],
            "--tgt",
            write_lines(t / "short.txt", TARGETS[:3]),
            "--out",
            str(t / "o.tsv"),
        ],
        EXIT_DATA,
        "short.txt",
    ),
    "MTEB rows that are not objects": Case(_mteb_not_objects, EXIT_DATA, "mteb.jsonl:2"),
    "MTEB JSON nested 200,000 deep": Case(_mteb_deeply_nested, EXIT_DATA, "mteb.jsonl:3"),
    # --- hostile embeddings (exit 3): a pickle is never loaded
    ".npy holding pickled objects": Case(_npy_pickle, EXIT_DATA, "src.npy"),
    ".npy with a NaN": Case(_npy_nan, EXIT_DATA, "src.npy"),
    ".npy truncated": Case(_npy_truncated, EXIT_DATA, "src.npy"),
    ".npy with an all-zero row": Case(_npy_zero_rows, EXIT_DATA, "src.npy"),
    ".npy of 0 bytes": Case(
        lambda t: (
            ["mine", "--src", str(t / "z.npy"), "--tgt", _corpus(t)[1]]
            if (t / "z.npy").write_bytes(b"") is not None
            else []
        ),
        EXIT_DATA,
        "z.npy",
    ),
    ".npy sides of two dimensions": Case(_npy_dimensions_differ, EXIT_DATA, "dimension"),
    # --- hostile shard folders (exit 3)
    "a manifest whose checksum was changed": Case(_manifest_tampered, EXIT_DATA, "manifest"),
    "a manifest nested 100,000 deep": Case(_manifest_not_json, EXIT_DATA, "manifest.json"),
    "two shards swapped": Case(_shard_swapped, EXIT_DATA, "shard-0000"),
    "a text that is not the one encoded": Case(_wrong_text_for_shards, EXIT_DATA, "other.txt"),
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
    "a 240-byte output name": Case(
        lambda t: [*_mine(t), "--out", str(t / ("p" * 236 + ".tsv"))],
        EXIT_OK,
        creates=("p" * 236 + ".tsv", "p" * 236 + ".tsv.meta.json"),
    ),
    "an output name whose sidecar is too long": Case(
        lambda t: [*_mine(t), "--out", str(t / ("p" * 246 + ".tsv"))], EXIT_USAGE, "longer than the 255"
    ),
    "out is /dev/null": Case(lambda t: [*_mine(t), "--out", os.devnull], EXIT_OK),
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
