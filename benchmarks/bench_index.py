"""Approximate FAISS search for mining (``mine(..., index=...)``) against the exact one-pass engine, and the scaling
curve of issue 13.

For each N = M, on the planted data of ``bench_mining.py`` (random L2-normalized embeddings, half of the targets noisy
translations of sources, the rest distractors), each method runs in a fresh process (its own peak memory):

- ``exact``: the exact one-pass engine (the reference; ``mine``'s own steps);
- ``faiss-two-searches``: the LASER / sentence-transformers baseline, ``faiss.knn`` in each direction (exact);
- ``auto``: ``mine(..., index="auto")`` (exact up to N x M = EXACT_MAX_PAIRS, then an index chosen from N, M and d);
- ``ivf`` and ``opq-pq``: the two indexes "auto" picks for medium and large corpora (``IVF<n>,Flat`` and
  ``OPQ64,IVF<n>,PQ64``, n and nprobe by auto's rule), built at any size, so the curve has every method at every N;
- any FAISS factory string (e.g. ``IVF1024,Flat``) with ``--nprobe``.

``--dtype float16`` stores the inputs at half precision (as ``encode --dtype float16`` does) before mining; they are
compared with the float32 exact run. Printed per run: wall and CPU time (user + system of the process), the index
training time, peak memory above the inputs, recall@k of the forward neighbours of 2,000 sampled sources against exact
search (read from the run's own neighbours, outside the timing), and the share of the exact run's mined pairs that
the run keeps (same k, margin, mode): with no threshold, above each of ``--thresholds`` (the exact runs at 20k and
50k give every planted pair a margin of at least 2.41 and every other pair at most 1.35, so above 1.5 the exact pairs
are exactly the planted ones), and among the planted pairs. Above ``--exact-up-to`` no exact reference is run (its
time grows as N^2): the planted column then counts all planted pairs (the exact runs find every one of them).

Results are kept in ``--workdir``; float32 exact runs are reused, and with ``--reuse`` every run is (to print the
table again).

    OMP_NUM_THREADS=1 python benchmarks/bench_index.py --sizes 10000 30000 100000 200000 \
        --methods exact faiss-two-searches ivf opq-pq
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_mining import make_embeddings, rss_mb


def _case_name(method: str, n: int, dim: int, k: int, dtype: str = "float32") -> str:
    safe = "".join(c if c.isalnum() else "_" for c in method)
    return f"{safe}-n{n}-d{dim}-k{k}" + ("" if dtype == "float32" else f"-{dtype}")


def resolve_method(method: str, n: int, dim: int, nprobe: int | None):
    """(index option for ``search_neighbours``, nprobe): "ivf" and "opq-pq" are the indexes "auto" picks for
    medium and large corpora, built at every size (auto itself is exact below EXACT_MAX_MACS)."""
    from bitext_hf.mining.index import auto_ivf_flat, auto_opq_pq

    if method in ("ivf", "opq-pq"):
        spec = auto_ivf_flat(n, n) if method == "ivf" else auto_opq_pq(n, n, dim)
        return spec.factory, nprobe or spec.nprobe
    return method, nprobe


class Timings(logging.Handler):
    """Training and search seconds from the index module's log line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.found: dict = {}

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"trained in ([0-9.]+)s, both directions in ([0-9.]+)s", record.getMessage())
        if found:
            self.found = {"train_s": float(found[1]), "train_and_search_s": float(found[2])}


