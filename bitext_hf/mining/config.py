"""The settings of one mining job (:class:`MiningConfig`), each checked when the config is made: what
``bitext-hf mine`` parses its options into, and what :func:`bitext_hf.mining.pipeline.run_mining` runs."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bitext_hf.encoders.exported import BACKENDS
from bitext_hf.encoders.precision import QUANTIZE_CHOICES
from bitext_hf.errors import UsageError
from bitext_hf.mining.embedder import EncoderOptions
from bitext_hf.mining.filters import FilterSettings
from bitext_hf.mining.output import FORMATS
from bitext_hf.mining.retrieval import DEFAULT_MODE, check_settings
from bitext_hf.mining.sidecar import MiningRecord
from bitext_hf.mining.sides import (
    display,
    is_embeddings,
    is_npy,
)

__all__ = [
    "DEMO_DIR",
    "MiningConfig",
    "check_choices",
    "check_positive",
    "filter_settings",
    "refuse_cache_dir_without_cache",
    "refuse_lid_options_without_lid",
    "used_k",
]

DEMO_DIR = Path(__file__).parent.parent / "demo"
POOLINGS = ("mean", "max", "cls")


def used_k(k: int, n_src: int, n_tgt: int) -> int:
    """The k a run reports: the neighbours the margin averaged, ``k`` capped at the corpus (the larger side; a
    sentence of the other side averages over at most that side's size), not a ``k`` no neighbourhood reached."""
    return min(int(k), max(int(n_src), int(n_tgt)))


def filter_settings(options: Any) -> FilterSettings:
    """The :class:`FilterSettings` of ``options`` (a config or parsed arguments: an attribute per filter field); an
    unset ``lid_min_prob`` (None) is left to the filters' default."""
    values = {field.name: getattr(options, field.name) for field in dataclasses.fields(FilterSettings)}
    if values.get("lid_min_prob", 0) is None:
        del values["lid_min_prob"]
    return FilterSettings(**values)


def refuse_lid_options_without_lid(
    lid: bool, lid_min_prob: float | None, src_lang, tgt_lang, *, recorded: bool = False, where: str = ""
) -> None:
    """``--lid-min-prob`` acts only with ``--lid``; ``--src-lang`` / ``--tgt-lang`` with ``--lid``, or where they
    are ``recorded`` (``mine``'s sidecar; ``where`` names what records them). Else one line, exit 2."""
    if lid:
        return
    if lid_min_prob is not None:
        raise UsageError(f"--lid-min-prob {lid_min_prob:g} applies to --lid, which is not given")
    if not recorded:
        given = [option for option, value in (("--src-lang", src_lang), ("--tgt-lang", tgt_lang)) if value]
        if given:
            raise UsageError(
                f"{' and '.join(given)} {'act' if len(given) > 1 else 'acts'} only with --lid{where}, "
                "which is not given"
            )


def refuse_cache_dir_without_cache(cache_dir: str | None, no_cache: bool) -> None:
    if cache_dir is not None and no_cache:
        raise UsageError(f"--cache-dir {cache_dir} names the encoding cache, which --no-cache turns off: choose one")


def check_positive(value: Any, name: str) -> None:
    """``value`` is None or an integer >= 1 (a config's count option); else a usage error naming ``name``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise UsageError(f"{name} must be an integer >= 1, got {value!r}")


def check_choices(options: Any, **allowed: Sequence[str]) -> None:
    """What the command line's ``choices`` refuse, for a config made in Python: each option named in ``allowed`` and
    the encoder's ``pooling``, ``quantize`` and ``backend`` are None or one of their choices; else a usage error."""
    allowed = {"pooling": POOLINGS, "quantize": QUANTIZE_CHOICES, "backend": BACKENDS, **allowed}
    for name, choices in allowed.items():
        value = getattr(options, name)
        if value is not None and value not in choices:
            raise UsageError(f"unknown {name} {value!r}; choose one of {', '.join(choices)}")


@dataclasses.dataclass
class MiningConfig(EncoderOptions):
    """Everything one mining run needs; the fields are ``bitext-hf mine``'s options (``--src-docs`` is
    ``src_docs``), and messages name them as the command line spells them. Checked when made (``UsageError``).

    Args:
        src, tgt (str): sentences (text, one a line; compressed or ``-`` for stdin) or embeddings (.npy, or a folder
            of shards from ``bitext-hf encode``).
        src_text, tgt_text (str, optional): with an embeddings side, the text file of its sentences.
        out (str, optional): the pairs file (.tsv, .csv, .jsonl, .parquet or ``format``; ``-`` for stdout), written
            with its sidecar ``<out>.meta.json``; None writes nothing (the pairs are in the result).
        format (str, optional): the output format whatever the extension.
        k (int, defaults to 4), margin (str, defaults to "ratio"), mode (str, defaults to "max"),
        threshold (float, optional): as :func:`bitext_hf.mining.mine`.
        src_docs, tgt_docs (str, optional): the document id of each line: mine inside aligned documents.
        gold (str, optional): gold pairs ``src_line<TAB>tgt_line`` (0-based) to score the pairs against.
        keep_duplicates (bool, defaults to False): mine duplicate lines separately (default: once, at the first).
        model, src_model, tgt_model (str, optional): the encoder of both sides, or of one side.
        pooling (str, optional): "mean", "max" or "cls" for Hugging Face models.
        quantize (str, optional): "auto" (the default), "none", "bf16" or "int8": the CPU arithmetic of Hugging Face
            and sentence-transformers encoders (:func:`bitext_hf.encoders.load_encoder`).
        backend (str, optional): "torch" (the default) or "onnx" (ONNX Runtime; :func:`bitext_hf.encoders.load_encoder`).
        batch_size (int, defaults to 128), max_line_chars (int, defaults to 10000): sentences per encoder batch;
            the longest line accepted.
        cache_dir (str, optional), no_cache (bool, defaults to False): the encoding cache.
        index (str, defaults to "exact"), nprobe (int, optional): the neighbour search (see
            :mod:`bitext_hf.mining.index`); check_recall (int, optional): recall@k of an approximate index on that
            many sampled sources.
        distributed (str, optional), ray_address (str, optional), workers (int, optional): ``"ray"`` encodes and
            searches in Ray tasks.
        quiet (bool, defaults to False): no progress bars.
        threads (int, optional): CPU threads of the encoders and the search (:func:`bitext_hf.threads.limit_threads`,
            restored after the run); defaults to the count in force, else the CPUs this process may use.
        src_lang, tgt_lang (str, optional): language codes, recorded in the sidecar for the dataset card, and the
            languages ``lid`` checks.
        lid, lid_min_prob, min_chars, max_chars, max_length_ratio, dedup, drop_same_text: the filters, all off by
            default (:class:`bitext_hf.mining.filters.FilterSettings`); what each removed is in the result and the
            sidecar. ``lid_min_prob`` None is the filters' default.
        threshold_report (bool, defaults to False): keep every candidate pair (before the threshold) in the result
            and write the threshold report beside ``out`` (:mod:`bitext_hf.mining.threshold_report`).
        command (str, optional): the command that reproduces the run, recorded in the sidecar.
    """

    src: str | None
    tgt: str | None
    src_text: str | None = None
    tgt_text: str | None = None
    out: str | None = None
    format: str | None = None
    k: int = 4
    margin: str = "ratio"
    mode: str | None = DEFAULT_MODE
    threshold: float | None = None
    src_docs: str | None = None
    tgt_docs: str | None = None
    gold: str | None = None
    keep_duplicates: bool = False
    src_model: str | None = None
    tgt_model: str | None = None
    index: str = "exact"
    nprobe: int | None = None
    check_recall: int | None = None
    distributed: str | None = None
    ray_address: str | None = None
    workers: int | None = None
    quiet: bool = False
    threads: int | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    lid: bool = False
    lid_min_prob: float | None = None
    min_chars: float | None = None
    max_chars: float | None = None
    max_length_ratio: float | None = None
    dedup: bool = False
    drop_same_text: bool = False
    threshold_report: bool = False
    command: str | None = None

    def __post_init__(self) -> None:
        if not self.src or not self.tgt:
            raise UsageError("give --src and --tgt (text or .npy files), or --demo")
        if bool(self.src_docs) != bool(self.tgt_docs):
            raise UsageError("document-level mining needs both --src-docs and --tgt-docs")
        for side, model in (("src", self.src_model), ("tgt", self.tgt_model)):
            if model is not None and is_embeddings(getattr(self, side)):
                raise UsageError(f"--{side}-model has nothing to encode: --{side} holds embeddings (.npy or shards)")
        self.index = self.index or "exact"
        if self.distributed and self.src_docs:
            raise UsageError("--distributed ray mines whole corpora (no --src-docs)")
        if self.distributed and self.check_recall:
            raise UsageError("--check-recall searches in one process: leave it out with --distributed ray")
        if not self.distributed and (self.ray_address or self.workers):
            raise UsageError("--ray-address and --workers go with --distributed ray")
        # What the command line's parser refuses before a config is made; Python callers get the same checks.
        self.mode = self.mode or DEFAULT_MODE
        check_settings(self.margin, self.mode, self.threshold)
        check_positive(self.k, "k")
        for name in ("batch_size", "max_line_chars", "nprobe", "check_recall", "workers", "threads"):
            check_positive(getattr(self, name), name)
        check_choices(self, format=FORMATS, distributed=("ray",))
        if not isinstance(self.index, str):
            raise UsageError(f"index must be 'exact', 'auto' or a FAISS factory string, got {self.index!r}")
        if self.dedup and self.keep_duplicates:
            raise UsageError("--dedup drops duplicate lines and --keep-duplicates mines them: choose one")
        self._refuse_options_that_cannot_act()
        _ = self.filters  # checked when the config is made, as every other option

    def _refuse_options_that_cannot_act(self) -> None:
        """An option given where it can do nothing is a usage error, not silently ignored: the user meant it to act."""
        from bitext_hf.io import writes_in_place

        sidecar = bool(self.out) and not writes_in_place(self.out)
        # The languages act through --lid, and are recorded in the sidecar (the dataset card's languages).
        refuse_lid_options_without_lid(
            self.lid, self.lid_min_prob, self.src_lang, self.tgt_lang, recorded=sidecar, where=" or --out FILE"
        )
        if self.format is not None and not self.out:
            raise UsageError(f"--format {self.format} is the format of --out; there is no --out")
        refuse_cache_dir_without_cache(self.cache_dir, self.no_cache)

    @property
    def filters(self) -> FilterSettings:
        """The filters of this run (see :mod:`bitext_hf.mining.filters`)."""
        return filter_settings(self)

    @classmethod
    def demo(cls, **options: Any) -> MiningConfig:
        """The bundled English-German demo (``bitext_hf/demo/README.md``) scored against its gold pairs."""
        options.setdefault("gold", str(DEMO_DIR / "gold.tsv"))
        return cls(str(DEMO_DIR / "en.txt"), str(DEMO_DIR / "de.txt"), **options)

    @property
    def inputs(self) -> list[str | None]:
        """Every file the run reads (None for an input not given)."""
        return [self.src, self.tgt, self.src_text, self.tgt_text, self.src_docs, self.tgt_docs, self.gold]

    def record(self, src_rows: int, tgt_rows: int, dim: int) -> MiningRecord:
        """The sidecar's record of this run over ``src_rows`` x ``tgt_rows`` embeddings of dimension ``dim``."""
        src_model, tgt_model = self._side_encoder("src"), self._side_encoder("tgt")
        same = src_model == tgt_model
        return MiningRecord(
            encoder=src_model if same else None,
            src_model=None if same else src_model,
            tgt_model=None if same else tgt_model,
            margin=self.margin,
            mode=self.mode,
            k=used_k(self.k, src_rows, tgt_rows),  # what the margin averaged, not a k above the corpus
            threshold=self.threshold,
            # What an approximate run searched with: its pairs are not the exact engine's (see check_recall).
            index=self._index_description(src_rows, tgt_rows, dim),
            src=display(self.src),
            tgt=display(self.tgt),
            src_lang=self.src_lang,
            tgt_lang=self.tgt_lang,
            src_sentences=int(src_rows),
            tgt_sentences=int(tgt_rows),
            command=self.command,
        )

    def _side_encoder(self, side: str) -> str | None:
        """The encoder that embedded a side: the manifest's for shards, None for a .npy side (not known here)."""
        path = getattr(self, side)
        if os.path.isdir(path):
            from bitext_hf.mining.shards import MANIFEST, read_manifest

            return read_manifest(os.path.join(path, MANIFEST)).encoder
        if is_npy(path):
            return None
        from bitext_hf.mining.embedding_cache import encoder_identity

        model = getattr(self, f"{side}_model") or self.model
        return encoder_identity(model, self.pooling, self.quantize, self.backend)

    def _index_description(self, src_rows: int, tgt_rows: int, dim: int) -> str:
        if self.src_docs and self.index == "auto":  # resolved per document pair, by its sizes
            return "auto (chosen per document pair)"
        return str(self._index_spec(src_rows, tgt_rows, dim))

    def _index_spec(self, src_rows: int, tgt_rows: int, dim: int | None):
        """The search that index / nprobe resolve to for this corpus (exact, or the factory string and nprobe)."""
        from bitext_hf.mining.index import resolve_index

        return resolve_index(self.index, src_rows, tgt_rows, dim, nprobe=self.nprobe)
