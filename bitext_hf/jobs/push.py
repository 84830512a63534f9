"""The push job: ``run_push(PushConfig)`` uploads a saved model folder, or mined pairs as a dataset with its card, to
the Hub in one commit, or with ``dry_run`` says what that commit would hold. ``bitext-hf push`` calls it; Python
users call the same thing.

Checks run before any network access, cheapest first: the options and the repository id (when the config is made),
the folder or pairs file (``UsageError`` for a folder that is not a saved model or holds a link out of it, and for a
``--pairs`` or ``--meta`` that is a FIFO, a device or a folder: refused unopened; ``DataValidationError`` for a pairs,
metadata or threshold report file that is missing, larger than its bound, unreadable, or holds a NaN or infinite
number the card would summarize), then the token (``HubAccessError`` when there is none). Every file is read once,
bounded, before the token is looked for; what goes up is what was checked. A model folder publishes the exported
model only, checked file by file (:mod:`bitext_hf.hub.model_files`). A refusal of the Hub (401/403, 404, no network)
is a ``HubAccessError`` whose message says that nothing was uploaded.
"""

from __future__ import annotations

import logging
import os
import reprlib
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from bitext_hf.errors import UsageError
from bitext_hf.hub.upload import check_repo_id, resolve_token, upload
from bitext_hf.io.terminal import escape_controls
from bitext_hf.jobs.base import ReportLine, job_run
from bitext_hf.jobs.option_fields import check_fields, option

if TYPE_CHECKING:
    from bitext_hf.hub.model_files import LeftOut

__all__ = ["PushConfig", "PushResult", "push_report", "run_push"]

logger = logging.getLogger(__name__)

PREVIEW_ROWS = 5