def child(method, n, dim, k, nprobe, out: Path, recall_queries: int, dtype: str) -> None:
    from bitext_hf.mining import check_pair, mine
    from bitext_hf.mining.index import recall_at_k, resolve_index, search_neighbours_unchecked
    from bitext_hf.mining.knn import BidirectionalKNN
    from bitext_hf.mining.retrieval import retrieve

    x, y = make_embeddings(n, dim)
    if dtype == "float16":  # stored at half precision (as `encode --dtype float16` writes), read back as float32
        x, y = x.astype(np.float16), y.astype(np.float16)
    mine(x[:64], y[:64], k=k)  # warm-up outside the timing: imports, thread pools, the compiled numba kernel
    timings = Timings()
    logging.getLogger("bitext_hf.mining.index").addHandler(timings)
    logging.getLogger("bitext_hf.mining.index").setLevel(logging.INFO)
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak-RSS counter: the peak is the method's own
    base = rss_mb("VmRSS")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    # The steps of ``mine`` (the same work), keeping the neighbourhoods for recall@k without a second index.
    if method == "faiss-two-searches":  # the baseline of bench_mining: two exact FAISS searches
        import faiss

        src, tgt = check_pair(x, y, "source", "target")
        fwd = faiss.knn(src, tgt, k, metric=faiss.METRIC_INNER_PRODUCT)
        bwd = faiss.knn(tgt, src, k, metric=faiss.METRIC_INNER_PRODUCT)
        knn = BidirectionalKNN(fwd[0], fwd[1], bwd[0], bwd[1])
    else:
        src, tgt = check_pair(x, y, "source", "target")
        index, probe = resolve_method(method, n, dim, nprobe)
        knn = search_neighbours_unchecked(src, tgt, k, index=index, nprobe=probe)
    pairs = retrieve(knn, margin="ratio", mode="max")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    peak = rss_mb("VmHWM")
    np.savez(out.with_suffix(".npz"), src=pairs.src_indices, tgt=pairs.tgt_indices, scores=pairs.scores)
    result = {"wall_s": wall, "cpu_s": cpu, "peak_extra_mb": peak - base, "inputs_mb": base, "pairs": len(pairs)}
    result.update(timings.found, load=os.getloadavg()[0])
    if method not in ("exact", "faiss-two-searches"):
        index, probe = resolve_method(method, n, dim, nprobe)
        spec = resolve_index(index, n, n, dim, nprobe=probe)
        result["index"] = "exact" if spec.exact else f"{spec.factory} nprobe={spec.nprobe}"
        result["recall"] = recall_at_k(src, tgt, knn, queries=recall_queries, seed=1).recall
    out.with_suffix(".json").write_text(json.dumps(result))


