"""The ``encode``, ``mine`` and ``score`` commands."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from bitext_hf.cli.inputs import _embed, _pair_texts, _read_gold, _side_for_mining
from bitext_hf.errors import EXIT_OK, DataValidationError, UsageError

logger = logging.getLogger("bitext_hf")

DEMO_DIR = Path(__file__).parent.parent / "demo"


def cmd_encode(args) -> int:
    from bitext_hf.data import read_lines
    from bitext_hf.io import atomic_output

    texts = read_lines(args.input, max_chars=args.max_line_chars)
    embeddings = _embed(args, texts, "input")
    with atomic_output(args.out, "wb") as handle:
        np.save(handle, embeddings.astype(np.float32))
    print(f"wrote {embeddings.shape[0]} x {embeddings.shape[1]} float32 embeddings to {args.out}")
    return EXIT_OK


def cmd_mine(args) -> int:
    from bitext_hf.mining import MinedPairs, mine, mine_documents, write_pairs

    if args.demo:
        if args.src or args.tgt:
            raise UsageError("--demo mines the bundled corpus; do not combine it with --src/--tgt")
        args.src, args.tgt = str(DEMO_DIR / "en.txt"), str(DEMO_DIR / "de.txt")
        args.gold = args.gold or str(DEMO_DIR / "gold.tsv")
        print(f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)")
    if not args.src or not args.tgt:
        raise UsageError("give --src and --tgt (text or .npy files), or --demo")
    src_texts, src_emb, src_lines = _side_for_mining(args, args.src, "source")
    tgt_texts, tgt_emb, tgt_lines = _side_for_mining(args, args.tgt, "target")
    if src_emb.shape[1] != tgt_emb.shape[1]:
        raise DataValidationError(f"{args.src} has dimension {src_emb.shape[1]} but {args.tgt} has {tgt_emb.shape[1]}")
    for path, other in ((args.src, tgt_emb.shape[0]), (args.tgt, src_emb.shape[0])):
        if args.k > other:
            logger.warning(
                "k=%d is larger than the other side (%d rows): using k=%d for %s", args.k, other, other, path
            )

    settings = dict(k=args.k, margin=args.margin, mode=args.mode, threshold=args.threshold)
    if args.src_docs or args.tgt_docs:
        if not (args.src_docs and args.tgt_docs):
            raise UsageError("document-level mining needs both --src-docs and --tgt-docs")
        from bitext_hf.data import read_lines

        doc_ids = []
        for docs_path, texts, emb, side in (
            (args.src_docs, src_texts, src_emb, args.src),
            (args.tgt_docs, tgt_texts, tgt_emb, args.tgt),
        ):
            docs = np.asarray(read_lines(docs_path))
            n_lines = len(texts) if texts is not None else emb.shape[0]
            if len(docs) != n_lines:
                raise DataValidationError(
                    f"{docs_path} has {len(docs)} lines but {side} has {n_lines}: give one document id per line"
                )
            doc_ids.append(docs)
        src_docs, tgt_docs = doc_ids
        pairs = mine_documents(src_emb, tgt_emb, src_docs[src_lines], tgt_docs[tgt_lines], **settings)
    else:
        pairs = mine(src_emb, tgt_emb, show_progress=not args.quiet and src_emb.shape[0] > 50_000, **settings)
    pairs = MinedPairs(src_lines[pairs.src_indices], tgt_lines[pairs.tgt_indices], pairs.scores, pairs.cosines)

    if args.out:
        write_pairs(pairs, args.out, src_texts=src_texts, tgt_texts=tgt_texts)
        print(f"wrote {len(pairs)} pairs to {args.out}")
    shown = len(pairs) if args.show < 0 else min(args.show, len(pairs))
    if shown:
        print(f"{'score':>7}  {'src':>6}  {'tgt':>6}  sentences")
        for src, tgt, score in pairs.select(slice(shown)):
            src_text = src_texts[src] if src_texts else ""
            tgt_text = tgt_texts[tgt] if tgt_texts else ""
            print(f"{score:7.4f}  {src:6d}  {tgt:6d}  {src_text}  |||  {tgt_text}")
        if shown < len(pairs):
            print(f"... {len(pairs) - shown} more (--show -1 prints all, --out FILE writes them)")
    print(
        f"mined {len(pairs)} pairs from {src_emb.shape[0]} source x {tgt_emb.shape[0]} target sentences "
        f"(k={args.k}, margin={args.margin}, mode={args.mode}, threshold={args.threshold})"
    )
    if args.gold:
        gold = _read_gold(Path(args.gold))
        found = pairs.as_set()
        true_positives = len(found & gold)
        precision = true_positives / len(found) if found else 0.0
        recall = true_positives / len(gold) if gold else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        print(f"against {len(gold)} gold pairs: precision {precision:.3f}  recall {recall:.3f}  F1 {f1:.3f}")
    return EXIT_OK


def cmd_score(args) -> int:
    from bitext_hf.mining import MinedPairs, score_pairs, write_pairs

    sources, targets = _pair_texts(args)
    src_emb, tgt_emb = _embed(args, sources, "source"), _embed(args, targets, "target")
    scores = score_pairs(src_emb, tgt_emb, k=args.k, margin=args.margin)
    rows = np.arange(len(sources))
    pairs = MinedPairs(rows, rows, scores, np.einsum("ij,ij->i", src_emb, tgt_emb))
    if args.threshold is not None:
        pairs = pairs.select(pairs.scores >= args.threshold)
    write_pairs(pairs, args.out, src_texts=sources, tgt_texts=targets)
    print(
        f"scored {len(sources)} pairs (k={args.k}, margin={args.margin}); wrote {len(pairs)} to {args.out}"
        + (f" (threshold {args.threshold})" if args.threshold is not None else "")
    )
    print(
        "score quantiles: "
        + "  ".join(
            f"{q:.0%} {v:.4f}"
            for q, v in zip((0.05, 0.25, 0.5, 0.75, 0.95), np.quantile(scores, [0.05, 0.25, 0.5, 0.75, 0.95]))
        )
    )
    return EXIT_OK
