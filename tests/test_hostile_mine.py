"""Hostile and careless uses of ``bitext-hf mine``, one table: links, FIFOs, sockets, devices and folders at every name
the job writes (the pairs ``OUT``, the sidecar ``OUT.meta.json``, with ``--threshold-report`` ``OUT.threshold.png``
and ``OUT.threshold.md``), the user's own ``--out`` link and streams (followed and written directly, as always), an
output that is an input (by name, link, ``..``, hard link, inside a shard folder read), a rename of the commit or a
disk that fails over an earlier run's outputs, options that cannot act, the inputs only ``mine`` reads (gold pairs,
document ids, ``.npy`` sides, folders of shards), the job called from Python with values of the wrong type, absurd
values; then signals while the job writes (subprocesses, in the slow set).

The contract each row asserts is tests/hostile_jobs.py's: exit code, one stderr line, the encoder not even loaded for a
refusal, every earlier file byte-identical (an earlier run's outputs too, whatever fails), nothing but the expected
outputs created, no hang. Hostile text, checkpoints, caches and input bounds, which every job reads alike, are in
tests/test_hostile.py.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, fake_embedding, write_lines
from hostile_jobs import (
    KINDS,
    TIMEOUT,
    VICTIM,
    Case,
    at_output,
    check_case,
    corpus,
    earlier_run,
    fail_rename,
    full_disk_at,
    hardlink,
    over_earlier,
    params,
    signal_while_writing,
)
from hostile_support import MakesMarker

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE, main

pytestmark = TIMEOUT

OUT, SIDECAR = "p.tsv", "p.tsv.meta.json"
FIGURE, SAMPLE = "p.tsv.threshold.png", "p.tsv.threshold.md"
PAIRS = (OUT, SIDECAR)
REPORT = (OUT, SIDECAR, FIGURE, SAMPLE)


def _mine(tmp: Path, *extra: str) -> list[str]:
    src, tgt = corpus(tmp)
    return ["mine", "--src", src, "--tgt", tgt, *extra]


def _npy(path: Path, array: np.ndarray, **kwargs) -> str:
    np.save(path, array, **kwargs)
    return str(path)


def _shard_folder(tmp: Path) -> str:
    """A folder of shards made by ``encode`` (the fake encoder) of src.txt, for cases that tamper with it."""
    src = write_lines(tmp / "src.txt", SOURCES)
    assert main(["encode", "--input", src, "--out", str(tmp / "emb") + "/", "--shard-size", "2", "--quiet"]) == 0
    return str(tmp / "emb")


def _npy_sides(tmp: Path) -> list[str]:
    """Both sides as .npy embeddings (dimension 16) with their texts: mining them loads no encoder."""
    src, tgt = corpus(tmp)
    for name, texts in (("src.npy", SOURCES), ("tgt.npy", TARGETS)):
        np.save(tmp / name, np.stack([fake_embedding(text) for text in texts]))
    return ["mine", "--src", str(tmp / "src.npy"), "--tgt", str(tmp / "tgt.npy"), "--src-text", src, "--tgt-text", tgt]


# --- the user's own --out: a link followed, a stream written directly (no sidecar), as always


def _victim_holds_the_pairs(tmp: Path) -> None:
    assert os.path.islink(tmp / OUT) and (tmp / VICTIM).read_text().startswith("score\tsrc_index")
    assert json.loads((tmp / SIDECAR).read_text())["k"] == 4


# --- outputs that are inputs (moved from tests/test_hostile.py)


def _sidecar_is_input(tmp: Path) -> list[str]:
    # `mine --src run.meta.json --out run`: the sidecar of `run` is run.meta.json, the input itself.
    write_lines(tmp / "run.meta.json", SOURCES)
    _, tgt = corpus(tmp)
    return ["mine", "--src", str(tmp / "run.meta.json"), "--tgt", tgt, "--out", str(tmp / "run"), "--format", "tsv"]


def _sidecar_hardlinked_to_input(tmp: Path) -> list[str]:
    argv = _mine(tmp, "--out", str(tmp / "pairs.tsv"))
    hardlink(tmp, "pairs.tsv.meta.json", str(tmp / "tgt.txt"))
    return argv


def _out_through_linked_folder(tmp: Path) -> list[str]:
    # A folder link that leads back to the inputs' folder: --out alias/src.txt is src.txt.
    argv = _mine(tmp)
    os.symlink(str(tmp), tmp / "alias")
    return [*argv, "--out", str(tmp / "alias" / "src.txt")]


def _report_is_input(tmp: Path) -> list[str]:
    # The threshold sample of p.tsv is a hard link of the target side.
    argv = _mine(tmp, "--out", OUT, "--threshold-report")
    hardlink(tmp, SAMPLE, str(tmp / "tgt.txt"))
    return argv


def _report_named_as_input(tmp: Path) -> list[str]:
    # --src is named as the threshold figure of --out.
    _, tgt = corpus(tmp)
    write_lines(tmp / FIGURE, SOURCES)
    return ["mine", "--src", FIGURE, "--tgt", tgt, "--out", OUT, "--threshold-report", "--format", "tsv"]


def _out_in_shard_folder(tmp: Path) -> list[str]:
    folder = _shard_folder(tmp)
    return ["mine", "--src", folder, "--src-text", "src.txt", "--tgt", corpus(tmp)[1], "--out", "emb/p.tsv"]


# --- inputs only mine reads (moved from tests/test_hostile.py and tests/test_hostile_commands.py)


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


def _mined_as_gold(tmp: Path) -> list[str]:
    gold = tmp / "mined.tsv"
    assert main([*_mine(tmp, "--out", str(gold)), "--quiet"]) == EXIT_OK
    return _mine(tmp, "--gold", str(gold))


def _sidecar_reports_k(k: int):
    def check(tmp: Path) -> None:
        assert json.loads((tmp / SIDECAR).read_text())["k"] == k

    return check


# --- the job from Python


def _python(**options):
    def setup(tmp: Path):
        from bitext_hf.jobs import MiningConfig, run_mining

        src, tgt = corpus(tmp)
        return lambda: run_mining(MiningConfig(src, tgt, **options))

    return setup


CASES: dict[str, Case] = {
    # --- at every name the job writes, what is not a regular file: refused before any work, nothing opened
    **{
        f"a {kind} at the sidecar name": Case(
            at_output(_mine, OUT, kind, at=SIDECAR), EXIT_USAGE, f"{SIDECAR}: {words}"
        )
        for kind, words in KINDS.items()
    },
    **{
        f"a {kind} at the threshold figure's name": Case(
            at_output(_mine, OUT, kind, "--threshold-report", at=FIGURE), EXIT_USAGE, f"{FIGURE}: {words}"
        )
        for kind, words in KINDS.items()
    },
    **{
        f"a {kind} at the threshold sample's name": Case(
            at_output(_mine, OUT, kind, "--threshold-report", at=SAMPLE), EXIT_USAGE, f"{SAMPLE}: {words}"
        )
        for kind, words in KINDS.items()
        if kind != "socket"
    },
    # --- the user's own --out: a link followed (its target written, the sidecar beside the link), a stream direct
    "--out a link to a file elsewhere": Case(
        at_output(_mine, OUT, "link"), EXIT_OK, creates=(SIDECAR,), replaces=(VICTIM,), then=_victim_holds_the_pairs
    ),
    "--out a FIFO: the pairs alone, written directly": Case(
        at_output(_mine, "pipe", "FIFO", "--format", "tsv"), EXIT_OK, fifo="pipe", fifo_gets=b"score\t"
    ),
    "--out a FIFO with --threshold-report": Case(
        at_output(_mine, "pipe", "FIFO", "--format", "tsv", "--threshold-report"),
        EXIT_USAGE,
        "give a file --out",
        fifo="pipe",
        fifo_gets=b"",
    ),
    "--out /dev/null with --threshold-report": Case(
        lambda t: _mine(t, "--out", os.devnull, "--threshold-report"), EXIT_USAGE, "give a file --out"
    ),
    "--out a socket": Case(at_output(_mine, OUT, "socket"), EXIT_USAGE, f"--out {OUT}: is a socket"),
    "out is /dev/null": Case(lambda t: [*_mine(t), "--out", os.devnull], EXIT_OK),
    # --- paths that lead to an input: refused before any work
    "out is a symlink to an input": Case(
        lambda t: [*_mine(t), "--out", str(os.symlink(t / "src.txt", t / OUT) or t / OUT)], EXIT_USAGE, "input"
    ),
    "out is a hard link of an input": Case(
        lambda t: [*_mine(t), "--out", str(hardlink(t, OUT, corpus(t)[1]))], EXIT_USAGE, "input"
    ),
    "out reaches an input through ..": Case(
        lambda t: [*_mine(t), "--out", str(t / "sub" / ".." / "tgt.txt")] if (t / "sub").mkdir() is None else [],
        EXIT_USAGE,
        "input",
    ),
    "out reaches an input through a folder link": Case(_out_through_linked_folder, EXIT_USAGE, "input"),
    "the sidecar would be an input": Case(_sidecar_is_input, EXIT_USAGE, "input"),
    "the sidecar is a hard link of an input": Case(_sidecar_hardlinked_to_input, EXIT_USAGE, "input"),
    "the threshold sample is a hard link of an input": Case(_report_is_input, EXIT_USAGE, f"{SAMPLE}: is the input"),
    "the threshold figure's name is --src": Case(_report_named_as_input, EXIT_USAGE, f"{FIGURE}: is the input"),
    "--out inside the --src folder of shards": Case(
        _out_in_shard_folder, EXIT_USAGE, "--out emb/p.tsv: is inside the input folder"
    ),
    # --- unusable outputs
    "out is a folder": Case(lambda t: [*_mine(t), "--out", str(t)], EXIT_USAGE, "is a directory"),
    "out in a missing folder": Case(
        lambda t: [*_mine(t), "--out", str(t / "no" / "p.tsv")], EXIT_USAGE, "does not exist"
    ),
    "out under a file": Case(lambda t: [*_mine(t), "--out", str(t / "src.txt" / "p.tsv")], EXIT_USAGE, "not a folder"),
    "out is empty": Case(lambda t: [*_mine(t), "--out", ""], EXIT_USAGE, "empty output path"),
    "out has an unknown extension": Case(lambda t: [*_mine(t), "--out", str(t / "p.xyz")], EXIT_USAGE, "--format"),
    "a 240-byte output name": Case(
        lambda t: [*_mine(t), "--out", str(t / ("p" * 236 + ".tsv"))],
        EXIT_OK,
        creates=("p" * 236 + ".tsv", "p" * 236 + ".tsv.meta.json"),
    ),
    "an output name whose sidecar is too long": Case(
        lambda t: [*_mine(t), "--out", str(t / ("p" * 246 + ".tsv"))], EXIT_USAGE, "longer than the 255"
    ),
    "a threshold report name too long": Case(
        lambda t: _mine(t, "--out", "p" * 240 + ".tsv", "--threshold-report"), EXIT_USAGE, "longer than the 255"
    ),
    # --- a run over an earlier one's outputs: all new or all as they were
    "a second run replaces every output": Case(
        over_earlier(_mine, OUT, "--threshold-report", names=REPORT), EXIT_OK, replaces=REPORT
    ),
    "the commit's rename of the sidecar fails": Case(
        over_earlier(_mine, OUT, names=PAIRS),
        EXIT_ERROR,
        f"{SIDECAR}: input/output error",
        patch=fail_rename(2),
        encodes=True,
    ),
    "the commit's rename of the threshold figure fails": Case(
        over_earlier(_mine, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{FIGURE}: input/output error",
        patch=fail_rename(2),
        encodes=True,
    ),
    "the commit's last rename fails": Case(
        over_earlier(_mine, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{SIDECAR}: input/output error",
        patch=fail_rename(4),
        encodes=True,
    ),
    "a full disk as the pairs are written": Case(
        over_earlier(_mine, OUT, names=REPORT),
        EXIT_ERROR,
        f"{OUT}: no space left on device",
        patch=full_disk_at(1),
        encodes=True,
    ),
    "a full disk as the threshold sample is written": Case(
        over_earlier(_mine, OUT, "--threshold-report", names=REPORT),
        EXIT_ERROR,
        f"{SAMPLE}: no space left on device",
        patch=full_disk_at(4),
        encodes=True,
    ),
    "a full disk, a new run": Case(
        lambda t: _mine(t, "--out", OUT, "--threshold-report"),
        EXIT_ERROR,
        "no space left on device",
        patch=full_disk_at(3),
        encodes=True,
    ),
    # --- options (moved from tests/test_hostile.py and tests/test_hostile_commands.py)
    "two inputs from stdin": Case(lambda t: ["mine", "--src", "-", "--tgt", "-"], EXIT_USAGE, "stdin"),
    "threshold nan": Case(lambda t: [*_mine(t), "--threshold", "nan"], EXIT_USAGE, "threshold"),
    "k is zero": Case(lambda t: [*_mine(t), "--k", "0"], EXIT_USAGE, "k"),
    "mine --k above the corpus records the k used": Case(
        lambda t: [*_mine(t), "--k", "50", "--out", str(t / "p.tsv")],
        EXIT_OK,
        creates=PAIRS,
        then=_sidecar_reports_k(len(SOURCES)),
    ),
    "mine --lid-min-prob without --lid": Case(
        lambda t: [*_mine(t), "--lid-min-prob", "0.7", "--out", str(t / "p.tsv")], EXIT_USAGE, "--lid-min-prob 0.7"
    ),
    "mine --src-lang without --lid or a sidecar": Case(
        lambda t: _mine(t, "--src-lang", "en"), EXIT_USAGE, "--src-lang acts only with --lid or --out FILE"
    ),
    "mine --tgt-lang without --lid, pairs to stdout": Case(
        lambda t: _mine(t, "--tgt-lang", "de", "--out", "-"), EXIT_USAGE, "--tgt-lang acts only with --lid"
    ),
    "mine --format without --out": Case(lambda t: _mine(t, "--format", "csv"), EXIT_USAGE, "there is no --out"),
    "mine --cache-dir with --no-cache": Case(
        lambda t: _mine(t, "--cache-dir", str(t / "c"), "--no-cache"), EXIT_USAGE, "--no-cache turns off"
    ),
    "mine --index garbage on text names no made-up dimension": Case(
        lambda t: _mine(t, "--index", "garbage"), EXIT_USAGE, "'garbage' is not a FAISS factory string:", "3840"
    ),
    "mine --index garbage on embeddings names their dimension": Case(
        lambda t: [*_npy_sides(t), "--index", "garbage"], EXIT_USAGE, "for dimension 16: could not parse", "3840"
    ),
    "HOME unwritable, threshold report drawn": Case(
        lambda t: [*_npy_sides(t), "--threshold-report", "--out", str(t / "p.tsv"), "--quiet"],
        EXIT_OK,
        creates=REPORT,
        env={"HOME": os.devnull, "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": "", "MPLCONFIGDIR": ""},
        subprocess=True,
        slow=True,
    ),
    # --- absurd values
    "--k 10**12 is capped at the corpus": Case(
        lambda t: _mine(t, "--k", str(10**12), "--out", OUT),
        EXIT_OK,
        creates=PAIRS,
        then=_sidecar_reports_k(len(SOURCES)),
    ),
    "--threshold 1e30 keeps no pair": Case(lambda t: _mine(t, "--threshold", "1e30", "--out", OUT), EXIT_OK,
                                            creates=PAIRS),
    "--batch-size 10**12": Case(lambda t: _mine(t, "--batch-size", str(10**12), "--out", OUT), EXIT_OK, creates=PAIRS),
    "--max-line-chars 0": Case(lambda t: _mine(t, "--max-line-chars", "0"), EXIT_USAGE, "must be an integer >= 1"),
    "--nprobe 10**12 with the exact search": Case(
        lambda t: _mine(t, "--nprobe", str(10**12)), EXIT_USAGE, "nprobe applies to IVF indexes"
    ),
    "--index with a million lists for 10 sentences": Case(
        lambda t: _mine(t, "--index", "IVF1000000,Flat"), EXIT_USAGE, "has 1000000 lists"
    ),
    # --- the job from Python: a path of another type works, a value of the wrong type is refused before any work
    "out as a pathlib.Path": Case(_python(out=Path(OUT)), EXIT_OK, creates=PAIRS),
    "out as bytes": Case(_python(out=b"p.tsv"), EXIT_USAGE, "out=b'p.tsv' (--out): must be a string"),
    "k as a string": Case(_python(k="4", out=OUT), EXIT_USAGE, "k='4' (--k): must be an integer"),
    # --- inputs only mine reads: refused naming the file, before any encoding
    "a tab for TSV output": Case(
        lambda t: [
            "mine",
            "--src",
            write_lines(t / "tab.txt", ["a\tb", *SOURCES[1:]]),
            "--tgt",
            corpus(t)[1],
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
    "mine's pairs given as --gold": Case(_mined_as_gold, EXIT_DATA, "mined.tsv:2: expected `src_line<TAB>tgt_line`"),
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
    ".npy holding pickled objects": Case(_npy_pickle, EXIT_DATA, "src.npy"),
    ".npy with a NaN": Case(_npy_nan, EXIT_DATA, "src.npy"),
    ".npy truncated": Case(_npy_truncated, EXIT_DATA, "src.npy"),
    ".npy with an all-zero row": Case(_npy_zero_rows, EXIT_DATA, "src.npy"),
    ".npy of 0 bytes": Case(
        lambda t: (
            ["mine", "--src", str(t / "z.npy"), "--tgt", corpus(t)[1]]
            if (t / "z.npy").write_bytes(b"") is not None
            else []
        ),
        EXIT_DATA,
        "z.npy",
    ),
    ".npy sides of two dimensions": Case(_npy_dimensions_differ, EXIT_DATA, "dimension"),
    "a manifest whose checksum was changed": Case(_manifest_tampered, EXIT_DATA, "manifest"),
    "a manifest nested 100,000 deep": Case(_manifest_not_json, EXIT_DATA, "manifest.json"),
    "two shards swapped": Case(_shard_swapped, EXIT_DATA, "shard-0000"),
    "a text that is not the one encoded": Case(_wrong_text_for_shards, EXIT_DATA, "other.txt"),
}  # fmt: skip


@pytest.mark.parametrize("name", params(CASES))
def test_hostile_mine(name, tmp_path, monkeypatch, capsys):
    check_case(CASES[name], tmp_path, monkeypatch, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("fresh", [True, False], ids=["new outputs", "over an earlier run"])
def test_a_signal_while_writing_leaves_the_earlier_outputs(tmp_path, signum, fresh):
    argv = ["mine", "--src", "src.txt", "--tgt", "tgt.txt", "--out", OUT, "--threshold-report"]
    setup = corpus if fresh else earlier_run(*REPORT)
    signal_while_writing(tmp_path, "bitext_hf.data.pair_files:write_pairs", argv, signum, setup)
