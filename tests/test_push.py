"""Tests for ``bitext-hf push``: the Hub is a stand-in (``HfApi`` methods intercepted), never the network.

The stand-in records every call and, at ``upload_folder`` time, what the commit would hold (the folder is a
temporary one for --pairs, gone after the command), so the tests assert exactly what would be uploaded.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from huggingface_hub import DatasetCard
from huggingface_hub.errors import HfHubHTTPError

from bitext_hf.cli import main
from bitext_hf.hub.dataset_card import metadata_path, write_mining_metadata
from bitext_hf.mining import MinedPairs, write_pairs

httpx = pytest.importorskip("httpx2") if importlib.util.find_spec("httpx2") else pytest.importorskip("httpx")

SOURCES = ["The cat sleeps.", "It rains.", 'She said "yes".', "Good morning."]
TARGETS = ["Die Katze schläft.", "Es regnet.", 'Sie sagte "ja".', "Guten Morgen."]


class FakeHub:
    """Records HfApi calls; ``fail`` maps a method name to the error it raises."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, dict]] = []
        self.uploaded: dict[str, bytes] = {}
        self.fail: dict[str, Exception] = {}
        import huggingface_hub

        self.existing_public = False  # what repo_info says of the repository
        for name in ("create_repo", "create_branch", "repo_info", "upload_folder"):
            monkeypatch.setattr(huggingface_hub.HfApi, name, self._method(name))

    def _method(self, name):
        def method(api, *args, **kwargs):
            self.calls.append((name, {"token": api.token, "args": args, **kwargs}))
            if name in self.fail:
                raise self.fail[name]
            if name == "upload_folder":
                self._snapshot(Path(kwargs["folder_path"]), kwargs.get("ignore_patterns") or [])
                return type("CommitInfo", (), {"commit_url": "https://hub.example/commit/abc"})()
            if name == "repo_info":
                return type("RepoInfo", (), {"private": not self.existing_public})()
            return "https://hub.example/repo"

        return method

    def _snapshot(self, folder: Path, ignore: list[str]) -> None:
        from huggingface_hub.utils import filter_repo_objects

        files = [path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()]
        for name in filter_repo_objects(files, ignore_patterns=ignore):
            self.uploaded[name] = (folder / name).read_bytes()

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def mined(rows: list[int], scores: list[float]) -> MinedPairs:
    """Pairs of line i with line i (cosines are not written)."""
    indices, values = np.array(rows, dtype=np.int64), np.array(scores, dtype=np.float32)
    return MinedPairs(indices, indices.copy(), values, values * 0.8)


def http_error(status: int) -> HfHubHTTPError:
    request = httpx.Request("POST", "https://huggingface.co/api/repos/create")
    return HfHubHTTPError(f"{status} Client Error", response=httpx.Response(status, request=request))


@pytest.fixture
def hub(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_TOKEN", "hf_env_token")
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.delenv("HF_OIDC_RESOURCE", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token-file"))
    return FakeHub(monkeypatch)


@pytest.fixture
def checkpoint(tmp_path) -> Path:
    folder = tmp_path / "run"
    (folder / "checkpoint-5").mkdir(parents=True)
    (folder / "checkpoint-5" / "optimizer.pt").write_bytes(b"opt")
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text("{}")
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "README.md").write_text("# card\n")
    (folder / "training_curve.png").write_bytes(b"\x89PNG")
    (folder / "logs.jsonl").write_text("{}\n")
    return folder


@pytest.fixture
def pairs_file(tmp_path) -> Path:
    path = tmp_path / "pairs.parquet"
    write_pairs(mined([0, 1, 2], [1.31, 1.12, 1.07]), path, src_texts=SOURCES, tgt_texts=TARGETS)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["push", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_push_model_uploads_the_checkpoint_as_one_commit_without_training_leftovers(hub, checkpoint, capsys):
    code, out, err = run(capsys, "--model", str(checkpoint), "--repo", "me/aligner", "--private", "--revision", "v1")
    assert code == 0, err
    assert hub.names() == ["create_repo", "repo_info", "create_branch", "upload_folder"]
    create, _, branch, upload = (kwargs for _, kwargs in hub.calls)
    assert create["args"] == ("me/aligner",) and create["private"] is True and create["repo_type"] == "model"
    assert create["token"] == "hf_env_token"  # HF_TOKEN, the usual place
    assert branch["branch"] == "v1" and upload["revision"] == "v1" and upload["repo_id"] == "me/aligner"
    assert sorted(hub.uploaded) == [
        "1_Pooling/config.json",
        "README.md",
        "config.json",
        "model.safetensors",
        "training_curve.png",
    ]
    assert "https://hub.example/commit/abc" in out


def test_token_option_and_token_file(hub, checkpoint, capsys, monkeypatch, tmp_path):
    assert run(capsys, "--model", str(checkpoint), "--repo", "me/a", "--token", "hf_option")[0] == 0
    assert hub.calls[-1][1]["token"] == "hf_option"
    monkeypatch.delenv("HF_TOKEN")
    (tmp_path / "token").write_text("hf_file_token\n")
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "token"))
    assert run(capsys, "--model", str(checkpoint), "--repo", "me/a")[0] == 0
    assert hub.calls[-1][1]["token"] == "hf_file_token"
    assert hub.calls[0][0] == "create_repo" and "create_branch" not in hub.names()  # no --revision: main


