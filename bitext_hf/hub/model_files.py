"""Which files of a model folder go to the Hub, checked, and staged so that exactly those are uploaded.

What a model folder publishes (:func:`select_model_files`): the exported model only, the files transformers,
tokenizers, PEFT, sentence-transformers and ``save_for_hub`` write (:data:`MODEL_FILE_PATTERNS`, the remote code
that ``auto_map`` names with the modules it imports relatively, the sentence-transformers module folders that
modules.json names, the images the card shows), plus what ``include`` patterns add, less what ``exclude`` patterns
remove. Training leftovers (checkpoints, stage runs, caches, the Trainer's state, evaluation results, folders
holding a model of their own) stay local, each with its reason.

The folder is walked without following links: a link whose target leaves the folder is refused
(:class:`UsageError`, exit 2, before any token or network access); a link to a file inside the folder is uploaded as
that file's content under the link's name (the Hub has no links, and what it points to is in the folder anyway);
links to folders are not followed (no loops, no second copies); what is not a regular file (a FIFO, a device) is
never opened. The upload commits exactly the checked files (:func:`staged`): a private temporary folder holds them
as hard links (copies where the filesystem refuses hard links), each verified to be the very file that was checked,
so a file swapped for a link or for another file after the check is refused, not followed.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import posixpath
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from bitext_hf.errors import OutputWriteError, UsageError
from bitext_hf.hub.upload import IMAGE_LINK, check_model_folder
from bitext_hf.io.small_files import MAX_CONFIG_BYTES

__all__ = [
    "MODEL_FILE_PATTERNS",
    "CheckedFile",
    "FileSelection",
    "LeftOut",
    "printable",
    "select_model_files",
    "staged",
]

# The top-level files of an exported model: what transformers' save_pretrained (config, weights, their shards and
# index), a tokenizer's save_pretrained (tokenizer.json, its config, the vocabulary files of transformers' tokenizer
# classes), PEFT (an adapter), sentence-transformers (its three configs) and save_for_hub (the card) write. Named
# here rather than read from those libraries' constants so that `push` imports none of them.
MODEL_FILE_PATTERNS = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-[0-9]*-of-[0-9]*.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "pytorch_model-[0-9]*-of-[0-9]*.bin",
    "adapter_config.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "vocab.txt",
    "vocab.json",
    "merges.txt",
    "sentencepiece.bpe.model",
    "spiece.model",
    "tokenizer.model",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "README.md",
)
# Why a file or folder stays local, by its first path component (the first match wins): what the recipes and the
# Trainer leave in an output_dir.
_LEFTOVER_REASONS = (
    ("checkpoint-*", "a training checkpoint"),
    ("stage[0-9]*", "a training stage's run (its checkpoints and model; the final model is the folder's own)"),
    ("teacher_cache", "the teacher's embedding cache"),
    ("alignments", "the word-alignment cache"),
    ("tokenizer", "the tokenizer copy a resumed run reuses (the model's own is at the top of the folder)"),
    ("mlm-*", "the MLM pre-training"),
    ("runs", "training logs (TensorBoard)"),
    ("training_args.bin", "the Trainer's arguments (a pickle)"),
    ("trainer_state.json", "training state"),
    ("optimizer.*", "training state"),
    ("scheduler.*", "training state"),
    ("scaler.*", "training state"),
    ("rng_state*", "training state"),
    ("logs.jsonl", "the training log"),
    ("*results*.json", "evaluation results (the card shows them)"),
    (".*", "a hidden file"),
)
_OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a file swapped for a FIFO after the check does not hang the open; it then fails the identity check.
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class CheckedFile:
    """One file of a commit: ``name`` in the repository, with the bytes of ``source`` (a path inside the folder: the
    file itself, or the target of a link inside the folder) as it was checked: ``size`` and ``identity`` (device,
    inode, size, modification time: an inode number alone may be reused by a new file), which staging verifies."""

    name: str
    source: str
    size: int
    identity: tuple[int, ...]


@dataclass(frozen=True)
class LeftOut:
    """What stays local: a file, or a folder (``name`` ends with "/") of ``files`` files, and why."""

    name: str
    files: int
    size: int
    reason: str


@dataclass(frozen=True)
class FileSelection:
    """The checked files of ``folder`` (its resolved path, ``identity`` its device and inode) that one commit holds,
    and what it leaves out."""

    folder: Path
    identity: tuple[int, int]
    files: tuple[CheckedFile, ...]
    left_out: tuple[LeftOut, ...]


def _identity(status: os.stat_result) -> tuple[int, ...]:
    # Not the change time: making the hard link that stages a file changes it.
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def printable(name: str) -> str:
    """``name`` (a file name whose bytes may not be UTF-8: ``os.fsdecode`` keeps them as lone surrogates) with such
    bytes escaped, so that printing it cannot fail."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _matching(name: str, patterns: Sequence[str]) -> str | None:
    """The first of ``patterns`` that selects ``name``, by huggingface_hub's rule (fnmatch on the whole path, "*"
    crossing "/", a pattern ending in "/" meaning everything under that folder)."""
    from huggingface_hub.utils import filter_repo_objects

    return next((pattern for pattern in patterns if list(filter_repo_objects([name], allow_patterns=[pattern]))), None)


