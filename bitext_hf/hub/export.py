"""Save a trained model as a Hub-ready folder (weights, remote code, tokenizer, card, sentence-transformers modules).

``save_for_hub`` writes one folder that loads three ways:

* ``AutoModel.from_pretrained(folder, trust_remote_code=True)`` anywhere (the modeling code travels with it), and
  without ``trust_remote_code`` once ``bitext_hf.modeling`` is imported (``import bitext_hf`` alone does not register);
* ``AutoTokenizer.from_pretrained(folder)``;
* ``SentenceTransformer(folder, trust_remote_code=True)``: ``Transformer -> Pooling -> [Dense] -> [Normalize]``,
  on sentence-transformers 5.x (what transformers 4.x allows) and 6.x alike: the files are in 5.0's format, with the
  classic ``sentence_transformers.models`` class names that 6 still resolves.

The contract with the model (what sentence-transformers relies on): ``forward`` accepts ``input_ids`` and
``attention_mask`` (and ``return_dict``, ``token_type_ids``, or ``**kwargs``) and returns a ``ModelOutput`` whose
``last_hidden_state`` holds the token vectors, shape (batch, length, dim), and is its first field when only those
inputs are given (sentence-transformers 5.0 to 5.3 read ``outputs[0]``). Two options need sentence-transformers 6,
for exporting and for loading: ``token_embeddings_field`` (another field than ``last_hidden_state``) and
``pooling="model"`` (the model's own pooled field ``sentence_embedding`` instead of a Pooling module).
``save_for_hub`` runs the model on a probe sentence first and refuses, with the reason, a model that breaks it.

``push_to_hub`` uploads such a folder with ``huggingface_hub``; ``push_recipe_output`` is every recipe's
``--push_to_hub``: the same upload, with the repository and its settings read from ``TrainingArguments``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from bitext_hf.hub.upload import upload
from bitext_hf.io.small_files import read_small_json

__all__ = [
    "POOLING_MODES",
    "HubExportError",
    "push_recipe_output",
    "push_to_hub",
    "save_for_hub",
]

logger = logging.getLogger(__name__)

# sentence-transformers' Pooling modes, plus "model": the model's own pooled output.
POOLING_MODES = ("mean", "max", "cls", "lasttoken", "mean_sqrt_len_tokens", "weightedmean", "model")
_SENTENCE_TRANSFORMERS_KEYS = {
    "pooling",
    "pooling_mode",  # alias of "pooling"
    "normalize",
    "dense",
    "dense_activation",
    "max_seq_length",
    "token_embeddings_field",
    "sentence_embedding_field",
    "verify",
}
_PROBE_SENTENCES = ("The cat sleeps on the sofa.", "Le chat dort.")
_ST_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")
# The module folders this module writes (1_Pooling, 2_Dense, 3_Normalize) and the files it puts in them: what a
# later export may delete of an earlier one, whose modules.json lists them. A folder of any other name is not ours.
_ST_MODULE_FOLDER = re.compile(r"^(\d+)_(Pooling|Dense|Normalize)$")
_ST_MODULE_FILES = ("config.json", "model.safetensors")
_MODULES_JSON_MAX_BYTES = 2**20  # ours lists at most four modules


class HubExportError(ValueError):
    """The model, tokenizer, options or folder cannot make a valid Hub export."""


# The classic module names: sentence-transformers 5.0 to 5.3 define them, 5.4 and later (6 included) resolve them
# through their backwards-compatible import aliases. The paths 6 itself writes (`sentence_transformers.base...`) do
# not exist in 5.x, the only series people on transformers 4.x can install.
_ST_CLASS = "sentence_transformers.models.{}"
_POOLING_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
_ACTIVATIONS = {None: "torch.nn.modules.linear.Identity", "tanh": "torch.nn.modules.activation.Tanh"}


def _sentence_transformers_modules(
    options: dict[str, Any], dimension: int
) -> list[tuple[str, str, dict[str, Any] | None, dict[str, torch.Tensor] | None]]:
    """The modules after the Transformer as ``(folder, class name, config.json or None, weights or None)``.

    Written by hand in the format sentence-transformers 5.0 wrote: its module classes pass every saved config key to
    their constructors, so the keys that 6's own ``save`` adds (``module_input_name``, ``embedding_dimension``...)
    break loading on 5.x, while 6 still reads the older keys (it renames them silently).
    """
    modules: list[tuple[str, str, dict[str, Any] | None, dict[str, torch.Tensor] | None]] = []
    if options["pooling"] != "model":
        pooling = {"word_embedding_dimension": dimension}
        pooling.update({key: mode == options["pooling"] for mode, key in _POOLING_KEYS.items()})
        modules.append(("Pooling", "Pooling", {**pooling, "include_prompt": True}, None))
    dense = options["dense"]
    if dense is not None:
        config = {
            "in_features": dense.in_features,
            "out_features": dense.out_features,
            "bias": dense.bias is not None,
            "activation_function": _ACTIVATIONS[options["dense_activation"]],
        }
        weights = {"linear.weight": dense.weight.detach().float().cpu().contiguous().clone()}
        if dense.bias is not None:
            weights["linear.bias"] = _cpu_bias(dense).contiguous().clone()
        modules.append(("Dense", "Dense", config, weights))
    if options["normalize"]:
        modules.append(("Normalize", "Normalize", None, None))
    return [
        (f"{index}_{name}", kind, config, weights) for index, (name, kind, config, weights) in enumerate(modules, 1)
    ]


def _st_major_version() -> int:
    import sentence_transformers

    return int(sentence_transformers.__version__.split(".")[0])


def _normalize_options(options: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - _SENTENCE_TRANSFORMERS_KEYS)
    if unknown:
        raise HubExportError(
            f"unknown sentence_transformers option(s) {unknown}; known: {sorted(_SENTENCE_TRANSFORMERS_KEYS)}"
        )
    if "pooling" in options and "pooling_mode" in options and options["pooling"] != options["pooling_mode"]:
        raise HubExportError("give either 'pooling' or 'pooling_mode' (they are the same option), not both")
    pooling = options.get("pooling", options.get("pooling_mode", "mean"))
    if pooling not in POOLING_MODES:
        raise HubExportError(f"sentence_transformers pooling must be one of {POOLING_MODES}, got {pooling!r}")
    dense = options.get("dense")
    if dense is not None and not isinstance(dense, torch.nn.Linear):
        raise HubExportError(f"sentence_transformers 'dense' must be a torch.nn.Linear, got {type(dense).__name__}")
    activation = options.get("dense_activation")
    if activation not in (None, "tanh"):
        raise HubExportError(f"dense_activation must be None or 'tanh', got {activation!r}")
    max_seq_length = options.get("max_seq_length")
    if max_seq_length is not None and (not isinstance(max_seq_length, int) or max_seq_length < 2):
        raise HubExportError(f"max_seq_length must be an int >= 2, got {max_seq_length!r}")
    if pooling == "model" and _st_major_version() < 6:
        raise HubExportError("pooling='model' needs sentence-transformers >= 6; use a Pooling mode instead")
    token_field = options.get("token_embeddings_field", "last_hidden_state")
    if token_field != "last_hidden_state" and _st_major_version() < 6:
        raise HubExportError(
            f"token_embeddings_field={token_field!r} needs sentence-transformers >= 6 (5.x cannot name the field)"
        )
    return {
        "pooling": pooling,
        # Normalized by default: bitext-hf's encoders (and every family's encode) give L2-normalized rows for cosine,
        # and the export must return the same vectors as the family's own encoding, not norm-20 raw pools.
        "normalize": bool(options.get("normalize", True)),
        "dense": dense,
        "dense_activation": activation,
        "max_seq_length": max_seq_length,
        "token_embeddings_field": token_field,
        "sentence_embedding_field": options.get("sentence_embedding_field", "sentence_embedding"),
        "verify": bool(options.get("verify", False)),
    }


def _output_field(output: Any, field: str) -> torch.Tensor | None:
    if isinstance(output, Mapping):
        return output.get(field)
    return getattr(output, field, None)


def _probe(model: torch.nn.Module, tokenizer: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Run the model as sentence-transformers will and check the contract; returns the probe inputs and outputs."""
    features = tokenizer(list(_PROBE_SENTENCES), padding=True, truncation=True, return_tensors="pt")
    features = {key: value for key, value in features.items() if key in ("input_ids", "attention_mask")}
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            output = model(**{key: value.to(device) for key, value in features.items()}, return_dict=True)
    except TypeError as error:
        raise HubExportError(
            f"{type(model).__name__}.forward(input_ids=..., attention_mask=..., return_dict=True) failed ({error}): "
            "sentence-transformers calls it that way"
        ) from error
    finally:
        model.train(was_training)
    field = options["sentence_embedding_field"] if options["pooling"] == "model" else options["token_embeddings_field"]
    values = _output_field(output, field)
    expected_ndim = 2 if options["pooling"] == "model" else 3
    if not isinstance(values, torch.Tensor) or values.ndim != expected_ndim:
        shape = tuple(values.shape) if isinstance(values, torch.Tensor) else type(values).__name__
        raise HubExportError(
            f"{type(model).__name__}'s output has no {expected_ndim}-d tensor {field!r} (got {shape}); set "
            f"sentence_transformers={{'{'sentence' if expected_ndim == 2 else 'token'}_embeddings_field': ...}}"
        )
    dimension = values.shape[-1]
    dense = options["dense"]
    if dense is not None and dense.in_features != dimension:
        raise HubExportError(f"the Dense layer takes {dense.in_features} features but the embeddings have {dimension}")
    own = _output_field(output, options["sentence_embedding_field"]) if options["pooling"] != "model" else None
    return {
        "features": features,
        "values": values.float().cpu(),
        "dimension": dimension,
        "model_sentence_embedding": own.float().cpu() if isinstance(own, torch.Tensor) and own.ndim == 2 else None,
    }