def test_missing_token_is_one_line_exit_4_before_any_call(hub, checkpoint, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    code, out, err = run(capsys, "--model", str(checkpoint), "--repo", "me/a")
    assert code == 4 and out == ""
    assert err.count("\n") == 1 and "no Hugging Face token" in err and "HF_TOKEN" in err
    assert hub.calls == []


@pytest.mark.parametrize(
    ("failing", "status", "message"),
    [
        ("create_repo", 403, "may not write to me/a \\(HTTP 403\\).*nothing was created or uploaded"),
        (
            "upload_folder",
            403,
            r"may not write to me/a \(HTTP 403\).*nothing was uploaded \(the commit is all or none; me/a exists",
        ),
        ("upload_folder", 404, "not found \\(HTTP 404\\)"),
        ("upload_folder", None, "could not be reached"),
    ],
)
def test_hub_refusals_are_one_line_exit_4(hub, checkpoint, capsys, failing, status, message):
    import re

    hub.fail[failing] = http_error(status) if status else httpx.ConnectError("connection refused")
    code, out, err = run(capsys, "--model", str(checkpoint), "--repo", "me/a")
    assert code == 4 and out == ""
    assert err.count("\n") == 1 and err.startswith("bitext-hf push: error: ") and re.search(message, err)
    assert "Traceback" not in err
    assert hub.uploaded == {}


@pytest.mark.parametrize(
    ("remove", "message"),
    [("config.json", "no config.json"), ("model.safetensors", "no weights"), (None, "not a folder")],
)
def test_a_folder_that_is_not_a_checkpoint_is_exit_2(hub, checkpoint, capsys, remove, message):
    target = checkpoint / "missing" if remove is None else checkpoint
    if remove:
        (checkpoint / remove).unlink()
    code, _, err = run(capsys, "--model", str(target), "--repo", "me/a")
    assert code == 2 and message in err and err.count("\n") == 1
    assert hub.calls == []


@pytest.mark.parametrize("repo", ["a/b/c", "me/", "me/-bad", "me/a b"])
def test_bad_repo_ids_are_usage_errors(hub, checkpoint, capsys, repo):
    code, _, err = run(capsys, "--model", str(checkpoint), "--repo", repo)
    assert code == 2 and "--repo must look like" in err and hub.calls == []


def test_push_pairs_publishes_a_dataset_with_its_card(hub, pairs_file, capsys, tmp_path):
    import datasets

    write_mining_metadata(
        pairs_file,
        {"encoder": "use-multilingual-v3", "margin": "ratio", "mode": "max", "k": 4, "threshold": 1.05,
         "src": "corpus.en", "tgt": "corpus.de",
         "command": "bitext-hf mine --src corpus.en --tgt corpus.de --threshold 1.05 --out pairs.parquet"},
    )  # fmt: skip
    code, out, err = run(capsys, "--pairs", str(pairs_file), "--repo", "me/mined", "--languages", "en", "de")
    assert code == 0 and "as a dataset to me/mined" in out, err
    assert err == ""  # no progress bars of the Parquet writer
    upload = hub.calls[-1][1]
    assert upload["repo_type"] == "dataset" and hub.calls[0][1]["repo_type"] == "dataset"
    assert sorted(hub.uploaded) == [
        "README.md",
        "data/train-00000-of-00001.parquet",
        "mining.json",
        "score_histogram.png",
    ]
    assert hub.uploaded["score_histogram.png"].startswith(b"\x89PNG")
    card = DatasetCard(hub.uploaded["README.md"].decode())
    assert card.data.language == ["en", "de"] and card.data.size_categories == "n<1K"
    assert card.data.configs[0]["data_files"][0]["path"] == "data/train-*.parquet"
    facts = [
        "| encoder | `use-multilingual-v3` |",
        "| margin | ratio |",
        "| retrieval mode | max |",
        "| k (neighbours averaged by the margin) | 4 |",
        "| threshold | 1.05 |",
        "| pairs | 3 |",
        "![Score histogram](score_histogram.png)",
        "bitext-hf mine --src corpus.en --tgt corpus.de --threshold 1.05 --out pairs.parquet",
        'load_dataset("me/mined", split="train")',
    ]
    assert [fact for fact in facts if fact not in card.text] == []
    # The uploaded files make a dataset that `datasets` loads (as the Hub's would).
    copy = tmp_path / "copy"
    for name, content in hub.uploaded.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_bytes(content)
    loaded = datasets.load_dataset(str(copy), split="train")
    assert loaded["src"] == SOURCES[:3] and loaded["tgt"] == TARGETS[:3]
    assert loaded.column_names == ["score", "src_index", "tgt_index", "src", "tgt"]


@pytest.mark.parametrize("suffix", [".tsv", ".jsonl", ".csv"])
def test_push_pairs_reads_every_output_format_of_mine(hub, capsys, caplog, tmp_path, suffix):
    import pyarrow.parquet as pq

    path = tmp_path / f"pairs{suffix}"
    write_pairs(mined([0, 2], [1.2, 1.1]), path, src_texts=SOURCES, tgt_texts=TARGETS)
    code, _, err = run(capsys, "--pairs", str(path), "--repo", "me/mined")
    assert code == 0, err
    assert "no mining metadata" in caplog.text  # no sidecar: the card says it does not know
    card = hub.uploaded["README.md"].decode()
    assert "| margin | [More Information Needed] |" in card and "the command was not recorded" in card
    import io

    table = pq.read_table(io.BytesIO(hub.uploaded["data/train-00000-of-00001.parquet"]))
    assert table.column("tgt").to_pylist() == [TARGETS[0], TARGETS[2]]  # quotes in TSV are text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "cannot read the pairs"),
        (b"a\tb\n1\t2\n", "no column score, src, tgt"),
        (b"score\tsrc_index\ttgt_index\tsrc\ttgt\n", "no pairs to publish"),
    ],
)
def test_unreadable_pairs_are_exit_3_before_the_token(hub, capsys, tmp_path, monkeypatch, content, message):
    monkeypatch.delenv("HF_TOKEN")  # the data is checked first
    path = tmp_path / "pairs.tsv"
    path.write_bytes(content)
    code, _, err = run(capsys, "--pairs", str(path), "--repo", "me/mined")
    assert code == 3 and message in err and str(path) in err and err.count("\n") == 1
    assert hub.calls == []


