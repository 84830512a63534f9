"""The bitext-hf command line, end to end with the embedded encoder: results, exit codes, and no output file left
behind on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from bitext_hf.cli import EXIT_DATA, EXIT_ENCODER, EXIT_OK, EXIT_USAGE, main


def run(capsys, *argv):
    code = main([*argv, "--quiet"] if argv and argv[0] != "--help" else list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def corpus(tmp_path):
    en = tmp_path / "en.txt"
    de = tmp_path / "de.txt"
    en.write_text("The weather is nice today.\nWhere is the train station?\nI like green tea.\nThe door is open.\n")
    de.write_text("Wo ist der Bahnhof?\nDie Tür ist offen.\nDas Wetter ist heute schön.\nIch mag grünen Tee.\n")
    return en, de


def test_mine_demo_reports_precision_and_recall(capsys):
    code, out, _ = run(capsys, "mine", "--demo")
    assert code == EXIT_OK
    line = next(line for line in out.splitlines() if line.startswith("against 120 gold pairs"))
    precision, recall = float(line.split("precision ")[1].split()[0]), float(line.split("recall ")[1].split()[0])
    assert precision > 0.85 and recall > 0.9
    # Every report line is words, not a bare number (the gold recall once leaked out as a stray "0.95" line).
    assert not [line for line in out.splitlines() if line.strip().replace(".", "", 1).isdigit()]


def test_mine_writes_tsv_with_the_right_pairs(capsys, corpus, tmp_path):
    en, de = corpus
    out_file = tmp_path / "pairs.tsv"
    code, out, _ = run(capsys, "mine", "--src", str(en), "--tgt", str(de), "--out", str(out_file))
    assert code == EXIT_OK and "wrote 4 pairs" in out
    rows = [line.split("\t") for line in out_file.read_text().splitlines()]
    assert rows[0] == ["score", "src_index", "tgt_index", "src", "tgt"]
    assert {(int(r[1]), int(r[2])) for r in rows[1:]} == {(0, 2), (1, 0), (2, 3), (3, 1)}


def test_encode_then_mine_from_npy_and_parquet(capsys, corpus, tmp_path):
    import pyarrow.parquet as pq

    en, de = corpus
    for path in (en, de):
        assert run(capsys, "encode", "--input", str(path), "--out", str(path) + ".npy")[0] == EXIT_OK
    assert np.load(str(en) + ".npy").shape == (4, 512)
    out_file = tmp_path / "pairs.parquet"
    code, _, _ = run(
        capsys,
        "mine",
        "--src",
        str(en) + ".npy",
        "--tgt",
        str(de) + ".npy",
        "--out",
        str(out_file),
        "--mode",
        "intersect",
    )
    assert code == EXIT_OK and pq.read_table(out_file).num_rows == 4


def test_document_level_mining(capsys, corpus, tmp_path):
    en, de = corpus
    (tmp_path / "en.docs").write_text("d1\nd1\nd2\nd2\n")
    (tmp_path / "de.docs").write_text("d1\nd2\nd1\nd2\n")
    out_file = tmp_path / "pairs.tsv"
    code, _, _ = run(
        capsys,
        "mine",
        "--src",
        str(en),
        "--tgt",
        str(de),
        "--src-docs",
        str(tmp_path / "en.docs"),
        "--tgt-docs",
        str(tmp_path / "de.docs"),
        "--out",
        str(out_file),
        "--mode",
        "intersect",
    )
    assert code == EXIT_OK
    pairs = {tuple(map(int, line.split("\t")[1:3])) for line in out_file.read_text().splitlines()[1:]}
    assert pairs <= {(0, 0), (0, 2), (1, 0), (1, 2), (2, 1), (2, 3), (3, 1), (3, 3)}
    assert (0, 2) in pairs and (3, 1) in pairs


def test_duplicates_are_mined_once_and_reported(capsys, corpus, tmp_path, caplog):
    en, de = corpus
    en.write_text(en.read_text() + "I like green tea.\n")
    out_file = tmp_path / "pairs.tsv"
    code = main(["mine", "--src", str(en), "--tgt", str(de), "--out", str(out_file)])
    capsys.readouterr()
    assert code == EXIT_OK and "1 duplicate line(s)" in caplog.text
    src_lines = [int(line.split("\t")[1]) for line in out_file.read_text().splitlines()[1:]]
    assert 4 not in src_lines and 2 in src_lines


def test_k_larger_than_corpus_is_capped_with_a_warning(capsys, corpus, caplog):
    en, de = corpus
    code = main(["mine", "--src", str(en), "--tgt", str(de), "--k", "50"])
    capsys.readouterr()
    assert code == EXIT_OK and "k=50 is larger than the other side" in caplog.text


def test_score_filters_an_existing_corpus(capsys, tmp_path):
    pairs = tmp_path / "corpus.tsv"
    pairs.write_text(
        "The weather is nice today.\tDas Wetter ist heute schön.\n"
        "Where is the train station?\tIch mag grünen Tee.\n"
        "The door is open.\tDie Tür ist offen.\n"
    )
    out_file = tmp_path / "scored.tsv"
    assert run(capsys, "score", "--pairs", str(pairs), "--out", str(out_file))[0] == EXIT_OK
    rows = [line.split("\t") for line in out_file.read_text().splitlines()[1:]]
    assert [int(r[1]) for r in rows] == [0, 1, 2], "input order is kept"
    scores = [float(r[0]) for r in rows]
    assert scores[1] < min(scores[0], scores[2]), "the mistranslated pair scores lowest"
    kept = tmp_path / "kept.tsv"
    assert (
        run(
            capsys,
            "score",
            "--pairs",
            str(pairs),
            "--out",
            str(kept),
            "--threshold",
            str((scores[1] + min(scores[0], scores[2])) / 2),
        )[0]
        == EXIT_OK
    )
    assert len(kept.read_text().splitlines()) == 3


def test_eval_writes_json(capsys, corpus, tmp_path):
    en, _ = corpus
    de = tmp_path / "de_aligned.txt"
    de.write_text("Das Wetter ist heute schön.\nWo ist der Bahnhof?\nIch mag grünen Tee.\nDie Tür ist offen.\n")
    out_file = tmp_path / "results.json"
    assert run(capsys, "eval", "--src", str(en), "--tgt", str(de), "--out", str(out_file))[0] == EXIT_OK
    results = json.loads(out_file.read_text())
    assert results["xsim"] == {"xsim": 0.0, "errors": 0, "n": 4}
    assert results["accuracy"]["accuracy"] == 1.0


def test_eval_mteb_and_bucc(capsys, tmp_path):
    rows = [
        {"sentence1": "The door is open.", "sentence2": "Die Tür ist offen."},
        {"sentence1": "I like tea.", "sentence2": "Ich mag Tee."},
    ]
    mteb = tmp_path / "t.jsonl"
    mteb.write_text("\n".join(json.dumps(r) for r in rows))
    code, out, _ = run(capsys, "eval", "--mteb", str(mteb))
    assert code == EXIT_OK and json.loads(out)["xsim"]["errors"] == 0
    (tmp_path / "b.de").write_text("d1\tDie Tür ist offen.\nd2\tIch mag Tee.\nd3\tDer Hund bellt laut.\n")
    (tmp_path / "b.en").write_text("e1\tI like tea.\ne2\tThe door is open.\ne3\tStock prices fell sharply.\n")
    (tmp_path / "b.gold").write_text("d1\te2\nd2\te1\n")
    code, out, _ = run(capsys, "eval", "--bucc", *(str(tmp_path / f"b.{s}") for s in ("de", "en", "gold")))
    assert code == EXIT_OK and json.loads(out)["bucc_f1"]["recall"] == 1.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "file is empty"),
        (b"Hello\n\x00\x01\n", ":2: NUL byte"),
        (b"Hello\nSch\xf6n\n", ":2: invalid UTF-8"),
        (b"Hello\n" + b"a" * 20_000 + b"\n", ":2: line of 20000 characters"),
        (b"Hello\n\nWorld\n", ":2: empty line"),
    ],
)
def test_bad_text_input_exits_3_names_the_line_and_writes_nothing(capsys, corpus, tmp_path, content, message):
    en, _ = corpus
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    out_file = tmp_path / "pairs.tsv"
    code, _, err = run(capsys, "mine", "--src", str(en), "--tgt", str(bad), "--out", str(out_file))
    assert code == EXIT_DATA
    assert str(bad) in err and message in err and len(err.strip().splitlines()) == 1
    assert not out_file.exists()


def test_mismatched_parallel_files_are_rejected(capsys, corpus, tmp_path):
    en, de = corpus
    de.write_text(de.read_text() + "Noch eine Zeile.\n")
    out_file = tmp_path / "scored.tsv"
    code, _, err = run(capsys, "score", "--src", str(en), "--tgt", str(de), "--out", str(out_file))
    assert code == EXIT_DATA and "has 4 lines but" in err and not out_file.exists()


@pytest.mark.parametrize(
    ("src", "tgt", "message"),
    [
        (np.full((3, 8), np.nan), np.ones((3, 8)), "NaN or inf"),
        (np.ones((3, 8)), np.ones((3, 9)), "dimension"),
        (np.ones(8), np.ones((3, 8)), "2-D"),
    ],
)
def test_bad_embeddings_exit_3(capsys, tmp_path, src, tgt, message):
    np.save(tmp_path / "src.npy", src.astype(np.float32))
    np.save(tmp_path / "tgt.npy", tgt.astype(np.float32))
    out_file = tmp_path / "pairs.tsv"
    code, _, err = run(
        capsys, "mine", "--src", str(tmp_path / "src.npy"), "--tgt", str(tmp_path / "tgt.npy"), "--out", str(out_file)
    )
    assert code == EXIT_DATA and message in err and not out_file.exists()


def test_corrupt_npy_is_reported(capsys, tmp_path, corpus):
    en, _ = corpus
    (tmp_path / "x.npy").write_bytes(b"not numpy")
    code, _, err = run(capsys, "mine", "--src", str(en), "--tgt", str(tmp_path / "x.npy"))
    assert code == EXIT_DATA and f"{tmp_path / 'x.npy'}: not a .npy file" in err


def test_unloadable_encoder_exits_4(capsys, corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    en, de = corpus
    code, _, err = run(capsys, "mine", "--src", str(en), "--tgt", str(de), "--model", "some-org/not-cached-model")
    assert code == EXIT_ENCODER and "cannot load encoder" in err and len(err.strip().splitlines()) == 1


def test_usage_errors(capsys, corpus):
    en, _ = corpus
    assert run(capsys, "mine", "--src", str(en))[0] == EXIT_USAGE
    # An unknown choice is the config's refusal (the same for Python callers), one line, before --src is asked for.
    code, _, err = run(capsys, "mine", "--mode", "best")
    assert code == EXIT_USAGE and "mode='best' (--mode): must be one of forward, backward" in err
    assert len(err.strip().splitlines()) == 1


def test_console_script_help():
    result = subprocess.run(
        [sys.executable, "-m", "bitext_hf.cli", "mine", "--help"], capture_output=True, text=True, check=True
    )
    assert "bitext-hf mine --demo" in result.stdout and "exit codes" in result.stdout
