"""The alignment job over files: :func:`run_alignment` over an :class:`AlignConfig`. ``bitext-hf align`` parses its
options into the config and calls it; Python users get the same job, the same files:

>>> from bitext_hf.alignment import AlignConfig, run_alignment
>>> result = run_alignment(AlignConfig("book.de", "book.fr", out="book.align"))

A run aligns one document pair (``src`` and ``tgt`` files, one sentence a line) or many (``src`` and ``tgt``
folders holding files of the same names, or ``src_docs`` and ``tgt_docs`` lists of documents paired line by line;
``out`` is then a folder, one output file per document). In order: every
option checked when the config is made; every output path planned and checked (:class:`bitext_hf.io.OutputSet`: no
link, FIFO, device or folder at an output's name, no output that is an input or in an input folder, a writable
folder) and the inputs protected from every file the job writes; every document read and checked (and, for TSV
output, that its sentences fit); only then the encoder loaded and every distinct overlap text of each side encoded
once for the whole run (or taken from the encoding cache); each pair aligned, and the outputs written to temporary
files and committed together, the sidecar ``<out>.meta.json`` (in a folder ``out``: ``alignment.meta.json``, which
lists the documents this run wrote) last. A bad input never costs an encoding run; a failure or a signal before the
commit leaves the earlier files exactly as they were. An output folder that does not exist is made (its parent must
exist); files in it that the run does not write stay as they are. The documents of a folder are its own files: files
in its subfolders are not aligned, and the run says how many it left out.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bitext_hf.alignment.config import AlignConfig, AlignSettings
from bitext_hf.alignment.output import EXTENSIONS, check_tsv_sentences
from bitext_hf.alignment.overlaps import overlap_texts
from bitext_hf.alignment.search import Alignment, search
from bitext_hf.errors import UsageError

if TYPE_CHECKING:
    from bitext_hf.io import OutputSet

__all__ = ["ALIGNMENT_TASK", "SIDECAR_KEYS", "SIDECAR_NAME", "AlignResult", "run_alignment"]

logger = logging.getLogger("bitext_hf")

# The sidecar of a folder of outputs (a file output's is <file>.meta.json, as mine's).
SIDECAR_NAME = "alignment.meta.json"
# What tells an alignment's sidecar from a mining run's (``push --pairs`` renders the card of either), and its keys.
ALIGNMENT_TASK = "sentence alignment"
SIDECAR_KEYS = (
    "task",
    "encoder",
    *(field.name for field in dataclasses.fields(AlignSettings)),
    "format",
    "src",
    "tgt",
    "src_lang",
    "tgt_lang",
    "src_docs",
    "tgt_docs",
    "documents",
    "command",
)


@dataclasses.dataclass(repr=False)
class AlignResult:
    """What a run aligned, one entry per document pair in each list.

    Attributes:
        names (list of str): each document pair's name (its output file's name in a folder run).
        src_documents, tgt_documents (list of list of str): each pair's sentences as read.
        alignments (list of Alignment): each pair's beads and scores (:class:`~bitext_hf.alignment.search.Alignment`).
        outputs (list of str): the files written (none without ``out``).
        encoded, from_cache (int): overlap texts encoded in this run, and served from the encoding cache.
        seconds (dict of str to float): wall time of each stage.

    ``repr`` summarises; the documents and alignments are in the attributes.
    """

    names: list[str]
    src_documents: list[list[str]]
    tgt_documents: list[list[str]]
    alignments: list[Alignment]
    outputs: list[str]
    encoded: int
    from_cache: int
    seconds: dict[str, float]

    def __repr__(self) -> str:
        beads = sum(len(alignment) for alignment in self.alignments)
        return (
            f"AlignResult({len(self.names)} document pair(s), {beads} beads, outputs={self.outputs[:3]}"
            f"{'...' if len(self.outputs) > 3 else ''}, encoded={self.encoded}, from_cache={self.from_cache}, "
            f"seconds={ {stage: round(value, 3) for stage, value in self.seconds.items()} })"
        )


def run_alignment(config: AlignConfig, *, load_encoder: Callable[..., Any] | None = None) -> AlignResult:
    """Run the alignment job of ``config`` (see the module docstring).

    Args:
        load_encoder (callable, optional): as :func:`bitext_hf.mining.pipeline.run_mining`'s.

    Raises:
        UsageError: options or output path that cannot work; DataValidationError: a bad input (naming the file and
            line); OutputWriteError: an output could not be written (nothing partial is left behind).
    """
    from bitext_hf.mining.sides import job_scope

    with job_scope(config.threads):
        return _run(config, load_encoder)


def _documents(config: AlignConfig) -> tuple[list[str], list[str], list[str]]:
    """(names, source paths, target paths): one pair, the documents of two lists paired by line, or the files of two
    folders paired by name."""
    if config.src_docs:
        return _listed_documents(config.src_docs, config.tgt_docs)
    if not config.many_documents:
        return [os.path.basename(config.src) or "document"], [config.src], [config.tgt]
    listed, left_out = [], []
    for folder in (config.src, config.tgt):
        names, nested, special = _folder_documents(folder)
        listed.append(names)
        if nested or special:
            left_out.append((folder, nested, special))
    if left_out:
        logger.warning(
            "left out of the alignment: %s (a folder's documents are its own files; list nested documents with "
            "--src-docs/--tgt-docs)",
            "; ".join(_left_out_words(*entry) for entry in left_out),
        )
    src_names, tgt_names = map(set, listed)
    if src_names != tgt_names:
        only = sorted(src_names ^ tgt_names)[:3]
        raise UsageError(
            f"--src {config.src} and --tgt {config.tgt} must hold files of the same names (documents paired by name); "
            f"not in both: {', '.join(only)}"
        )
    if not listed[0]:
        raise UsageError(f"--src {config.src}: no documents in the folder")
    names = listed[0]
    return names, [os.path.join(config.src, n) for n in names], [os.path.join(config.tgt, n) for n in names]


def _folder_documents(folder: str) -> tuple[list[str], int, int]:
    """The documents of ``folder`` (its own files, hidden ones aside, sorted), the files in its subfolders, and its
    entries that are neither files nor folders (FIFOs, sockets, devices, broken links): those two are left out."""
    names, nested, special = [], 0, 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_file():
                names.append(entry.name)
            elif entry.is_dir():
                for _, _, files in os.walk(entry.path):
                    nested += sum(not name.startswith(".") for name in files)
            else:
                special += 1
    return sorted(names), nested, special


def _left_out_words(folder: str, nested: int, special: int) -> str:
    parts = [f"{nested} file(s) in subfolders"] if nested else []
    if special:
        parts.append(f"{special} entr{'y' if special == 1 else 'ies'} that are not files (FIFO, socket, device, link)")
    return f"{' and '.join(parts)} of {folder}"


def _listed_documents(src_list: str, tgt_list: str) -> tuple[list[str], list[str], list[str]]:
    """The documents of two lists, paired line by line; a document's name (its output's) is its source file's."""
    from bitext_hf.data import read_lines
    from bitext_hf.errors import DataValidationError
    from bitext_hf.mining.sides import display

    paths = []
    for listing in (src_list, tgt_list):
        folder = os.path.dirname(listing) if listing != "-" else ""
        paths.append([os.path.join(folder, line.strip()) for line in read_lines(listing)])
    if len(paths[0]) != len(paths[1]):
        raise DataValidationError(
            f"{display(src_list)} lists {len(paths[0])} documents but {display(tgt_list)} lists {len(paths[1])}: "
            "give one target document per source document"
        )
    names, seen = [], {}
    for number, path in enumerate(paths[0], start=1):
        name = os.path.basename(path)
        if name in seen:
            raise DataValidationError(
                f"{display(src_list)}:{number}: a second document named {name} (line {seen[name]}); the outputs are "
                "named after the source documents, so their file names must differ"
            )
        seen[name] = number
        names.append(name)
    return names, paths[0], paths[1]