def _walk(root_fd: int) -> tuple[dict[str, os.stat_result], dict[str, str], set[str]]:
    """Every entry beneath the folder open as ``root_fd``, never following a link: relative path -> lstat; links ->
    their target as written; and the folders that could be listed."""
    entries: dict[str, os.stat_result] = {}
    links: dict[str, str] = {}
    listed: set[str] = set()
    for directory, folders, files, directory_fd in os.fwalk(".", dir_fd=root_fd):
        prefix = "" if directory == "." else directory[2:] + "/"  # "./a/b" -> "a/b/"
        listed.add(prefix)
        for name in (*folders, *files):
            try:
                status = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
                if stat.S_ISLNK(status.st_mode):
                    links[prefix + name] = os.readlink(name, dir_fd=directory_fd)
            except OSError:  # removed while walking
                continue
            entries[prefix + name] = status
    return entries, links, listed


def _resolve_link(root: Path, name: str, entries: dict[str, os.stat_result]) -> tuple[str | None, str | None]:
    """(the path inside the folder of the regular file the link ``name`` leads to, None) or (None, why it cannot be
    uploaded; "outside" when its target leaves the folder)."""
    target = os.path.realpath(root / name)
    if os.path.commonpath([str(root), target]) != str(root):
        return None, "outside"
    inside = Path(target).relative_to(root).as_posix()
    status = entries.get(inside)
    if inside == "." or (status is not None and stat.S_ISDIR(status.st_mode)):
        return None, "a link to a folder (links to folders are not followed)"
    if status is None or not stat.S_ISREG(status.st_mode):
        return None, "a link that leads to no regular file"
    return inside, None


def _open_parent(root_fd: int, relative: str) -> tuple[int, str]:
    """The folder holding ``relative`` inside the folder open as ``root_fd``, opened following no link on the way,
    and the last name of ``relative``.

    Written by hand because Python has no openat2(RESOLVE_BENEATH): each folder on the way is opened relative to
    the previous one with O_NOFOLLOW, so a folder swapped for a link after the check cannot lead out of the folder.
    """
    *folders, name = relative.split("/")
    folder_fd = os.dup(root_fd)
    try:
        for folder in folders:
            next_fd = os.open(folder, _OPEN_FOLDER, dir_fd=folder_fd)
            os.close(folder_fd)
            folder_fd = next_fd
    except OSError:
        os.close(folder_fd)
        raise
    return folder_fd, name


