"""Where the CPU of the default encoder's overlaps goes: every overlap composed from one pass
(``USEEncoder.encode_runs``, what ``align`` does) against each overlap text encoded (``USEEncoder.encode``), split
into the work each part does, with the rows the network computes.

Parts (each one's own time, the parts called inside it excluded): tokenizing the sentences or texts
(``UseTokenizer.encode_marked`` / ``encode``); the composition's check of its runs' ids (``_composable``, which
tokenizes every run of several sentences again); the per-id tables (``UseTorchForward._by_id``: embedding,
projection and the convolutions' per-id products, once per distinct id of a scope); the network's token-level work
(``span_sums`` / ``__call__``: both convolutions, layer norm, the sums); the sentence-level head (``_head``, once per
vector); the rest (bookkeeping, normalization). Rows: the tokens the first convolutions read (every token of every
sequence sent to the network) and those whose features are kept (the second convolutions' rows: every token of a
text encoded; the summed spans of a composed pass). Both sides' overlaps (runs of 1 to ``--max-align`` - 1
sentences, as ``bench_align.py --encoding``), one encoder thread by default, the repeat with the least CPU kept.
Sets: the seven Text+Berg test documents (vecalign's ``bleualign_data``, read from a checkout) and the gettext
documents of ``bench_align.py`` (``--gettext``, 500 pairs, seed 0).

``--in-play-rows`` counts instead the rows a composition of only the runs in play would read (not built): each
sentence read alone (its ids and its two marks), plus a joint read (``2 * EDGE_CONTEXT`` ids) for each pair of
consecutive sentences that a run encoded by ``align --overlaps in-play`` (``bitext_hf.alignment.in_play``) holds,
beside the rows of every text and of every overlap composed.

    python benchmarks/bench_compose_parts.py --vecalign ~/src/vecalign --gettext ja zh_CN
    python benchmarks/bench_compose_parts.py --vecalign ~/src/vecalign --gettext ja zh_CN --in-play-rows
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import sys
import time
from pathlib import Path

PARTS = ("tokenizing", "checks of the runs' ids", "per-id tables", "network (token level)", "head", "rest")


class PartTimer:
    """Process CPU seconds per part, each call's own: a part called inside another is taken out of the outer one."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.read = self.kept = 0
        self._inner: list[float] = []
        self.originals: dict = {}

    def wrap(self, owner, name: str, part: str, rows=None) -> None:
        original = self.originals[name] = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, **kwargs):
            if rows is not None:
                read, kept = rows(*args[1:], **kwargs)
                self.read, self.kept = self.read + read, self.kept + kept
            self._inner.append(0.0)
            start = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.process_time() - start
                inner = self._inner.pop()
                self.seconds[part] += spent - inner
                if self._inner:
                    self._inner[-1] += spent

        setattr(owner, name, timed)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self.read = self.kept = 0


def document_sets(args) -> dict[str, list]:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_align import TEST_DOCUMENTS, bleualign, gettext_document

    sets = {"Text+Berg de-fr test (7 documents)": [bleualign(args.vecalign, name) for name in TEST_DOCUMENTS]}
    for lang in args.gettext:
        sets[f"gettext en-{lang} (500 pairs)"] = [gettext_document(lang, 500, seed=0)]
    return sets


def in_play_rows(args) -> None:
    """The rows of the runs in play, composed (the module docstring), beside every text's and every overlap's."""
    from bitext_hf.alignment.in_play import align_in_play
    from bitext_hf.alignment.overlaps import overlap_texts
    from bitext_hf.encoders.use import USEEncoder, UseTokenizer, UseTorchForward
    from bitext_hf.encoders.use_runs import EDGE_CONTEXT

    encoder = USEEncoder(threads=args.threads)
    tokenize = UseTokenizer(threads=args.threads).encode
    print("| set | every text | every overlap composed | runs in play, composed (not built) |")
    print("|---|---|---|---|")
    for label, documents in document_sets(args).items():
        texts = [overlap_texts([document[k] for document in documents], args.max_align - 1) for k in (0, 1)]
        timer = PartTimer()  # counts the rows the composed pass reads
        timer.wrap(
            UseTorchForward, "span_sums", "network (token level)", rows=lambda ids, spans, **_: (sum(map(len, ids)), 0)
        )
        try:
            for side in texts:
                encoder.encode_runs(side.sentences, side.runs)
        finally:
            UseTorchForward.span_sums = timer.originals["span_sums"]
        encoded: list[set[str]] = [set(), set()]

        def recorder(number, encoded=encoded):
            def encode(batch):
                encoded[number].update(batch)
                return encoder.encode(batch, show_progress=False)

            return encode

        align_in_play(*texts, recorder(0), recorder(1), max_align=args.max_align)
        every = in_play_total = 0
        for side, wanted in zip(texts, encoded):
            every += sum(map(len, tokenize(list(side.texts))))
            sentences, joints = set(), set()
            # A run of layer + 1 sentences ending at sentence ``end`` is row index[layer, end] of the texts.
            for index, _ in side.documents:
                for layer in range(index.shape[0]):
                    for end in range(layer, index.shape[1]):
                        row = int(index[layer, end])
                        if row >= 0 and side.texts[row] in wanted:
                            rows = [int(sentence) for sentence in index[0, end - layer : end + 1]]
                            sentences.update(rows)
                            joints.update(itertools.pairwise(rows))
            in_play_total += sum(map(len, tokenize([side.texts[row] for row in sorted(sentences)])))
            in_play_total += 2 * EDGE_CONTEXT * len(joints)
        print(
            f"| {label} | {every:,} | {timer.read:,} ({timer.read / every:.3f}) "
            f"| {in_play_total:,} ({in_play_total / every:.3f}) |"
        )


