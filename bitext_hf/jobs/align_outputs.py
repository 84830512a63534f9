"""What an alignment run writes (:mod:`bitext_hf.jobs.align`): every output planned before anything is read
(:func:`plan_outputs`: one file and its sidecar, or a folder of files and ``alignment.meta.json``), each document
checked to fit the output format before any encoding (:func:`check_documents_fit`), then the outputs and the sidecar
written and committed together (:func:`write_outputs`). The inputs are :mod:`bitext_hf.jobs.align_inputs`'."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from bitext_hf.data import alignment_files
from bitext_hf.data.alignment_files import ALIGNMENT_TASK, EXTENSIONS, SIDECAR_NAME, check_tsv_sentences
from bitext_hf.data.tmx import check_xml_text
from bitext_hf.errors import UsageError

if TYPE_CHECKING:
    from bitext_hf.jobs.align import AlignConfig
    from bitext_hf.jobs.base import JobOutputs

__all__ = ["check_documents_fit", "plan_outputs", "write_outputs"]


def plan_outputs(config: AlignConfig, outputs: JobOutputs, names: list[str], documents: list[str]) -> list[str]:
    """Declare the output of each document and the sidecar (last) before anything is read: one file and
    ``<out>.meta.json``, or a folder of files and its ``alignment.meta.json`` (one stream ``out`` gets the alignment
    alone); returns the outputs' paths (none without ``out``)."""
    from bitext_hf.data.pair_files import metadata_path

    if config.out is None:
        return []
    if not config.many_documents:
        if outputs.add_out(config.out):  # a file; a stream (stdout, a FIFO, a device) has no sidecar
            outputs.add(metadata_path(config.out), last=True)
        return [config.out]
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
    return paths


def check_documents_fit(fmt: str, paths: list[str], documents: list[list[str]], lines: list) -> None:
    """Each document's sentences checked to fit the output format (a TSV cell holds no tab or line break, TMX no
    character XML 1.0 cannot hold), naming the file and line, before the encoder is loaded."""
    from bitext_hf.data.readers import display_name

    for path, document, document_lines in zip(paths, documents, lines):
        if fmt == "tsv":
            check_tsv_sentences(document, display_name(path), document_lines)
        elif fmt == "tmx":
            check_xml_text(document, display_name(path), document_lines)


def _sidecar_text(config: AlignConfig, names: list[str], languages: tuple[str | None, str | None]) -> str:
    from bitext_hf.data.pair_files import printable

    record = {
        "task": ALIGNMENT_TASK,
        "encoder": config.encoder_spec().identity,
        **config.settings.as_dict(),
        "overlaps": config.overlaps,
        "format": config.output_format,
        "classifier": config.classifier,
        "src": config.src,
        "tgt": config.tgt,
        "src_lang": languages[0],
        "tgt_lang": languages[1],
        "split": config.split or None,
        "clauses": config.clauses or None,
        "src_docs": config.src_docs,
        "tgt_docs": config.tgt_docs,
        "documents": names if config.many_documents else None,
        "command": config.command,
    }
    return (
        json.dumps({k: printable(v) for k, v in record.items() if v is not None}, indent=2, ensure_ascii=False) + "\n"
    )


def write_outputs(
    config: AlignConfig, outputs: JobOutputs, paths, alignments, src_docs, tgt_docs, names, qualities, languages
):
    """Every output and the sidecar, or none of them: each written to a temporary file, all renamed together at the
    end, the sidecar last (:class:`~bitext_hf.jobs.base.JobOutputs`); a failure or a signal before that leaves the
    files that were there before as they were. One stream the user named (stdout, a FIFO, a device) is written
    directly, alone."""
    from bitext_hf.data.pair_files import metadata_path

    fmt = config.output_format
    for number, (path, alignment, src, tgt) in enumerate(zip(paths, alignments, src_docs, tgt_docs)):
        with outputs.staged(path) as temporary:
            extra = {"languages": languages} if fmt == "tmx" else {}
            if qualities is None:  # the call as it has always been (tests replace write_alignment)
                alignment_files.write_alignment(alignment, temporary, src, tgt, fmt, **extra)
            else:
                alignment_files.write_alignment(alignment, temporary, src, tgt, fmt, qualities[number], **extra)
    if not outputs.is_stream(config.out):
        sidecar = os.path.join(config.out, SIDECAR_NAME) if config.many_documents else metadata_path(config.out)
        with outputs.open(sidecar) as handle:
            handle.write(_sidecar_text(config, names, languages))
    outputs.commit()