def _plan_outputs(
    config: AlignConfig, names: list[str], documents: list[str], lists: list[str]
) -> tuple[list[str], OutputSet | None]:
    """The output path of each document, and the :class:`~bitext_hf.io.OutputSet` that writes them with the sidecar
    (None: no ``out``, or one stream written directly), every path checked before anything is read."""
    from bitext_hf.io import OutputSet, check_inputs_and_output, writes_in_place
    from bitext_hf.mining.sidecar import metadata_path

    inputs = documents + lists
    check_inputs_and_output(None, inputs)  # one stdin at most; the inputs protected from every write
    if config.out is None:
        return [], None
    if not config.many_documents:
        if writes_in_place(config.out):  # stdout, a FIFO, a device: written directly, without a sidecar
            check_inputs_and_output(config.out, inputs)
            return [config.out], None
        outputs = OutputSet(inputs=inputs)
        outputs.add(config.out, follow_symlinks=True)
        outputs.add(metadata_path(config.out), last=True)
        return [config.out], outputs
    folders = [config.src, config.tgt] if not config.src_docs else []
    outputs = OutputSet(inputs=inputs, input_folders=folders)
    real = outputs.add_folder(config.out)
    # Listed documents may sit in any folder but the outputs' (a folder of documents and outputs mixed, which a
    # later run over that folder would take for documents).
    for path in documents if config.src_docs else ():
        if os.path.realpath(os.path.dirname(os.path.abspath(path))) == real:
            raise UsageError(
                f"--out {config.out}: holds the listed document {path}; write the outputs to a folder of their own"
            )
    extension = EXTENSIONS[config.output_format]
    paths = [os.path.join(config.out, name + extension) for name in names]
    for path in paths:
        outputs.add(path)
    outputs.add(os.path.join(config.out, SIDECAR_NAME), last=True)
    return paths, outputs


