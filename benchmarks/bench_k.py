"""What the neighbourhood size k costs: time and peak memory of ``bidirectional_knn`` as k grows.

The fused CPU kernel keeps a sorted top-k list per row and per column; a similarity that enters a list shifts up to
k entries, and when k approaches the corpus size nearly every similarity enters. Time therefore grows with k (and
memory with (N + M) k), which is why ``bitext_hf.mining.check_k`` bounds k. Each k runs in a fresh subprocess so
that peak memory is its own; CPU time (the process's own) is printed beside wall time, which depends on what else
the machine runs.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_k.py --n 5000 --dim 64 --ks 4 16 64 256 1024
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np

__all__ = ["main"]


def child(n: int, dim: int, k: int) -> None:
    from bitext_hf.mining import bidirectional_knn, knn

    knn.MAX_K = max(knn.MAX_K, k)  # measure beyond the bound that check_k enforces

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    y = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    bidirectional_knn(x[:64], y[:64], min(k, 64))  # numba compilation (cached) outside the timing
    start, cpu_start = time.perf_counter(), time.process_time()
    bidirectional_knn(x, y, k, backend="fused", device="cpu")
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"k": k, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_mb": round(peak_mb)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="rows on each side")
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--ks", type=int, nargs="+", default=[4, 16, 64, 256, 1024])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.n, args.dim, args.child)
        return
    print(f"{args.n} x {args.n} x {args.dim}-d, fused CPU backend")
    for k in args.ks:
        command = [sys.executable, __file__, "--n", str(args.n), "--dim", str(args.dim), "--child", str(k)]
        print(subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