def _open_beneath(root_fd: int, relative: str) -> int:
    """``relative`` inside the folder open as ``root_fd`` opened for reading, following no link, never blocking."""
    folder_fd, name = _open_parent(root_fd, relative)
    try:
        return os.open(name, _OPEN_FILE, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)


def _read_checked(root_fd: int, file: CheckedFile) -> bytes | None:
    """The content of a checked file, or None when it is no longer the file that was checked."""
    try:
        fd = _open_beneath(root_fd, file.source)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode) or _identity(status) != file.identity:
            return None
        # A config, card or module of more than this is not read into memory: what it would tell (remote code,
        # images, relative imports) is left out, as for a file that cannot be parsed.
        if status.st_size > MAX_CONFIG_BYTES:
            return None
        return handle.read(MAX_CONFIG_BYTES)


def _read_json(root_fd: int, file: CheckedFile | None) -> object:
    content = _read_checked(root_fd, file) if file is not None else None
    try:
        return json.loads(content) if content is not None else None
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; RecursionError: nested too deep
        return None


def _remote_code(root_fd: int, candidates: dict[str, CheckedFile]) -> set[str]:
    """The Python files the configs' ``auto_map`` name (a reference to another repository, "repo--module.Class",
    ships no code here), with the modules they import relatively, as transformers' save_pretrained copies them."""
    modules: set[str] = set()
    for config in ("config.json", "tokenizer_config.json"):
        record = _read_json(root_fd, candidates.get(config))
        auto_map = record.get("auto_map") if isinstance(record, dict) else None
        for value in auto_map.values() if isinstance(auto_map, dict) else ():
            for reference in value if isinstance(value, list) else [value]:
                if isinstance(reference, str) and "." in reference and "--" not in reference:
                    modules.add(reference.split(".")[0])
    found: set[str] = set()
    pending = [f"{module}.py" for module in modules]
    while pending:
        name = pending.pop()
        if name in found or name not in candidates:
            continue
        found.add(name)
        try:
            tree = ast.parse(_read_checked(root_fd, candidates[name]) or b"")
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                imported = [node.module] if node.module else [alias.name for alias in node.names]
                pending += [f"{module.split('.')[0]}.py" for module in imported]
    return found


def _module_folders(root_fd: int, candidates: dict[str, CheckedFile]) -> set[str]:
    """The folders of the sentence-transformers modules (1_Pooling/, 2_Dense/...) that modules.json names."""
    entries = _read_json(root_fd, candidates.get("modules.json"))
    folders = set()
    for entry in entries if isinstance(entries, list) else ():
        path = entry.get("path") if isinstance(entry, dict) else None
        if isinstance(path, str) and path and posixpath.normpath(path) == path and not path.startswith(("/", "..")):
            folders.add(path + "/")
    return folders


def _card_images(root_fd: int, candidates: dict[str, CheckedFile]) -> set[str]:
    """The files inside the folder that the card (README.md) shows as images: its figures."""
    content = _read_checked(root_fd, candidates["README.md"]) if "README.md" in candidates else None
    images = set()
    for link in IMAGE_LINK.findall(content.decode("utf-8", "replace") if content else ""):
        path = posixpath.normpath(re.split(r"[?#]", link)[0])
        if "://" not in link and not path.startswith(("/", "..")):
            images.add(path)
    return images


def _leftover_reason(name: str, entries: dict[str, os.stat_result]) -> str:
    top = name.split("/")[0]
    for pattern, reason in _LEFTOVER_REASONS:
        if fnmatchcase(top, pattern):
            return reason
    if top != name and any(f"{top}/{model_file}" in entries for model_file in ("config.json", "adapter_config.json")):
        return f"a model of its own: push it with its own --model, or add it with --include '{top}/'"
    return "not part of the exported model"