def planted_pairs(n: int, dim: int, seed: int = 0) -> set[tuple[int, int]]:
    """(source, target) of the noisy translations that ``make_embeddings`` plants: its draws replayed."""
    rng = np.random.default_rng(seed)
    rng.standard_normal((n, dim), dtype=np.float32)
    rng.standard_normal((n, dim), dtype=np.float32)
    position = np.argsort(rng.permutation(n))  # target row of each pre-shuffle row
    return {(i, int(position[i])) for i in range(n // 2)}


def read_pairs_output(out: Path) -> tuple[set, dict | None]:
    """All pairs of a run, and {pair: score} (a threshold in every mode is a filter on the scores: ``retrieve``
    applies it after the mode). Runs saved without scores give None for the second."""
    if not out.with_suffix(".npz").exists():  # the first 200k exact run saved indices only
        pairs = np.load(out.with_suffix(".npy"))
        return set(zip(pairs[0].tolist(), pairs[1].tolist())), None
    data = np.load(out.with_suffix(".npz"))
    scored = dict(zip(zip(data["src"].tolist(), data["tgt"].tolist()), data["scores"].tolist()))
    return set(scored), scored


def above(scored: dict | None, threshold: float) -> set | None:
    return None if scored is None else {pair for pair, score in scored.items() if score >= threshold}


def share(part: set | None, whole: set | None) -> str:
    return "n/a" if whole is None or part is None else f"{len(part & whole) / max(1, len(whole)):.2%}"


def run_case(method: str, n: int, args, dtype: str) -> tuple[dict, set, dict | None] | None:
    """A run's results (run now unless kept and reusable); None when ``--reuse`` finds none to print."""
    out = Path(args.workdir) / _case_name(method, n, args.dim, args.k, dtype)
    reuse = args.reuse or (method == "exact" and dtype == "float32")
    if args.reuse and not out.with_suffix(".json").exists():
        return None
    if not out.with_suffix(".json").exists() or not reuse:
        command = [sys.executable, __file__, "--child", method, "--sizes", str(n), "--dim", str(args.dim)]
        command += ["--k", str(args.k), "--workdir", args.workdir, "--recall-queries", str(args.recall_queries)]
        command += ["--dtype", dtype] + (["--nprobe", str(args.nprobe)] if args.nprobe is not None else [])
        subprocess.run(command, check=True)
    return json.loads(out.with_suffix(".json").read_text()), *read_pairs_output(out)


def plot(args, path: str) -> None:
    """CPU time and planted pairs kept against N (log-log) for each method, from the results kept in --workdir."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    times, kept = figure.subplots(1, 2)
    points: dict[str, list] = {method: [] for method in args.methods}
    for n in args.sizes:  # sizes outside: the planted pairs of a size are replayed once (2 N x d draws)
        planted = None
        for method in args.methods:
            out = Path(args.workdir) / _case_name(method, n, args.dim, args.k, args.dtype)
            if out.with_suffix(".json").exists():
                planted = planted if planted is not None else planted_pairs(n, args.dim)
                cpu = json.loads(out.with_suffix(".json").read_text())["cpu_s"]
                points[method].append((n, cpu, 100 * len(read_pairs_output(out)[0] & planted) / len(planted)))
    for number, (method, found) in enumerate(points.items()):
        style = {"marker": "osD^v"[number % 5], "linestyle": "-" if number % 2 == 0 else "--"}  # overlaps stay visible
        if found:
            n, cpu, share_kept = zip(*found)
            times.plot(n, cpu, label=method, **style)
            kept.plot(n, share_kept, label=method, **style)
    times.set(xscale="log", yscale="log", xlabel="N = M (sentences a side)", ylabel="CPU seconds, one core")
    times.set_title(f"mining cost, d = {args.dim}, {args.dtype}")
    kept.set(xscale="log", xlabel="N = M (sentences a side)", ylabel="% of the planted pairs mined")
    kept.set_title("planted translations kept")
    for axes in (times, kept):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend()
    figure.savefig(path)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000, 50_000, 100_000, 200_000], help="N = M")
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["exact", "auto"],
        help="exact, faiss-two-searches, auto, ivf / opq-pq (auto's two index rules at any size) or factory strings",
    )
    parser.add_argument("--nprobe", type=int, default=None, help="for factory strings (default: auto's choice)")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32", help="storage of the inputs")
    parser.add_argument("--recall-queries", type=int, default=2000, help="sampled sources for recall@k")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[1.06, 1.2, 1.5], help="margin thresholds")
    parser.add_argument(
        "--exact-up-to",
        type=int,
        default=200_000,
        help="larger N runs no exact reference (kept columns n/a; planted pairs counted against all planted ones)",
    )
    parser.add_argument("--reuse", action="store_true", help="print saved results only (missing ones are skipped)")
    parser.add_argument("--workdir", default="outputs/bench_index", help="results kept here (exact runs reused)")
    parser.add_argument("--plot", metavar="PNG", help="draw the kept results of --sizes and --methods, run nothing")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.plot:
        plot(args, args.plot)
        return
    if args.child:
        out = Path(args.workdir) / _case_name(args.child, args.sizes[0], args.dim, args.k, args.dtype)
        child(args.child, args.sizes[0], args.dim, args.k, args.nprobe, out, args.recall_queries, args.dtype)
        return

    import faiss
    import torch

    print(
        f"# d={args.dim}, k={args.k}, margin=ratio, mode=max, {args.dtype} inputs; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), faiss {faiss.__version__} ({faiss.omp_get_max_threads()} threads), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    header = (
        "| N = M | method | index | wall s | CPU s | CPU vs exact | train s | peak extra MB | recall@k | pairs "
        "| exact pairs kept | " + " | ".join(f">= {t} kept" for t in args.thresholds) + " | planted pairs kept |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|", flush=True)
    for n in args.sizes:
        planted = planted_pairs(n, args.dim)
        exact, exact_pairs, exact_scored = {}, None, None
        if n <= args.exact_up_to and (found := run_case("exact", n, args, "float32")) is not None:
            exact, exact_pairs, exact_scored = found
            planted &= exact_pairs  # the planted pairs that exact mining finds
        for method in args.methods:
            if method == "exact" and (exact_pairs is None or args.dtype == "float32"):
                if exact_pairs is None:
                    continue
                result, pairs, scored = exact, exact_pairs, exact_scored
            elif (found := run_case(method, n, args, args.dtype)) is not None:
                result, pairs, scored = found
            else:
                continue
            recall = f"{result['recall']:.4f}" if "recall" in result else "1 (exact)"
            kept = [share(above(scored, t), above(exact_scored, t)) for t in args.thresholds]
            index = result.get("index", "FAISS knn x 2" if method == "faiss-two-searches" else "exact one-pass")
            ratio = "-" if exact_pairs is None else f"{result['cpu_s'] / exact['cpu_s']:.3f}"
            train = f"{result['train_s']:.1f}" if "train_s" in result else "-"
            print(
                f"| {n:,} | {method} | {index.replace(' nprobe=None', '')} | {result['wall_s']:.1f} "
                f"| {result['cpu_s']:.1f} | {ratio} | {train} | {result['peak_extra_mb']:.0f} "
                f"| {recall} | {result['pairs']:,} | {share(pairs, exact_pairs)} | {' | '.join(kept)} "
                f"| {share(pairs, planted)} ({len(planted):,}) |",
                flush=True,
            )


if __name__ == "__main__":
    main()
