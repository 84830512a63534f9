"""``mine`` with inputs as users have them: .npy embeddings with their sentences, one encoder per side, stdin and
process substitution, and document-level mining that keeps a sentence repeated in two documents."""

from __future__ import annotations

import io
import json
import os
import threading

import numpy as np
import pytest
from cli_fakes import DIM, GOLD, SOURCES, TARGETS, fake_embedding, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_DATA, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from bitext_hf.cli.parser import build_parser


@pytest.fixture
def fake_encoders(monkeypatch):
    return install_fake_encoders(monkeypatch)


def _read_tsv(path) -> list[list[str]]:
    return [line.split("\t") for line in open(path, encoding="utf-8").read().splitlines()[1:]]


def test_npy_inputs_carry_their_sentences(capsys, fake_encoders, tmp_path):
    np.save(tmp_path / "src.npy", np.stack([fake_embedding(s) for s in SOURCES]))
    np.save(tmp_path / "tgt.npy", np.stack([fake_embedding(t) for t in TARGETS]))
    src_text, tgt_text = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / "pairs.tsv"
    code, _, _ = run(
        capsys,
        "mine",
        "--src",
        str(tmp_path / "src.npy"),
        "--tgt",
        str(tmp_path / "tgt.npy"),
        "--src-text",
        src_text,
        "--tgt-text",
        tgt_text,
        "--out",
        str(out),
    )
    assert code == EXIT_OK and fake_encoders.loaded == []
    rows = _read_tsv(out)
    assert {(int(r[1]), int(r[2])) for r in rows} == GOLD
    assert all(r[3] == SOURCES[int(r[1])] and r[4] == TARGETS[int(r[2])] for r in rows)


def test_npy_text_with_another_line_count_is_a_data_error(capsys, fake_encoders, tmp_path):
    np.save(tmp_path / "src.npy", np.stack([fake_embedding(s) for s in SOURCES]))
    src_text = write_lines(tmp_path / "src.txt", SOURCES[:4])
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, err = run(capsys, "mine", "--src", str(tmp_path / "src.npy"), "--src-text", src_text, "--tgt", tgt)
    assert code == EXIT_DATA and "has 4 lines but" in err and "5 embedding rows" in err
    assert fake_encoders.loaded == []


@pytest.mark.parametrize(
    "content", [b"", b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (5, 16), }"]
)
def test_empty_or_truncated_npy_is_one_line_exit_3(capsys, fake_encoders, tmp_path, content):
    (tmp_path / "src.npy").write_bytes(content)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, err = run(capsys, "mine", "--src", str(tmp_path / "src.npy"), "--tgt", tgt)
    assert code == EXIT_DATA and str(tmp_path / "src.npy") in err and len(err.strip().splitlines()) == 1
    assert fake_encoders.loaded == []


def test_one_encoder_per_side_each_loaded_once(capsys, fake_encoders, tmp_path):
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, _ = run(capsys, "mine", "--src", src, "--tgt", tgt, "--src-model", "student", "--tgt-model", "teacher")
    assert code == EXIT_OK and fake_encoders.loaded == ["student", "teacher"]
    assert fake_encoders.encoders[0].encoded == [SOURCES] and fake_encoders.encoders[1].encoded == [TARGETS]
    fake_encoders.loaded.clear()
    assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--model", "shared")[0] == EXIT_OK
    assert fake_encoders.loaded == ["shared"]
    fake_encoders.loaded.clear()
    assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--model", "m", "--tgt-model", "t")[0] == EXIT_OK
    assert fake_encoders.loaded == ["m", "t"]


def test_a_side_model_for_an_npy_side_is_a_usage_error(capsys, fake_encoders, tmp_path):
    np.save(tmp_path / "src.npy", np.stack([fake_embedding(s) for s in SOURCES]))
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, err = run(capsys, "mine", "--src", str(tmp_path / "src.npy"), "--tgt", tgt, "--src-model", "x")
    assert code == EXIT_USAGE and "--src-model" in err


def test_stdin_for_one_side(capsys, fake_encoders, tmp_path, monkeypatch):
    src = write_lines(tmp_path / "src.txt", SOURCES)
    data = "".join(t + "\n" for t in TARGETS).encode()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    out = tmp_path / "pairs.tsv"
    assert run(capsys, "mine", "--src", src, "--tgt", "-", "--out", str(out))[0] == EXIT_OK
    assert {(int(r[1]), int(r[2])) for r in _read_tsv(out)} == GOLD


def test_a_stdin_problem_names_stdin(capsys, fake_encoders, tmp_path, monkeypatch):
    src = write_lines(tmp_path / "src.txt", SOURCES)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"a\tb\n"), encoding="utf-8"))
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", "-", "--out", str(tmp_path / "pairs.tsv"))
    assert code == EXIT_DATA and "<stdin>:1: the sentence contains a tab" in err and fake_encoders.loaded == []