def _classify(
    path: Path, root: Path, walked: tuple[dict[str, os.stat_result], dict[str, str], set[str]], exclude: Sequence[str]
) -> tuple[dict[str, CheckedFile], dict[str, str]]:
    """The files that may go up (regular files, and links to one inside the folder) and the entries that cannot or
    must not (name -> why); a :class:`UsageError` for a link out of the folder that ``exclude`` does not name."""
    entries, links, listed = walked
    candidates: dict[str, CheckedFile] = {}
    reasons = {
        f"{name}/": "a folder that could not be read"
        for name, status in entries.items()
        if stat.S_ISDIR(status.st_mode) and f"{name}/" not in listed
    }
    for name, status in sorted(entries.items()):
        if stat.S_ISDIR(status.st_mode):
            continue
        excluded = _matching(name, exclude) or (name in links and _matching(name + "/", exclude))
        source = name
        if name in links:
            source, why_not = _resolve_link(root, name, entries)
            if why_not == "outside" and not excluded:
                raise UsageError(
                    f"{printable(str(path / name))}: a symbolic link out of the model folder (to "
                    f"{printable(links[name])}); push uploads only what is inside the folder: copy the file in, "
                    f"or leave the link out with --exclude '{printable(name)}'"
                )
            if source is None:
                reasons[name] = f"--exclude {excluded}" if excluded else why_not
                continue
            status = entries[source]
        elif not stat.S_ISREG(status.st_mode):
            reasons[name] = "not a regular file (never opened)"
            continue
        if excluded:
            reasons[name] = f"--exclude {excluded}"
        elif printable(name) != name:
            reasons[name] = "a name that is not valid UTF-8 (the Hub's paths are)"
        candidates[name] = CheckedFile(name, source, status.st_size, _identity(status))
    return candidates, reasons


def _left_out(reasons: dict[str, str], sizes: dict[str, int], kept: set[str], entries) -> list[LeftOut]:
    """What stays local; a folder none of whose files goes up is one line (its files' reason if they share one)."""
    groups: dict[str, list[str]] = {}
    for name in reasons:
        groups.setdefault(name.split("/")[0], []).append(name)
    left_out = []
    for top, names in sorted(groups.items()):
        if names == [top] or any(name.startswith(top + "/") for name in kept):
            left_out += [LeftOut(name, 0, sizes.get(name, 0), reasons[name]) for name in sorted(names)]
            continue
        shared = {reasons[name] for name in names}
        reason = shared.pop() if len(shared) == 1 else _leftover_reason(names[0], entries)
        files = [name for name in names if not name.endswith("/")]
        left_out.append(LeftOut(top + "/", len(files), sum(sizes.get(name, 0) for name in files), reason))
    return left_out


def select_model_files(
    folder: str | os.PathLike, *, include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> FileSelection:
    """The files of the model folder ``folder`` that belong on the Hub (see the module docstring), checked.

    ``include`` / ``exclude``: patterns as huggingface_hub's ``filter_repo_objects`` reads them (fnmatch on the path
    inside the folder, "*" crossing "/", "NAME/" for a folder), adding files to the exported model's and removing
    files from the result. Raises :class:`UsageError` (exit 2) for a folder that is not a saved model, for a link
    whose target leaves the folder (unless ``exclude`` names it), and for a selection without a file.
    """
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"--model {folder}: not a folder (give the folder a model was saved to)")
    root = Path(os.path.realpath(path))
    root_fd = os.open(root, _OPEN_FOLDER)
    try:
        walked = _walk(root_fd)
        candidates, reasons = _classify(path, root, walked, exclude)
        check_model_folder(path)
        module_folders = _module_folders(root_fd, candidates)
        exported = _remote_code(root_fd, candidates) | _card_images(root_fd, candidates)
        entries = walked[0]
        kept: list[CheckedFile] = []
        for name, file in candidates.items():
            if name in reasons:
                continue
            if (
                name in exported
                or ("/" not in name and any(fnmatchcase(name, pattern) for pattern in MODEL_FILE_PATTERNS))
                or any(name.startswith(module) for module in module_folders)
                or _matching(name, include)
            ):
                kept.append(file)
            else:
                reasons[name] = _leftover_reason(name, entries)
        if not kept:
            raise UsageError(f"--model {folder}: no file to upload (see --exclude)")
        sizes = {name: status.st_size for name, status in entries.items() if stat.S_ISREG(status.st_mode)}
        sizes.update((name, file.size) for name, file in candidates.items())
        left_out = _left_out(reasons, sizes, {file.name for file in kept}, entries)
        folder_status = os.fstat(root_fd)
        return FileSelection(root, (folder_status.st_dev, folder_status.st_ino), tuple(kept), tuple(left_out))
    finally:
        os.close(root_fd)


