"""Uploading a folder to the Hub as one commit, with errors a user can act on.

Everything is checked before the network: the folder (a checkpoint has config.json and weights), the repository
id, the token (``--token``, else ``HF_TOKEN``, else the file ``hf auth login`` writes: ``huggingface_hub.get_token``).
The upload is one ``HfApi.upload_folder`` call, which is one commit: the repository gets every file or none. Errors
of the Hub (401/403: no write permission, 404, network) become :class:`HubAccessError` (exit 4) whose message says
what was and was not changed. Which files of a model folder go up, and how they are checked and staged, is
:mod:`bitext_hf.hub.model_files`.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bitext_hf.errors import EXIT_ENCODER, BitextError, UsageError
from bitext_hf.io.small_files import MAX_CONFIG_BYTES, read_small_json

if TYPE_CHECKING:
    from bitext_hf.hub.model_files import FileSelection

__all__ = ["HubAccessError", "check_model_folder", "check_repo_id", "resolve_token", "upload"]

logger = logging.getLogger(__name__)

_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


class HubAccessError(BitextError, RuntimeError):
    """The Hub cannot be used: no token, no permission, an unknown repository or revision, no network (exit 4, the
    code of a model that cannot be loaded from the Hub either)."""

    exit_code = EXIT_ENCODER


def check_repo_id(repo_id: str, option: str = "--repo") -> str:
    """``repo_id`` if it is ``owner/name`` (or ``name``) as the Hub allows (``huggingface_hub``'s own
    ``validate_repo_id``: letters, digits, '-', '_', '.', at most 96 characters a part, not starting or ending with
    '-' or '.', no '--' or '..', not ending in '.git'), else a usage error naming ``option``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise UsageError(
            f"{option} must look like 'owner/name' (letters, digits, '-', '_', '.'), got {repo_id!r}"
        ) from None
    return repo_id


