"""Where an IVF index becomes cheaper than the exact engine (issue 23): the place for ``--index auto``'s threshold.

``index="auto"`` stays exact while N x M is at most ``EXACT_MAX_PAIRS``, then builds ``auto_ivf_flat(N, M)``
(``IVF<n>,Flat``, nprobe ``auto_nprobe(n)``). This measures both at every size of a grid, so that the threshold can sit
where the index starts to cost less CPU time than the exact one-pass engine:

- **exact**: ``mine(..., index="exact")``, the one-pass engine;
- **ivf**: ``mine(..., index=<auto_ivf_flat(N, N)>, nprobe=<its nprobe>)``, the index auto chooses beyond its
  threshold, forced at every size (training, both directions, exact re-scoring: everything ``mine`` does).

Both mine both directions with k = 4, ratio margin and max mode, on the planted data of ``bench_mining.py`` (random
L2-normalized rows; half of the targets noisy translations of sources, the rest distractors), N = M, over a grid of
dimensions (``--dims``), sizes (``--sizes``), thread counts (``--threads``: an integer, or ``default``, which leaves
the count unset so that the library takes ``usable_cpus()``, as the CLI does without ``--threads``; such a run's
process has no OMP/MKL/OpenBLAS/NUMBA thread variables) and loads (``--load``): ``quiet`` starts nothing beside the
run, ``busy`` starts ``--busy_procs`` CPU-burning Python spin loops before each measured run and stops them after it,
the case of a shared machine, where thread pools that wait for each other cost more CPU.

Each (method, d, N, threads, load) runs in a fresh process; after a warm-up outside the timing, the time of the
``mine`` call is taken: wall seconds, and CPU seconds (user + system of that process, all its threads). Printed per
run: both, the cores it kept busy (CPU / wall), the CPU ratio ivf / exact, the index training time, the share of the
exact run's pairs (same d, N, threads and load) that the IVF run mines too, with no threshold and above each of
``--thresholds`` (as ``bench_index.py`` counts "kept"), and the 1-minute load average before the run (before any
busy process starts) and after it. Then, per (d, threads, load), the crossover: the smallest N of the grid at which
IVF's CPU time is below the exact engine's, and N interpolated where the ratio crosses 1 (log ratio linear in log N
between the two sizes that bracket it; outside the grid, extrapolated from the two nearest sizes and marked so),
also as N x N sentence pairs, the unit of ``EXACT_MAX_PAIRS``.

Results are kept in ``--workdir``, one JSON (and the pairs) per run: an interrupted grid resumes where it stopped,
and ``--reuse`` prints the table of what is kept without running anything. ``--nprobe P ...`` adds runs of the same
IVF index scanning P lists instead of auto's (method ``ivf-p<P>``): what another nprobe buys and costs. A kept result
names the nprobe it ran with (the table's index column), which auto's rule may have changed since. ``--plot PNG`` draws the CPU ratio
ivf / exact against N, one line per (d, threads, load), with a line at 1.

    python benchmarks/bench_index_crossover.py --dims 256 512 768 --sizes 5000 10000 20000 40000 80000 \\
        --threads 1 default --load quiet busy --plot benchmarks/figures/index_crossover.png
    python benchmarks/bench_index_crossover.py --reuse --dims 256 512 768 --sizes 5000 10000 20000 40000 80000 \\
        --threads 1 default --load quiet busy   # the table again, from the kept results
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_index import Timings, above, read_pairs_output, share
from bench_mining import make_embeddings

METHODS = ("exact", "ivf")
# Cleared in a "default" run's process: with none of them set, the thread count is the library's own choice.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
# A crossover extrapolated further than this factor beyond the sizes measured is not printed as a number.
EXTRAPOLATE_AT_MOST = 4


def _case_name(method: str, dim: int, n: int, k: int, threads: str, load: str, busy_procs: int) -> str:
    condition = f"busy{busy_procs}" if load == "busy" else load
    return f"{method}-d{dim}-n{n}-k{k}-t{threads}-{condition}"


def _index_spec(method: str, n: int):
    """exact; auto's IVF ("ivf"); or auto's IVF scanning another number of lists ("ivf-p<nprobe>", ``--nprobe``)."""
    from bitext_hf.mining.index import IndexSpec, auto_ivf_flat

    if method == "exact":
        return IndexSpec("exact")
    spec = auto_ivf_flat(n, n)
    return IndexSpec(spec.factory, int(method.removeprefix("ivf-p"))) if method.startswith("ivf-p") else spec


def child(method: str, dim: int, n: int, k: int, threads: str, out: Path) -> None:
    """One measured run: ``mine`` under the thread limit the pipeline applies; the result written to ``out``."""
    from bitext_hf.mining import mine
    from bitext_hf.threads import limit_threads

    x, y = make_embeddings(n, dim)
    spec = _index_spec(method, n)
    with limit_threads(None if threads == "default" else int(threads)) as limit:
        mine(x[:64], y[:64], k=k, device="cpu")  # warm-up outside the timing: imports, thread pools, numba kernel
        timings = Timings()
        logging.getLogger("bitext_hf.mining.index").addHandler(timings)
        logging.getLogger("bitext_hf.mining.index").setLevel(logging.INFO)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        pairs = mine(x, y, k=k, margin="ratio", mode="max", index=spec.factory, nprobe=spec.nprobe, device="cpu")
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        thread_count = limit.threads
    np.savez(out.with_suffix(".npz"), src=pairs.src_indices, tgt=pairs.tgt_indices, scores=pairs.scores)
    result = {"wall_s": wall, "cpu_s": cpu, "pairs": len(pairs), "index": str(spec), "thread_count": thread_count}
    result.update(timings.found, load_after=os.getloadavg()[0])
    out.with_suffix(".child.json").write_text(json.dumps(result))


def _busy_processes(count: int) -> list[subprocess.Popen]:
    """``count`` single-threaded Python spin loops (no memory, no I/O): competitors for the cores."""
    return [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL) for _ in range(count)
    ]


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
    for process in processes:
        process.wait()


def run_case(method: str, dim: int, n: int, threads: str, load: str, args) -> dict | None:
    """A run's result, run now unless kept (None when ``--reuse`` finds none). The JSON is written last, under its
    final name only when complete: a run interrupted before is run again on resume."""
    out = Path(args.workdir) / _case_name(method, dim, n, args.k, threads, load, args.busy_procs)
    if out.with_suffix(".json").exists():
        return json.loads(out.with_suffix(".json").read_text())
    if args.reuse:
        return None
    command = [sys.executable, __file__, "--child", method, "--dims", str(dim), "--sizes", str(n)]
    command += ["--k", str(args.k), "--threads", threads, "--workdir", args.workdir, "--out", str(out)]
    env = dict(os.environ)
    for name in THREAD_VARIABLES:
        if threads == "default":
            env.pop(name, None)
        else:
            env[name] = threads
    load_before = os.getloadavg()[0]
    busy = _busy_processes(args.busy_procs) if load == "busy" else []
    try:
        subprocess.run(command, check=True, env=env)
    finally:
        _stop(busy)
    result = json.loads(out.with_suffix(".child.json").read_text())
    result["load_before"] = load_before
    partial = out.with_suffix(".json.part")
    partial.write_text(json.dumps(result))
    os.replace(partial, out.with_suffix(".json"))
    out.with_suffix(".child.json").unlink()
    return result


def crossover(points: list[tuple[int, float]]) -> tuple[int | None, float | None, str]:
    """(smallest N with ratio < 1, N where log ratio crosses 0, how it was found) from (N, ratio ivf / exact)
    sorted by N: interpolated between the first bracketing sizes (ratio >= 1, then < 1), else extrapolated from
    the two sizes nearest the crossing (when the ratio falls with N)."""
    points = [(n, ratio) for n, ratio in points if ratio > 0]
    first_below = next((n for n, ratio in points if ratio < 1), None)
    for (n1, r1), (n2, r2) in itertools.pairwise(points):
        if r1 >= 1 > r2:
            return first_below, _log_log_root(n1, r1, n2, r2), "interpolated"
    if len(points) < 2:
        return first_below, None, "too few sizes"
    (n1, r1), (n2, r2) = points[:2] if first_below is not None else points[-2:]
    if r2 >= r1:
        return first_below, None, "ratio does not fall with N"
    root = _log_log_root(n1, r1, n2, r2)
    if not points[0][0] / EXTRAPOLATE_AT_MOST <= root <= points[-1][0] * EXTRAPOLATE_AT_MOST:
        return first_below, None, f"more than {EXTRAPOLATE_AT_MOST}x outside the grid"
    return first_below, root, "extrapolated"


def _log_log_root(n1: int, r1: float, n2: int, r2: float) -> float:
    slope = (math.log(r2) - math.log(r1)) / (math.log(n2) - math.log(n1))
    return math.exp(math.log(n1) - math.log(r1) / slope)


def _conditions(args):
    for load in args.load:
        for dim in args.dims:
            for threads in args.threads:
                yield dim, threads, load


def plot(curves: dict, path: str) -> None:
    """CPU ratio ivf / exact against N (log-log), one line per (d, threads, load), and the line at 1."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4.5), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    for number, ((dim, threads, load), points) in enumerate(curves.items()):
        if points:
            n, ratio = zip(*points)
            style = {"marker": "osD^v"[number % 5], "linestyle": "-" if load == "quiet" else "--"}
            axes.plot(n, ratio, label=f"d={dim}, threads={threads}, {load}", **style)
    axes.axhline(1.0, color="black", linewidth=1)
    axes.set(xscale="log", yscale="log", xlabel="N = M (sentences a side)", ylabel="CPU time, IVF / exact")
    axes.set_title("IVF-Flat (auto's index, forced) against the exact engine")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize="small")
    figure.savefig(path)
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 512, 768])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 10_000, 20_000, 40_000, 80_000], help="N = M")
    parser.add_argument(
        "--threads", nargs="+", default=["1", "default"], help="thread counts: integers, or 'default' (left unset)"
    )
    parser.add_argument("--load", nargs="+", choices=("quiet", "busy"), default=["quiet"])
    parser.add_argument("--busy_procs", type=int, default=4, help="CPU-burning processes beside each busy run")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument(
        "--nprobe",
        type=int,
        nargs="+",
        default=[],
        help="also run auto's IVF scanning this many lists (method ivf-p<nprobe>; not part of the crossover)",
    )
    parser.add_argument("--thresholds", type=float, nargs="+", default=[1.2], help="margin thresholds for 'kept'")
    parser.add_argument("--workdir", default="outputs/bench_index_crossover", help="results kept here (resumed)")
    parser.add_argument("--reuse", action="store_true", help="print the kept results only (missing ones skipped)")
    parser.add_argument("--plot", metavar="PNG", help="also draw the CPU ratio against N")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for threads in args.threads:
        if threads != "default" and not (threads.isdigit() and int(threads) >= 1):
            parser.error(f"--threads takes integers >= 1 or 'default', got {threads!r}")
    args.sizes = sorted(set(args.sizes))
    os.makedirs(args.workdir, exist_ok=True)
    if args.child:
        child(args.child, args.dims[0], args.sizes[0], args.k, args.threads[0], Path(args.out))
        return
    run(args)