def test_process_substitution_is_read_as_a_stream(capsys, fake_encoders, tmp_path):
    # What `--tgt <(zcat de.gz)` passes: a /dev/fd/N path to a pipe, readable once, with no size.
    read_end, write_end = os.pipe()

    def feed():
        with os.fdopen(write_end, "wb") as handle:
            handle.write("".join(t + "\n" for t in TARGETS).encode())

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        src = write_lines(tmp_path / "src.txt", SOURCES)
        out = tmp_path / "pairs.tsv"
        code, _, err = run(capsys, "mine", "--src", src, "--tgt", f"/dev/fd/{read_end}", "--out", str(out))
    finally:
        thread.join()
        os.close(read_end)
    assert code == EXIT_OK, err
    assert {(int(r[1]), int(r[2])) for r in _read_tsv(out)} == GOLD


def test_documents_keep_a_sentence_repeated_in_two_documents(capsys, fake_encoders, tmp_path):
    # "cat|en" is in documents d1 and d2, and each has its translation: both pairs must be mined, and each
    # distinct sentence is encoded once.
    src = write_lines(tmp_path / "src.txt", ["cat|en", "dog|en", "cat|en", "tree|en"])
    tgt = write_lines(tmp_path / "tgt.txt", ["dog|de", "cat|de", "tree|de", "cat|de"])
    src_docs = write_lines(tmp_path / "src.docs", ["d1", "d1", "d2", "d2"])
    tgt_docs = write_lines(tmp_path / "tgt.docs", ["d1", "d1", "d2", "d2"])
    out = tmp_path / "pairs.tsv"
    code, _, _ = run(
        capsys, "mine", "--src", src, "--tgt", tgt, "--src-docs", src_docs, "--tgt-docs", tgt_docs, "--out", str(out)
    )
    assert code == EXIT_OK
    rows = _read_tsv(out)
    assert {(int(r[1]), int(r[2]), r[5]) for r in rows} == {(0, 1, "d1"), (1, 0, "d1"), (2, 3, "d2"), (3, 2, "d2")}
    assert fake_encoders.n_encoded == 6  # 3 distinct source + 3 distinct target sentences


def test_one_default_mode_for_python_and_the_command_line():
    from bitext_hf.mining import DEFAULT_MODE

    for command in ("mine", "eval"):
        assert build_parser().parse_args([command]).mode is None  # resolved to DEFAULT_MODE when run
    help_text = build_parser()._subparsers._group_actions[0].choices["mine"].format_help()
    assert f"default {DEFAULT_MODE}" in help_text


def test_mine_writes_the_sidecar_that_push_puts_in_the_dataset_card(capsys, fake_encoders, tmp_path, monkeypatch):
    import json
    import shlex

    from bitext_hf.hub.dataset_card import metadata_path, prepare_dataset_folder

    monkeypatch.chdir(tmp_path)
    write_lines(tmp_path / "src.txt", SOURCES)
    write_lines(tmp_path / "tgt.txt", TARGETS)
    argv = [
        "mine",
        "--src",
        "src.txt",
        "--tgt",
        "tgt.txt",
        "--src-model",
        "student",
        "--tgt-model",
        "teacher",
        "--quantize",  # the fakes compute in float32; "auto" would name bfloat16 on a CPU that has it
        "none",
        "--k",
        "2",
        "--mode",
        "intersect",
        "--threshold",
        "1.01",
        "--out",
        "pairs.parquet",
    ]
    code, _, err = run(capsys, *argv)
    assert code == EXIT_OK, err
    sidecar = json.loads(metadata_path("pairs.parquet").read_text(encoding="utf-8"))
    assert sidecar == {
        "src_model": "student",
        "tgt_model": "teacher",
        "margin": "ratio",
        "mode": "intersect",
        "k": 2,
        "threshold": 1.01,
        "index": "exact",
        "src": "src.txt",
        "tgt": "tgt.txt",
        "src_sentences": 5,
        "tgt_sentences": 5,
        "command": shlex.join(["bitext-hf", *argv, "--quiet"]),
    }
    card = (
        prepare_dataset_folder("pairs.parquet", tmp_path / "dataset", repo_id="me/mined") / "README.md"
    ).read_text()
    facts = [
        "| encoder | `source: student, target: teacher` |",
        "| margin | ratio |",
        "| retrieval mode | intersect |",
        "| k (neighbours averaged by the margin) | 2 |",
        "| threshold | 1.01 |",
        "| neighbour search | exact |",
        "| source text | src.txt |",
        "| sentences searched (source x target) | 5 x 5 |",
        sidecar["command"],
    ]
    assert [fact for fact in facts if fact not in card] == []
    unknown = [line for line in card.split("## Mining")[1].split("## Counts")[0].splitlines() if "Needed]" in line]
    assert unknown == ["| languages | [More Information Needed] |"]  # mine is not told them (push --languages is)
    # push --pairs reads the same sidecar (a dry run: no token, no network).
    code, out, err = run(capsys, "push", "--pairs", "pairs.parquet", "--repo", "me/mined", "--dry-run")
    assert code == EXIT_OK and "mining.json" in out and "no mining metadata" not in err


