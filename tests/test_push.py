"""Tests for ``bitext-hf push``: the Hub is a stand-in (``HfApi`` methods intercepted), never the network.

The stand-in records every call and, at ``upload_folder`` time, what the commit would hold (the folder is a
temporary one for --pairs, gone after the command), so the tests assert exactly what would be uploaded.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
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
    """Records HfApi calls; ``fail`` maps a method name to the error it raises; ``on_create`` runs when the
    repository is created (after every check, before the upload)."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[str, dict]] = []
        self.uploaded: dict[str, bytes] = {}
        self.fail: dict[str, Exception] = {}
        self.on_create = lambda: None
        import huggingface_hub

        self.existing_public = False  # what repo_info says of the repository
        for name in ("create_repo", "create_branch", "repo_info", "upload_folder"):
            monkeypatch.setattr(huggingface_hub.HfApi, name, self._method(name))

    def _method(self, name):
        def method(api, *args, **kwargs):
            self.calls.append((name, {"token": api.token, "args": args, **kwargs}))
            if name == "create_repo":
                self.on_create()
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

    def copy_to(self, folder: Path) -> Path:
        """The uploaded files, written into ``folder`` as the repository would hold them."""
        for name, content in self.uploaded.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(content)
        return folder

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
    (folder / "modules.json").write_text(json.dumps([{"idx": 0, "path": ""}, {"idx": 1, "path": "1_Pooling"}]))
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "README.md").write_text("# card\n\n![Training curve](training_curve.png)\n")
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
        "modules.json",
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


@pytest.mark.parametrize("repo", ["a/b/c", "me/", "me/-bad", "me/a b", "me/foo--bar", "me/x.git", "me/a..b", ""])
def test_bad_repo_ids_are_usage_errors(hub, checkpoint, capsys, repo):
    code, _, err = run(capsys, "--model", str(checkpoint), "--repo", repo)
    assert code == 2 and "--repo must look like" in err and hub.calls == []


def test_push_pairs_publishes_a_dataset_with_its_card(hub, pairs_file, capsys, tmp_path):
    import datasets

    write_mining_metadata(
        pairs_file,
        {
            "encoder": "use-multilingual-v3",
            "margin": "ratio",
            "mode": "max",
            "k": 4,
            "threshold": 1.05,
            "src": "corpus.en",
            "tgt": "corpus.de",
            "command": "bitext-hf mine --src corpus.en --tgt corpus.de --threshold 1.05 --out pairs.parquet",
        },
    )
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
    loaded = datasets.load_dataset(str(hub.copy_to(tmp_path / "copy")), split="train")
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


