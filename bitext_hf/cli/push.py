"""``bitext-hf push``: upload a saved model folder, or mined pairs as a dataset with its card, to the Hub.

Checks run before any network access, cheapest first: the repository id and the folder or pairs file (exit 2 for
a folder that is not a saved model, 3 for a pairs file that cannot be read), then the token (exit 4 when there is
none). The upload is one commit (all files or none); a refusal of the Hub (401/403, 404, no network) is exit 4 and
its message says that nothing was uploaded.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from bitext_hf.errors import EXIT_OK, DataValidationError

__all__ = ["EPILOG_PUSH", "add_push", "cmd_push"]

logger = logging.getLogger(__name__)

EPILOG_PUSH = """examples:
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --private
  bitext-hf push --pairs pairs.parquet --repo me/mined-en-de --languages en de
  bitext-hf push --model runs/laser3-wol --repo me/laser3-wol --dry-run   # list what would be committed

--model uploads the folder written by save_for_hub (weights, tokenizer, remote code, card and figures) as it is,
leaving training leftovers out (checkpoint-*, logs, caches). --pairs publishes a `datasets` dataset: a Parquet
train split, a dataset card with the mining parameters, counts and score histogram, and mining.json. The
parameters come from the sidecar `<pairs file>.meta.json` when it exists (or --meta FILE); what it lacks is
marked [More Information Needed] in the card.

Token: --token, else the HF_TOKEN variable, else the saved `hf auth login`.

exit codes:
  0  uploaded (the commit URL is printed)
  2  wrong usage: a bad --repo, a --model folder without config.json or weights
  3  a pairs file or metadata file that cannot be read (the message names it)
  4  the Hub: no token, no write permission (HTTP 401/403), repository or revision not found, no network;
     nothing was uploaded (one commit: all files or none)
Errors are one line on stderr; --debug or BITEXT_HF_DEBUG=1 shows the traceback instead."""


def add_push(commands, fmt) -> None:
    """Register ``push`` on the sub-command parsers ``commands``."""
    p = commands.add_parser(
        "push",
        help="upload a saved model, or mined pairs as a dataset with its card, to the Hugging Face Hub",
        formatter_class=fmt,
        epilog=EPILOG_PUSH,
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="a folder written by save_for_hub (config.json and weights)")
    what.add_argument("--pairs", help="mined pairs (.parquet, .jsonl, .csv or .tsv as `bitext-hf mine` writes them)")
    p.add_argument("--repo", required=True, help="the Hub repository, owner/name (created if missing)")
    p.add_argument("--private", action="store_true", help="create the repository private (an existing one is kept)")
    p.add_argument("--revision", help="the branch to commit to (created from main if missing; default main)")
    p.add_argument("--token", help="a Hub token with write access (default: HF_TOKEN, then the saved login)")
    p.add_argument("--message", help="the commit message")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list the files the commit would hold (with their sizes) and stop: no token, no network",
    )
    group = p.add_argument_group("with --pairs")
    group.add_argument("--meta", help="mining metadata JSON (default: <pairs file>.meta.json when it exists)")
    group.add_argument("--languages", nargs=2, metavar=("SRC", "TGT"), help="language codes of the two sides")
    group.add_argument("--license", help="the dataset's licence id for the card (e.g. cc-by-4.0)")
    p.add_argument("-q", "--quiet", action="store_true", help="no info logs")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks of errors")
    p.set_defaults(func=cmd_push)


def cmd_push(args) -> int:
    from bitext_hf.hub.upload import MODEL_IGNORE_PATTERNS, check_checkpoint, check_repo_id, resolve_token, upload

    repo_id = check_repo_id(args.repo)
    if args.model is not None:
        folder = check_checkpoint(args.model)
        if args.dry_run:
            return _list_files(folder, MODEL_IGNORE_PATTERNS, f"model repository {repo_id}")
        token = resolve_token(args.token)
        url = upload(
            folder,
            repo_id,
            token=token,
            private=args.private,
            revision=args.revision,
            commit_message=args.message or "Upload model trained with bitext-hf",
            ignore_patterns=MODEL_IGNORE_PATTERNS,
        )
        print(f"uploaded {folder} to {repo_id}: {url}")
        return EXIT_OK

    from bitext_hf.hub.dataset_card import (
        metadata_path,
        prepare_dataset_folder,
        read_mining_metadata,
        read_pairs_table,
    )

    pairs = Path(args.pairs)
    if not pairs.is_file():
        raise DataValidationError(f"--pairs {args.pairs}: no such file")
    table = read_pairs_table(pairs)  # every check on the data before the token and the work
    meta = Path(args.meta) if args.meta else metadata_path(pairs)
    if args.meta and not meta.is_file():
        raise DataValidationError(f"--meta {args.meta}: no such file")
    metadata = read_mining_metadata(meta) if meta.is_file() else {}
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
            return _list_files(folder, (), f"dataset repository {repo_id}")
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


def _list_files(folder: Path, ignore_patterns, target: str) -> int:
    """Print what one commit of ``folder`` would hold (``--dry-run``), with the rule the upload applies."""
    from huggingface_hub.utils import filter_repo_objects

    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    kept = list(filter_repo_objects(files, ignore_patterns=list(ignore_patterns) or None))
    for name in kept:
        print(f"{(folder / name).stat().st_size:>12,}  {name}")
    print(f"dry run: {len(kept)} files would be committed to the {target}; nothing was uploaded")
    return EXIT_OK
