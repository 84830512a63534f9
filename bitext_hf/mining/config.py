"""The settings of one mining job (:class:`MiningConfig`), each checked when the config is made: what
``bitext-hf mine`` parses its options into, and what :func:`bitext_hf.mining.pipeline.run_mining` runs."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar

from bitext_hf.encoding.embedder import EncoderOptions, RayOptions
from bitext_hf.errors import UsageError
from bitext_hf.mining.filters import FilterOptions, FilterSettings
from bitext_hf.mining.margin import MARGINS
from bitext_hf.mining.output import FORMATS
from bitext_hf.mining.retrieval import DEFAULT_MODE, MODES
from bitext_hf.mining.sidecar import MiningRecord
from bitext_hf.mining.sides import (
    display,
    is_embeddings,
    is_npy,
)
from bitext_hf.options import QUIET, THREADS, check_fields, finite_float, option, positive_int

__all__ = [
    "DEMO_DIR",
    "FILTER_LENGTHS",
    "MarginOptions",
    "MiningConfig",
    "ThresholdOptions",
    "demo_inputs",
    "filter_settings",
    "refuse_lid_options_without_lid",
    "used_k",
]

DEMO_DIR = Path(__file__).parent.parent / "demo"

# How the filters count a sentence's length, said in the help of every command that filters.
FILTER_LENGTHS = (
    "Lengths are in Latin-equivalent characters: a Han or kana character counts 3, a Hangul syllable 2, any\n"
    "other 1 (those scripts write about that much more per character), so one bound serves every script."
)


def demo_inputs(gold: str | None = None) -> dict[str, str]:
    """The inputs of the bundled English-German demo (``bitext_hf/demo/README.md``): its two sides, and its gold
    pairs unless ``gold`` names others."""
    return {
        "src": str(DEMO_DIR / "en.txt"),
        "tgt": str(DEMO_DIR / "de.txt"),
        "gold": gold or str(DEMO_DIR / "gold.tsv"),
    }


def used_k(k: int, n_src: int, n_tgt: int) -> int:
    """The k a run reports: the neighbours the margin averaged, ``k`` capped at the corpus (the larger side; a
    sentence of the other side averages over at most that side's size), not a ``k`` no neighbourhood reached."""
    return min(int(k), max(int(n_src), int(n_tgt)))


def filter_settings(options: FilterOptions) -> FilterSettings:
    """The checked :class:`FilterSettings` of a job's config (an unset ``lid_min_prob`` is the filters' default)."""
    return FilterSettings(**{name.name: getattr(options, name.name) for name in dataclasses.fields(FilterOptions)})


@dataclasses.dataclass(kw_only=True)
class MarginOptions:
    """The margin's options (``mine``, ``score``, ``eval``), declared once.

    Args:
        k (int, defaults to 4): the neighbours the margin averages, capped at the corpus size.
        margin (str, defaults to "ratio"): "ratio", "distance" or "absolute" (plain cosine).
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {"margin": ("margin", None)}

    k: int = field(
        default=4,
        metadata=option(
            # bitext_hf.mining.knn.MAX_K, written out: the kNN module imports torch, which --help must not.
            "neighbours averaged by the margin (default 4; capped at corpus size, then at most 256: time and memory "
            "grow faster than k)",
            type=positive_int,
            group="margin",
        ),
    )
    margin: str = field(
        default="ratio",
        metadata=option("ratio (default), distance, or absolute (plain cosine)", choices=MARGINS, group="margin"),
    )


@dataclasses.dataclass(kw_only=True)
class ThresholdOptions:
    """The score threshold of the pairs a job keeps (``mine``, ``score``), and its report, declared once.

    Args:
        threshold (float, optional): keep the pairs scoring at least this.
        threshold_report (bool, defaults to False): write a figure of every candidate pair's score with the threshold
            marked, and the pairs just above and below it, beside the output file.
    """

    threshold: float | None = field(
        default=None, metadata=option("keep the pairs with score >= this (in every mode)", type=finite_float)
    )
    threshold_report: bool = field(
        default=False,
        metadata=option(
            "write OUT.threshold.png (the scores of every candidate pair, the --threshold marked) and "
            "OUT.threshold.md (the pairs just above and below it; around the median without --threshold) beside "
            "--out FILE, to pick a threshold by looking",
            group="filters",
        ),
    )


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


@dataclasses.dataclass
class MiningConfig(ThresholdOptions, MarginOptions, FilterOptions, RayOptions, EncoderOptions):
    """Everything one mining run needs; the fields are ``bitext-hf mine``'s options (``--src-docs`` is
    ``src_docs``), and messages name them as the command line spells them. Checked when made (``UsageError``).

    The filters ``lid``, ``lid_min_prob``, ``min_chars``, ``max_chars``, ``max_length_ratio``, ``dedup`` and
    ``drop_same_text`` are all off by default (:class:`bitext_hf.mining.filters.FilterSettings`); what each removed is
    in the result and the sidecar. ``lid_min_prob`` None is the filters' default.

    Args:
        src (str): source sentences (text, one a line; compressed or ``-`` for stdin) or embeddings (.npy, or a
            folder of shards from ``bitext-hf encode``).
        tgt (str): target sentences or embeddings, as ``src``.
        src_text (str, optional): with an embeddings ``src``, the text file of its sentences.
        tgt_text (str, optional): with an embeddings ``tgt``, the text file of its sentences.
        out (str, optional): the pairs file (.tsv, .csv, .jsonl, .parquet or ``format``; ``-`` for stdout), written
            with its sidecar ``<out>.meta.json``; None writes nothing (the pairs are in the result).
        format (str, optional): the output format whatever the extension.
        k (int, defaults to 4): neighbours of the margin, as :func:`bitext_hf.mining.mine`.
        margin (str, defaults to "ratio"): the margin, as :func:`bitext_hf.mining.mine`.
        mode (str, defaults to "max"): the retrieval mode, as :func:`bitext_hf.mining.mine`.
        threshold (float, optional): keep pairs scoring at least this, in every mode.
        src_docs (str, optional): the document id of each source line: mine inside aligned documents.
        tgt_docs (str, optional): the document id of each target line.
        gold (str, optional): gold pairs ``src_line<TAB>tgt_line`` (0-based) to score the pairs against.
        keep_duplicates (bool, defaults to False): mine duplicate lines separately (default: once, at the first).
        model (str, optional): the encoder of both sides.
        src_model (str, optional): the encoder of the source side (default ``model``).
        tgt_model (str, optional): the encoder of the target side (default ``model``).
        pooling (str, optional): "mean", "max" or "cls" for Hugging Face models.
        quantize (str, optional): "auto" (the default), "none", "bf16" or "int8": the CPU arithmetic of Hugging Face
            and sentence-transformers encoders (:func:`bitext_hf.encoders.load_encoder`).
        backend (str, optional): "torch" (the default) or "onnx" (ONNX Runtime; :func:`bitext_hf.encoders.load_encoder`).
        batch_size (int, defaults to 128): sentences per encoder batch.
        max_line_chars (int, defaults to 10000): the longest line accepted.
        cache_dir (str, optional): the encoding cache's folder.
        no_cache (bool, defaults to False): neither read nor write the encoding cache.
        index (str, defaults to "exact"): the neighbour search (see :mod:`bitext_hf.mining.index`).
        nprobe (int, optional): inverted lists scanned by an IVF index.
        check_recall (int, optional): recall@k of an approximate index on that many sampled sources.
        distributed (str, optional): ``"ray"`` encodes and searches in Ray tasks.
        ray_address (str, optional): the Ray cluster to join (default: a local Ray instance).
        workers (int, optional): Ray tasks at a time.
        quiet (bool, defaults to False): no progress bars.
        threads (int, optional): CPU threads of the encoders and the search (:func:`bitext_hf.threads.limit_threads`,
            restored after the run); defaults to the count in force, else the CPUs this process may use.
        src_lang (str, optional): the source side's language code, recorded in the sidecar for the dataset card,
            and the language ``lid`` checks.
        tgt_lang (str, optional): the target side's language code, as ``src_lang``.
        threshold_report (bool, defaults to False): keep every candidate pair (before the threshold) in the result
            and write the threshold report beside ``out`` (:mod:`bitext_hf.mining.threshold_report`).
        command (str, optional): the command that reproduces the run, recorded in the sidecar.
    """

    option_groups: ClassVar[dict[str, tuple[str, str | None]]] = {
        "filters": (
            "filters (all off by default; what each removes is counted in the report, the sidecar and the dataset "
            "card)",
            FILTER_LENGTHS + "\nLength, duplicates, then language run on each side before encoding; the others on "
            "the mined pairs.",
        ),
        "sides": ("one encoder per side", None),
        "index": ("approximate search (FAISS; benchmarks/README.md has recall and time by size)", None),
    }

    src: str | None = field(
        metadata=option(
            "source sentences (text, one a line; .gz/.xz/.bz2/.zst; - for stdin) or embeddings (.npy, or a folder "
            "of shards from `encode --out FOLDER/`, mined a block at a time)"
        )
    )
    tgt: str | None = field(metadata=option("target sentences or embeddings, as --src (only one side can be -)"))
    src_text: str | None = field(
        default=None,
        metadata=option("with a .npy or folder --src: the text file of its sentences (one line per row)"),
    )
    tgt_text: str | None = field(default=None, metadata=option("with a .npy --tgt: the text file of its sentences"))
    out: str | None = field(
        default=None,
        metadata=option(
            "write the pairs here, in the format of the extension: .tsv or .txt (TSV), .csv, .jsonl, .parquet or "
            ".pq; `-` for stdout (TSV unless --format); written atomically, never over an input"
        ),
    )
    format: str | None = field(
        default=None,
        metadata=option(
            "output format whatever the extension (default: by the extension of --out, .txt being TSV; any other "
            "extension without --format is exit 2)",
            choices=FORMATS,
        ),
    )
    mode: str | None = field(
        default=DEFAULT_MODE,
        metadata=option(
            "retrieval mode (default max, also for document-level mining)", choices=MODES, parser_default=None
        ),
    )
    src_docs: str | None = field(
        default=None, metadata=option("document id of each source line: mine inside aligned documents")
    )
    tgt_docs: str | None = field(default=None, metadata=option("document id of each target line"))
    gold: str | None = field(
        default=None,
        metadata=option(
            "gold pairs (`src_line<TAB>tgt_line`, 0-based) to report precision and recall; read before encoding"
        ),
    )
    keep_duplicates: bool = field(default=False, metadata=option("mine duplicate lines separately (default: once)"))
    src_model: str | None = field(
        default=None,
        metadata=option("encoder of the source side (default --model), e.g. a LASER3 student", group="sides"),
    )
    tgt_model: str | None = field(
        default=None, metadata=option("encoder of the target side (default --model), e.g. its teacher", group="sides")
    )
    index: str = field(
        default="exact",
        metadata=option(
            "exact (default): every similarity, one pass for both directions; auto: exact while the corpus is "
            "small (N x M <= 6.4e9 sentence pairs, 80k x 80k, where an index starts to pay on a busy machine), then "
            "IVF<n>,Flat (inverted lists of exact vectors, n ~ 4 sqrt(N) lists, nprobe: 64 of them and at least "
            "3/64), then OPQ64,IVF<n>,PQ64 once a side's vectors pass 8 GiB; or any FAISS factory string, e.g. "
            "IVF1024,Flat. An index is trained once on a seeded sample of both sides and built over each side; scores "
            "are always exact cosines of the candidates found, so an index can only miss pairs",
            metavar="exact|auto|FACTORY",
            group="index",
        ),
    )
    nprobe: int | None = field(
        default=None,
        metadata=option(
            "inverted lists each sentence scans with an IVF index (default 64, at most the lists): time grows about "
            "linearly with it, and so does recall until it nears exact; with IVF-Flat, nprobe = lists is exact search",
            type=positive_int,
            group="index",
        ),
    )
    check_recall: int | None = field(
        default=None,
        metadata=option(
            "after an approximate run, compare the neighbours of N sampled sources (seeded) with exact search and "
            "print recall@k (to stderr when the pairs go to stdout); costs one more index over the targets",
            type=positive_int,
            metavar="N",
            group="index",
        ),
    )
    quiet: bool = field(default=False, metadata=QUIET)
    threads: int | None = field(default=None, metadata=THREADS)
    command: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)  # each field's type and range, as the command line's refusal, before anything else
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
        self.mode = self.mode or DEFAULT_MODE
        self.check_encoder_options()
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

    @property
    def filters(self) -> FilterSettings:
        """The filters of this run (see :mod:`bitext_hf.mining.filters`)."""
        return filter_settings(self)

    @classmethod
    def demo(cls, **options: Any) -> MiningConfig:
        """The bundled English-German demo (``bitext_hf/demo/README.md``) scored against its gold pairs."""
        return cls(**{**options, **demo_inputs(options.get("gold"))})

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
            from bitext_hf.encoding.shards import MANIFEST, read_manifest

            return read_manifest(os.path.join(path, MANIFEST)).encoder
        if is_npy(path):
            return None
        from bitext_hf.encoding.cache import encoder_identity

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