def test_missing_pairs_and_bad_metadata_are_exit_3(hub, pairs_file, capsys):
    code, _, err = run(capsys, "--pairs", str(pairs_file) + ".missing", "--repo", "me/m")
    assert code == 3 and "no such file" in err
    metadata_path(pairs_file).write_text("[1, 2]")
    code, _, err = run(capsys, "--pairs", str(pairs_file), "--repo", "me/m")
    assert code == 3 and "must be a JSON object" in err and hub.calls == []


def test_push_needs_exactly_one_of_model_and_pairs(hub, checkpoint, pairs_file, capsys):
    with pytest.raises(SystemExit) as raised:
        main(["push", "--model", str(checkpoint), "--pairs", str(pairs_file), "--repo", "me/a"])
    assert raised.value.code == 2 and hub.calls == []


def test_dry_run_lists_the_commit_without_token_or_network(hub, checkpoint, pairs_file, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    code, out, _ = run(capsys, "--model", str(checkpoint), "--repo", "me/a", "--dry-run")
    assert code == 0 and hub.calls == []
    listed = [line.split()[-1] for line in out.splitlines()[:-1]]
    assert listed == ["1_Pooling/config.json", "README.md", "config.json", "model.safetensors", "training_curve.png"]
    assert (
        out.splitlines()[-1]
        == "dry run: 5 files would be committed to the model repository me/a; nothing was uploaded"
    )
    code, out, _ = run(capsys, "--pairs", str(pairs_file), "--repo", "me/m", "--dry-run")
    assert code == 0 and hub.calls == []
    assert [line.split()[-1] for line in out.splitlines()[:-1]] == [
        "README.md", "data/train-00000-of-00001.parquet", "mining.json", "score_histogram.png",
    ]  # fmt: skip


def test_adapter_folders_are_checkpoints_and_broken_card_images_are_reported(hub, tmp_path, capsys, caplog):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
    (adapter / "adapter_model.safetensors").write_bytes(b"lora")
    (adapter / "README.md").write_text("# LoRA\n\n![curve](training_curve.png)\n![logo](https://x.example/l.png)\n")
    code, _, err = run(capsys, "--model", str(adapter), "--repo", "me/lora")
    assert code == 0, err
    assert sorted(hub.uploaded) == ["README.md", "adapter_config.json", "adapter_model.safetensors"]
    assert "shows training_curve.png, which is not in the folder" in caplog.text and "l.png" not in caplog.text


def test_private_push_into_an_existing_public_repository_is_refused(hub, checkpoint, capsys):
    hub.existing_public = True
    code, _, err = run(capsys, "--model", str(checkpoint), "--repo", "me/public", "--private")
    assert code == 4 and "me/public already exists and is public" in err and "Nothing was uploaded" in err
    assert "upload_folder" not in hub.names() and hub.uploaded == {}
    assert run(capsys, "--model", str(checkpoint), "--repo", "me/public")[0] == 0  # without --private: as asked
    assert hub.names()[-2:] == ["create_repo", "upload_folder"]  # no repo_info call when privacy is not asked