def run(args) -> None:
    import faiss
    import torch

    from bitext_hf.mining.index import AUTO_NPROBE, AUTO_PROBED_SHARE, EXACT_MAX_PAIRS
    from bitext_hf.threads import usable_cpus

    print(
        f"# k={args.k}, margin=ratio, mode=max, float32; dims {args.dims}, sizes {args.sizes}, threads "
        f"{args.threads} (default = usable_cpus() = {usable_cpus()}), load {args.load}"
        + (f" ({args.busy_procs} busy processes)" if "busy" in args.load else "")
        + f"; {os.cpu_count()} cores, torch {torch.__version__}, faiss {faiss.__version__}; ivf = auto_ivf_flat(N, N), "
        f"nprobe {AUTO_NPROBE} and at least {AUTO_PROBED_SHARE:.4f} of the lists; EXACT_MAX_PAIRS {EXACT_MAX_PAIRS:.1e}; load average {os.getloadavg()[0]:.2f}"
    )
    header = (
        "| d | threads | load | N = M | N x N x d | method | index | wall s | CPU s | cores busy | CPU ivf/exact "
        "| train s | pairs | exact pairs kept | "
        + " | ".join(f">= {t} kept" for t in args.thresholds)
        + " | load avg before / after |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|", flush=True)
    curves: dict = {}
    for dim, threads, load in _conditions(args):
        curve = curves.setdefault((dim, threads, load), [])
        for n in args.sizes:
            methods = [*METHODS, *(f"ivf-p{nprobe}" for nprobe in args.nprobe)]
            results = {method: run_case(method, dim, n, threads, load, args) for method in methods}
            exact = results["exact"]
            if exact is not None and results["ivf"] is not None:
                curve.append((n, results["ivf"]["cpu_s"] / exact["cpu_s"]))
            _print_rows(dim, threads, load, n, results, args)
    print()
    _print_crossovers(curves, EXACT_MAX_PAIRS)
    if args.plot:
        plot(curves, args.plot)