def test_one_encoder_for_both_sides_is_the_encoder_of_the_sidecar(capsys, fake_encoders, tmp_path):
    import json

    from bitext_hf.encoders.spec import EncoderSpec

    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / "pairs.tsv"
    assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out))[0] == EXIT_OK
    sidecar = json.loads((tmp_path / "pairs.tsv.meta.json").read_text(encoding="utf-8"))
    # The default encoder by the runtime it computes in ("torch", "torch bf16" where the CPU has it natively).
    default = EncoderSpec(None).identity
    assert default.startswith("use-multilingual-v3 (torch")
    assert sidecar["encoder"] == default and "src_model" not in sidecar and "threshold" not in sidecar
    # .npy sides: the encoder is not known, and the sidecar does not pretend it is.
    np.save(tmp_path / "src.npy", np.stack([fake_embedding(s) for s in SOURCES]))
    assert run(capsys, "mine", "--src", str(tmp_path / "src.npy"), "--tgt", tgt, "--out", str(out))[0] == EXIT_OK
    sidecar = json.loads((tmp_path / "pairs.tsv.meta.json").read_text(encoding="utf-8"))
    assert sidecar["tgt_model"] == default and "src_model" not in sidecar and "encoder" not in sidecar


def test_no_sidecar_for_streams_or_when_the_pairs_are_not_written(
    capsys, caplog, fake_encoders, tmp_path, monkeypatch
):
    import bitext_hf.data.pair_files
    from bitext_hf.errors import OutputWriteError

    monkeypatch.chdir(tmp_path)
    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    for out in ("-", os.devnull):
        assert run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", out)[0] == EXIT_OK
    assert "could not write" not in caplog.text
    assert sorted(path.name for path in tmp_path.iterdir()) == ["src.txt", "tgt.txt"]
    assert not os.path.exists(os.devnull + ".meta.json")
    # A failed run leaves neither pairs nor sidecar: a data error, then a failed write of the pairs.
    np.save(tmp_path / "wide.npy", np.zeros((5, DIM + 1), np.float32))
    code, _, _ = run(capsys, "mine", "--src", "wide.npy", "--tgt", tgt, "--out", "pairs.tsv")
    assert code == EXIT_DATA

    def failing_write(*args, **kwargs):
        raise OutputWriteError("pairs.tsv: no space left on device")

    monkeypatch.setattr(bitext_hf.data.pair_files, "write_pairs", failing_write)
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", "pairs.tsv")
    assert code != EXIT_OK and "no space left" in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["src.txt", "tgt.txt", "wide.npy"]


def test_pairs_and_sidecar_are_written_together_or_not_at_all(capsys, fake_encoders, tmp_path, monkeypatch):
    import errno

    src, tgt = write_lines(tmp_path / "src.txt", SOURCES), write_lines(tmp_path / "tgt.txt", TARGETS)
    out, sidecar = tmp_path / "pairs.tsv", tmp_path / "pairs.tsv.meta.json"
    out.write_text("an earlier run's pairs\n", encoding="utf-8")
    sidecar.write_text('{"margin": "distance"}', encoding="utf-8")
    real_replace = os.replace

    def replace_failing_for_the_sidecar(source, target, *args, **kwargs):
        if str(target).endswith(".meta.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace_failing_for_the_sidecar)
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out))
    assert code == EXIT_ERROR and "no space left on device" in err and len(err.strip().splitlines()) == 1
    # Neither the new pairs without their description, nor the earlier description without its pairs: the commit
    # puts the earlier run's files back as they were.
    assert out.read_text(encoding="utf-8") == "an earlier run's pairs\n"
    assert sidecar.read_text(encoding="utf-8") == '{"margin": "distance"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv", "pairs.tsv.meta.json", "src.txt", "tgt.txt"]


def test_a_file_name_that_is_not_utf8_is_written_escaped_into_the_sidecar(capsys, fake_encoders, tmp_path):
    name = os.fsdecode(b"src-\xff.txt")  # what Python makes of such a name under any locale: a lone surrogate
    src = write_lines(tmp_path / name, SOURCES)
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    out = tmp_path / "pairs.tsv"
    code, _, err = run(capsys, "mine", "--src", src, "--tgt", tgt, "--out", str(out))
    assert code == EXIT_OK, err
    record = json.loads((tmp_path / "pairs.tsv.meta.json").read_text(encoding="utf-8"))
    assert record["src"].endswith("src-\\xff.txt") and "src-\\xff.txt" in record["command"]
