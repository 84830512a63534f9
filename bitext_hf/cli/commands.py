"""The ``encode``, ``mine`` and ``score`` commands.

Each checks everything cheap first (options, the output path, every input file, the gold pairs, that the sentences
fit the output format) and only then loads an encoder and encodes: a bad input never costs an encoding run and
never leaves an output behind. ``mine`` writing its pairs to a file also writes ``<file>.meta.json``, the mining
parameters and the command, which ``bitext-hf push --pairs`` shows in the dataset card.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import shlex
import sys
from pathlib import Path

import numpy as np

from bitext_hf.cli.inputs import (
    Side,
    _embedding_cache,
    _encoder,
    check_inputs_and_output,
    display,
    embed,
    is_embeddings,
    is_npy,
    pair_texts,
    read_gold,
    read_side,
)
from bitext_hf.errors import EXIT_OK, DataValidationError, UsageError

__all__ = ["cmd_encode", "cmd_mine", "cmd_score"]

logger = logging.getLogger("bitext_hf")

DEMO_DIR = Path(__file__).parent.parent / "demo"


def _report_stream(out: str | None):
    """Where the human-readable report goes: stderr when the results themselves go to stdout (``--out -``)."""
    return sys.stderr if out in ("-", "/dev/stdout") else sys.stdout


def _shown(out: str) -> str:
    return "stdout" if out == "-" else out


def _shard_output(out: str) -> bool:
    """Whether ``encode --out`` names a folder of shards: a path ending in /, an existing folder, or a new path
    without a file extension (``emb.de`` or ``x.npy`` stay one file, as before shards existed)."""
    if out == "-" or not out.strip():
        return False
    if out.endswith(("/", os.sep)) or os.path.isdir(out):
        return True
    return not os.path.exists(out) and not Path(out).suffix


def cmd_encode(args) -> int:
    from bitext_hf.data import read_lines
    from bitext_hf.io import atomic_output, protect_inputs

    protect_inputs([args.input])  # no file this command writes, a shard behind a link included, may replace it
    _check_distributed(args)
    if _shard_output(args.out):
        return _encode_shards(args)
    if args.distributed:
        raise UsageError(f"--distributed ray writes a folder of shards; end --out with / ({args.out} is one file)")
    if args.shard_size is not None or args.resume:
        raise UsageError(
            f"--shard-size and --resume are for a folder --out; {args.out} is written as one .npy file "
            "(end the path with / for shards)"
        )
    check_inputs_and_output(args.out, [args.input])
    texts = read_lines(args.input, max_chars=args.max_line_chars)
    embeddings = embed(args, texts, "input")
    with atomic_output(args.out, "wb") as handle:
        np.save(handle, embeddings.astype(args.dtype))
    print(
        f"wrote {embeddings.shape[0]} x {embeddings.shape[1]} {args.dtype} embeddings to {_shown(args.out)}",
        file=_report_stream(args.out),
    )
    return EXIT_OK


def _encode_shards(args) -> int:
    """``encode`` into a folder: shard by shard, memory one shard, the manifest last; ``--resume`` continues."""
    from bitext_hf.data import read_lines
    from bitext_hf.mining.embedding_cache import encoder_identity
    from bitext_hf.mining.shards import DEFAULT_SHARD_SIZE, check_shard_folder, write_shards

    check_shard_folder(args.out, resume=args.resume)  # before reading: a wrong folder costs nothing
    texts = read_lines(args.input, max_chars=args.max_line_chars)
    # Whole-text entries only: a run cut short resumes from its shards (--resume), and the shards of a run are
    # its durable copy, so entries per shard would only hold every shard twice on disk. A sharded run does not
    # write an entry either: that would hold the whole text in memory, which shards exist to avoid.
    cache = _embedding_cache(args)
    cached = cache.load(cache.key(texts, args.model, args.pooling), len(texts)) if cache is not None else None

    def encode(batch: list[str]) -> np.ndarray:  # the encoder is loaded at the first shard left to encode
        return _encoder(args, args.model).encode(batch, batch_size=args.batch_size, show_progress=False)

    settings = dict(
        encoder=encoder_identity(args.model, args.pooling),
        shard_size=args.shard_size or DEFAULT_SHARD_SIZE,
        dtype=args.dtype,
        resume=args.resume,
        show_progress=not args.quiet,
    )
    if cached is not None:  # the encoder is never loaded
        logger.info("%d input sentences: embeddings from the cache", len(texts))
        manifest, encoded = write_shards(args.out, texts, encode, embeddings=cached, **settings)
    elif args.distributed:
        from bitext_hf.mining.distributed import encode_shards_ray, encoder_loader

        loader = encoder_loader(args.model, pooling=args.pooling, batch_size=args.batch_size)
        manifest, encoded = encode_shards_ray(
            args.out, texts, loader, address=args.ray_address, workers=args.workers, **settings
        )
    else:
        manifest, encoded = write_shards(args.out, texts, encode, **settings)
    print(
        f"wrote {manifest.count} x {manifest.dimension} {manifest.dtype} embeddings in {len(manifest.shards)} "
        f"shard(s) and {os.path.join(args.out, 'manifest.json')} ({encoded} sentences encoded by this run)"
    )
    return EXIT_OK


def _check_distributed(args) -> None:
    """``--distributed ray`` options, checked before anything is read: Ray installed, the address answering."""
    if not getattr(args, "distributed", None):
        if getattr(args, "ray_address", None) or getattr(args, "workers", None):
            raise UsageError("--ray-address and --workers go with --distributed ray")
        return
    from bitext_hf.mining.distributed import _import_ray, check_ray_address

    _import_ray()
    if args.ray_address:
        check_ray_address(args.ray_address)


# ----------------------------------------------------------------------------------------------------- mine


def _check_mine_options(args) -> None:
    if args.demo:
        if args.src or args.tgt:
            raise UsageError("--demo mines the bundled corpus; do not combine it with --src/--tgt")
        args.src, args.tgt = str(DEMO_DIR / "en.txt"), str(DEMO_DIR / "de.txt")
        args.gold = args.gold or str(DEMO_DIR / "gold.tsv")
        print(
            f"Demo: {DEMO_DIR / 'README.md'} (Django UI messages, English-German, BSD-3-Clause)",
            file=_report_stream(args.out),
        )
    if not args.src or not args.tgt:
        raise UsageError("give --src and --tgt (text or .npy files), or --demo")
    if bool(args.src_docs) != bool(args.tgt_docs):
        raise UsageError("document-level mining needs both --src-docs and --tgt-docs")
    for side, model in (("src", args.src_model), ("tgt", args.tgt_model)):
        if model is not None and is_embeddings(getattr(args, side)):
            raise UsageError(f"--{side}-model has nothing to encode: --{side} holds embeddings (.npy or shards)")
    if getattr(args, "distributed", None) and (args.src_docs or (getattr(args, "index", None) or "exact") != "exact"):
        raise UsageError("--distributed ray mines with the exact index over whole corpora (no --src-docs, no --index)")
    _check_distributed(args)
    from bitext_hf.mining import DEFAULT_MODE

    args.mode = args.mode or DEFAULT_MODE


def _check_dimensions(args, src_emb: np.ndarray, tgt_emb: np.ndarray) -> None:
    if src_emb.shape[1] != tgt_emb.shape[1]:
        raise DataValidationError(
            f"{display(args.src)} has dimension {src_emb.shape[1]} but {display(args.tgt)} has {tgt_emb.shape[1]}"
        )


def _read_docs(path: str, side: Side) -> np.ndarray:
    from bitext_hf.data import read_lines

    docs = read_lines(path)
    if len(docs) != side.n_rows:
        raise DataValidationError(
            f"{display(path)} has {len(docs)} lines but {display(side.path)} has {side.n_rows}: "
            "give one document id per line"
        )
    return np.asarray(docs)


def _rows_to_mine(args, side: Side, what: str, spec: str | None, per_document: bool):
    """(embeddings of the rows to mine, the line of each row, the de-duplication key of each row or None)."""
    from bitext_hf.data import deduplicate

    lines = np.arange(side.n_rows)
    if side.texts is None or args.keep_duplicates:
        emb = side.embeddings if side.embeddings is not None else embed(args, side.texts, what, spec)
        return emb, lines, None
    unique, inverse = deduplicate(side.texts)
    inverse = np.asarray(inverse, dtype=np.int64)
    if per_document:
        # No global de-duplication: a sentence repeated in two documents must be seen by both. Each distinct
        # sentence is still encoded once; mine_documents mines it once per document (the texts are the keys).
        emb = side.embeddings if side.embeddings is not None else embed(args, unique, what, spec)[inverse]
        return emb, lines, side.texts
    if len(unique) < len(side.texts):
        logger.warning(
            "%s: %d duplicate line(s); each distinct sentence is mined once and reported at its first line "
            "(--keep-duplicates mines every line)",
            display(side.text_path), len(side.texts) - len(unique),
        )  # fmt: skip
    # Unique sentences are in first-occurrence order, so the first line of each is where its id first appears.
    first_line = np.unique(inverse, return_index=True)[1]
    emb = side.embeddings[first_line] if side.embeddings is not None else embed(args, unique, what, spec)
    return emb, first_line, None


def _distributed_session(args):
    """One Ray session for the encoding of both sides and the search under --distributed ray (each would start
    its own, and load the encoder in fresh workers, otherwise); nothing without it."""
    if not getattr(args, "distributed", None):
        return contextlib.nullcontext()
    from bitext_hf.mining.distributed import ray_session

    return ray_session(args.ray_address, args.workers)


def cmd_mine(args) -> int:
    from bitext_hf.io import writes_in_place
    from bitext_hf.mining import check_k, mine_documents
    from bitext_hf.mining.output import check_representable, output_format

    _check_mine_options(args)
    inputs = [args.src, args.tgt, args.src_text, args.tgt_text, args.src_docs, args.tgt_docs, args.gold]
    check_inputs_and_output(args.out, inputs)
    if args.out and not writes_in_place(args.out):  # the sidecar is written too: it must not be an input either
        from bitext_hf.hub.dataset_card import metadata_path

        check_inputs_and_output(str(metadata_path(args.out)), inputs)
    fmt = output_format(args.out, args.format) if args.out else None
    # Every input is read and checked before any encoder is loaded.
    src = read_side(args, args.src, args.src_text, "src")
    tgt = read_side(args, args.tgt, args.tgt_text, "tgt")
    if src.embeddings is not None and tgt.embeddings is not None:
        _check_dimensions(args, src.embeddings, tgt.embeddings)
    docs = (_read_docs(args.src_docs, src), _read_docs(args.tgt_docs, tgt)) if args.src_docs else None
    gold = read_gold(args.gold, src.n_rows, tgt.n_rows) if args.gold else None
    if fmt is not None:
        for side in (src, tgt):
            if side.texts is not None:
                check_representable(side.texts, display(side.text_path), fmt)
        if docs is not None:
            check_representable(list(docs[0]), display(args.src_docs), fmt)
    check_k(args.k, src.n_rows, tgt.n_rows)
    _check_index_options(args, src, tgt, docs is not None)

    with _distributed_session(args):  # started after every input was read and checked
        src_emb, src_lines, src_keys = _rows_to_mine(args, src, "source", args.src_model, docs is not None)
        tgt_emb, tgt_lines, tgt_keys = _rows_to_mine(args, tgt, "target", args.tgt_model, docs is not None)
        _check_dimensions(args, src_emb, tgt_emb)  # an encoder's against the other side's .npy or encoder
        for path, other in ((args.src, tgt_emb.shape[0]), (args.tgt, src_emb.shape[0])):
            if args.k > other:
                logger.warning(
                    "k=%d is larger than the other side (%d rows): using k=%d for %s", args.k, other, other, path
                )
        settings = dict(k=args.k, margin=args.margin, mode=args.mode, threshold=args.threshold)
        if getattr(args, "index", "exact") != "exact":
            settings.update(index=args.index, nprobe=args.nprobe)
        recall = None
        if docs is not None:
            pairs = mine_documents(
                src_emb, tgt_emb, docs[0], docs[1], src_keys=src_keys, tgt_keys=tgt_keys, **settings
            )
        else:
            pairs, recall = _mine(args, src_emb, tgt_emb, settings)
            pairs = dataclasses.replace(
                pairs, src_indices=src_lines[pairs.src_indices], tgt_indices=tgt_lines[pairs.tgt_indices]
            )

    report = _report_stream(args.out)
    if args.out:
        _write_pairs_and_sidecar(args, pairs, src, tgt, fmt, src_emb.shape, tgt_emb.shape)
        print(f"wrote {len(pairs)} pairs to {_shown(args.out)}", file=report)
    _show_pairs(args, pairs, src.texts, tgt.texts)
    print(
        f"mined {len(pairs)} pairs from {src_emb.shape[0]} source x {tgt_emb.shape[0]} target sentences "
        f"(k={args.k}, margin={args.margin}, mode={args.mode}, threshold={args.threshold})",
        file=report,
    )
    if gold is not None:
        found = pairs.as_set()
        true_positives = len(found & gold)
        precision = true_positives / len(found) if found else 0.0
        gold_recall = true_positives / len(gold)  # not `recall`: that name holds the --check-recall report
        f1 = 2 * precision * gold_recall / (precision + gold_recall) if precision + gold_recall else 0.0
        print(
            f"against {len(gold)} gold pairs: precision {precision:.3f}  recall {gold_recall:.3f}  F1 {f1:.3f}",
            file=report,
        )
    if getattr(args, "check_recall", None) and recall is None:  # document-level runs keep no global neighbours
        from bitext_hf.mining import check_recall

        recall = check_recall(
            np.asarray(src_emb), np.asarray(tgt_emb), k=args.k, index=args.index, nprobe=args.nprobe,
            queries=args.check_recall,
        )  # fmt: skip
    if recall is not None:
        print(recall, file=report)
    return EXIT_OK


def _check_index_options(args, src: Side, tgt: Side, per_document: bool) -> None:
    """--index / --nprobe / --check-recall, checked before any encoding: a factory string against the dimension of
    a .npy side (else only its syntax, on a dimension that most factory strings accept; the encoder's dimension is
    checked after encoding) and against the corpus sizes."""
    index = getattr(args, "index", "exact")
    if index == "exact" and getattr(args, "check_recall", None):
        raise UsageError("--check-recall compares an approximate --index with exact search; --index is exact")
    if index == "exact" and args.nprobe is None:
        return
    if per_document and index not in ("exact", "auto"):
        raise UsageError(
            f"--index {index!r} with --src-docs: document-level mining takes --index exact or auto (one index per "
            "document would be trained on that document alone)"
        )
    from bitext_hf.mining.index import resolve_index

    known = next((side.embeddings.shape[1] for side in (src, tgt) if side.embeddings is not None), None)
    resolve_index(index, src.n_rows, tgt.n_rows, known or 3840, nprobe=args.nprobe)


def _mine(args, src_emb, tgt_emb, settings: dict):
    """Mine in memory, or block by block when a side is a folder of shards (same pairs and scores). Returns the
    pairs and, with --check-recall, the recall@k of the run's own forward neighbours (no second index)."""
    from bitext_hf.mining import _check_pair, mine
    from bitext_hf.mining.index import recall_at_k, search_neighbours
    from bitext_hf.mining.retrieval import check_settings, retrieve
    from bitext_hf.mining.shards import ShardedEmbeddings, mine_shards

    show_progress = not args.quiet and src_emb.shape[0] > 50_000
    index = getattr(args, "index", None) or "exact"
    if getattr(args, "distributed", None):
        from bitext_hf.mining.distributed import mine_ray

        return mine_ray(src_emb, tgt_emb, address=args.ray_address, workers=args.workers, **settings), None
    if isinstance(src_emb, ShardedEmbeddings) or isinstance(tgt_emb, ShardedEmbeddings):
        if index == "exact":
            return mine_shards(src_emb, tgt_emb, show_progress=show_progress, **settings), None
        logger.warning("--index %s reads the shards into memory (only the exact search streams them)", index)
        src_emb, tgt_emb = np.asarray(src_emb), np.asarray(tgt_emb)
    if not getattr(args, "check_recall", None):
        return mine(src_emb, tgt_emb, show_progress=show_progress, **settings), None
    # mine()'s steps, keeping the neighbourhoods: recall@k is then read from them (a few exact searches).
    options = {key: settings.pop(key) for key in ("k", "index", "nprobe")}
    check_settings(settings["margin"], settings["mode"], settings["threshold"])
    src, tgt = _check_pair(src_emb, tgt_emb, "source embeddings", "target embeddings")
    knn = search_neighbours(src, tgt, show_progress=show_progress, checked=True, **options)
    recall = recall_at_k(src, tgt, knn, queries=args.check_recall, index=str(_index_spec(args, src.shape, tgt.shape)))
    return retrieve(knn, **settings), recall