def _print_rows(dim: int, threads: str, load: str, n: int, results: dict, args) -> None:
    exact = results["exact"]
    exact_pairs = exact_scored = None
    if exact is not None:
        name = _case_name("exact", dim, n, args.k, threads, load, args.busy_procs)
        exact_pairs, exact_scored = read_pairs_output(Path(args.workdir) / name)
    for method, result in results.items():
        if result is None:
            continue
        pairs, scored = read_pairs_output(
            Path(args.workdir) / _case_name(method, dim, n, args.k, threads, load, args.busy_procs)
        )
        ratio = "-" if exact is None else f"{result['cpu_s'] / exact['cpu_s']:.3f}"
        kept = [share(above(scored, t), above(exact_scored, t)) for t in args.thresholds]
        train = f"{result['train_s']:.1f}" if "train_s" in result else "-"
        label = "default" if threads == "default" else threads
        print(
            f"| {dim} | {label} ({result['thread_count']}) | {load} | {n:,} | {n * n * dim:.2e} | {method} "
            f"| {result['index']} | {result['wall_s']:.2f} | {result['cpu_s']:.2f} "
            f"| {result['cpu_s'] / max(result['wall_s'], 1e-9):.2f} | {ratio} | {train} | {result['pairs']:,} "
            f"| {share(pairs, exact_pairs)} | {' | '.join(kept)} "
            f"| {result['load_before']:.2f} / {result['load_after']:.2f} |",
            flush=True,
        )


def _print_crossovers(curves: dict, exact_max_pairs: float) -> None:
    print(
        "| d | threads | load | CPU ivf/exact by N | first N with IVF cheaper | crossover N | crossover N x N "
        "| auto's threshold (N at EXACT_MAX_PAIRS) |"
    )
    print("|---" * 8 + "|")
    for (dim, threads, load), points in curves.items():
        if not points:
            continue
        first, root, how = crossover(points)
        ratios = ", ".join(f"{n:,}: {ratio:.2f}" for n, ratio in points)
        at_root = how if root is None else f"{root:,.0f} ({how})"
        pairs = "-" if root is None else f"{root * root:.2e}"
        first_text = "none in the grid" if first is None else f"{first:,}"
        today = math.sqrt(exact_max_pairs)
        print(
            f"| {dim} | {threads} | {load} | {ratios} | {first_text} | {at_root} | {pairs} "
            f"| {today:,.0f} ({exact_max_pairs:.1e}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