def _warn_if_export_differs_from_model(model: Any, probe: dict[str, Any], options: dict[str, Any]) -> None:
    """A model that pools by itself (e.g. with a projection) and an export that pools otherwise disagree silently."""
    own, exported = probe["model_sentence_embedding"], _expected_embeddings(probe, options)
    if own is None or exported is None:
        return
    # Directions only: the export may add normalization, which cosine similarity ignores anyway.
    same = own.shape == exported.shape and torch.allclose(
        torch.nn.functional.normalize(own, dim=-1), torch.nn.functional.normalize(exported, dim=-1), atol=1e-4
    )
    if not same:
        logger.warning(
            "The sentence-transformers export (pooling=%s%s) does not reproduce %s.%s; if the model's own "
            "pooling is the one you want, pass sentence_transformers={'pooling': 'model'} (or the projection as 'dense')",
            options["pooling"],
            " + dense" if options["dense"] is not None else "",
            type(model).__name__,
            options["sentence_embedding_field"],
        )


def _expected_embeddings(probe: dict[str, Any], options: dict[str, Any]) -> torch.Tensor | None:
    """The embeddings the export should give for the probe sentences, computed by hand (None: mode not covered)."""
    values, mask = probe["values"], probe["features"]["attention_mask"].unsqueeze(-1).float()
    pooling = options["pooling"]
    if pooling == "model":
        pooled = values
    elif pooling == "mean":
        pooled = (values * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    elif pooling == "max":
        pooled = values.masked_fill(mask == 0, -1e9).amax(1)
    elif pooling == "cls":
        pooled = values[:, 0]
    else:
        return None
    dense = options["dense"]
    if dense is not None:
        pooled = torch.nn.functional.linear(pooled, dense.weight.detach().float().cpu(), _cpu_bias(dense))
        if options["dense_activation"] == "tanh":
            pooled = torch.tanh(pooled)
    if options["normalize"]:
        pooled = torch.nn.functional.normalize(pooled, dim=-1)
    return pooled


def _cpu_bias(dense: torch.nn.Linear) -> torch.Tensor | None:
    return None if dense.bias is None else dense.bias.detach().float().cpu()


def _register_remote_code(model: Any) -> bool:
    """Ship the model's code with its weights unless it is a class of transformers itself."""
    model_class, config_class = type(model), type(model.config)
    if model_class.__module__.startswith("transformers.") or model_class.__module__ == "__main__":
        return False
    config_class.register_for_auto_class()
    model_class.register_for_auto_class("AutoModel")
    return True


def _write_sentence_transformers(
    folder: Path, options: dict[str, Any], dimension: int, tokenizer: Any, model_limit: int | None = None
) -> None:
    from safetensors.torch import save_file

    transformer_config: dict[str, Any] = {"do_lower_case": False}
    # model_limit: what the family's encode truncates to (its max_tokens, whatever the tokenizer's own limit), so
    # that both give the same vectors; a max_seq_length option may only lower it.
    max_seq_length = options["max_seq_length"]
    if not isinstance(model_limit, int):
        max_seq_length = max_seq_length or getattr(tokenizer, "model_max_length", None)
    elif max_seq_length is None or max_seq_length > model_limit:
        max_seq_length = model_limit
    if isinstance(max_seq_length, int) and max_seq_length < 1_000_000:  # tokenizers without a limit say 1e30
        transformer_config["max_seq_length"] = max_seq_length
    if _needs_sentence_transformers_6(options):
        # Only 6 can name the output field to read; without these keys it reads `last_hidden_state` (5.4 and later)
        # or the output's first field (5.0 to 5.3), which is why the families put the token vectors there.
        pooled_by_model = options["pooling"] == "model"
        field = options["sentence_embedding_field"] if pooled_by_model else options["token_embeddings_field"]
        transformer_config.update(
            transformer_task="feature-extraction",
            modality_config={"text": {"method": "forward", "method_output_name": field}},
            module_output_name="sentence_embedding" if pooled_by_model else "token_embeddings",
        )
    (folder / "sentence_bert_config.json").write_text(json.dumps(transformer_config, indent=2), encoding="utf-8")

    entries = [{"idx": 0, "name": "0", "path": "", "type": _ST_CLASS.format("Transformer")}]
    for index, (path, kind, config, weights) in enumerate(_sentence_transformers_modules(options, dimension), 1):
        (folder / path).mkdir()
        if config is not None:
            (folder / path / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        if weights is not None:
            save_file(weights, str(folder / path / "model.safetensors"), metadata={"format": "pt"})
        entries.append({"idx": index, "name": str(index), "path": path, "type": _ST_CLASS.format(kind)})
    (folder / "modules.json").write_text(json.dumps(entries, indent=2), encoding="utf-8")

    import transformers

    model_config = {
        "model_type": "SentenceTransformer",
        # No sentence_transformers version: the files are in 5.0's format whatever is installed here, and a newer
        # version than the reader's makes every 5.x user see a warning that the model may not work.
        "__version__": {"transformers": transformers.__version__, "pytorch": torch.__version__},
        "prompts": {},
        "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    }
    (folder / "config_sentence_transformers.json").write_text(json.dumps(model_config, indent=2), encoding="utf-8")


def _needs_sentence_transformers_6(options: dict[str, Any]) -> bool:
    """Whether the export names an output field, which only sentence-transformers 6's config can say."""
    return options["pooling"] == "model" or options["token_embeddings_field"] != "last_hidden_state"


def _verify_sentence_transformers(folder: Path, probe: dict[str, Any], options: dict[str, Any]) -> None:
    from sentence_transformers import SentenceTransformer

    expected = _expected_embeddings(probe, options)
    loaded = SentenceTransformer(str(folder), trust_remote_code=True, device="cpu")
    actual = torch.as_tensor(loaded.encode(list(_PROBE_SENTENCES), convert_to_numpy=True))
    if expected is None:
        return
    if actual.shape != expected.shape or not torch.allclose(actual, expected, atol=1e-4, rtol=1e-3):
        raise HubExportError(
            "the sentence-transformers export does not reproduce the model's pooled embeddings "
            f"(max difference {(actual - expected).abs().max().item() if actual.shape == expected.shape else 'shape'})"
        )


def _honour_umask(staging: Path) -> None:
    """Give every staged file ``0o666 & ~umask`` and every folder ``0o777 & ~umask``, as a plain ``open`` would.

    Some writers go through temporary files (transformers writes ``model.safetensors`` via ``mkstemp``), which are
    0600 whatever the umask: a checkpoint others on the machine cannot read. The umask is read from a probe file
    created here (``os.umask`` can only be read by setting it, which races with other threads).
    """
    probe = staging / ".umask-probe"
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    file_mode = probe.stat().st_mode & 0o777
    probe.unlink()
    folder_mode = file_mode | ((file_mode & 0o444) >> 2)  # search permission wherever read permission is given
    for path in staging.rglob("*"):
        if not path.is_symlink():
            path.chmod(folder_mode if path.is_dir() else file_mode)


def _portable_tokenizer_class(folder: Path) -> None:
    """transformers 5 names a plain `tokenizers` tokenizer `TokenizersBackend`, a class 4.x lacks; both read its
    older name `PreTrainedTokenizerFast` as the same class, so the export (loadable under 4.57 too) writes that."""
    path = folder / "tokenizer_config.json"
    if path.is_file():
        config = json.loads(path.read_text(encoding="utf-8"))
        if config.get("tokenizer_class") == "TokenizersBackend":
            config["tokenizer_class"] = "PreTrainedTokenizerFast"
            path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _earlier_export_modules(output_dir: Path) -> list[Path] | None:
    """The module folders of an earlier export into ``output_dir``, read from its modules.json when that file is one
    this module wrote (a regular file listing the Transformer at index 0, then Pooling / Dense / Normalize modules
    numbered in order); None when there is no such file (none, or another program's). Only real folders are listed:
    a link or a file of that name is not the export's."""
    path = output_dir / "modules.json"
    if path.is_symlink():
        return None
    try:
        entries = read_small_json(path, _MODULES_JSON_MAX_BYTES)
    except (ValueError, OSError, RecursionError):  # SmallFileError is a ValueError: a folder, a FIFO, too large
        return None
    transformer = {"idx": 0, "name": "0", "path": "", "type": _ST_CLASS.format("Transformer")}
    if not isinstance(entries, list) or not entries or entries[0] != transformer:
        return None
    folders = []
    for index, entry in enumerate(entries[1:], 1):
        match = _ST_MODULE_FOLDER.match(entry.get("path", "")) if isinstance(entry, dict) else None
        if match is None or entry != {
            "idx": index,
            "name": str(index),
            "path": entry["path"],
            "type": _ST_CLASS.format(match.group(2)),
        }:
            return None
        folder = output_dir / entry["path"]
        if folder.is_dir() and not folder.is_symlink():  # a link or a file there now is not the export's: kept
            folders.append(folder)
    return folders


def _holds_only_written_files(folder: Path) -> bool:
    return all(item.name in _ST_MODULE_FILES and item.is_file() and not item.is_symlink() for item in folder.iterdir())


def _move_into(staging: Path, output_dir: Path) -> None:
    """Move the finished files into ``output_dir`` (which may hold other things, e.g. checkpoints): files of the same
    name are replaced; of an earlier export, the module folders and sentence-transformers files that this one does
    not write are removed (they would confuse sentence-transformers), and nothing else. A folder in the way that no
    earlier export wrote is refused before anything changes."""
    output_dir.mkdir(parents=True, exist_ok=True)
    earlier = _earlier_export_modules(output_dir)
    ours = set(earlier or ())
    for item in staging.iterdir():
        target = output_dir / item.name
        if target.is_symlink() and item.is_dir():
            raise HubExportError(f"{target}: a link where the export writes a folder; move it away and export again")
        if target.is_dir() and not target.is_symlink() and not (target in ours and _holds_only_written_files(target)):
            raise HubExportError(
                f"{target}: a folder where the export writes {'a folder' if item.is_dir() else 'a file'}, holding "
                "files no earlier export wrote; move it away and export again"
            )
        if item.is_dir() and target.exists() and not target.is_dir():
            raise HubExportError(f"{target}: a file where the export writes a folder; move it away and export again")
    if earlier is not None:
        for name in _ST_FILES:  # an earlier export with sentence-transformers files, this one without
            stale = output_dir / name
            if not (staging / name).exists() and stale.is_file() and not stale.is_symlink():
                stale.unlink()
        for folder in earlier:
            if not folder.is_dir():
                continue
            for name in _ST_MODULE_FILES:
                written = folder / name
                if written.is_file() and not written.is_symlink():
                    written.unlink()
            if any(folder.iterdir()):
                logger.warning("%s: kept, it holds files that no export wrote", folder)
            else:
                folder.rmdir()
    for item in staging.iterdir():
        os.replace(item, output_dir / item.name)


def save_for_hub(
    model: Any,
    tokenizer: Any,
    output_dir: str | os.PathLike,
    *,
    model_card: str,
    sentence_transformers: Mapping[str, Any] | None = None,
    remote_code: bool = True,
    figures: Sequence[str | os.PathLike] = (),
) -> Path:
    """Write ``model`` (a ``PreTrainedModel``), ``tokenizer`` and ``model_card`` to ``output_dir`` for the Hub.

    Args:
        model: the trained model; saved with ``save_pretrained`` (safetensors).
        tokenizer: saved with ``save_pretrained`` next to it; None for a model that reads no text (the light pair
            classifier), which then cannot have a sentence-transformers export.
        output_dir: the folder; created if missing. Files of an earlier export are replaced, and the
            sentence-transformers files and module folders (``1_Pooling/``...) that its modules.json lists and this
            export does not write are removed; everything else (training checkpoints, a ``1_Data/`` folder, a
            module folder holding files no export wrote) is kept. A folder where the export writes a file or
            folder of its own, unless an earlier export wrote it, is refused (``HubExportError``). Everything is written to a temporary folder first and moved in at the
            end, so a failure leaves no half-written export. Files and folders get the modes the umask allows.
        model_card: the README.md text, e.g. from :func:`bitext_hf.hub.render_model_card`.
        sentence_transformers: ``None`` for no sentence-transformers export, else a dict of:
            ``pooling`` (alias ``pooling_mode``): ``mean`` (default), ``max``, ``cls``, ``lasttoken``,
            ``mean_sqrt_len_tokens``, ``weightedmean``, or ``model`` (the model's own pooled output
            ``sentence_embedding_field``, default "sentence_embedding"; sentence-transformers >= 6);
            ``dense``: a ``torch.nn.Linear`` applied after pooling (its weights are copied), ``dense_activation``:
            None (identity) or "tanh"; ``normalize``: append L2 normalization (default True, as bitext-hf's own
            encoders normalize; False exports the raw pooled vectors);
            ``max_seq_length``: truncation length (default: the model's ``max_tokens``, what its ``encode`` keeps,
            else the tokenizer's; never above ``max_tokens``); ``token_embeddings_field``: the output field with
            token vectors (default "last_hidden_state"; another needs sentence-transformers 6); ``verify``: reload
            the export with ``SentenceTransformer`` and check it reproduces the pooling computed here (default False).
        remote_code: register the model's (non-transformers) classes for ``AutoConfig``/``AutoModel`` so that
            ``save_pretrained`` copies their source files and writes ``auto_map`` into config.json.
        figures: image files (from :mod:`bitext_hf.hub.figures`) copied next to README.md under their own names,
            so that the card's relative image links resolve locally and on the Hub.

    Returns:
        The output folder.

    Raises:
        HubExportError: an unknown or invalid option, or a model that breaks the sentence-transformers contract
            (see the module docstring).
    """
    if not isinstance(model_card, str) or not model_card.strip():
        raise HubExportError("model_card must be the non-empty README.md text (see bitext_hf.hub.render_model_card)")
    if not hasattr(model, "save_pretrained") or not hasattr(model, "config"):
        raise HubExportError(f"save_for_hub needs a transformers PreTrainedModel, got {type(model).__name__}")
    # A model that reads no text (the light pair classifier reads features) has no tokenizer; one that reads text
    # ships its tokenizer beside it, and a sentence-transformers export needs it.
    if tokenizer is None and sentence_transformers is not None:
        raise HubExportError("save_for_hub: a sentence-transformers export needs the tokenizer")
    if tokenizer is not None and not hasattr(tokenizer, "save_pretrained"):
        raise HubExportError("save_for_hub needs the tokenizer (anything with save_pretrained), or None")
    missing = [str(figure) for figure in figures if not Path(figure).is_file()]
    if missing:
        raise HubExportError(f"figure file(s) not found: {', '.join(missing)}")
    options = _normalize_options(sentence_transformers) if sentence_transformers is not None else None
    probe = _probe(model, tokenizer, options) if options is not None else None
    if probe is not None:
        _warn_if_export_differs_from_model(model, probe, options)

    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    # A fixed name (not mkdtemp): `verify` loads remote code from here, and transformers caches modules by folder name.
    staging = output_dir.parent / f".{output_dir.name}.staging"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        shipped_code = remote_code and _register_remote_code(model)
        model.save_pretrained(str(staging), safe_serialization=True)
        if tokenizer is not None:
            tokenizer.save_pretrained(str(staging))
            _portable_tokenizer_class(staging)
        (staging / "README.md").write_text(model_card if model_card.endswith("\n") else model_card + "\n", "utf-8")
        if options is not None:
            model_limit = getattr(model, "max_tokens", None)
            _write_sentence_transformers(staging, options, probe["dimension"], tokenizer, model_limit)
            if options["verify"]:
                _verify_sentence_transformers(staging, probe, options)
        for figure in figures:
            shutil.copyfile(figure, staging / Path(figure).name)
        _honour_umask(staging)
        _move_into(staging, output_dir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info(
        "Saved %s to %s (remote code: %s, sentence-transformers: %s)",
        type(model).__name__,
        output_dir,
        shipped_code,
        options["pooling"] if options else "no",
    )
    return output_dir


def push_to_hub(
    output_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    token: str | None = None,
    commit_message: str = "Upload model trained with bitext-hf",
    revision: str | None = None,
) -> str:
    """Create ``repo_id`` on the Hub if needed and upload the folder written by :func:`save_for_hub`.

    Returns the URL of the commit. Raises :class:`HubExportError` before any network access when the folder is not
    an export (no config.json) or ``repo_id`` is not of the form ``owner/name`` or ``name``, and
    :class:`bitext_hf.hub.HubAccessError` (exit 4, one line saying nothing was uploaded) when the Hub refuses:
    HTTP 401/403, an unknown repository or revision, no network. ``revision``: a branch, created if missing. The
    upload is one commit, as ``bitext-hf push --model`` makes it.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        raise HubExportError(f"{str(folder)!r} is not a folder: run save_for_hub first")
    if not (folder / "config.json").is_file():
        raise HubExportError(f"{str(folder)!r} has no config.json: it is not a saved model (run save_for_hub first)")
    if not repo_id or repo_id.count("/") > 1 or repo_id.startswith("/") or repo_id.endswith("/"):
        raise HubExportError(f"repo_id must look like 'owner/name' or 'name', got {repo_id!r}")
    if not (folder / "README.md").is_file():
        logger.warning("%s has no README.md: the Hub page will have no model card", folder)
    from bitext_hf.hub.model_files import select_model_files

    # The exported model and its evaluation results, as `bitext-hf push --model` selects them: training leftovers
    # (checkpoints, stage folders, caches, logs) stay local, and a link out of the folder is refused.
    selection = select_model_files(folder, include=("eval_results.json",))
    return upload(
        folder,
        repo_id,
        token=token,
        private=private,
        revision=revision,
        commit_message=commit_message,
        selection=selection,
    )


def push_recipe_output(
    folder: str | os.PathLike,
    training_args: Any,
    default_repo: str | None = None,
    *,
    push: bool | None = None,
    commit_message: str = "Upload model trained with bitext-hf",
) -> str | None:
    """A recipe's ``--push_to_hub``: upload ``folder`` (written by :func:`save_for_hub`) with :func:`push_to_hub`.

    Args:
        folder: the export to upload (training leftovers beside it stay local, see :func:`push_to_hub`).
        training_args: the run's ``TrainingArguments``: ``hub_model_id`` names the repository, ``hub_private_repo``,
            ``hub_token`` and ``hub_revision`` apply as the Trainer's own push would apply them.
        default_repo: the repository when no ``--hub_model_id`` is given; default: the folder's name.
        push: whether to upload; ``None`` reads ``training_args.push_to_hub``. Recipes switch that flag off before
            training, so that the Trainer does not push every checkpoint with the whole output folder and its own
            card, and pass the value they kept.

    Returns:
        The commit URL, or ``None`` when nothing was to be pushed.
    """
    if push is None:
        push = bool(getattr(training_args, "push_to_hub", False))
    if not push:
        return None
    folder = Path(folder)
    repo_id = getattr(training_args, "hub_model_id", None) or default_repo or folder.resolve().name
    url = push_to_hub(
        folder,
        repo_id,
        private=bool(getattr(training_args, "hub_private_repo", False)),
        token=getattr(training_args, "hub_token", None),
        revision=getattr(training_args, "hub_revision", None),
        commit_message=commit_message,
    )
    logger.info("Pushed %s to %s: %s", folder, repo_id, url)
    return url