def _index_description(args, src_shape, tgt_shape) -> str:
    if args.src_docs and getattr(args, "index", None) == "auto":  # resolved per document pair, by its sizes
        return "auto (chosen per document pair)"
    return str(_index_spec(args, src_shape, tgt_shape))


def _index_spec(args, src_shape, tgt_shape):
    """The search that --index / --nprobe resolved to for this corpus (exact, or the factory string and nprobe)."""
    from bitext_hf.mining.index import resolve_index

    index = getattr(args, "index", None) or "exact"
    return resolve_index(index, src_shape[0], tgt_shape[0], src_shape[1], nprobe=getattr(args, "nprobe", None))


def _side_encoder(args, side: str) -> str | None:
    """The encoder that embedded a side: the manifest's for shards, None for a .npy side (not known here)."""
    path = getattr(args, side)
    if os.path.isdir(path):
        from bitext_hf.mining.shards import MANIFEST, read_manifest

        return read_manifest(os.path.join(path, MANIFEST)).encoder
    if is_npy(path):
        return None
    from bitext_hf.encoders import DEFAULT_ENCODER

    name = getattr(args, f"{side}_model") or args.model or DEFAULT_ENCODER
    return f"{name} ({args.pooling} pooling)" if args.pooling else name


def _write_pairs_and_sidecar(args, pairs, src: Side, tgt: Side, fmt: str, src_shape, tgt_shape) -> None:
    """The pairs file and its sidecar ``<out>.meta.json`` (the run's parameters and command, which ``bitext-hf push
    --pairs`` puts in the card), both or neither: the sidecar is serialized before anything is written, its temp
    file is renamed only after the pairs file, and a failure removes whichever was written. A stream or a device
    (``--out -``, ``/dev/null``) gets the pairs alone: there is no place for a sidecar beside it."""
    from bitext_hf.hub.dataset_card import metadata_path, mining_metadata_json
    from bitext_hf.io import atomic_output, writes_in_place
    from bitext_hf.mining import write_pairs

    if writes_in_place(args.out):
        write_pairs(pairs, args.out, src_texts=src.texts, tgt_texts=tgt.texts, format=fmt)
        return
    sidecar_text = mining_metadata_json(_mining_metadata(args, src_shape, tgt_shape))
    written = False
    try:
        with atomic_output(metadata_path(args.out), follow_symlinks=False) as handle:
            handle.write(sidecar_text)
            write_pairs(pairs, args.out, src_texts=src.texts, tgt_texts=tgt.texts, format=fmt)
            written = True
    except BaseException:
        if written:  # the pairs were renamed into place, their sidecar was not: take them back, and an earlier
            # run's sidecar would now describe pairs that are not there
            for path in (args.out, metadata_path(args.out)):
                with contextlib.suppress(OSError):
                    os.unlink(path)
        raise


