"""The ``eval`` command: xsim (LASER), retrieval accuracy (Tatoeba-style), MTEB's bitext-mining metrics, BUCC F1.

Units: xsim and xsim_text are error rates in percent (as LASER reports them); every other score is a fraction in
[0, 1]. An MTEB file with several subsets (a ``lang`` / ``subset`` column) is evaluated subset by subset, never as
one pooled candidate set; the top-level numbers are then the average: xsim micro-averaged over all pairs
(sum of errors / sum of pairs, as LASER), the fractions averaged over subsets (as MTEB averages a task's subsets).
"""

from __future__ import annotations

import json
import logging

import numpy as np

from bitext_hf.cli.inputs import check_encoder_options, check_inputs_and_output, embed, pair_texts
from bitext_hf.errors import EXIT_OK, UsageError

__all__ = ["DEFAULT_K", "DEFAULT_MARGIN", "EVAL_KEYS", "cmd_eval"]

DEFAULT_K, DEFAULT_MARGIN = 4, "ratio"  # the defaults `--help` shows for --k and --margin

logger = logging.getLogger("bitext_hf")

# The unit of every key of the results (shown in `bitext-hf eval --help` and the README).
EVAL_KEYS = """results (JSON; printed, and written with --out):
  model, k, margin  the encoder, and (with xsim or --bucc) the margin's k as used: --k capped at the corpus size
              (the larger side; per subset under `subsets`, the largest at the top) and the margin
  xsim        {xsim, errors, n}: LASER's xsim, the percent (0-100) of sources whose best-margin candidate among
              their k nearest targets is not the gold target; errors of n sources
  xsim_text   the same, but a predicted target whose text equals the gold target's text counts as correct
              (LASER's text mode: duplicate targets are no errors); percent
  accuracy    {src2tgt_accuracy, tgt2src_accuracy, accuracy}: top-1 cosine retrieval in each direction and their
              mean, exactly sentence-transformers' TranslationEvaluator (a retrieved sentence whose text is the
              gold sentence's counts as a hit); fractions in [0, 1]; aligned rows only
  mteb        {accuracy, precision, recall, f1, main_score}: MTEB's bitext-mining metrics (nearest target by
              cosine; precision/recall/f1 weighted over the gold labels as sklearn average="weighted";
              main_score = f1), comparable with the MTEB leaderboard; fractions in [0, 1]
  n_pairs     gold pairs evaluated
  subsets     per-subset results when an MTEB file holds several; the top-level numbers are then their average:
              xsim micro-averaged (sum of errors / sum of n), the fractions the mean over subsets
  bucc_f1     {precision, recall, f1, threshold, ...} of --bucc, fractions in [0, 1]; the threshold is the F1-best
              one on --bucc-train (or on the test split itself, an oracle, when no training split is given)
"""


def _evaluate(args, sources: list[str], targets: list[str], gold: list[tuple[int, int]], aligned: bool) -> dict:
    from bitext_hf.evaluation.metrics import functional as F
    from bitext_hf.mining import bidirectional_knn
    from bitext_hf.mining.config import used_k

    results: dict[str, object] = {}
    gold_tgt = [j for _, j in gold]
    # Only the sources of gold pairs are evaluated: the others are never encoded. When the data is aligned, they
    # are every source in order.
    src_sel = embed(args, [sources[i] for i, _ in gold], "source")
    tgt_emb = embed(args, targets, "target")
    metrics = set(args.metrics)
    if "xsim" in metrics:
        results["k"] = used_k(args.k, len(gold), len(targets))  # what the margin averaged, not a k above the data
        # One kNN for both the index-based and the text-based error counts.
        knn = bidirectional_knn(src_sel, tgt_emb, args.k)
        results["xsim"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt)
        results["xsim_text"] = F.xsim_from_knn(knn, margin=args.margin, gold=gold_tgt, target_texts=targets)
    if "accuracy" in metrics:
        if aligned:
            # With the texts, a retrieved sentence equal to the gold one is a hit, as TranslationEvaluator counts.
            source_texts = [sources[i] for i, _ in gold]
            results["accuracy"] = F.bitext_accuracy(src_sel, tgt_emb, source_texts=source_texts, target_texts=targets)
        else:
            logger.warning("accuracy needs row-aligned pairs; skipped for this data")
    if "mteb" in metrics:
        # src_sel holds the gold pairs' sources in gold order: gold pair number r is (r, j) in it.
        results["mteb"] = F.mteb_bitext_mining(src_sel, tgt_emb, gold=list(enumerate(gold_tgt)))
    results["n_pairs"] = len(gold)
    return results


def _average(per_subset: dict[str, dict]) -> dict:
    """xsim micro-averaged over all pairs (LASER); fractions averaged over subsets (MTEB)."""
    from bitext_hf.evaluation.metrics import functional as F

    parts = list(per_subset.values())
    average: dict[str, object] = {}
    if all("k" in part for part in parts):  # the largest neighbourhood a subset used (each subset reports its own)
        average["k"] = max(part["k"] for part in parts)
    for key in ("xsim", "xsim_text"):
        if all(key in part for part in parts):
            average[key] = F.xsim_micro_average(part[key] for part in parts)
    for key in ("accuracy", "mteb"):
        if all(key in part for part in parts):
            average[key] = {name: float(np.mean([part[key][name] for part in parts])) for name in parts[0][key]}
    average["n_pairs"] = sum(part["n_pairs"] for part in parts)
    return average


