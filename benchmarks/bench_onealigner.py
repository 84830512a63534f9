"""Two-stage OneAligner retrieval against the full BERTScore matrix, on the same model and the same sentences.

For N real translation pairs (English -> xx gettext messages of this machine, a language the model was not trained
on by default), every English sentence retrieves its translation among the N candidates:

* full: ``retrieve`` (``bitext_hf.families.onealigner``): BERTScore of all N^2 pairs, in-batch normalization per
  256 x 256 block (the paper's inference);
* two-stage: ``two_stage_retrieve``: a first stage proposes the top-K candidates, then BERTScore with normalization
  terms estimated on a 256-sentence sample scores those K only. First stages (``--first_stages``):
  ``tokens`` (every source token's nearest target tokens through FAISS, an IVF index at scale; the default) and
  ``pooled`` (exact kNN over the mean-pooled layer-L vectors); both run against the same full-matrix result.

Both timings include encoding the sentences; one untimed call of each method on 64 sentences first absorbs
compilation (numba) and first-call costs. The full matrix at N = 20k is 4e8 BERTScore pairs (390-690 s on two
CPU cores, benchmarks/README.md) and is computed completely by default. A quicker mode: above ``--full_max``
sentences the full method is run for the first ``--full_rows`` sources only (whole 256-row normalization blocks
against all N targets, so those rows get exactly their full-matrix scores) and its time is extrapolated linearly
in the number of rows (encoding the N targets counted once); both accuracies are then also reported on those
same rows. Printed: seconds, the speed-up, top-1 accuracy of each, their
difference in points, the first stage's recall@K (how often the gold translation is among the candidates) and
how often the candidates contain the full matrix's own top-1 where that top-1 is correct (what the first stage
must not lose).

    python benchmarks/bench_onealigner.py --model runs/onealigner-gettext --sizes 1000 5000 20000
    python benchmarks/bench_onealigner.py --model runs/onealigner-gettext --language sv --top_k 32 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time

import faiss
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

import bitext_hf.modeling  # noqa: F401  (registers OneAligner with the Auto classes)
from bitext_hf.data import gettext_pairs
from bitext_hf.families.onealigner import encode_tokens, retrieve, two_stage_retrieve
from bitext_hf.modeling.onealigner import OneAlignerModel


def load_pairs(language: str, count: int, min_words: int = 1, seed: int = 0) -> tuple[list[str], list[str]]:
    pairs = gettext_pairs(language, min_words=min_words)
    if len(pairs) < count:
        raise SystemExit(f"only {len(pairs)} en-{language} pairs available, asked for {count}")
    rng = np.random.default_rng(seed)
    chosen = [pairs[index] for index in rng.choice(len(pairs), size=count, replace=False)]
    return [english for english, _ in chosen], [translation for _, translation in chosen]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="runs/onealigner-gettext", help="a trained OneAligner folder")
    parser.add_argument("--language", default="sv", help="gettext language of the targets (default: Swedish)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    parser.add_argument("--top_k", type=int, default=64, help="first-stage candidates per source")
    parser.add_argument(
        "--first_stages", nargs="+", default=["tokens", "pooled"], choices=["tokens", "pooled"], help="first stages"
    )
    parser.add_argument("--token_neighbours", type=int, default=64, help="target tokens per source token (tokens)")
    parser.add_argument("--nprobe", type=int, default=2, help="IVF cells per source token (tokens, at scale)")
    parser.add_argument("--normalization_sample", type=int, default=256, help="second-stage normalization sample")
    parser.add_argument("--full_max", type=int, default=20000, help="largest N with a complete full matrix")
    parser.add_argument("--full_rows", type=int, default=1024, help="source rows of the full matrix above full_max")
    parser.add_argument("--min_words", type=int, default=1, help="minimum words of the English side (gettext)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)

    model: OneAlignerModel = AutoModel.from_pretrained(args.model).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    english, translations = load_pairs(args.language, max(args.sizes), args.min_words)
    print(
        f"model {args.model} (layer {model.config.layer}, hidden {model.config.hidden_size}), en->{args.language}, "
        f"top_k {args.top_k}, normalization sample {args.normalization_sample}, torch threads "
        f"{torch.get_num_threads()}"
    )
    header = (
        f"{'N':>6} | {'first':>6} | {'full s':>8} | {'2-stage s':>9} | {'speed-up':>8} | {'acc full':>8} | "
        f"{'acc 2-st':>8} | {'diff pts':>8} | {'recall@K':>8} | {'keeps':>6} | rows compared (2-stage acc, all rows)"
    )
    print(header)
    print("-" * len(header))
    warm_up = (english[:64], translations[:64])
    retrieve(model, tokenizer, *warm_up)
    for first_stage in args.first_stages:
        two_stage_retrieve(model, tokenizer, *warm_up, top_k=8, first_stage=first_stage)
    rows = []
    for size in args.sizes:
        sources, targets = english[:size], translations[:size]
        gold = np.arange(size)
        if size <= args.full_max:
            rows_measured = size
            started = time.perf_counter()
            full_top1 = retrieve(model, tokenizer, sources, targets).numpy()
            full_seconds = time.perf_counter() - started
        else:
            rows_measured = min(size, args.full_rows)
            started = time.perf_counter()
            encode_tokens(model, tokenizer, targets)
            target_encoding = time.perf_counter() - started
            started = time.perf_counter()
            full_top1 = retrieve(model, tokenizer, sources[:rows_measured], targets).numpy()
            measured = time.perf_counter() - started
            full_seconds = target_encoding + (measured - target_encoding) * size / rows_measured
        full_accuracy = float((full_top1 == gold[:rows_measured]).mean())
        full_correct = full_top1 == gold[:rows_measured]
        for first_stage in args.first_stages:
            started = time.perf_counter()
            _, indices = two_stage_retrieve(
                model,
                tokenizer,
                sources,
                targets,
                top_k=args.top_k,
                first_stage=first_stage,
                token_neighbours=args.token_neighbours,
                nprobe=args.nprobe,
                normalization_sample=args.normalization_sample,
            )
            two_stage_seconds = time.perf_counter() - started
            two_stage_accuracy = float((indices[:rows_measured, 0] == gold[:rows_measured]).mean())
            two_stage_all_rows = float((indices[:, 0] == gold).mean())
            recall = float((indices == gold[:, None]).any(axis=1).mean())
            # Where the full matrix is right, its top-1 (the gold) must be among the candidates to be kept.
            keeps = float((indices[:rows_measured] == full_top1[:, None]).any(axis=1)[full_correct].mean())
            row = {
                "n": size,
                "first_stage": first_stage,
                "full_seconds": full_seconds,
                "two_stage_seconds": two_stage_seconds,
                "speedup": full_seconds / two_stage_seconds,
                "full_accuracy": full_accuracy,
                "two_stage_accuracy": two_stage_accuracy,
                "difference_points": 100 * (two_stage_accuracy - full_accuracy),
                "recall_at_k": recall,
                "keeps_full_correct": keeps,
                "rows_measured": rows_measured,
                "two_stage_accuracy_all_rows": two_stage_all_rows,
            }
            rows.append(row)
            print(
                f"{size:>6} | {first_stage:>6} | {full_seconds:>8.1f} | {two_stage_seconds:>9.1f} | "
                f"{row['speedup']:>7.1f}x | {100 * full_accuracy:>8.1f} | {100 * two_stage_accuracy:>8.1f} | "
                f"{row['difference_points']:>+8.1f} | {100 * recall:>8.1f} | {100 * keeps:>6.1f} | {rows_measured}"
                + (f" ({100 * two_stage_all_rows:.1f}), full time extrapolated" if rows_measured < size else ""),
                flush=True,
            )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"args": vars(args), "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