def _mining_metadata(args, src_shape, tgt_shape) -> dict:
    """The sidecar's record of a run: encoder(s), margin, mode, k, threshold, index, inputs, counts, command."""
    src_model, tgt_model = _side_encoder(args, "src"), _side_encoder(args, "tgt")
    same = src_model == tgt_model
    return {
        "encoder": src_model if same else None,
        "src_model": None if same else src_model,
        "tgt_model": None if same else tgt_model,
        "margin": args.margin,
        "mode": args.mode,
        "k": args.k,
        "threshold": args.threshold,
        # What an approximate run searched with: its pairs are not the exact engine's (see --check-recall).
        "index": _index_description(args, src_shape, tgt_shape),
        "src": display(args.src),
        "tgt": display(args.tgt),
        "src_sentences": int(src_shape[0]),
        "tgt_sentences": int(tgt_shape[0]),
        "command": shlex.join(["bitext-hf", *getattr(args, "argv", sys.argv[1:])]),
    }


def _show_pairs(args, pairs, src_texts, tgt_texts) -> None:
    if _report_stream(args.out) is sys.stderr:
        return  # stdout holds the pairs file itself
    shown = len(pairs) if args.show < 0 else min(args.show, len(pairs))
    if not shown:
        return
    print(f"{'score':>7}  {'src':>6}  {'tgt':>6}  sentences")
    for src, tgt, score in pairs.select(slice(shown)):
        src_text = src_texts[src] if src_texts else ""
        tgt_text = tgt_texts[tgt] if tgt_texts else ""
        print(f"{score:7.4f}  {src:6d}  {tgt:6d}  {src_text}  |||  {tgt_text}")
    if shown < len(pairs):
        print(f"... {len(pairs) - shown} more (--show -1 prints all, --out FILE writes them)")