def _bucc(args) -> dict:
    from bitext_hf.data import read_bucc
    from bitext_hf.evaluation.metrics import functional as F
    from bitext_hf.mining import DEFAULT_MODE, mine
    from bitext_hf.mining.config import used_k

    task = read_bucc(*args.bucc, max_chars=args.max_line_chars)
    train = read_bucc(*args.bucc_train, max_chars=args.max_line_chars) if args.bucc_train else None

    used = []

    def candidates(t):
        used.append(used_k(args.k, len(t.sources), len(t.targets)))
        src_emb, tgt_emb = embed(args, t.sources, "source"), embed(args, t.targets, "target")
        pairs = mine(src_emb, tgt_emb, k=args.k, margin=args.margin, mode=args.mode or DEFAULT_MODE)
        labels, n_gold = F.bucc_labels(zip(pairs.src_indices.tolist(), pairs.tgt_indices.tolist()), t.gold)
        return pairs.scores, labels, n_gold

    test_scores, test_labels, test_gold = candidates(task)
    kwargs = {}
    if train is not None:
        kwargs = dict(zip(("train_scores", "train_labels", "n_gold_train"), candidates(train)))
    result = F.bucc_f1(test_scores, test_labels, n_gold_test=test_gold, **kwargs)
    result["threshold_from"] = "train" if train is not None else "test (oracle)"
    result["k"] = max(used)  # the largest neighbourhood either split used
    return result


def _refuse_options_that_cannot_act(args) -> None:
    """Options given where they do nothing are refused (exit 2), not ignored; ``--metrics`` unset is all three."""
    check_encoder_options(args)
    if args.bucc:
        if args.metrics is not None:
            raise UsageError("--metrics chooses among xsim, accuracy and mteb; --bucc computes BUCC F1 only")
    elif args.mode is not None:
        raise UsageError("--mode picks the candidates of --bucc; xsim, accuracy and mteb search every target")
    if args.metrics is None:
        args.metrics = ["xsim", "accuracy", "mteb"]
    elif "xsim" not in args.metrics and (args.k is not None or args.margin is not None):
        raise UsageError("--k and --margin are xsim's; --metrics leaves xsim out (accuracy and mteb use plain cosine)")
    # The parser leaves them unset (None) so that a value given where it cannot act is told from the default.
    args.k = DEFAULT_K if args.k is None else args.k
    args.margin = DEFAULT_MARGIN if args.margin is None else args.margin


def cmd_eval(args) -> int:
    from bitext_hf.data import read_mteb
    from bitext_hf.io import atomic_output
    from bitext_hf.mining import check_k

    sources_given = [bool(args.bucc), bool(args.mteb), bool(args.pairs or args.src or args.tgt)]
    if sum(sources_given) != 1:
        raise UsageError("give one of --pairs, --src/--tgt, --mteb or --bucc")
    for option, value in (("--split", args.split), ("--subset", args.subset), ("--columns", args.columns)):
        if value is not None and not args.mteb:
            raise UsageError(f"{option} is for --mteb data")
    if args.bucc_train and not args.bucc:
        raise UsageError("--bucc-train needs --bucc (the test split it picks the threshold for)")
    _refuse_options_that_cannot_act(args)
    inputs = [args.pairs, args.src, args.tgt, args.mteb, *(args.bucc or ()), *(args.bucc_train or ())]
    check_inputs_and_output(args.out, inputs)
    results: dict[str, object] = {"model": args.model or "use-multilingual-v3"}
    if args.bucc or "xsim" in args.metrics:  # k and the margin are reported only where they were used
        results.update(k=args.k, margin=args.margin)
    if args.bucc:
        results["bucc_f1"] = _bucc(args)
        results["k"] = results["bucc_f1"].pop("k")
    else:
        if args.mteb:
            tasks = read_mteb(args.mteb, split=args.split, subset=args.subset, columns=args.columns)
            inputs_by_name = {name: (t.sources, t.targets, t.gold, t.is_aligned) for name, t in tasks.items()}
        else:
            sources, targets = pair_texts(args)
            inputs_by_name = {"default": (sources, targets, [(i, i) for i in range(len(sources))], True)}
        for _, targets, gold, _ in inputs_by_name.values():  # every subset checked before any encoding
            check_k(args.k, len(gold), len(targets))
        per_subset = {name: _evaluate(args, *task) for name, task in inputs_by_name.items()}
        if len(per_subset) == 1:
            results.update(next(iter(per_subset.values())))
        else:
            results.update(_average(per_subset))
            results["subsets"] = per_subset
    text = json.dumps(results, indent=2, ensure_ascii=False)
    print(text)
    if args.out and args.out != "-":  # `-`: the lines above are the output
        with atomic_output(args.out) as handle:
            handle.write(text + "\n")
    return EXIT_OK