def measure(args) -> list[tuple[str, str, float, dict, int, int]]:
    from bitext_hf.alignment.overlaps import overlap_texts
    from bitext_hf.encoders import use_runs
    from bitext_hf.encoders.use import USEEncoder, UseTokenizer, UseTorchForward

    timer = PartTimer()
    for name in ("encode_marked", "encode"):
        timer.wrap(UseTokenizer, name, "tokenizing")
    timer.wrap(use_runs, "_composable", "checks of the runs' ids")
    timer.wrap(UseTorchForward, "_by_id", "per-id tables")
    timer.wrap(
        UseTorchForward,
        "span_sums",
        "network (token level)",
        rows=lambda ids, spans, **_: (sum(map(len, ids)), sum(end - start for row in spans for start, end in row)),
    )
    timer.wrap(UseTorchForward, "__call__", "network (token level)", rows=lambda ids: (sum(map(len, ids)),) * 2)
    timer.wrap(UseTorchForward, "_head", "head")

    encoder = USEEncoder(threads=args.threads)
    encoder.encode(["warm up ....", "again"] * 8, show_progress=False)  # the tokenizer's port, read at first use
    results = []
    for label, documents in document_sets(args).items():
        sides = [overlap_texts([document[k] for document in documents], args.max_align - 1) for k in (0, 1)]
        ways = {
            "composed": lambda side: encoder.encode_runs(side.sentences, side.runs),
            "every text": lambda side: encoder.encode(side.texts, batch_size=128, show_progress=False),
        }
        for way, encode in ways.items():
            best = None
            for _ in range(args.repeats):
                timer.reset()
                cpu = time.process_time()
                for side in sides:
                    encode(side)
                total = time.process_time() - cpu
                if best is None or total < best[0]:
                    parts = dict(timer.seconds, rest=total - sum(timer.seconds.values()))
                    best = (total, parts, timer.read, timer.kept)
            results.append((label, way, *best))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vecalign", required=True, help="a checkout of thompsonb/vecalign (its bleualign_data)")
    parser.add_argument("--gettext", nargs="*", default=["ja", "zh_CN"], help="gettext languages (en-LANG)")
    parser.add_argument("--threads", type=int, default=1, help="the encoder's CPU threads")
    parser.add_argument("--max-align", type=int, default=5, help="runs of up to max-align - 1 sentences")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each way; the one with the least CPU kept")
    parser.add_argument("--in-play-rows", action="store_true", help="count the rows of the runs in play composed")
    args = parser.parse_args()
    if args.in_play_rows:
        in_play_rows(args)
        return
    results = measure(args)
    print(f"# {os.cpu_count()} CPUs, {args.threads} encoder thread(s), CPU s of the fastest of {args.repeats} runs\n")
    print(f"| set | overlaps | {' | '.join(PARTS)} | total | share | rows read / kept | network us a row read |")
    print("|---|---|" + "---|" * (len(PARTS) + 4))
    every = {label: total for label, way, total, *_ in results if way == "every text"}
    for label, way, total, parts, read, kept in results:
        cells = " | ".join(f"{parts[part]:.3f}" for part in PARTS)
        network = parts["network (token level)"] + parts["per-id tables"]
        print(
            f"| {label} | {way} | {cells} | {total:.2f} | {total / every[label]:.3f} | {read:,} / {kept:,} "
            f"| {1e6 * network / read:.1f} |"
        )


if __name__ == "__main__":
    main()