@dataclass(kw_only=True)
class PushConfig:
    """One ``bitext-hf push`` run; the fields are its options (``--dry-run`` is ``dry_run``), and messages name them
    as the command line spells them. Checked when made (``UsageError``).

    Args:
        model (str, optional): a folder written by ``save_for_hub``: its exported model goes up.
        pairs (str, optional): mined pairs (.parquet, .jsonl, .csv or .tsv as ``bitext-hf mine`` writes them): they
            go up as a dataset with its card.
        space (str, optional): a dataset on the Hub (``owner/name``, as ``pairs`` published it): a Gradio Space
            that opens it in the review app goes up (:mod:`bitext_hf.hub.space`). Exactly one of ``model``,
            ``pairs`` and ``space``.
        repo (str): the Hub repository, ``owner/name`` (created if missing).
        private (bool): create the repository private (an existing one is kept).
        revision (str, optional): the branch to commit to (default main).
        token (str, optional): a token with write access (default: ``HF_TOKEN``, then the saved login).
        message (str, optional): the commit message.
        dry_run (bool): say what the commit would hold and what stays local, then stop: no token, no network.
        include (list of str): with ``model``, fnmatch patterns of files to add.
        exclude (list of str): with ``model``, fnmatch patterns of files to leave out.
        meta (str, optional): with ``pairs``, the mining metadata (default: the sidecar ``<pairs>.meta.json``).
        languages (list of two str, optional): with ``pairs``, the two sides' language codes, for the card.
        license (str, optional): with ``pairs``, the dataset's licence id, for the card.
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {
        "model": ("with --model", None),
        "pairs": ("with --pairs", None),
    }

    model: str | None = field(
        default=None,
        metadata=option(
            "a folder written by save_for_hub (config.json and weights): its exported model goes up",
            exclusive="what",
            required=True,
        ),
    )
    pairs: str | None = field(
        default=None,
        metadata=option(
            "mined pairs (.parquet, .jsonl, .csv or .tsv as `bitext-hf mine` writes them)",
            exclusive="what",
            required=True,
        ),
    )
    space: str | None = field(
        default=None,
        metadata=option(
            "a dataset on the Hub (owner/name, as --pairs published it): a Gradio Space that reviews it in "
            "`bitext-hf app` goes up to --repo",
            exclusive="what",
            required=True,
            metavar="DATASET",
        ),
    )
    repo: str = field(metadata=option("the Hub repository, owner/name (created if missing)", required=True))
    private: bool = field(default=False, metadata=option("create the repository private (an existing one is kept)"))
    revision: str | None = field(
        default=None, metadata=option("the branch to commit to (created from main if missing; default main)")
    )
    token: str | None = field(
        default=None, metadata=option("a Hub token with write access (default: HF_TOKEN, then the saved login)")
    )
    message: str | None = field(default=None, metadata=option("the commit message"))
    dry_run: bool = field(
        default=False,
        metadata=option(
            "print the files the commit would hold (sizes, total) and what stays local and why, then stop: "
            "no token, no network; with --pairs also the rows, columns and first rows"
        ),
    )
    include: list[str] = field(
        default_factory=list,
        metadata=option(
            "also upload the files this pattern matches (repeatable; fnmatch on the path inside the folder, "
            "'NAME/' for a folder)",
            metavar="PATTERN",
            action="append",
            group="model",
        ),
    )
    exclude: list[str] = field(
        default_factory=list,
        metadata=option(
            "do not upload the files this pattern matches, even files of the model (repeatable; a link "
            "named here is left out instead of refused)",
            metavar="PATTERN",
            action="append",
            group="model",
        ),
    )
    meta: str | None = field(
        default=None,
        metadata=option("mining metadata JSON (default: <pairs file>.meta.json when it exists)", group="pairs"),
    )
    languages: list[str] | None = field(
        default=None,
        metadata=option("language codes of the two sides", metavar=("SRC", "TGT"), nargs=2, group="pairs"),
    )
    license: str | None = field(
        default=None, metadata=option("the dataset's licence id for the card (e.g. cc-by-4.0)", group="pairs")
    )

    def __post_init__(self) -> None:
        # Each field's type first: include/exclude lists of patterns (one string would be read as its characters),
        # languages two codes, the flags bools.
        check_fields(self)
        for flag, value in (("--model", self.model), ("--pairs", self.pairs), ("--meta", self.meta)):
            if value is not None and not value.strip():
                raise UsageError(f"{flag} {value!r}: an empty path; give a path")
        if sum(value is not None for value in (self.model, self.pairs, self.space)) != 1:
            raise UsageError("give one of --model FOLDER, --pairs FILE and --space DATASET")
        check_repo_id(self.repo)
        if self.space is not None:
            check_repo_id(self.space, "--space")
        if self.model is not None or self.space is not None:
            # Options of a dataset upload do nothing to a model's: refused, as --include/--exclude are with --pairs.
            given = [
                flag
                for flag, value in (
                    ("--meta", self.meta),
                    ("--languages", self.languages),
                    ("--license", self.license),
                )
                if value
            ]
            if given:
                what = "--model uploads a model, whose card is its folder's README.md"
                if self.space is not None:
                    what = "--space uploads a Space, whose card names the dataset it reviews"
                raise UsageError(
                    f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} a --pairs dataset; {what}"
                )
        if self.model is None and (self.include or self.exclude):
            raise UsageError("--include and --exclude choose files of a --model folder")


@dataclass
class PushResult:
    """What a run uploaded, or with ``dry_run`` would upload.

    Args:
        repo_id (str), repo_type (str): the repository, "model" or "dataset".
        files (list of (str, int)): each file of the commit with its size in bytes, by name.
        left_out (list of LeftOut): with ``model``, what stays local and why (a folder as one entry).
        url (str, optional): the commit's URL; None for a dry run.
        preview (str, optional): with ``pairs`` and ``dry_run``, the row count, the columns and the first rows as
            text (:func:`bitext_hf.hub.dataset_card.pairs_preview`).
    """

    repo_id: str
    repo_type: str
    files: list[tuple[str, int]]
    left_out: list[LeftOut] = field(default_factory=list)
    url: str | None = None
    preview: str | None = None


def run_push(config: PushConfig) -> PushResult:
    """Run ``config``: check the folder or the pairs, then (unless ``dry_run``) the token, and upload in one commit.

    Raises:
        UsageError: a ``config`` that is no :class:`PushConfig`, or a field set since it was made to a value it
            refuses (``config.repo = "not a repo"``; the config is checked again first); a folder that is not a saved
            model, a link out of it, nothing left to upload, a file that changed while it was checked; a ``pairs`` or
            ``meta`` that is not a regular file (a FIFO, a device, a folder).
        DataValidationError: a pairs, metadata or threshold report file that is missing, larger than its bound
            (the pairs: the input bound, ``BITEXT_HF_MAX_INPUT_BYTES``; the sidecar 4 MiB), unreadable, or holds an
            empty, NaN or infinite number that the card would summarize (the file and line named).
        HubAccessError: no token, no write permission, repository or revision not found, no network (nothing was
            uploaded).
    """
    if not isinstance(config, PushConfig):
        raise UsageError(f"run_push takes a PushConfig, not {type(config).__name__} ({reprlib.repr(config)})")
    config.__post_init__()
    # Through the same door as every job (its outputs are the upload's own temporary folder, not declared here):
    # the pairs and the metadata are protected from every file the run writes.
    with job_run(config, inputs=[config.pairs, config.meta]):
        if config.model is not None:
            return _push_model(config)
        if config.space is not None:
            return _push_space(config)
        return _push_pairs(config)


def _push_space(config: PushConfig) -> PushResult:
    from bitext_hf import __version__
    from bitext_hf.hub.space import prepare_space_folder

    token = None if config.dry_run else resolve_token(config.token)
    with tempfile.TemporaryDirectory(prefix="bitext-hf-space-") as staging:
        folder = prepare_space_folder(staging, dataset=config.space, repo_id=config.repo, version=__version__)
        files = sorted(path for path in folder.iterdir() if path.is_file())
        result = PushResult(config.repo, "space", [(path.name, path.stat().st_size) for path in files])
        if config.dry_run:
            return result
        result.url = upload(
            folder,
            config.repo,
            repo_type="space",
            token=token,
            private=config.private,
            revision=config.revision,
            commit_message=config.message or f"A bitext-hf review Space for {config.space}",
        )
    return result


def _push_model(config: PushConfig) -> PushResult:
    from bitext_hf.hub.model_files import select_model_files

    selection = select_model_files(config.model, include=config.include, exclude=config.exclude)
    result = PushResult(
        config.repo,
        "model",
        sorted((file.name, file.size) for file in selection.files),
        list(selection.left_out),
    )
    if config.dry_run:
        return result
    token = resolve_token(config.token)
    result.url = upload(
        selection.folder,
        config.repo,
        token=token,
        private=config.private,
        revision=config.revision,
        commit_message=config.message or "Upload model trained with bitext-hf",
        selection=selection,
    )
    return result


def _given_file(path: str, option: str) -> None:
    """A file named on the command line (``--pairs``, ``--meta``) that is there but is not a regular file (a FIFO, a
    device, a folder, a socket) is wrong usage: refused, with what it is, before it is opened (opening a FIFO waits
    for a writer). A missing one, or a link to nothing, is left to the reader (bad input, exit 3)."""
    from bitext_hf.io.small_files import file_kind

    try:
        mode = os.stat(path).st_mode  # a link followed: what it leads to is what would be read
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{option} {escape_controls(path)}: not a regular file ({file_kind(mode)}); push reads {option} whole, "
            "from a regular file"
        )


def _push_pairs(config: PushConfig) -> PushResult:
    from bitext_hf.hub.dataset_card import (
        metadata_path,
        pairs_preview,
        prepare_dataset_folder,
        read_pairs_table,
        read_sidecar,
        read_sidecar_of,
        read_threshold_report,
    )

    # Cheapest first: what the options name, then every file read once and bounded, then the token and the work.
    _given_file(config.pairs, "--pairs")
    if config.meta:
        _given_file(config.meta, "--meta")
    pairs = Path(config.pairs)
    table = read_pairs_table(pairs)
    metadata = read_sidecar(config.meta) if config.meta else read_sidecar_of(pairs)
    report = read_threshold_report(pairs)
    if not metadata:
        where = escape_controls(str(config.meta or metadata_path(pairs)))
        logger.warning("no mining metadata (%s): the card will not say how the pairs were mined", where)
    token = None if config.dry_run else resolve_token(config.token)
    with tempfile.TemporaryDirectory(prefix="bitext-hf-push-") as staging:
        folder = prepare_dataset_folder(
            pairs,
            staging,
            repo_id=config.repo,
            metadata=metadata,
            languages=config.languages,
            license=config.license,
            table=table,
            threshold_report=report,
        )
        files = sorted(path for path in folder.rglob("*") if path.is_file())
        result = PushResult(
            config.repo,
            "dataset",
            sorted((path.relative_to(folder).as_posix(), path.stat().st_size) for path in files),
        )
        if config.dry_run:
            result.preview = pairs_preview(table, pairs, rows=PREVIEW_ROWS)
            return result
        result.url = upload(
            folder,
            config.repo,
            repo_type="dataset",
            token=token,
            private=config.private,
            revision=config.revision,
            commit_message=config.message or "Upload bitext mined with bitext-hf",
        )
    return result


def push_report(config: PushConfig, result: PushResult) -> list[ReportLine]:
    """What ``bitext-hf push`` prints when it ends: for a dry run, the card's preview (pairs), each file of the commit
    with its size and the total, what stays local and why (a model folder); else where the upload went. Names are
    shown with their control characters escaped (a file name may hold a terminal escape sequence or a line break)."""
    if result.url is not None:
        if config.model is not None:
            shown = f"{escape_controls(config.model)} to {result.repo_id} ({len(result.files)} files)"
        elif config.space is not None:
            shown = f"a review Space for {config.space} to {result.repo_id}"
        else:
            shown = f"{escape_controls(str(Path(config.pairs)))} as a dataset to {result.repo_id}"
        return [ReportLine(f"uploaded {shown}: {result.url}")]
    lines = [result.preview] if result.preview is not None else []
    lines.append(f"would commit to the {result.repo_type} repository {result.repo_id}:")
    lines += [f"{size:>15,}  {escape_controls(name)}" for name, size in result.files]
    lines.append(f"total: {len(result.files)} files, {_bytes(sum(size for _, size in result.files))}")
    if config.model is not None:
        lines += _left_out_lines(result.left_out)
    lines.append("dry run: nothing was uploaded")
    return [ReportLine(line) for line in lines]


def _bytes(count: int) -> str:
    """``count`` bytes, exactly and, from a kilobyte on, in the unit a reader takes in at a glance."""
    from tqdm import tqdm

    return f"{count:,} bytes" + (f" ({tqdm.format_sizeof(count, 'B', 1000)})" if count >= 1000 else "")


def _left_out_lines(left_out: list[LeftOut]) -> list[str]:
    if not left_out:
        return ["left out: nothing"]
    lines = [f"left out, stays local ({_bytes(sum(item.size for item in left_out))}; --include PATTERN adds files):"]
    for item in left_out:
        count = f" ({item.files} file{'s' if item.files != 1 else ''})" if item.files else ""
        lines.append(f"{item.size:>15,}  {escape_controls(item.name)}{count}: {escape_controls(item.reason)}")
    return lines
