"""Mining speed and memory: one-pass bidirectional kNN (bitext_hf) against two separate exact FAISS searches.

(a) baseline, the LASER / sentence-transformers way: ``faiss.knn(x, y)`` and ``faiss.knn(y, x)`` (exact, inner
    product), then margin scoring and max retrieval.
(b) ``bitext_hf.mining.mine``: one blocked pass over the similarity matrix keeps both the row and the column top-k,
    then the same margin scoring and max retrieval.

Both run on the same random L2-normalized embeddings (half of the targets are noisy translations of sources, the
rest distractors), each in a fresh subprocess so that peak memory is its own, and the script checks that both
return the same pairs. Wall time depends on what else the machine runs; CPU time (user + system of the process)
measures the work itself, so both are printed, with the (b)/(a) ratios.

    python benchmarks/bench_mining.py --sizes 10000 50000 100000 200000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_embeddings(
    n: int, dim: int, seed: int = 0, *, n_tgt: int | None = None, shuffle: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """n sources and n_tgt (default n) targets; the first half of the smaller side's count are noisy translations
    of the first sources, the rest distractors; targets shuffled unless ``shuffle=False`` (the draws for a square
    shuffled set are the same as before these options, so bench_index can replay them)."""
    n_tgt = n if n_tgt is None else n_tgt
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = rng.standard_normal((n_tgt, dim), dtype=np.float32)
    half = min(n, n_tgt) // 2
    y[:half] = x[:half] + 0.8 * y[:half] / np.sqrt(dim)  # noisy translations: cosine about 0.78
    y /= np.linalg.norm(y, axis=1, keepdims=True)
    return x, (y[rng.permutation(n_tgt)] if shuffle else y)


def rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(method: str, n: int, dim: int, k: int, out: str) -> None:
    # bitext_hf first, for both methods: it points FAISS's bundled OpenBLAS at the CPU's kernels before FAISS loads
    # it (bitext_hf.blas_kernels); imported first, FAISS would run its generic ones on CPUs its OpenBLAS predates.
    from bitext_hf.mining import BidirectionalKNN, mine, retrieve  # isort: skip

    import faiss

    x, y = make_embeddings(n, dim)
    # Warm up outside the timing: library imports, thread pools, and loading the compiled numba kernel (cached on
    # disk after the first use: a one-time cost of about a second per process).
    faiss.knn(x[:64], y[:64], k, metric=faiss.METRIC_INNER_PRODUCT)
    mine(x[:64], y[:64], k=k)

    # Reset the peak-RSS counter so that the peak is the method's own, on top of the inputs.
    Path("/proc/self/clear_refs").write_text("5")
    base = rss_mb("VmRSS")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if method == "faiss-two-searches":
        fwd_sims, fwd_idx = faiss.knn(x, y, k, metric=faiss.METRIC_INNER_PRODUCT)
        bwd_sims, bwd_idx = faiss.knn(y, x, k, metric=faiss.METRIC_INNER_PRODUCT)
        pairs = retrieve(BidirectionalKNN(fwd_sims, fwd_idx, bwd_sims, bwd_idx), margin="ratio", mode="max")
    else:
        pairs = mine(x, y, k=k, margin="ratio", mode="max")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak = rss_mb("VmHWM")
    np.save(out, np.stack([pairs.src_indices, pairs.tgt_indices]))
    print(
        json.dumps(
            {"wall_s": wall, "cpu_s": cpu, "peak_extra_mb": peak - base, "inputs_mb": base, "pairs": len(pairs)}
        )
    )


def run_case(method: str, n: int, dim: int, k: int, workdir: str) -> tuple[dict, np.ndarray]:
    out = os.path.join(workdir, f"{method}-{n}.npy")
    result = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            method,
            "--sizes",
            str(n),
            "--dim",
            str(dim),
            "--k",
            str(k),
            "--out",
            out,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1]), np.load(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000, 200_000], help="N = M")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.sizes[0], args.dim, args.k, args.out)
        return

    from importlib.metadata import version

    import torch

    import bitext_hf  # noqa: F401  (sets FAISS's OpenBLAS kernels; the children inherit them)

    kernels = os.environ.get("OPENBLAS_CORETYPE") or "its own choice"
    print(
        f"# d={args.dim}, k={args.k}, margin=ratio, mode=max; {os.cpu_count()} cores, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), faiss {version('faiss-cpu')} (OpenBLAS kernels: {kernels}), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        "| N = M | (a) FAISS x2 wall s | (b) one-pass wall s | wall (b)/(a) | (a) CPU s | (b) CPU s | CPU (b)/(a) "
        "| (a) peak extra MB | (b) peak extra MB | inputs MB | same pairs |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    with tempfile.TemporaryDirectory() as workdir:
        for n in args.sizes:
            base, base_pairs = run_case("faiss-two-searches", n, args.dim, args.k, workdir)
            ours, our_pairs = run_case("bitext-hf-one-pass", n, args.dim, args.k, workdir)
            same = {tuple(p) for p in base_pairs.T.tolist()} == {tuple(p) for p in our_pairs.T.tolist()}
            print(
                f"| {n:,} | {base['wall_s']:.1f} | {ours['wall_s']:.1f} | {ours['wall_s'] / base['wall_s']:.2f} "
                f"| {base['cpu_s']:.1f} | {ours['cpu_s']:.1f} | {ours['cpu_s'] / base['cpu_s']:.2f} "
                f"| {base['peak_extra_mb']:.0f} | {ours['peak_extra_mb']:.0f} | {ours['inputs_mb']:.0f} "
                f"| {'yes' if same else 'NO'} ({ours['pairs']:,}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