# ----------------------------------------------------------------------------------------------------- score


def cmd_score(args) -> int:
    from bitext_hf.mining import MinedPairs, check_k, score_pairs, write_pairs
    from bitext_hf.mining.output import check_representable, output_format

    check_inputs_and_output(args.out, [args.pairs, args.src, args.tgt])
    fmt = output_format(args.out, args.format)
    sources, targets = pair_texts(args)
    if not args.pairs:  # cells of a TSV pairs file cannot hold a tab or a line break; Moses lines can hold a tab
        check_representable(sources, display(args.src), fmt)
        check_representable(targets, display(args.tgt), fmt)
    check_k(args.k, len(sources), len(targets))
    src_emb, tgt_emb = embed(args, sources, "source"), embed(args, targets, "target")
    scores = score_pairs(src_emb, tgt_emb, k=args.k, margin=args.margin)
    rows = np.arange(len(sources))
    pairs = MinedPairs(rows, rows, scores, np.einsum("ij,ij->i", src_emb, tgt_emb))
    if args.threshold is not None:
        pairs = pairs.select(pairs.scores >= args.threshold)
    write_pairs(pairs, args.out, src_texts=sources, tgt_texts=targets, format=fmt)
    report = _report_stream(args.out)
    print(
        f"scored {len(sources)} pairs (k={args.k}, margin={args.margin}); wrote {len(pairs)} to {_shown(args.out)}"
        + (f" (threshold {args.threshold})" if args.threshold is not None else ""),
        file=report,
    )
    quantiles = (0.05, 0.25, 0.5, 0.75, 0.95)
    values = np.quantile(scores, quantiles)
    print("score quantiles: " + "  ".join(f"{q:.0%} {v:.4f}" for q, v in zip(quantiles, values)), file=report)
    return EXIT_OK
