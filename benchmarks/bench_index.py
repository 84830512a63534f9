"""Approximate FAISS search for mining (``mine(..., index=...)``) against the exact one-pass engine.

For each N = M, on the planted data of ``bench_mining.py`` (random L2-normalized embeddings, half of the targets noisy
translations of sources, the rest distractors), each method runs in a fresh process (its own peak memory):

- ``exact``: ``bitext_hf.mining.mine`` (the reference, one blocked pass in both directions);
- ``auto``: ``mine(..., index="auto")`` (the index and nprobe chosen from N, M and d);
- any FAISS factory string (e.g. ``IVF1024,Flat`` or ``OPQ64,IVF1024,PQ64``) with ``--nprobe``.

Printed per run: wall and CPU time (user + system of the process), peak memory above the inputs, recall@k of the
forward neighbours of sampled sources against exact search (:func:`bitext_hf.mining.index.check_recall`, outside the
timing), and the share of the exact run's mined pairs that the approximate run keeps (same k, margin, mode,
threshold), both without a threshold and with ``--threshold`` (default 1.5: in the exact runs at 20k and 50k every
planted pair scores at least 2.41 and every other pair at most 1.35, so above 1.5 the exact pairs are exactly the
planted ones), and the share of the exact run's planted pairs (the translations) that it keeps. Results are kept in
``--workdir``; exact runs are reused (the 200k exact run takes many minutes on one thread), and with ``--reuse``
every run is (to print the table again).

    OMP_NUM_THREADS=1 python benchmarks/bench_index.py --sizes 20000 50000 100000 200000 --methods exact auto
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_mining import _rss_mb, make_embeddings


def _case_name(method: str, n: int, dim: int, k: int) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in method)
    return f"{safe}-n{n}-d{dim}-k{k}"


def child(method: str, n: int, dim: int, k: int, nprobe: int | None, out: Path, recall_queries: int) -> None:
    from bitext_hf.mining import mine

    x, y = make_embeddings(n, dim)
    mine(x[:64], y[:64], k=k)  # warm-up outside the timing: imports, thread pools, the compiled numba kernel
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS counter: the peak is the method's own
    base = _rss_mb("VmRSS")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    # The exact run passes no index option, so the same script measures the engine before and after this change.
    options = {} if method == "exact" else {"index": method, "nprobe": nprobe}
    pairs = mine(x, y, k=k, margin="ratio", mode="max", **options)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak = _rss_mb("VmHWM")
    np.savez(out.with_suffix(".npz"), src=pairs.src_indices, tgt=pairs.tgt_indices, scores=pairs.scores)
    result = {"wall_s": wall, "cpu_s": cpu, "peak_extra_mb": peak - base, "inputs_mb": base, "pairs": len(pairs)}
    if method != "exact":
        from bitext_hf.mining.index import check_recall, resolve_index

        spec = resolve_index(method, n, n, dim, nprobe=nprobe)
        result["index"] = "exact" if spec.exact else f"{spec.factory} nprobe={spec.nprobe}"
        report = check_recall(x, y, k=k, index=method, nprobe=nprobe, queries=recall_queries, seed=1)
        result["recall"] = report.recall
    out.with_suffix(".json").write_text(json.dumps(result))


def planted_pairs(n: int, dim: int, seed: int = 0) -> set[tuple[int, int]]:
    """(source, target) of the noisy translations that ``make_embeddings`` plants: its draws replayed."""
    rng = np.random.default_rng(seed)
    rng.standard_normal((n, dim), dtype=np.float32)
    rng.standard_normal((n, dim), dtype=np.float32)
    position = np.argsort(rng.permutation(n))  # target row of each pre-shuffle row
    return {(i, int(position[i])) for i in range(n // 2)}


def _pairs(out: Path, threshold: float) -> tuple[set, set | None]:
    """All pairs of a run, and those scoring >= threshold (a threshold in every mode is a filter on the scores:
    ``retrieve`` applies it after the mode). Runs saved without scores give None for the second."""
    if not out.with_suffix(".npz").exists():  # the first 200k exact run saved indices only
        pairs = np.load(out.with_suffix(".npy"))
        return set(zip(pairs[0].tolist(), pairs[1].tolist())), None
    data = np.load(out.with_suffix(".npz"))
    keep = data["scores"] >= threshold
    every = set(zip(data["src"].tolist(), data["tgt"].tolist()))
    return every, set(zip(data["src"][keep].tolist(), data["tgt"][keep].tolist()))


def share(part: set, whole: set | None) -> str:
    return "n/a" if whole is None else f"{len(part & whole) / max(1, len(whole)):.2%}"


def run_case(method: str, n: int, args) -> tuple[dict, set, set | None]:
    out = Path(args.workdir) / _case_name(method, n, args.dim, args.k)
    if not out.with_suffix(".json").exists() or (method != "exact" and not args.reuse):
        command = [sys.executable, __file__, "--child", method, "--sizes", str(n), "--dim", str(args.dim)]
        command += ["--k", str(args.k), "--workdir", args.workdir, "--recall-queries", str(args.recall_queries)]
        if args.nprobe is not None:
            command += ["--nprobe", str(args.nprobe)]
        subprocess.run(command, check=True)
    return json.loads(out.with_suffix(".json").read_text()), *_pairs(out, args.threshold)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000, 100_000, 200_000], help="N = M")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--methods", nargs="+", default=["exact", "auto"], help="exact, auto or factory strings")
    parser.add_argument("--nprobe", type=int, default=None, help="for factory strings (default: auto's choice)")
    parser.add_argument("--recall-queries", type=int, default=2000, help="sampled sources for recall@k")
    parser.add_argument("--threshold", type=float, default=1.5, help="margin threshold of the second comparison")
    parser.add_argument("--reuse", action="store_true", help="print saved results instead of running them again")
    parser.add_argument("--workdir", default="outputs/bench_index", help="results kept here (exact runs reused)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.child:
        out = Path(args.workdir) / _case_name(args.child, args.sizes[0], args.dim, args.k)
        child(args.child, args.sizes[0], args.dim, args.k, args.nprobe, out, args.recall_queries)
        return

    import faiss
    import torch

    print(
        f"# d={args.dim}, k={args.k}, margin=ratio, mode=max, float32; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        "| N = M | method | index | wall s | CPU s | CPU vs exact | peak extra MB | recall@k | pairs | "
        f"exact pairs kept | exact pairs >= {args.threshold} kept | exact planted pairs kept |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|", flush=True)
    for n in args.sizes:
        exact, exact_pairs, exact_above = run_case("exact", n, args)
        planted = planted_pairs(n, args.dim) & exact_pairs
        for method in args.methods:
            if method == "exact":
                result, pairs, above = exact, exact_pairs, exact_above
            else:
                result, pairs, above = run_case(method, n, args)
            recall = f"{result['recall']:.4f}" if "recall" in result else "1 (exact)"
            print(
                f"| {n:,} | {method} | {result.get('index', 'exact one-pass').replace(' nprobe=None', '')} "
                f"| {result['wall_s']:.1f} "
                f"| {result['cpu_s']:.1f} | {result['cpu_s'] / exact['cpu_s']:.3f} | {result['peak_extra_mb']:.0f} "
                f"| {recall} | {result['pairs']:,} | {share(pairs, exact_pairs)} | {share(above or set(), exact_above)} "
                f"| {share(pairs, planted)} ({len(planted):,}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
