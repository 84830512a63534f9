"""Approximate search on real sentence embeddings: how many of the exact run's pairs an index keeps when the
vectors have the structure of language (``bench_index.py`` measures it on structureless random vectors).

Data: every (English, ``--lang``) pair of the installed gettext catalogs (``bitext_hf.data.gettext_pairs``), the
translations as sources and the English messages, shuffled, as targets; both encoded by the default encoder (the
embedded multilingual USE v3; the embeddings are kept in ``--workdir`` and reused). Mined with k=4, ratio margin,
max mode, exact and through each index of ``--methods`` (as in bench_index: "ivf" and "opq-pq" are auto's two index
rules built at this size), in this process, one thread. Printed per method: CPU time, recall@4 of sampled sources,
the share of the exact pairs kept with no threshold and above each threshold, and the share of mined pairs that
are the catalogs' own translations (precision against the gettext alignment).

    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 python benchmarks/bench_index_real.py --lang fr --methods ivf opq-pq
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

import numpy as np
from bench_index import Timings, above, resolve_method, share


def embeddings(lang: str, workdir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(translations, shuffled English, the English row of each translation), encoded once and kept."""
    from bitext_hf.data import gettext_pairs

    pairs = gettext_pairs(lang)
    order = np.random.default_rng(0).permutation(len(pairs))  # target row t holds the English of pair order[t]
    gold = np.argsort(order)
    files = workdir / f"{lang}-src.npy", workdir / f"{lang}-tgt.npy"
    if not all(f.exists() for f in files):
        from bitext_hf.encoders import load_encoder

        encoder = load_encoder(threads=1)
        start = time.perf_counter()
        np.save(files[0], encoder.encode([p[1] for p in pairs], batch_size=128))
        np.save(files[1], encoder.encode([pairs[i][0] for i in order], batch_size=128))
        print(f"(encoded {2 * len(pairs):,} sentences in {time.perf_counter() - start:.0f} s)")
    return np.load(files[0]), np.load(files[1]), gold


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", default="fr", help="gettext language of the sources (fr has the most pairs here)")
    parser.add_argument("--methods", nargs="+", default=["ivf", "opq-pq"], help="as in bench_index.py")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[1.06, 1.2])
    parser.add_argument("--recall-queries", type=int, default=2000)
    parser.add_argument("--workdir", default="outputs/bench_index_real")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    from bitext_hf.mining import check_pair
    from bitext_hf.mining.index import recall_at_k, search_neighbours_unchecked
    from bitext_hf.mining.retrieval import retrieve

    x, y, gold = embeddings(args.lang, workdir)
    src, tgt = check_pair(x, y, "source", "target")
    n, dim = src.shape
    timings = Timings()
    logging.getLogger("bitext_hf.mining.index").addHandler(timings)
    logging.getLogger("bitext_hf.mining.index").setLevel(logging.INFO)
    print(
        f"# gettext {args.lang} -> en, {n:,} x {tgt.shape[0]:,}, d={dim}, k=4, ratio, max; one thread; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        "| method | index | CPU s | CPU vs exact | train s | recall@4 | pairs | exact pairs kept | "
        + " | ".join(f">= {t} kept" for t in args.thresholds)
        + " | pairs that are the catalogs' translations |"
    )
    print(header + "\n" + "|---" * (header.count("|") - 1) + "|", flush=True)
    exact = None
    for method in ["exact", *args.methods]:
        index, nprobe = resolve_method(method, n, dim, None)
        cpu = time.process_time()
        knn = search_neighbours_unchecked(src, tgt, 4, index=index, nprobe=nprobe)
        pairs = retrieve(knn, margin="ratio", mode="max")
        cpu = time.process_time() - cpu
        scored = dict(zip(zip(pairs.src_indices.tolist(), pairs.tgt_indices.tolist()), pairs.scores.tolist()))
        exact = exact or (cpu, scored)
        recall = recall_at_k(src, tgt, knn, queries=args.recall_queries, seed=1).recall
        correct = np.mean(gold[pairs.src_indices] == pairs.tgt_indices)
        kept = [share(above(scored, t), above(exact[1], t)) for t in args.thresholds]
        label = "exact one-pass" if method == "exact" else f"{index} nprobe={nprobe}"
        train = f"{timings.found['train_s']:.1f}" if method != "exact" else "-"
        print(
            f"| {method} | {label} | {cpu:.1f} | {cpu / exact[0]:.3f} | {train} | {recall:.4f} | {len(pairs):,} "
            f"| {share(set(scored), set(exact[1]))} | {' | '.join(kept)} | {correct:.2%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