def test_dry_run_prints_each_file_with_its_size_the_total_and_what_stays_local(hub, checkpoint, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")  # no token needed, no call made
    code, out, _ = run(capsys, "--model", str(checkpoint), "--repo", "me/a", "--dry-run")
    assert code == 0 and hub.calls == []
    names = ["1_Pooling/config.json", "README.md", "config.json", "model.safetensors", "modules.json"]
    names.append("training_curve.png")
    sizes = {name: (checkpoint / name).stat().st_size for name in names}
    total = sum(sizes.values())
    assert out.splitlines() == [
        "would commit to the model repository me/a:",
        *(f"{size:>15,}  {name}" for name, size in sizes.items()),
        f"total: 6 files, {total:,} bytes",
        "left out, stays local (6 bytes; --include PATTERN adds files):",
        "              3  checkpoint-5/ (1 file): a training checkpoint",
        "              3  logs.jsonl: the training log",
        "dry run: nothing was uploaded",
    ]


def test_pairs_dry_run_shows_the_rows_the_columns_and_the_first_rows(hub, pairs_file, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    code, out, _ = run(capsys, "--pairs", str(pairs_file), "--repo", "me/m", "--dry-run")
    assert code == 0 and hub.calls == []
    lines = out.splitlines()
    assert lines[:2] == [f"{pairs_file}: 3 rows, 5 columns: score, src_index, tgt_index, src, tgt", "first 3 rows:"]
    assert lines[2].split() == ["score", "src_index", "tgt_index", "src", "tgt"]
    for line, (score, source, target) in zip(
        lines[3:6], [(1.31, SOURCES[0], TARGETS[0]), (1.12, SOURCES[1], TARGETS[1]), (1.07, SOURCES[2], TARGETS[2])]
    ):
        assert f"{score}" in line and source in line and target in line
    assert lines[6] == "would commit to the dataset repository me/m:"
    files = [line.split() for line in lines[7:11]]
    assert [name for _, name in files] == [
        "README.md",
        "data/train-00000-of-00001.parquet",
        "mining.json",
        "score_histogram.png",
    ]
    total = sum(int(size.replace(",", "")) for size, _ in files)
    assert all(int(size.replace(",", "")) > 0 for size, _ in files)
    assert (
        re.fullmatch(rf"total: 4 files, {total:,} bytes \([0-9.]+kB\)", lines[11])
        and lines[12] == "dry run: nothing was uploaded"
    )


def test_run_push_is_the_command_in_one_call(hub, checkpoint, pairs_file, capsys):
    from bitext_hf.errors import UsageError
    from bitext_hf.hub.model_files import LeftOut
    from bitext_hf.jobs import PushConfig, run_push

    code, out, _ = run(capsys, "--model", str(checkpoint), "--repo", "me/a", "--dry-run")
    dry = run_push(PushConfig(model=str(checkpoint), repo="me/a", dry_run=True))
    assert code == 0 and dry.url is None and dry.repo_type == "model" and hub.calls == []
    assert [f"{size:>15,}  {name}" for name, size in dry.files] == out.splitlines()[1:7]
    assert dry.left_out == [
        LeftOut("checkpoint-5/", 1, 3, "a training checkpoint"),
        LeftOut("logs.jsonl", 0, 3, "the training log"),
    ]
    assert run(capsys, "--model", str(checkpoint), "--repo", "me/a")[0] == 0
    by_command = dict(hub.uploaded)
    hub.uploaded.clear()
    pushed = run_push(PushConfig(model=str(checkpoint), repo="me/a"))
    assert pushed.url == "https://hub.example/commit/abc" and hub.uploaded == by_command
    assert [name for name, _ in pushed.files] == sorted(by_command)
    hub.uploaded.clear()
    dataset = run_push(PushConfig(pairs=str(pairs_file), repo="me/m", languages=["en", "de"]))
    assert dataset.repo_type == "dataset" and [name for name, _ in dataset.files] == sorted(hub.uploaded)
    with pytest.raises(UsageError, match="--include and --exclude"):
        PushConfig(pairs=str(pairs_file), repo="me/m", include=["*.md"])


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


# -- what a model folder publishes ----------------------------------------------------------------------------------

SECRET = b"TOP SECRET: not for the Hub"
# The exported model of a MuSR-like run: remote code (auto_map, and the modules it imports relatively), weights,
# tokenizer, sentence-transformers modules, the card and the figure it shows.
EXPORT = {
    "config.json": json.dumps(
        {
            "model_type": "musr",
            "auto_map": {
                "AutoConfig": "configuration_musr.MuSRConfig",
                "AutoModel": "modeling_musr.MuSREncoderDecoder",
            },
        }
    ),
    "configuration_musr.py": "class MuSRConfig: ...\n",
    "modeling_musr.py": "from .configuration_musr import MuSRConfig\nfrom . import layers_musr\n",
    "layers_musr.py": "class Block: ...\n",
    "model.safetensors": "final weights",
    "tokenizer.json": "{}",
    "tokenizer_config.json": "{}",
    "modules.json": json.dumps(
        [{"idx": 0, "path": ""}, {"idx": 1, "path": "1_Pooling"}, {"idx": 2, "path": "2_Dense"}]
    ),
    "sentence_bert_config.json": "{}",
    "config_sentence_transformers.json": "{}",
    "1_Pooling/config.json": "{}",
    "2_Dense/config.json": "{}",
    "2_Dense/model.safetensors": "dense weights",
    "README.md": "# MuSR\n\n![xsim by stage](xsim_by_stage.png)\n",
    "xsim_by_stage.png": "PNG",
}
# What a run keeps beside its export (stage runs, checkpoints, caches, the Trainer's state), and what stays local
# for another reason: a model of its own, a script, a hidden file.
LEFTOVERS = {
    "checkpoint-4/model.safetensors": "weights at step 4",
    "checkpoint-4/optimizer.pt": "optimizer",
    "stage1/config.json": "{}",
    "stage1/model.safetensors": "stage-1 weights",
    "stage1/training_args.bin": "pickle",
    "stage1/checkpoint-2/optimizer.pt": "optimizer",
    "stage2/config.json": "{}",
    "stage2/model.safetensors": "stage-2 weights",
    "teacher_cache/en.npy": "cached",
    "alignments/en-de.links": "0-0",
    "tokenizer/tokenizer.json": "{}",
    "sentence-transformers/config.json": "{}",
    "sentence-transformers/model.safetensors": "encoder weights",
    "training_args.bin": "pickle",
    "trainer_state.json": "{}",
    "eval_results.json": "{}",
    "logs.jsonl": "{}\n",
    "train.py": "print('not remote code')\n",
    ".gitignore": "*\n",
}


@pytest.fixture
def musr_run(tmp_path) -> Path:
    folder = tmp_path / "musr-run"
    for name, content in {**EXPORT, **LEFTOVERS}.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    return folder


@pytest.fixture
def secret(tmp_path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "config.json").write_bytes(SECRET)
    path = tmp_path / "secret.txt"
    path.write_bytes(SECRET)
    return path


def test_a_run_folder_publishes_its_exported_model_only(hub, musr_run, capsys):
    code, out, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr")
    assert code == 0, err
    assert hub.uploaded == {name: content.encode() for name, content in EXPORT.items()}  # one copy of the weights
    staging = Path(hub.calls[-1][1]["folder_path"])
    assert not staging.exists() and not staging.is_relative_to(musr_run)  # staged apart, and cleaned up
    code, out, _ = run(capsys, "--model", str(musr_run), "--repo", "me/musr", "--dry-run")
    left_out = out.split("left out, stays local")[1].splitlines()[1:-1]
    assert {line.split()[1].rstrip(":") for line in left_out} == {
        ".gitignore",
        "alignments/",
        "checkpoint-4/",
        "eval_results.json",
        "logs.jsonl",
        "sentence-transformers/",
        "stage1/",
        "stage2/",
        "teacher_cache/",
        "tokenizer/",
        "train.py",
        "trainer_state.json",
        "training_args.bin",
    }
    reasons = {line.split()[1].rstrip(":"): line.split(": ", 1)[1] for line in left_out}
    assert reasons["stage1/"].startswith("a training stage's run") and "(4 files)" in out
    assert reasons["training_args.bin"] == "the Trainer's arguments (a pickle)"
    assert reasons["sentence-transformers/"].startswith("a model of its own: push it with its own --model")
    assert reasons["train.py"] == "not part of the exported model"  # Python that no auto_map names


@pytest.mark.parametrize(
    ("options", "added", "removed"),
    [
        (["--include", "eval_results.json"], {"eval_results.json"}, set()),
        (
            ["--include", "sentence-transformers/"],
            {"sentence-transformers/config.json", "sentence-transformers/model.safetensors"},
            set(),
        ),
        (["--include", ".gitignore", "--include", "train.py"], {".gitignore", "train.py"}, set()),
        (["--exclude", "*.png"], set(), {"xsim_by_stage.png"}),
        (["--exclude", "2_Dense/"], set(), {"2_Dense/config.json", "2_Dense/model.safetensors"}),
        (
            ["--include", "*.json", "--exclude", "stage*", "--exclude", "README.md"],
            {
                "eval_results.json",
                "trainer_state.json",
                "tokenizer/tokenizer.json",
                "sentence-transformers/config.json",
            },
            {"README.md"},
        ),
    ],
)
def test_include_and_exclude_patterns(hub, musr_run, capsys, options, added, removed):
    code, _, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr", *options)
    assert code == 0, err
    assert sorted(hub.uploaded) == sorted((set(EXPORT) | added) - removed)


@pytest.mark.parametrize(
    ("link", "target"),
    [
        ("tokenizer.json", "secret.txt"),  # named like a file of the model
        ("notes.txt", "secret.txt"),  # a name push would leave out anyway
        ("stage2/tokenizer.json", "secret.txt"),  # inside a leftover folder
        ("1_Pooling/config.json", "../../secret.txt"),  # relative, through ..
        ("teacher_cache", "outside"),  # a folder out of the model folder
        ("modules.json", "/nonexistent/modules.json"),  # dangling, out of the folder
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_link_out_of_the_folder_is_refused_before_the_token(
    hub, musr_run, secret, capsys, monkeypatch, link, target, dry_run
):
    monkeypatch.delenv("HF_TOKEN")  # refused before the token is looked for (which would be exit 4)
    path = musr_run / link
    if path.is_dir():
        for child in path.iterdir():
            child.unlink()
        path.rmdir()
    path.unlink(missing_ok=True)
    path.symlink_to(target if target.startswith(("/", "..")) else secret.parent / target)
    code, out, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr", *(["--dry-run"] if dry_run else []))
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}: a symbolic link out of the model folder" in err and f"--exclude '{link}'" in err
    assert hub.calls == [] and hub.uploaded == {}


def test_a_link_out_that_exclude_names_is_left_out(hub, musr_run, secret, capsys):
    for child in (musr_run / "teacher_cache").iterdir():
        child.unlink()
    (musr_run / "teacher_cache").rmdir()
    (musr_run / "teacher_cache").symlink_to(secret.parent / "outside")
    (musr_run / "notes.txt").symlink_to(secret)
    options = ["--exclude", "teacher_cache", "--exclude", "notes.txt", "--include", "*"]
    code, out, err = run(capsys, "--model", str(musr_run), "--repo", "me/m", "--dry-run", *options)
    assert code == 0, err
    assert "              0  teacher_cache: --exclude teacher_cache" in out.splitlines()
    code, _, err = run(capsys, "--model", str(musr_run), "--repo", "me/m", *options)
    assert code == 0, err
    assert "notes.txt" not in hub.uploaded and not any(name.startswith("teacher_cache") for name in hub.uploaded)
    assert not any(SECRET in content for content in hub.uploaded.values())


def test_links_inside_the_folder_and_odd_files(hub, musr_run, capsys):
    # A link to a file inside goes up as that file's content under the link's name; a link to a folder is not
    # followed; a FIFO (named like a tokenizer file) and a name that is not UTF-8 stay local.
    (musr_run / "model.safetensors").unlink()
    (musr_run / "model.safetensors").symlink_to("stage2/model.safetensors")
    (musr_run / "pooling-link").symlink_to("1_Pooling", target_is_directory=True)
    os.mkfifo(musr_run / "vocab.txt")
    (musr_run / os.fsdecode(b"notes-\xff.txt")).write_text("latin-1 name")
    options = ["--include", "pooling-link/", "--include", "pooling-link", "--include", "notes-*"]
    code, out, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr", "--dry-run", *options)
    assert code == 0, err
    lines = out.splitlines()
    assert f"{len(LEFTOVERS['stage2/model.safetensors']):>15,}  model.safetensors" in lines  # the target's size
    assert "              0  vocab.txt: not a regular file (never opened)" in lines
    assert "              0  pooling-link: a link to a folder (links to folders are not followed)" in lines
    assert "             12  notes-\\xff.txt: a name that is not valid UTF-8 (the Hub's paths are)" in lines
    code, _, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr", *options)
    assert code == 0, err
    assert hub.uploaded["model.safetensors"] == b"stage-2 weights"
    assert sorted(hub.uploaded) == sorted(EXPORT)


def test_a_file_swapped_for_a_link_after_the_check_is_not_followed(hub, musr_run, secret, capsys):
    # The swap happens when the repository is created: after every check, before the upload reads the files.
    def swap() -> None:
        (musr_run / "model.safetensors").unlink()
        (musr_run / "model.safetensors").symlink_to(secret)

    hub.on_create = swap
    code, _, err = run(capsys, "--model", str(musr_run), "--repo", "me/musr")
    assert code == 0, err
    assert hub.uploaded["model.safetensors"] == b"final weights"  # the file that was checked
    assert not any(SECRET in content for content in hub.uploaded.values())


def _file_to_link(folder: Path, secret: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(secret)


def _file_to_another_file(folder: Path, secret: Path) -> None:
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").write_bytes(SECRET)


def _folder_to_link(folder: Path, secret: Path) -> None:
    (folder / "1_Pooling").rename(folder / "pooling-old")
    (folder / "1_Pooling").symlink_to(secret.parent / "outside")


def _file_to_fifo(folder: Path, secret: Path) -> None:
    os.mkfifo(folder / "tokenizer.json.new")
    os.replace(folder / "tokenizer.json.new", folder / "tokenizer.json")


@pytest.mark.parametrize("hard_links", [True, False], ids=["hard-links", "copies"])
@pytest.mark.parametrize("swap", [_file_to_link, _file_to_another_file, _folder_to_link, _file_to_fifo])
def test_staging_refuses_what_changed_after_the_check(musr_run, secret, monkeypatch, swap, hard_links):
    from bitext_hf.errors import UsageError
    from bitext_hf.hub.model_files import select_model_files, staged

    if not hard_links:  # another filesystem: the files are copied, from the checked file itself

        def cross_device(*args, **kwargs):
            raise OSError(18, "Invalid cross-device link")

        monkeypatch.setattr(os, "link", cross_device)
    selection = select_model_files(musr_run)
    with staged(selection) as folder:  # unchanged: every file, byte for byte
        staged_files = {
            path.relative_to(folder).as_posix(): path.read_text() for path in folder.rglob("*") if path.is_file()
        }
    assert staged_files == EXPORT
    swap(musr_run, secret)
    with pytest.raises(UsageError, match="changed while push was checking the folder"), staged(selection):
        pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--model", "{run}", "--exclude", "*"], "no file to upload"),
        (["--pairs", "{pairs}", "--include", "*.png"], "--include and --exclude choose files of a --model folder"),
    ],
)
def test_push_refusals_are_usage_errors(hub, musr_run, pairs_file, capsys, options, message):
    argv = [option.format(run=musr_run, pairs=pairs_file) for option in options]
    code, _, err = run(capsys, *argv, "--repo", "me/x")
    assert code == 2 and message in err and err.count("\n") == 1 and hub.calls == []
