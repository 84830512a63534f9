"""``bitext-hf push``: upload a saved model folder, or mined pairs as a dataset with its card, to the Hub.

Checks run before any network access, cheapest first: the repository id and the folder or pairs file (exit 2 for
a folder that is not a saved model or holds a link out of it, 3 for a pairs file that cannot be read), then the
token (exit 4 when there is none). A model folder publishes the exported model only, checked file by file
(:mod:`bitext_hf.hub.model_files`); ``--dry-run`` prints what would go up and what stays local, and why. The upload
is one commit (all files or none); a refusal of the Hub (401/403, 404, no network) is exit 4 and its message says
that nothing was uploaded.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from bitext_hf.errors import EXIT_OK, DataValidationError, UsageError

__all__ = ["EPILOG_PUSH", "add_push", "cmd_push"]

logger = logging.getLogger(__name__)

EPILOG_PUSH = """examples:
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --private
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --dry-run   # what would go up, what stays local
  bitext-hf push --model runs/musr --repo me/musr --include 'eval_results.json' --exclude '*.png'
  bitext-hf push --pairs pairs.parquet --repo me/mined-en-de --languages en de

--model publishes the exported model only: the files save_for_hub (and save_pretrained) write: config.json, the
weights (safetensors, shards and index; a PEFT adapter), the tokenizer files, the remote code that config.json's
auto_map names (with the modules it imports), the sentence-transformers files (modules.json, its configs and the
module folders it names: 1_Pooling/, 2_Dense/...), README.md and the images it shows. Everything else stays
local: checkpoint-*/, stage1/ and stage2/, teacher_cache/, alignments/, tokenizer/, training_args.bin, the
Trainer's state, logs, evaluation results, hidden files, and sub-folders holding a model of their own (push them
with their own --model, e.g. --model runs/musr/sentence-transformers). --include PATTERN adds files, --exclude
PATTERN removes files (both repeatable; fnmatch patterns on the path inside the folder, as huggingface_hub's
allow/ignore patterns: '*' also crosses '/', 'NAME/' is everything in a folder).

Links and odd files: a symbolic link whose target is outside the folder is refused (exit 2, the message names the
link) unless --exclude names it; a link to a file inside the folder goes up as that file's content under the
link's name; links to folders are not followed; FIFOs, sockets and devices are never opened. What goes up is
exactly what was checked: the files are staged as hard links (or copies) in a temporary folder and each is
verified to be the file that was checked: a file swapped for a link or another file meanwhile is never followed
(before staging: refused, exit 2; after: the checked file is what goes up).

--dry-run prints each file of the commit with its size and the total, then what stays local and why (a folder as
one line); with --pairs also the row count, the columns and the first rows. No token, no network.

--pairs publishes a `datasets` dataset: a Parquet train split, a dataset card with the mining parameters, counts
and score histogram, and mining.json. The parameters come from the sidecar `<pairs file>.meta.json` when it
exists (or --meta FILE); what it lacks is marked [More Information Needed] in the card.

Token: --token, else the HF_TOKEN variable, else the saved `hf auth login`.

exit codes:
  0  uploaded (the commit URL is printed), or a dry run
  1  a file could not be staged for the upload (a full disk)
  2  wrong usage: a bad --repo, a --model folder without config.json or weights, a link out of the folder,
     nothing left to upload, a file that changed while it was checked
  3  a pairs file or metadata file that cannot be read (the message names it)
  4  the Hub: no token, no write permission (HTTP 401/403), repository or revision not found, no network;
     nothing was uploaded (one commit: all files or none)
