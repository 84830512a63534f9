"""Output formats of mined pairs: real CSV, JSON Lines, Parquet, TSV to stdout, a doc_id column, and an unknown
extension refused before any work."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from cli_fakes import SOURCES, TARGETS, install_fake_encoders, run, write_lines

from bitext_hf.cli import EXIT_DATA, EXIT_OK, EXIT_USAGE
from bitext_hf.data.pair_files import TSV_HEADER, check_representable, write_pairs
from bitext_hf.errors import DataValidationError, UsageError
from bitext_hf.io.tables import output_format
from bitext_hf.mining import MinedPairs

# Sentences that CSV must quote, and non-ASCII text that JSON Lines must keep as is.
SOURCES_Q = ['cat|en, "the" cat', *SOURCES[1:]]
TARGETS_Q = [*TARGETS[:2], "cat|de, die Katze – schön", *TARGETS[3:]]


@pytest.fixture
def fake_encoders(monkeypatch):
    return install_fake_encoders(monkeypatch)


@pytest.fixture
def sides(tmp_path):
    return write_lines(tmp_path / "src.txt", SOURCES_Q), write_lines(tmp_path / "tgt.txt", TARGETS_Q)


def _mine(capsys, sides, out, *extra):
    return run(capsys, "mine", "--src", sides[0], "--tgt", sides[1], "--out", str(out), *extra)


def test_csv_is_real_csv(capsys, fake_encoders, sides, tmp_path):
    out = tmp_path / "pairs.csv"
    assert _mine(capsys, sides, out)[0] == EXIT_OK
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == TSV_HEADER and len(rows) == 6
    by_src = {int(r[1]): r for r in rows[1:]}
    assert by_src[0][3] == SOURCES_Q[0] and by_src[0][4] == TARGETS_Q[2] and int(by_src[0][2]) == 2


def test_jsonl_is_one_object_a_line_without_escaped_non_ascii(capsys, fake_encoders, sides, tmp_path):
    out = tmp_path / "pairs.jsonl"
    assert _mine(capsys, sides, out)[0] == EXIT_OK
    text = out.read_text(encoding="utf-8")
    assert "schön" in text and "\\u" not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert len(records) == 5 and set(records[0]) == set(TSV_HEADER)
    assert {(r["src_index"], r["tgt_index"]) for r in records} == {(0, 2), (1, 4), (2, 0), (3, 3), (4, 1)}
    assert all(isinstance(r["score"], float) for r in records)


def test_unknown_extension_is_refused_before_encoding_unless_format_is_given(capsys, fake_encoders, sides, tmp_path):
    out = tmp_path / "pairs.out"
    code, _, err = _mine(capsys, sides, out)
    assert code == EXIT_USAGE and "--format" in err and not out.exists() and fake_encoders.loaded == []
    assert _mine(capsys, sides, out, "--format", "jsonl")[0] == EXIT_OK
    assert len([json.loads(line) for line in out.read_text().splitlines()]) == 5


def test_dash_writes_tsv_to_stdout_and_the_report_to_stderr(capsys, fake_encoders, sides):
    code, out, err = _mine(capsys, sides, "-")
    assert code == EXIT_OK
    lines = out.splitlines()
    assert tuple(lines[0].split("\t")) == TSV_HEADER and len(lines) == 6
    assert "mined 5 pairs" in err and "mined" not in out


def test_parquet_to_a_file(capsys, fake_encoders, sides, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "pairs.parquet"
    assert _mine(capsys, sides, out)[0] == EXIT_OK
    table = pq.read_table(out)
    assert table.column_names == list(TSV_HEADER) and table.num_rows == 5


def _pairs(doc_ids=None) -> MinedPairs:
    scores, cosines = np.array([1.25, 1.0], np.float32), np.zeros(2, np.float32)
    return MinedPairs(
        np.array([1, 0]), np.array([0, 1]), scores, cosines, None if doc_ids is None else np.asarray(doc_ids)
    )


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl", "parquet"])
def test_write_pairs_adds_a_doc_id_column_for_document_mining(tmp_path, fmt):
    out = tmp_path / f"pairs.{fmt}"
    write_pairs(_pairs(["docA", "docB"]), out, src_texts=["a", "b"], tgt_texts=["x", "y"])
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(out).to_pylist()
        assert [row["doc_id"] for row in table] == ["docA", "docB"]
    elif fmt == "jsonl":
        assert [json.loads(line)["doc_id"] for line in out.read_text().splitlines()] == ["docA", "docB"]
    else:
        with out.open(newline="") as handle:
            rows = list(csv.reader(handle, delimiter="\t" if fmt == "tsv" else ","))
        assert rows[0][-1] == "doc_id" and [r[-1] for r in rows[1:]] == ["docA", "docB"]
        assert rows[1][:5] == ["1.250000", "1", "0", "b", "x"]


def test_check_representable_names_the_file_and_line():
    check_representable(["a\tb"], "x.txt", "csv")
    with pytest.raises(DataValidationError, match=r"x\.txt:2: .*tab"):
        check_representable(["fine", "a\tb"], "x.txt", "tsv")
    with pytest.raises(DataValidationError, match="source texts:1: the sentence contains a carriage return"):
        write_pairs(_pairs(), "unused.tsv", src_texts=["a\rb", "c"], tgt_texts=["x", "y"])


def test_write_pairs_checks_only_the_sentences_it_writes(tmp_path):
    # The jobs refuse every input line before encoding; the writer checks the rows of its table, named by input line.
    one_pair = MinedPairs(np.array([1]), np.array([2]), np.array([1.5], np.float32), np.zeros(1, np.float32))
    out = write_pairs(one_pair, tmp_path / "p.tsv", src_texts=["not\twritten", "a"], tgt_texts=["x\n", "y", "z"])
    assert out.read_text("utf-8").splitlines()[1] == "1.500000\t1\t2\ta\tz"
    with pytest.raises(DataValidationError, match="target texts:3: the sentence contains a line break"):
        write_pairs(one_pair, tmp_path / "q.tsv", src_texts=["x", "a"], tgt_texts=["x", "y", "z\nz"])
    assert not (tmp_path / "q.tsv").exists()


@pytest.mark.parametrize(
    "sentence, held", [("a\tb", "a tab"), ("a\nb", "a line break"), ("a\rb", "a carriage return")]
)
def test_the_alignment_tsv_check_names_what_the_sentence_holds(sentence, held):
    from bitext_hf.data.alignment_files import check_tsv_sentences

    check_tsv_sentences(["fine", "also fine"], "doc.en")
    with pytest.raises(DataValidationError) as caught:
        check_tsv_sentences(["fine", sentence], "doc.en")
    assert str(caught.value) == (
        f"doc.en:2: the sentence contains {held}, which TSV output cannot hold; write .jsonl, .parquet or .tmx "
        "instead (or --format vecalign|jsonl|parquet|tmx)"
    )


def test_output_format_from_extension_or_option():
    assert [output_format(p) for p in ("a.tsv", "a.CSV", "a.jsonl", "a.pq", "-")] == [
        "tsv",
        "csv",
        "jsonl",
        "parquet",
        "tsv",
    ]
    assert output_format("a.out", "csv") == "csv"
    with pytest.raises(UsageError):
        output_format("pairs.json")


def test_score_writes_the_format_of_its_extension(capsys, fake_encoders, tmp_path):
    pairs = write_lines(tmp_path / "corpus.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)])
    out = tmp_path / "scored.jsonl"
    assert run(capsys, "score", "--pairs", pairs, "--out", str(out))[0] == EXIT_OK
    assert [json.loads(line)["src_index"] for line in out.read_text().splitlines()] == [0, 1, 2, 3, 4]
    src = write_lines(tmp_path / "src.txt", ["a|en\tb", *SOURCES[1:]])
    tgt = write_lines(tmp_path / "tgt.txt", TARGETS)
    code, _, err = run(capsys, "score", "--src", src, "--tgt", tgt, "--out", str(tmp_path / "scored.tsv"))
    assert code == EXIT_DATA and f"{src}:1:" in err and fake_encoders.n_encoded == 10


def test_a_stream_output_is_tsv_whatever_its_name(tmp_path):
    import os

    os.mkfifo(tmp_path / "fifo")
    assert output_format(tmp_path / "fifo") == "tsv" and output_format("/dev/stdout") == "tsv"
    with pytest.raises(UsageError):
        output_format(tmp_path / "regular-file-to-be")


def test_a_full_disk_is_one_line_exit_1_and_leaves_nothing(capsys, fake_encoders, sides, tmp_path, monkeypatch):
    import errno

    class FullDiskWriter:
        def __init__(self, handle):
            pass

        def writerow(self, row):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(csv, "writer", FullDiskWriter)
    before = set(tmp_path.iterdir())
    code, _, err = _mine(capsys, sides, tmp_path / "pairs.csv")
    assert code == 1 and "no space left on device" in err and len(err.strip().splitlines()) == 1
    assert "--debug" not in err and set(tmp_path.iterdir()) == before


@pytest.mark.slow
def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    import subprocess
    import sys

    rng = np.random.default_rng(0)
    for name in ("src", "tgt"):  # enough pairs that the TSV outgrows the pipe buffer
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((2000, 8)).astype(np.float32))
    command = (
        f"{sys.executable} -m bitext_hf.cli mine --src {tmp_path}/src.npy --tgt {tmp_path}/tgt.npy --out - -q "
        "--mode union | head -n 1"
    )
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith("score\t")
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr


def test_a_new_file_under_dev_shm_is_written_in_the_format_of_its_extension(capsys, fake_encoders, sides):
    """/dev/shm is a file system like any other: a new file there is no stream, and gets the format its name says
    (it once got TSV, as every /dev path did, while the writer wrote it as the regular file it is)."""
    import os
    import shutil
    import tempfile

    import pyarrow.parquet as pq

    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        pytest.skip("no writable /dev/shm here")
    folder = tempfile.mkdtemp(dir="/dev/shm", prefix="bitext-hf-test-")
    try:
        out = os.path.join(folder, "pairs.parquet")
        assert output_format(out) == "parquet"
        assert _mine(capsys, sides, out)[0] == EXIT_OK
        table = pq.read_table(out)  # a TSV under this name would not read as Parquet
        assert table.num_rows > 0 and "score" in table.column_names
    finally:
        shutil.rmtree(folder)


def test_mine_and_score_plan_their_pairs_outputs_alike(tmp_path):
    """bitext_hf.jobs.base.plan_pairs_outputs, the planning of both jobs: the pairs, the threshold report beside a
    file (refused beside a stream) and, for mine, the sidecar committed last."""
    from bitext_hf.jobs.base import JobOutputs, plan_pairs_outputs

    out = str(tmp_path / "pairs.csv")
    with JobOutputs() as outputs:
        assert plan_pairs_outputs(outputs, out, None, threshold_report=True, sidecar=True) == "csv"
        for path in (out + ".threshold.png", out + ".threshold.md", out + ".meta.json"):
            with outputs.open(path) as handle:
                handle.write("x")
        with outputs.staged(out) as path:
            Path(path).write_text("pairs")
        outputs.commit()
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "pairs.csv",
        "pairs.csv.meta.json",
        "pairs.csv.threshold.md",
        "pairs.csv.threshold.png",
    ]
    with JobOutputs() as outputs:
        assert plan_pairs_outputs(outputs, None, None) is None
        assert plan_pairs_outputs(outputs, "-", "jsonl", sidecar=True) == "jsonl" and outputs.is_stream("-")
        with pytest.raises(UsageError, match="--threshold-report writes a figure and a sample beside --out FILE"):
            plan_pairs_outputs(outputs, "-", None, threshold_report=True)


def test_score_refuses_a_threshold_report_beside_a_stream(capsys, fake_encoders, tmp_path):
    pairs = write_lines(tmp_path / "corpus.tsv", [f"{s}\t{t}" for s, t in zip(SOURCES, TARGETS)])
    code, _, err = run(capsys, "score", "--pairs", pairs, "--out", "-", "--threshold-report")
    assert code == EXIT_USAGE and "--threshold-report writes a figure and a sample beside --out FILE" in err
    assert fake_encoders.loaded == []