def _staging_places(root: Path, device: int) -> list[str]:
    """Where the staging folder may go: hard links need the folder's filesystem, so the system's temporary folder
    when it is on it, else the folder's parent; copies go wherever a folder can be made."""
    temporary = tempfile.gettempdir()
    same_device = os.stat(temporary).st_dev == device
    return [temporary, str(root.parent)] if same_device else [str(root.parent), temporary]


@contextlib.contextmanager
def staged(selection: FileSelection) -> Iterator[Path]:
    """A private temporary folder holding exactly the files of ``selection`` under their names in the repository,
    as hard links to the checked files (copies where a hard link cannot be made), each verified to be the file that
    was checked; removed on exit. A file changed into another file or a link since the check is a :class:`UsageError`.
    """
    root = selection.folder

    def changed(name: str, detail: str = "") -> UsageError:
        return UsageError(
            f"{printable(str(root / name))}: changed while push was checking the folder{detail}; nothing was "
            "uploaded: run push again"
        )

    try:
        root_fd = os.open(root, _OPEN_FOLDER)
    except OSError as error:
        raise changed("", f" ({error.strerror})") from error
    try:
        folder_status = os.fstat(root_fd)
        if (folder_status.st_dev, folder_status.st_ino) != selection.identity:
            raise changed("")
        staging = None
        for place in _staging_places(root, selection.identity[0]):
            with contextlib.suppress(OSError):
                staging = tempfile.TemporaryDirectory(prefix=".bitext-hf-push-", dir=place)
                break
        if staging is None:
            raise OutputWriteError("push: no folder to stage the upload in (the temporary folder is not writable)")
        with staging as folder:
            for file in selection.files:
                target = Path(folder) / file.name
                target.parent.mkdir(parents=True, exist_ok=True)
                _stage_one(root_fd, file, target, changed)
            yield Path(folder)
    finally:
        os.close(root_fd)


def _stage_one(root_fd: int, file: CheckedFile, target: Path, changed: Callable[..., UsageError]) -> None:
    try:
        parent_fd, name = _open_parent(root_fd, file.source)
    except OSError as error:
        raise changed(file.source, f" ({error.strerror})") from error
    try:
        with contextlib.suppress(OSError):  # another filesystem, or hard links refused: copied below
            os.link(name, target, src_dir_fd=parent_fd, follow_symlinks=False)
            status = os.lstat(target)
            if not stat.S_ISREG(status.st_mode) or _identity(status) != file.identity:
                raise changed(file.source)
            return
        try:
            fd = os.open(name, _OPEN_FILE, dir_fd=parent_fd)
        except OSError as error:
            raise changed(file.source, f" ({error.strerror})") from error
        with os.fdopen(fd, "rb") as source:
            status = os.fstat(source.fileno())
            if not stat.S_ISREG(status.st_mode) or _identity(status) != file.identity:
                raise changed(file.source)
            try:
                with open(target, "xb") as copy:
                    shutil.copyfileobj(source, copy)
            except OSError as error:
                raise OutputWriteError(f"push: cannot stage {file.name} for the upload ({error.strerror})") from error
    finally:
        os.close(parent_fd)
