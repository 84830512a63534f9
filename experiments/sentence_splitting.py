"""Which offline rule-based sentence splitter ``bitext-hf align`` should use to cut raw documents into sentences.

Candidates (each offline, no model to download):

- ``regex``: the baseline. A boundary after ``.``, ``!`` or ``?`` followed by whitespace, and after a CJK terminal
  mark (``。！？``, and a run of them) whatever follows.
- ``sentence-splitter`` (PyPI ``sentence-splitter``, module ``sentence_splitter``, LGPLv3): Koehn and Schroeder's
  Moses ``split-sentences.perl`` with its non-breaking prefix lists, for the 24 languages that have one (ca cs da de
  el en es fi fr hu is it lt lv nl no pl pt ro ru sk sl sv tr). Any other code raises ``SentenceSplitterException``;
  here such a language is split with the English list (marked ``*``).
- ``pysbd`` (PyPI ``pysbd``, MIT): the Golden Rules port of pragmatic_segmenter, 23 languages (am ar bg da de el en
  es fa fr hi hy it ja kk mr my nl pl ru sk ur zh). Any other code raises ``ValueError``; here such a language is
  split with the English rules (marked ``*``). ``clean=False``, so the text is not changed.
- ``blingfire`` (PyPI ``blingfire``, MIT): Microsoft's finite-state sentence breaker, ``text_to_sentences``, one
  model for all languages (no language argument).
- ``sentence-splitter+cjk``: a combination, not a package: ``sentence-splitter`` (as above), then each of its
  sentences cut again after each run of CJK terminal marks and the closing brackets or quotes after it (Moses only
  breaks at whitespace).
- ``bitext-hf``: what ``align --split`` uses (``bitext_hf.data.sentences.sentence_splitter``): the combination
  above, a list's number that Moses cuts off as a sentence (``2.``, ``(3)``) opening the next sentence.
- ``+clauses``: ``bitext-hf`` with ``clauses=True`` (``align --split --clauses``): also a cut after each ``;`` or
  ``:`` followed by whitespace: Text+Berg's own convention (its gold cuts there every time but once), measured to see
  how far that convention and the layout below account for the gap to its gold; not the default (its gettext
  precision shows why).

Gold and sets:

1. Text+Berg German-French (vecalign's ``bleualign_data``: dev, test0..test6, ``.de`` and ``.fr``; GPL-2.0; one
   sentence a line, tokenized). Each line is detokenized (sacremoses ``MosesDetokenizer`` of the file's language), the
   lines of a document joined with one space into running text, and the splitters' boundaries compared with the line
   boundaries. Two gold variants: every line boundary (``all``), and without the boundaries that follow a line ending
   in ``;`` or ``:`` (``no ;:``), where Text+Berg also cuts and no general splitter does. The gold also cuts after
   titles, headings and captions without punctuation, which no splitter can find in running text: the script prints
   the share of gold boundaries that follow terminal punctuation, a ceiling on any splitter's recall there. A third
   variant (``titles apart``, every gold boundary) lays the lines out as a typeset document would: a line that ends
   neither a sentence nor a clause (a title, an author line, a caption) stands on its own as a paragraph, the others
   run on, and each paragraph is split on its own (as ``align --split`` does). Per language, the 8 documents
   together (counts summed).
2. gettext (this machine's catalogs, human translations of English interface messages; ``bitext_hf.data.gettext``'s
   readers, messages cleaned by ``clean_message``): per language, translated messages of one line that start with a
   letter that is not lower case (or a digit), end in terminal punctuation (``.!?`` or ``。！？``) and contain no
   terminal punctuation followed by whitespace, nor a CJK terminal mark, before their final run of it; English is the
   msgids of the translated messages of all the languages measured, each filtered the same way. Each side unique.
   Paragraphs are 5 consecutive such messages (catalog order) joined with a space, with none after a CJK mark in
   ja / zh; at most ``--max-messages`` (2,000) messages per language, whole paragraphs drawn with ``--seed``. Gold
   boundaries: the message boundaries. This set tests splitting between sentences (boundaries after ``.!?`` and CJK
   marks, in every script, the next sentence starting with a number or a non-Latin letter included) and
   over-splitting on what lies inside a message (numbers, versions, file names, URLs, abbreviations not followed by
   a space, placeholders such as ``%s.``); by construction it does not test multi-sentence messages, nor
   abbreviations followed by a space, which the filter leaves out (Text+Berg has those). The filter is the regex
   baseline's own rule, so the baseline scores 100 here by construction: only Text+Berg measures its errors. Arabic
   messages ending in ``؟`` are left out, so the Arabic question mark is not tested; the few Thai messages that pass
   are mostly abbreviations (month names), Thai sentences having no final punctuation.

Boundaries are compared as character offsets in the text with all whitespace removed, so a splitter that trims or
normalises spaces is not penalised; a splitter that changes other characters is reported (none does here). Scores:
boundary precision, recall and F1 (micro, over all boundaries of the set), the start of a text not counted.

3. Speed: gold sentences per second of each splitter over the 8 Text+Berg documents of a language, one process and
   one thread (none of the splitters starts threads), splitter already built, repeated until ``--speed-seconds``
   (2 s) have passed.

    python experiments/sentence_splitting.py
    python experiments/sentence_splitting.py --languages ja,ru --examples 5

Prints the tables (markdown); writes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import version

from bitext_hf.data.catalog_reader import read_catalog
from bitext_hf.data.gettext import clean_message, find_catalogs
from bitext_hf.errors import DataValidationError

VECALIGN_REPO = "/work/.mirror/thompsonb+vecalign/repo"
TEXT_BERG_DOCS = ("dev", "test0", "test1", "test2", "test3", "test4", "test5", "test6")
GETTEXT_LANGUAGES = "ja,zh_CN,ko,ru,ar,th,pt_BR,es,tr,pl,it,nl"
SPLITTERS = ("regex", "sentence-splitter", "pysbd", "blingfire", "sentence-splitter+cjk", "bitext-hf", "+clauses")
PARAGRAPH = 5  # messages per gettext paragraph

_WHITESPACE = re.compile(r"\s+")
_CJK_MARKS = "。！？"
# The regex baseline: after . ! ? and whitespace, or after a run of CJK terminal marks (whatever follows).
_REGEX_BOUNDARY = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])(?![。！？])\s*")
# The combination's cut: after a run of CJK marks and the closing brackets and quotes that follow it.
_CJK_END = re.compile(r"([。！？]+[」』）】〕〉》”’\"')]*)\s*(?=\S)")
_TERMINAL_END = re.compile(r"[.!?。！？]$")
_INNER_TERMINAL = re.compile(r"[.!?]\s|[。！？]")
_LETTER = re.compile(r"[^\W\d_]")
# A line that ends a sentence with punctuation (closing quotes and brackets after it allowed).
_ENDS_SENTENCE = re.compile(r"[.!?…。！？][\"'»«“”’)\]>]*$")

Splitter = Callable[[str], list[str]]


def iso_code(lang: str) -> str:
    """ISO 639-1 code of a gettext language folder: pt_BR -> pt, zh_CN -> zh."""
    return lang.split("_")[0].split("@")[0]


def _regex_split(text: str) -> list[str]:
    return _REGEX_BOUNDARY.split(text)


def cjk_split(text: str) -> list[str]:
    """``text`` cut after each run of CJK terminal marks (with the closing brackets and quotes after it)."""
    return _CJK_END.sub("\\1\n", text).split("\n")


def make_splitter(name: str, lang: str) -> tuple[Splitter, bool]:
    """(split function, whether it fell back to English) of splitter ``name`` for ISO code ``lang``."""
    if name == "regex":
        return _regex_split, False
    if name in ("sentence-splitter", "sentence-splitter+cjk"):
        from sentence_splitter import SentenceSplitter, SentenceSplitterException

        try:
            splitter, fallback = SentenceSplitter(language=lang), False
        except SentenceSplitterException:
            splitter, fallback = SentenceSplitter(language="en"), True
        if name == "sentence-splitter":
            return splitter.split, fallback
        return (lambda text: [piece for s in splitter.split(text) for piece in cjk_split(s)]), fallback
    if name in ("bitext-hf", "+clauses"):
        from bitext_hf.data.sentences import SENTENCE_SPLITTER_LANGUAGES, base_language, sentence_splitter

        fallback = base_language(lang) not in SENTENCE_SPLITTER_LANGUAGES
        return sentence_splitter(lang, clauses=name == "+clauses"), fallback
    if name == "pysbd":
        import pysbd

        try:
            segmenter, fallback = pysbd.Segmenter(language=lang, clean=False), False
        except ValueError:
            segmenter, fallback = pysbd.Segmenter(language="en", clean=False), True
        return segmenter.segment, fallback
    if name == "blingfire":
        import blingfire

        return (lambda text: blingfire.text_to_sentences(text).split("\n")), False
    raise ValueError(f"unknown splitter {name!r}")


def strip_spaces(text: str) -> str:
    return _WHITESPACE.sub("", text)


def boundaries(pieces: Iterable[str], text: str) -> tuple[set[int], bool]:
    """Offsets (in ``text`` without whitespace) where a piece after the first starts, and whether the pieces are the
    text exactly (whitespace aside). Pieces that differ are placed where they are found next."""
    target = strip_spaces(text)
    offsets, position, exact = set(), 0, True
    for piece in pieces:
        piece = strip_spaces(piece)
        if not piece:
            continue
        if not target.startswith(piece, position):
            exact = False
            found = target.find(piece, position)
            if found < 0:
                continue
            position = found
        if position:
            offsets.add(position)
        position += len(piece)
    offsets.discard(len(target))
    return offsets, exact


@dataclass
class Document:
    text: str
    gold: set[int]  # every gold boundary
    gold_strict: set[int]  # without those after ; or :
    sentences: int
    after_terminal: int = 0  # gold boundaries following terminal punctuation
    paragraphs: list[str] | None = None  # split one by one (their boundaries given), when set


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    inexact: int = 0  # texts whose pieces were not the text
    errors: list[str] = field(default_factory=list)

    def add(self, predicted: set[int], gold: set[int]) -> None:
        self.tp += len(predicted & gold)
        self.fp += len(predicted - gold)
        self.fn += len(gold - predicted)

    def cell(self) -> str:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0
        f = 2 * p * r / (p + r) if p + r else 0.0
        return f"{100 * p:.0f} / {100 * r:.0f} / {100 * f:.0f}"


def _git_show(path: str) -> str:
    return subprocess.run(
        ["git", "-C", VECALIGN_REPO, "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def text_berg(lang: str) -> list[Document]:
    from sacremoses import MosesDetokenizer

    detokenizer = MosesDetokenizer(lang=lang)
    documents = []
    for name in TEXT_BERG_DOCS:
        lines = [
            detokenizer.detokenize(line.split()) for line in _git_show(f"bleualign_data/{name}.{lang}").splitlines()
        ]
        lines = [line.strip() for line in lines if line.strip()]
        gold, strict, offset, after_terminal = set(), set(), 0, 0
        for previous in lines[:-1]:
            offset += len(strip_spaces(previous))
            gold.add(offset)
            if not previous.endswith((";", ":")):
                strict.add(offset)
            after_terminal += bool(_ENDS_SENTENCE.search(previous))
        documents.append(Document(" ".join(lines), gold, strict, len(lines), after_terminal, _layout(lines)))
    return documents


def _layout(lines: list[str]) -> list[str]:
    """The lines as paragraphs of a typeset document: a line that ends neither a sentence nor a clause (a title, an
    author line, a caption) stands on its own; the others run on."""
    paragraphs, current = [], []
    for line in lines:
        current.append(line)
        if not (_ENDS_SENTENCE.search(line) or line.endswith((";", ":"))):
            paragraphs.append(" ".join(current))
            current = []
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


# A document as a file: one paragraph a line (an export of a word processor or a web page), or hard-wrapped at 72
# columns; titles on their own lines (the layout of ``_layout``), no blank line anywhere.
_FILE_LAYOUTS: dict[str, Callable[[list[str]], list[str]]] = {
    "one paragraph a line": lambda paragraphs: paragraphs,
    "wrapped at 72": lambda paragraphs: [line for p in paragraphs for line in textwrap.wrap(p, 72)],
}


def _split_document_score(documents: list[Document], laid_out, lang: str, title_width: float | None) -> Score:
    """The product's splitter on each document laid out as a file; ``title_width`` replaces ``TITLE_WIDTH`` (0: no
    title rule)."""
    from bitext_hf.data import sentences

    score, default = Score(), sentences.TITLE_WIDTH
    sentences.TITLE_WIDTH = default if title_width is None else title_width
    try:
        for document in documents:
            pieces = sentences.split_document(laid_out(document.paragraphs), lang).sentences
            predicted, _ = boundaries(pieces, document.text)
            score.add(predicted, document.gold)
    finally:
        sentences.TITLE_WIDTH = default
    return score


def _usable(message: str) -> bool:
    if "\n" in message or "\r" in message or not _TERMINAL_END.search(message):
        return False
    first = message[0]
    if not (first.isdigit() or (_LETTER.match(first) and not first.islower())):
        return False
    return not _INNER_TERMINAL.search(message.rstrip(".!?" + _CJK_MARKS))


def gettext_messages(languages: list[str]) -> dict[str, list[str]]:
    """Usable messages per language (catalog order, each unique), English ('en') from the msgids of them all."""
    messages: dict[str, list[str]] = {"en": []}
    seen_english: set[str] = set()
    for lang in languages:
        found, seen = [], set()
        for catalog in find_catalogs(lang):
            try:
                pairs = read_catalog(catalog).pairs
            except DataValidationError:
                continue
            for msgid, msgstr in pairs:
                if "\n" in msgid or "\n" in msgstr:
                    continue
                source, target = clean_message(msgid), clean_message(msgstr)
                if not source or not target or source == target:
                    continue
                if _usable(target) and target not in seen:
                    seen.add(target)
                    found.append(target)
                if _usable(source) and source not in seen_english:
                    seen_english.add(source)
                    messages["en"].append(source)
        messages[lang] = found
    return messages


def gettext_documents(lang: str, messages: list[str], max_messages: int, seed: int) -> list[Document]:
    chunks = [messages[i : i + PARAGRAPH] for i in range(0, len(messages) - PARAGRAPH + 1, PARAGRAPH)]
    chosen = sorted(random.Random(seed).sample(range(len(chunks)), min(len(chunks), max_messages // PARAGRAPH)))
    cjk = iso_code(lang) in ("ja", "zh")
    documents = []
    for index in chosen:
        chunk = chunks[index]
        text, gold, offset = chunk[0], set(), len(strip_spaces(chunk[0]))
        for message in chunk[1:]:
            gold.add(offset)
            text += ("" if cjk and text.endswith(tuple(_CJK_MARKS)) else " ") + message
            offset += len(strip_spaces(message))
        documents.append(Document(text, gold, gold, len(chunk), len(gold)))
    return documents


def _context(text: str, offset: int, width: int = 40) -> str:
    """The text around whitespace-free ``offset``, the boundary shown as ``|``."""
    count = 0
    for index, char in enumerate(text):
        if not char.isspace():
            if count == offset:
                return (text[max(0, index - width) : index] + "|" + text[index : index + width]).replace("\n", " ")
            count += 1
    return text[-width:] + "|"


def evaluate(split: Splitter, documents: list[Document], examples: int, seed: int) -> tuple[Score, Score]:
    """Scores against every gold boundary and against the gold without ; and : boundaries, each with up to
    ``examples`` false positives and false negatives drawn with ``seed``."""
    every, strict = Score(), Score()
    mistakes: tuple[list, list] = ([], [])  # (document, offset, kind) of every, of strict
    for document in documents:
        pieces = (
            split(document.text) if document.paragraphs is None else [p for t in document.paragraphs for p in split(t)]
        )
        predicted, exact = boundaries(pieces, document.text)
        for score, gold, found in zip((every, strict), (document.gold, document.gold_strict), mistakes):
            score.inexact += not exact
            score.add(predicted, gold)
            found += [(document, o, "FP") for o in sorted(predicted - gold)]
            found += [(document, o, "FN") for o in sorted(gold - predicted)]
    for score, found in zip((every, strict), mistakes):
        for kind in ("FP", "FN"):
            of_kind = [m for m in found if m[2] == kind]
            for document, offset, _ in random.Random(seed).sample(of_kind, min(examples, len(of_kind))):
                score.errors.append(f"  {kind}: {_context(document.text, offset)}")
    return every, strict


def speed(split: Splitter, documents: list[Document], seconds: float) -> float:
    sentences, start = 0, time.perf_counter()
    while True:
        for document in documents:
            split(document.text)
            sentences += document.sentences
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return sentences / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--languages", default=GETTEXT_LANGUAGES, help="gettext languages (default: %(default)s)")
    parser.add_argument("--max-messages", type=int, default=2000, help="per gettext language (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speed-seconds", type=float, default=2.0)
    parser.add_argument("--examples", type=int, default=0, help="print up to N errors (FP, FN) per splitter and set")
    args = parser.parse_args(argv)
    languages = [lang for lang in args.languages.split(",") if lang]

    start = time.perf_counter()
    sets: list[tuple[str, str, list[Document], bool]] = []  # (name, ISO code, documents, strict variant)
    berg = {lang: text_berg(lang) for lang in ("de", "fr")}
    for lang, documents in berg.items():
        sets.append((f"Text+Berg {lang}, all", lang, documents, False))
        sets.append((f"Text+Berg {lang}, no ;:", lang, documents, True))
        sets.append((f"Text+Berg {lang}, titles apart", lang, documents, False))
    messages = gettext_messages(languages)
    gettext_sizes = []
    for lang in ["en", *languages]:
        documents = gettext_documents(lang, messages[lang], args.max_messages, args.seed)
        if documents:
            sets.append((f"gettext {lang}", iso_code(lang), documents, False))
        gettext_sizes.append(f"{lang} {len(messages[lang])} -> {sum(d.sentences for d in documents)}")
    print(f"data read in {time.perf_counter() - start:.1f} s")
    for lang, documents in berg.items():
        gold = sum(len(d.gold) for d in documents)
        print(
            f"Text+Berg {lang}: {sum(d.sentences for d in documents)} sentences, {gold} boundaries, "
            f"{gold - sum(len(d.gold_strict) for d in documents)} after ; or :, "
            f"{100 * sum(d.after_terminal for d in documents) / gold:.0f}% after terminal punctuation"
        )
    print("gettext usable messages -> measured:", ", ".join(gettext_sizes))

    cells: dict[tuple[str, str], str] = {}
    inexact: list[str] = []
    error_lines: list[str] = []
    scored: dict[tuple[str, str], tuple[Score, Score]] = {}
    for name in SPLITTERS:
        for set_name, lang, documents, strict in sets:
            split, fallback = make_splitter(name, lang)
            key = (set_name.replace(", no ;:", ", all"), name)
            if key not in scored:
                laid_out = set_name.endswith("titles apart")
                shown = documents if laid_out else [dataclasses.replace(d, paragraphs=None) for d in documents]
                scored[key] = evaluate(split, shown, args.examples, args.seed)
            score = scored[key][1 if strict else 0]
            cells[set_name, name] = score.cell() + (" *" if fallback else "")
            if score.inexact and not strict:
                inexact.append(f"{name} on {set_name}: {score.inexact} of {len(documents)} texts changed")
            if args.examples and (strict or not set_name.startswith("Text+Berg")):
                error_lines += [f"{name} / {set_name}:", *score.errors]

    print("\nBoundary precision / recall / F1 (%); * = the language is not supported, English rules used\n")
    print("| set | " + " | ".join(SPLITTERS) + " |")
    print("|---|" + "---|" * len(SPLITTERS))
    for set_name, *_ in sets:
        print(f"| {set_name} | " + " | ".join(cells[set_name, name] for name in SPLITTERS) + " |")
    if inexact:
        print("\nTexts whose pieces differ from the input (beyond whitespace):", "; ".join(inexact))

    print(
        f"\nSpeed on Text+Berg (8 documents per language, one thread, {args.speed_seconds:g} s each), gold sentences/s\n"
    )
    print("| splitter | de | fr |")
    print("|---|---|---|")
    for name in SPLITTERS:
        rates = [speed(make_splitter(name, lang)[0], berg[lang], args.speed_seconds) for lang in ("de", "fr")]
        print(f"| {name} | " + " | ".join(f"{rate:,.0f}" for rate in rates) + " |")

    print(
        "\n`align --split` (bitext_hf.data.sentences.split_document) on the documents laid out as files, no blank line;"
    )
    print("boundary precision / recall / F1 (%) against every gold boundary, title lines found by width or not\n")
    print("| set | layout | titles found (the default) | no title rule |")
    print("|---|---|---|---|")
    for lang, documents in berg.items():
        for layout, laid_out in _FILE_LAYOUTS.items():
            cells = [_split_document_score(documents, laid_out, lang, width).cell() for width in (None, 0.0)]
            print(f"| Text+Berg {lang} | {layout} | " + " | ".join(cells) + " |")

    versions = {package: version(package) for package in ("sentence-splitter", "pysbd", "blingfire", "sacremoses")}
    print("\nversions:", ", ".join(f"{p} {v}" for p, v in versions.items()), f"; Python {sys.version.split()[0]}")
    print(f"total {time.perf_counter() - start:.0f} s")
    if error_lines:
        print("\nErrors (FP: predicted, not gold; FN: gold, missed; | is the boundary)")
        print("\n".join(error_lines))


if __name__ == "__main__":
    main()