def check_model_folder(folder: str | os.PathLike) -> Path:
    """``folder`` if it holds a saved model: config.json (a JSON object) and weights (or a PEFT adapter:
    adapter_config.json and adapter weights); else a usage error saying what is missing."""
    path = Path(folder)
    if not path.is_dir():
        raise UsageError(f"--model {folder}: not a folder (give the folder a model was saved to)")
    if (path / "adapter_config.json").is_file() and any((path / name).is_file() for name in _ADAPTER_WEIGHTS):
        _warn_about_the_card(path)
        return path
    config = path / "config.json"
    if not config.is_file():
        raise UsageError(f"--model {folder}: not a saved model: no config.json (save it with save_for_hub first)")
    try:
        if not isinstance(read_small_json(config, MAX_CONFIG_BYTES), dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: JSON nested too deep
        raise UsageError(f"{config}: not a readable model config ({error})") from None
    if not any((path / name).is_file() for name in _WEIGHTS):
        raise UsageError(f"--model {folder}: not a saved model: no weights ({' or '.join(_WEIGHTS[::2])})")
    _warn_about_the_card(path)
    return path


def _warn_about_the_card(folder: Path) -> None:
    card = folder / "README.md"
    if not card.is_file():
        logger.warning("%s has no README.md: the Hub page will have no model card", folder)
        return
    # Relative image links of the card (the figures) must travel with it, or the Hub page shows broken images.
    text = card.read_text(encoding="utf-8", errors="replace")
    for link in IMAGE_LINK.findall(text):
        if "://" not in link and not (folder / link).is_file():
            logger.warning(
                "%s shows %s, which is not in the folder: the Hub page will show a broken image", card, link
            )


def resolve_token(token: str | None) -> str:
    """The token to upload with: ``token``, else ``HF_TOKEN``, else the saved login; a :class:`HubAccessError`
    when there is none (before any network access)."""
    if token:
        return token
    from huggingface_hub import get_token

    found = get_token()
    if not found:
        raise HubAccessError(
            "no Hugging Face token: run `hf auth login`, set HF_TOKEN, or pass --token (a token with write access)"
        )
    return found


def _hub_error(error: Exception, repo_id: str, stage: str) -> HubAccessError:
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if status in (401, 403):
        reason = f"the token may not write to {repo_id} (HTTP {status}): use a token with write access to it"
    elif status == 404:
        reason = f"{repo_id} or the revision was not found (HTTP 404)"
    elif status is not None:
        reason = f"the Hub answered HTTP {status}: {first_line}"
    else:
        reason = f"the Hub could not be reached ({first_line})"
    if stage == "create":
        done = "nothing was created or uploaded"
    else:  # create_repo succeeded: say so, an empty new repository is what the user will find
        done = f"nothing was uploaded (the commit is all or none; {repo_id} exists, empty if it was just created)"
    return HubAccessError(f"{reason}; {done}")


def upload(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    repo_type: str = "model",
    token: str | None,
    private: bool = False,
    revision: str | None = None,
    commit_message: str,
    ignore_patterns: Sequence[str] = (),
    selection: FileSelection | None = None,
) -> str:
    """Create ``repo_id`` if needed, create the branch ``revision`` if needed, and upload ``folder`` as one commit;
    returns the commit URL. ``private``: a new repository is private, and an existing public one is refused (nothing
    uploaded) rather than published to. ``token=None``: huggingface_hub's own default.

    ``selection``: the checked files of a model folder (``bitext_hf.hub.model_files.select_model_files``); then
    exactly those files are committed, staged (``model_files.staged``) before any network access, and ``folder``
    and ``ignore_patterns`` are not used.
    """
    from bitext_hf.hub.model_files import staged

    if selection is None:
        return _upload_folder(folder, repo_id, repo_type, token, private, revision, commit_message, ignore_patterns)
    with staged(selection) as staging:
        _name_the_repository(staging / "README.md", repo_id)
        return _upload_folder(staging, repo_id, repo_type, token, private, revision, commit_message, ())


def _name_the_repository(card: Path, repo_id: str) -> None:
    """Put ``repo_id`` into the load snippets of a card written before its repository was known (the placeholder of
    ``bitext_hf.hub.card_facts``), in the staged copy only: the user's folder keeps its card."""
    from bitext_hf.hub.card_facts import REPO_ID_PLACEHOLDER, fill_repo_id

    if not card.is_file():
        return
    text = card.read_text(encoding="utf-8")
    if REPO_ID_PLACEHOLDER in text:
        card.unlink()  # a hard link to the user's file: writing through it would change the original
        card.write_text(fill_repo_id(text, repo_id), encoding="utf-8")


def _upload_folder(
    folder: str | os.PathLike,
    repo_id: str,
    repo_type: str,
    token: str | None,
    private: bool,
    revision: str | None,
    commit_message: str,
    ignore_patterns: Sequence[str],
) -> str:
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    network_errors: tuple[type[BaseException], ...] = (HfHubHTTPError, ConnectionError, TimeoutError)
    # The HTTP client's transport errors (no network, timeouts): httpx2 or httpx by huggingface_hub version;
    # requests (huggingface_hub < 1.0) raises ConnectionError subclasses.
    for client in ("httpx2", "httpx"):
        try:
            network_errors += (importlib.import_module(client).TransportError,)
        except (ImportError, AttributeError):
            continue
    api = HfApi(token=token)
    try:
        # A Space is created with its SDK: the review app is a Gradio one (bitext_hf.hub.space).
        sdk = {"space_sdk": "gradio"} if repo_type == "space" else {}
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True, **sdk)
        # create_repo keeps an existing repository as it is: a public one would publish what was meant private.
        public = private and getattr(api.repo_info(repo_id, repo_type=repo_type), "private", None) is False
    except network_errors as error:
        raise _hub_error(error, repo_id, "create") from error
    if public:
        raise HubAccessError(
            f"{repo_id} already exists and is public: --private (private=True) does not change an existing "
            "repository; make it private on the Hub or drop --private. Nothing was uploaded"
        )
    try:
        if revision and revision != "main":
            api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
    except network_errors as error:
        raise _hub_error(error, repo_id, "branch") from error
    try:
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type=repo_type,
            revision=revision,
            commit_message=commit_message,
            ignore_patterns=list(ignore_patterns) or None,
        )
    except network_errors as error:
        raise _hub_error(error, repo_id, "upload") from error
    return str(getattr(commit, "commit_url", commit))
