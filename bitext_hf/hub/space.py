"""The review app as a Hugging Face Space (``bitext-hf push --space DATASET``): a folder of three files that runs
``bitext-hf app`` on a dataset that ``bitext-hf push --pairs`` published.

- ``README.md``: the Space's card (``sdk: gradio``, ``app_file: app.py``, the dataset it reviews);
- ``app.py``: downloads the dataset's Parquet file, copies it where the review may write (``/data``, a Space's
  persistent storage, when the Space has it; else a folder of its own, which a restart of the Space empties), and
  opens the review there; ``BITEXT_HF_SPACE_DATA`` names a local copy of the dataset instead (a test, a mirror);
- ``requirements.txt``: this version of bitext-hf with its app extra.

The files are text made here; nothing of the app is imported (the hub layer sits under it).
"""

from __future__ import annotations

import os
from pathlib import Path

from bitext_hf.hub.dataset_card import DATA_FILE
from bitext_hf.hub.upload import check_repo_id

__all__ = ["SPACE_FILES", "prepare_space_folder"]

SPACE_FILES = ("README.md", "app.py", "requirements.txt")

_CARD = """---
title: Review {name}
emoji: 🔎
colorFrom: blue
colorTo: gray
sdk: gradio
app_file: app.py
pinned: false
datasets:
- {dataset}
tags:
- bitext-hf
- bitext-mining
---

# Review {dataset}

The pairs of [{dataset}](https://huggingface.co/datasets/{dataset}) in bitext-hf's review app: sort and filter them by
score, quality, length ratio and language ID, see the estimated precision as the threshold moves, reject pairs by
hand, and export what is kept (with a sidecar that `bitext-hf push --pairs` turns into a dataset card).

Decisions are kept beside the pairs in `{workdir}`: with the Space's persistent storage (`/data`) they survive a
restart; without it a restart starts a new review.

Made with `bitext-hf push --space {dataset} --repo {repo}`.
"""

_APP = '''"""A bitext-hf review Space for {dataset} (written by `bitext-hf push --space`)."""

import os
import shutil
from pathlib import Path

from bitext_hf.app import PairsReview, launch

DATASET = {dataset!r}
DATA_FILE = {data_file!r}


def review_folder() -> Path:
    """Where the review writes: the Space's persistent storage when it has one."""
    folder = Path("/data/review") if os.path.isdir("/data") and os.access("/data", os.W_OK) else Path("review").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def open_review() -> PairsReview:
    local = os.environ.get("BITEXT_HF_SPACE_DATA")
    if local:
        source = Path(local) / DATA_FILE
    else:
        from huggingface_hub import hf_hub_download

        source = Path(hf_hub_download(DATASET, DATA_FILE, repo_type="dataset"))
    pairs = review_folder() / "pairs.parquet"
    if not pairs.exists():
        # A copy of its own: the download cache holds links, and the review writes beside its input.
        shutil.copyfile(source, pairs)
    return PairsReview(pairs)


if __name__ == "__main__":
    launch(open_review(), host="0.0.0.0", port=int(os.environ.get("PORT", "7860")))
'''


def prepare_space_folder(folder: str | os.PathLike, *, dataset: str, repo_id: str, version: str) -> Path:
    """Write the Space's files (:data:`SPACE_FILES`) into the existing, empty ``folder``; returns it. ``dataset``: the
    dataset repository the Space reviews; ``repo_id``: the Space's own; ``version``: the bitext-hf it installs."""
    check_repo_id(dataset, "dataset")
    check_repo_id(repo_id, "repo_id")
    folder = Path(folder)
    name = dataset.split("/")[-1]
    workdir = "/data/review"
    (folder / "README.md").write_text(
        _CARD.format(name=name, dataset=dataset, repo=repo_id, workdir=workdir), encoding="utf-8"
    )
    (folder / "app.py").write_text(_APP.format(dataset=dataset, data_file=DATA_FILE), encoding="utf-8")
    (folder / "requirements.txt").write_text(f"bitext-hf[app]=={version}\n", encoding="utf-8")
    return folder
