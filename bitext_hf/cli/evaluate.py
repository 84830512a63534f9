"""The ``eval`` command: xsim, retrieval accuracy and BUCC F1 of an encoder."""

from __future__ import annotations

import json
import logging

from bitext_hf.cli.inputs import _embed, _pair_texts
from bitext_hf.errors import EXIT_OK

logger = logging.getLogger("bitext_hf")


def cmd_eval(args) -> int:
    from bitext_hf.data import read_bucc, read_mteb
    from bitext_hf.io import atomic_output
    from bitext_hf.metrics import functional as F
    from bitext_hf.mining import bidirectional_knn, mine

    results: dict[str, object] = {"model": args.model or "use-multilingual-v3", "k": args.k, "margin": args.margin}
    if args.bucc:
        task = read_bucc(*args.bucc)
        train = read_bucc(*args.bucc_train) if args.bucc_train else None

        def candidates(t):
            pairs = mine(
                _embed(args, t.sources, "source"),
                _embed(args, t.targets, "target"),
                k=args.k,
                margin=args.margin,
                mode=args.mode,
            )
            labels, n_gold = F.bucc_labels(zip(pairs.src_indices.tolist(), pairs.tgt_indices.tolist()), t.gold)
            return pairs.scores, labels, n_gold

        test_scores, test_labels, test_gold = candidates(task)
        kwargs = {}
        if train is not None:
            kwargs = dict(zip(("train_scores", "train_labels", "n_gold_train"), candidates(train)))
        results["bucc_f1"] = F.bucc_f1(test_scores, test_labels, n_gold_test=test_gold, **kwargs)
        results["bucc_f1"]["threshold_from"] = "train" if train is not None else "test (oracle)"
    else:
        if args.mteb:
            task = read_mteb(args.mteb, split=args.split, subset=args.subset)
            sources, targets, gold, aligned = task.sources, task.targets, task.gold, task.is_aligned
        else:
            sources, targets = _pair_texts(args)
            gold, aligned = [(i, i) for i in range(len(sources))], True
        gold_tgt = [j for _, j in gold]
        # Only the sources of gold pairs are evaluated: the others are never encoded. When the data is aligned,
        # they are every source in order.
        src_sel = _embed(args, [sources[i] for i, _ in gold], "source")
        tgt_emb = _embed(args, targets, "target")
        metrics = set(args.metrics)
        if "xsim" in metrics:
            # One kNN for both the index-based and the text-based error counts.
            knn = bidirectional_knn(src_sel, tgt_emb, args.k)
            results["xsim"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt)
            results["xsim_text"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt, target_texts=targets)
        if "accuracy" in metrics:
            if aligned:
                results["accuracy"] = F.bitext_accuracy(src_sel, tgt_emb)
            else:
                logger.warning("accuracy needs row-aligned pairs; skipped for this data")
        results["n_pairs"] = len(gold)
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if args.out:
        with atomic_output(args.out) as handle:
            handle.write(text + "\n")
    return EXIT_OK
