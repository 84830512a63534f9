"""The pair classifier's cross-encoder variant: any Hugging Face encoder with a one-logit sequence-classification head
reading the two texts together (``AutoModelForSequenceClassification``, what sentence-transformers' ``CrossEncoder``
loads), its Platt scaling folded into the head's last linear layer so that ``sigmoid(logit)`` is the calibrated
probability for every loader, ours and theirs.

It is slower than the light classifier (a transformer pass per pair instead of a few hundred multiply-adds) and reads
no encoder's cosine or margin: it takes any pairs, whatever encoder mined them. Trained by
``recipes/train_pair_quality_cross_encoder.py``; a folder it wrote carries ``"bitext_pair_quality":
"cross_encoder"`` in its config.json, which is how :func:`bitext_hf.mining.quality.load_classifier` tells it from the
light classifier.

It is the base's own transformers class (no remote code): it loads under any transformers that knows the base.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from bitext_hf.errors import EncoderLoadError, UsageError

__all__ = [
    "CROSS_ENCODER_MARKER",
    "CROSS_ENCODER_VARIANT",
    "CrossEncoderClassifier",
    "converted_logits",
    "cross_encoder_logits",
    "fold_calibration",
    "load_cross_encoder",
]

CROSS_ENCODER_MARKER = "bitext_pair_quality"  # the config.json key of a cross-encoder classifier
CROSS_ENCODER_VARIANT = "cross_encoder"
# sentence-transformers' CrossEncoder applies this to a one-logit model's output (its default too, written down so
# that a reader of config.json sees it): with the calibration folded into the head, its predict() is our probability.
SIGMOID = "torch.nn.modules.activation.Sigmoid"


@dataclasses.dataclass(frozen=True)
class CrossEncoderSettings:
    """What the jobs read of a classifier's config. A cross-encoder reads no encoder's scores: ``encoder`` is None
    (any encoder's pairs), ``reads_scores`` False; ``margin`` and ``margin_k`` are those of the light classifier, so
    that the jobs' margin (ignored here) is computed as for it."""

    max_length: int
    base: str | None
    languages: tuple[str, ...] = ()
    encoder: str | None = None
    reads_scores: bool = False
    margin: str = "ratio"
    margin_k: int = 4


def cross_encoder_logits(
    model: Any,
    tokenizer: Any,
    sources: Sequence[str],
    targets: Sequence[str],
    *,
    max_length: int,
    batch_size: int = 64,
    progress: bool | None = False,
    runner: Any = None,
) -> np.ndarray:
    """The head's logit of each pair (float32), batches of pairs of similar length (padding is most of the cost of
    short pairs; the order given is restored). ``progress``: a tqdm bar (None: only on a terminal). ``runner``: the
    model converted for ONNX Runtime or OpenVINO (:func:`converted_logits`), run in place of ``model``."""
    import torch
    from tqdm.auto import tqdm

    count = len(sources)
    out = np.zeros(count, dtype=np.float32)
    order = sorted(range(count), key=lambda i: len(sources[i]) + len(targets[i]))
    model.eval()
    shown = None if progress is None else not progress
    with torch.inference_mode(), tqdm(total=count, desc="pair quality", unit="pairs", disable=shown) as bar:
        for start in range(0, count, batch_size):
            rows = order[start : start + batch_size]
            inputs = tokenizer(
                [sources[i] for i in rows],
                [targets[i] for i in rows],
                truncation=True,
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            )
            if runner is None:
                out[rows] = model(**inputs.to(model.device)).logits[:, 0].float().cpu().numpy()
            else:
                out[rows] = runner(inputs["input_ids"].numpy(), inputs["attention_mask"].numpy())[:, 0]
            bar.update(len(rows))
    return out


def _logit_module(model: Any, tokenizer: Any) -> Any:
    """``(input_ids, attention_mask) -> logits``: the encoders' converters trace these two inputs. A base that reads
    token types (BERT: 0 up to the first separator, 1 after) gets them computed from the ids inside the graph."""
    import torch
    from torch import nn

    reads_types = "token_type_ids" in tokenizer.model_input_names and getattr(model.config, "type_vocab_size", 1) > 1
    separator = tokenizer.sep_token_id

    class LogitModule(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            if not reads_types:
                return self.model(input_ids=input_ids, attention_mask=attention_mask).logits
            separators = (input_ids == separator).long()
            types = ((separators.cumsum(1) - separators) > 0).long()
            return self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=types).logits

    return LogitModule().eval()


def converted_logits(model: Any, tokenizer: Any, backend: str, quantize: str | None, threads: int) -> Any:
    """The cross-encoder converted to ``backend`` ("onnx" or "openvino") the way the encoders are
    (:mod:`bitext_hf.encoders.exported`): ``runner(input_ids, attention_mask) -> logits`` on numpy arrays."""
    from transformers.utils import logging as transformers_logging

    from bitext_hf.encoders.exported import SAMPLE_SENTENCES, converted, exported_quantize

    sample = tokenizer(SAMPLE_SENTENCES, SAMPLE_SENTENCES[::-1], padding=True, return_tensors="pt")
    # OpenVINO's converter walks the model's attributes, among them the training loss, whose lookup warns that the
    # config names none: noise for a model that is only run.
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        return converted(
            backend,
            _logit_module(model, tokenizer),
            (sample["input_ids"], sample["attention_mask"]),
            quantize=exported_quantize(backend, quantize),
            threads=threads,
        )
    finally:
        transformers_logging.set_verbosity(verbosity)


def _head_output_layer(model: Any) -> Any:
    """The classification head's last linear layer (one output): BERT's ``classifier``, XLM-R's
    ``classifier.out_proj``, DistilBERT's ``classifier``...: the last ``nn.Linear`` with one output registered."""
    from torch import nn

    layers = [module for module in model.modules() if isinstance(module, nn.Linear) and module.out_features == 1]
    if not layers:
        raise ValueError(f"{type(model).__name__}: no one-output linear layer to fold the calibration into")
    return layers[-1]


def fold_calibration(model: Any, scale: float, bias: float) -> None:
    """Make ``sigmoid(logit)`` the Platt-scaled probability ``sigmoid(scale * logit + bias)``: the head's last layer
    ``w x + b`` becomes ``scale * w x + (scale * b + bias)``. Exact, because the logit is that layer's output."""
    import torch

    layer = _head_output_layer(model)
    with torch.no_grad():
        layer.weight.mul_(scale)
        if layer.bias is None:
            raise ValueError(f"{type(model).__name__}: its head's last layer has no bias to hold the calibration")
        layer.bias.mul_(scale).add_(bias)


class CrossEncoderClassifier:
    """A loaded cross-encoder classifier: ``score(sources, targets)`` gives the calibrated probability of each pair
    (the cosines and margins the jobs pass are not read)."""

    def __init__(self, model: Any, tokenizer: Any, settings: CrossEncoderSettings, runner: Any = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = settings
        self.runner = runner  # the model converted for ONNX Runtime or OpenVINO; None: torch

    def score(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        cosines: Any = None,
        margins: Any = None,
        *,
        batch_size: int = 64,
    ) -> Any:
        """The probability that each pair is a translation (a float32 torch tensor, as the light classifier's)."""
        import torch

        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources and {len(targets)} targets: one of each per pair")
        logits = cross_encoder_logits(
            self.model,
            self.tokenizer,
            list(sources),
            list(targets),
            max_length=self.config.max_length,
            batch_size=batch_size,
            progress=None,
            runner=self.runner,
        )
        return torch.sigmoid(torch.from_numpy(logits))


def load_cross_encoder(
    name: str | os.PathLike, config: dict[str, Any], *, backend: str = "torch", quantize: str | None = None
) -> CrossEncoderClassifier:
    """The cross-encoder classifier ``name`` (a folder or a Hub id, already known to be one by its ``config``),
    loaded with the encoder loaders' checks (safetensors only, no remote code, a FIFO or a link to nothing refused,
    the Hub only when it is there) and their one-line errors (``EncoderLoadError``, exit 4); ``backend`` "onnx" or
    "openvino" converts it as the encoders are converted (``quantize`` as for them)."""
    from bitext_hf.encoders.exported import exported_quantize
    from bitext_hf.encoders.sources import load_source, resolve_model

    if backend not in ("torch", "onnx", "openvino"):
        raise UsageError(f"classifier backend {backend!r}: choose torch, onnx or openvino")
    if backend != "torch":
        exported_quantize(backend, quantize)  # a precision the backend cannot compute in: refused before loading

    if config.get("num_labels", len(config.get("id2label") or {0: ""})) != 1:
        raise EncoderLoadError(f"--classifier {name}: a cross-encoder classifier has one output (its logit)")
    source = resolve_model(str(name))

    def build() -> CrossEncoderClassifier:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        model = AutoModelForSequenceClassification.from_pretrained(source.source, use_safetensors=True)
        tokenizer = AutoTokenizer.from_pretrained(source.source)
        settings = CrossEncoderSettings(
            max_length=int(config.get("pair_max_length") or tokenizer.model_max_length or 128),
            base=config.get("pair_quality_base"),
            languages=tuple(config.get("pair_quality_languages") or ()),
        )
        runner = None
        if backend != "torch":
            import torch

            runner = converted_logits(model, tokenizer, backend, quantize, torch.get_num_threads())
        return CrossEncoderClassifier(model, tokenizer, settings, runner)

    return load_source(source, build)