def _note_capped_settings(settings: AlignSettings, tgt_docs: list[list[str]]) -> None:
    """A word, before the encoding, where the search caps a setting at what the documents hold."""
    longest = max(map(len, tgt_docs), default=0)
    default = next(field.default for field in dataclasses.fields(AlignSettings) if field.name == "top_k")
    if longest and settings.top_k > max(longest, default):  # the default is no one's choice: no word for it
        logger.warning(
            "top-k %d is more than the %d sentences of the longest target document: every target sentence in the "
            "band is a candidate (top-k %d)",
            settings.top_k,
            longest,
            longest,
        )


def _run(config: AlignConfig, load_encoder) -> AlignResult:
    from bitext_hf.data import read_lines
    from bitext_hf.encoding.embedder import Embedder
    from bitext_hf.mining.sides import display

    started = time.perf_counter()
    names, src_paths, tgt_paths = _documents(config)
    fmt = config.output_format
    lists = [path for path in (config.src_docs, config.tgt_docs) if path]
    outputs, plan = _plan_outputs(config, names, src_paths + tgt_paths, lists)
    settings = config.settings
    # Every document is read and checked before any encoder is loaded.
    src_docs = [read_lines(path, max_chars=config.max_line_chars) for path in src_paths]
    tgt_docs = [read_lines(path, max_chars=config.max_line_chars) for path in tgt_paths]
    if fmt == "tsv":
        for path, document in zip(src_paths + tgt_paths, src_docs + tgt_docs):
            check_tsv_sentences(document, display(path))
    _note_capped_settings(settings, tgt_docs)
    read_seconds = time.perf_counter() - started

    embedder = Embedder.from_options(config, load_encoder)
    layers = settings.max_align - 1
    # Each side's distinct overlap texts over every document are encoded in one call: once each, one cache entry.
    src_overlaps = overlap_texts(src_docs, layers).embed(lambda texts: embedder.embed(texts, "source overlap"))
    tgt_overlaps = overlap_texts(tgt_docs, layers).embed(lambda texts: embedder.embed(texts, "target overlap"))
    align_started = time.perf_counter()
    alignments = [search(src, tgt, **settings.as_dict()) for src, tgt in zip(src_overlaps, tgt_overlaps)]
    align_seconds = time.perf_counter() - align_started

    write_started = time.perf_counter()
    if outputs:
        _write(config, plan, outputs, alignments, src_docs, tgt_docs, fmt, names)
    return AlignResult(
        names=names,
        src_documents=src_docs,
        tgt_documents=tgt_docs,
        alignments=alignments,
        outputs=outputs,
        encoded=embedder.encoded,
        from_cache=embedder.from_cache,
        seconds={
            "read": read_seconds,
            "encode": embedder.encode_seconds,
            "align": align_seconds,
            "write": time.perf_counter() - write_started,
        },
    )


def _sidecar_text(config: AlignConfig, names: list[str], fmt: str) -> str:
    from bitext_hf.encoding.cache import encoder_identity
    from bitext_hf.mining.sidecar import printable

    record = {
        "task": ALIGNMENT_TASK,
        "encoder": encoder_identity(config.model, config.pooling, config.quantize, config.backend),
        **config.settings.as_dict(),
        "format": fmt,
        "src": config.src,
        "tgt": config.tgt,
        "src_lang": config.src_lang,
        "tgt_lang": config.tgt_lang,
        "src_docs": config.src_docs,
        "tgt_docs": config.tgt_docs,
        "documents": names if config.many_documents else None,
        "command": config.command,
    }
    return (
        json.dumps({k: printable(v) for k, v in record.items() if v is not None}, indent=2, ensure_ascii=False) + "\n"
    )


def _write(config, plan, outputs, alignments, src_docs, tgt_docs, fmt, names) -> None:
    """Every output and the sidecar, or none of them: each written to a temporary file, all renamed together at the
    end, the sidecar last (:class:`~bitext_hf.io.OutputSet`); a failure or a signal before that leaves the files that
    were there before as they were."""
    from bitext_hf.alignment import output
    from bitext_hf.mining.sidecar import metadata_path

    if plan is None:  # one stream the user named (stdout, a FIFO, a device): written directly
        output.write_alignment(alignments[0], config.out, src_docs[0], tgt_docs[0], fmt)
        return
    sidecar = os.path.join(config.out, SIDECAR_NAME) if config.many_documents else str(metadata_path(config.out))
    with plan:
        for path, alignment, src, tgt in zip(outputs, alignments, src_docs, tgt_docs):
            with plan.staged(path) as temporary:
                output.write_alignment(alignment, temporary, src, tgt, fmt)
        with plan.open(sidecar) as handle:
            handle.write(_sidecar_text(config, names, fmt))
        plan.commit()