Errors are one line on stderr; --debug or BITEXT_HF_DEBUG=1 shows the traceback instead."""

_PREVIEW_ROWS = 5


def add_push(commands, fmt, shared: argparse.ArgumentParser) -> None:
    """Register ``push`` on the sub-command parsers ``commands``, with the options every command takes (``shared``)."""
    p = commands.add_parser(
        "push",
        parents=[shared],
        help="upload a saved model, or mined pairs as a dataset with its card, to the Hugging Face Hub",
        formatter_class=fmt,
        epilog=EPILOG_PUSH,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--model", help="a folder written by save_for_hub (config.json and weights): its exported model goes up"
    )
    what.add_argument("--pairs", help="mined pairs (.parquet, .jsonl, .csv or .tsv as `bitext-hf mine` writes them)")
    p.add_argument("--repo", required=True, help="the Hub repository, owner/name (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repository private (an existing one is kept)")
    p.add_argument("--revision", help="the branch to commit to (created from main if missing; default main)")
    p.add_argument("--token", help="a Hub token with write access (default: HF_TOKEN, then the saved login)")
    p.add_argument("--message", help="the commit message")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the files the commit would hold (sizes, total) and what stays local and why, then stop: no "
        "token, no network; with --pairs also the rows, columns and first rows",
    )
    group = p.add_argument_group("with --model")
    group.add_argument(
        "--include",
        action="append",
        default=[],
        metavar="PATTERN",
        help="also upload the files this pattern matches (repeatable; fnmatch on the path inside the folder, "
        "'NAME/' for a folder)",
    )
    group.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="do not upload the files this pattern matches, even files of the model (repeatable; a link named "
        "here is left out instead of refused)",
    )
    group = p.add_argument_group("with --pairs")
    group.add_argument("--meta", help="mining metadata JSON (default: <pairs file>.meta.json when it exists)")
    group.add_argument("--languages", nargs=2, metavar=("SRC", "TGT"), help="language codes of the two sides")
    group.add_argument("--license", help="the dataset's licence id for the card (e.g. cc-by-4.0)")
    p.set_defaults(func=cmd_push)


def cmd_push(args) -> int:
    from bitext_hf.hub.upload import check_repo_id, resolve_token, upload

    repo_id = check_repo_id(args.repo)
    if args.model is not None:
        from bitext_hf.hub.model_files import select_model_files

        # Options of a dataset upload do nothing to a model's: refused, as --include/--exclude are with --pairs.
        given = [
            option
            for option, value in (("--meta", args.meta), ("--languages", args.languages), ("--license", args.license))
            if value
        ]
        if given:
            raise UsageError(
                f"{', '.join(given)} describe{'s' if len(given) == 1 else ''} a --pairs dataset; --model uploads a "
                "model, whose card is its folder's README.md"
            )

        selection = select_model_files(args.model, include=args.include, exclude=args.exclude)
        if args.dry_run:
            _print_commit(selection.files, f"model repository {repo_id}")
            _print_left_out(selection.left_out)
            print("dry run: nothing was uploaded")
            return EXIT_OK
        token = resolve_token(args.token)
        url = upload(
            selection.folder,
            repo_id,
            token=token,
            private=args.private,
            revision=args.revision,
            commit_message=args.message or "Upload model trained with bitext-hf",
            selection=selection,
        )
        print(f"uploaded {args.model} to {repo_id} ({len(selection.files)} files): {url}")
        return EXIT_OK

    from bitext_hf.hub.dataset_card import (
        metadata_path,
        pairs_preview,
        prepare_dataset_folder,
        read_pairs_table,
        read_sidecar,
    )

    if args.include or args.exclude:
        raise UsageError("--include and --exclude choose files of a --model folder; --pairs uploads a dataset")
    pairs = Path(args.pairs)
    if not pairs.is_file():
        raise DataValidationError(
            f"--pairs {args.pairs}: {'not a regular file' if pairs.exists() else 'no such file'}"
        )
    table = read_pairs_table(pairs)  # every check on the data before the token and the work
    meta = Path(args.meta) if args.meta else metadata_path(pairs)
    if args.meta and not meta.is_file():
        raise DataValidationError(f"--meta {args.meta}: no such file")
    metadata = read_sidecar(meta) if meta.is_file() else {}
    if not metadata:
        logger.warning("no mining metadata (%s): the card will not say how the pairs were mined", meta)
    token = None if args.dry_run else resolve_token(args.token)
    with tempfile.TemporaryDirectory(prefix="bitext-hf-push-") as staging:
        folder = prepare_dataset_folder(
            pairs,
            staging,
            repo_id=repo_id,
            metadata=metadata,
            languages=args.languages,
            license=args.license,
            table=table,
        )
        if args.dry_run:
            print(pairs_preview(table, pairs, rows=_PREVIEW_ROWS))
            files = sorted(path for path in folder.rglob("*") if path.is_file())
            _print_commit(
                [(path.relative_to(folder).as_posix(), path.stat().st_size) for path in files],
                f"dataset repository {repo_id}",
            )
            print("dry run: nothing was uploaded")
            return EXIT_OK
        url = upload(
            folder,
            repo_id,
            repo_type="dataset",
            token=token,
            private=args.private,
            revision=args.revision,
            commit_message=args.message or "Upload bitext mined with bitext-hf",
        )
    print(f"uploaded {pairs} as a dataset to {repo_id}: {url}")
    return EXIT_OK


def _bytes(count: int) -> str:
    """``count`` bytes, exactly and, from a kilobyte on, in the unit a reader takes in at a glance."""
    from tqdm import tqdm

    return f"{count:,} bytes" + (f" ({tqdm.format_sizeof(count, 'B', 1000)})" if count >= 1000 else "")


def _print_commit(files, target: str) -> None:
    """``files``: CheckedFile or (name, size) pairs; one line each, by name, then the total."""
    from bitext_hf.hub.model_files import printable

    rows = sorted((file.name, file.size) if hasattr(file, "size") else file for file in files)
    print(f"would commit to the {target}:")
    for name, size in rows:
        print(f"{size:>15,}  {printable(name)}")
    total = sum(size for _, size in rows)
    print(f"total: {len(rows)} files, {_bytes(total)}")


def _print_left_out(left_out) -> None:
    from bitext_hf.hub.model_files import printable

    if not left_out:
        print("left out: nothing")
        return
    total = sum(item.size for item in left_out)
    print(f"left out, stays local ({_bytes(total)}; --include PATTERN adds files):")
    for item in left_out:
        count = f" ({item.files} file{'s' if item.files != 1 else ''})" if item.files else ""
        print(f"{item.size:>15,}  {printable(item.name)}{count}: {item.reason}")
