"""Approximate mining on Ray from shard folders (``bitext_hf.mining.distributed_index``), 1 and 2 local workers,
and the 100M x 100M plan that its per-task rates give.

Data: the planted embeddings of ``bench_mining.make_embeddings`` (N x N, unshuffled: source i < N/2 is translated by
target i), drawn chunk by chunk from the same random streams (checked against ``make_embeddings`` at a small size
first), so no more than one file shard is ever in memory, and written by the package's own shard writer
(``write_shards``, the folder ``bitext-hf encode --out FOLDER/`` writes) into ``--workdir``, reused when present.

Each worker count runs in a fresh process: ``open_shards`` on both folders (memory-mapped, checked and hashed;
timed apart), a local Ray of that many CPUs (started before the timing, then warmed up on a small slice), then
``knn_ray_index`` (the search of ``mine --distributed ray --index ...``: the index trained once in the driver,
filled shard by shard, each tile assigned to its lists once, searched tile by shard) and ``retrieve`` (k=4, ratio
margin, max mode), timed. Measured:
wall time; CPU time of the driver, of the Ray worker processes and of Ray's own services (psutil, sampled every
``--sample_s`` with a last sample at the end); the peak memory of the driver (anonymous memory sampled, since the
RSS counts the page cache of the memory-mapped shards) and of each worker (RSS, and RSS less shared pages, i.e.
less the object store's mapped objects); the tasks of each kind, and each kind's mean seconds from Ray's timeline.
Outside the timing: the share of the planted pairs mined and recall@4 of the forward neighbours of 2,000 sampled
sources against exact search (``faiss.knn`` over the targets, block by block).

The plan: the same index, tile and shard sizes at ``--plan_n`` a side; the per-task seconds measured here times the
task counts there; the driver's serial work: its CPU seconds per task of its submit-and-wait loop (measured on
empty tasks after the run) times the task counts there, plus the rest of its CPU time (rows read and put,
candidates fetched, retrieval) scaled by the rows; and the memory each part holds.

    OMP_NUM_THREADS=1 python benchmarks/bench_ray_index.py --n 1000000 --dim 256 --nprobe 64 --workers 1 2
    OMP_NUM_THREADS=1 python benchmarks/bench_ray_index.py --n 20000 --dim 64 --index ivf --tile_rows 5000 \
        --shard_rows 5000 --workers 1 2
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
from bench_mining import make_embeddings, rss_mb

K = 4
MB = 1 << 20


# ----------------------------------------------------------------------------------------------------- data


def planted_chunks(n: int, dim: int, side: str, seed: int = 0, rows: int = 16384):
    """The rows of ``make_embeddings(n, dim, seed, shuffle=False)``'s sources (``side="src"``) or targets, ``rows``
    at a time: the same draws (a second generator replays the sources' stream for the translated targets)."""
    sources, targets = np.random.default_rng(seed), np.random.default_rng(seed)
    half = n // 2
    for start in range(0, n, rows) if side == "tgt" else ():  # the targets are drawn after all the sources
        targets.standard_normal((min(rows, n - start), dim), dtype=np.float32)
    for start in range(0, n, rows):
        count = min(rows, n - start)
        if side == "src" or start < half:
            x = sources.standard_normal((count, dim), dtype=np.float32)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
        if side == "src":
            yield x
            continue
        y = targets.standard_normal((count, dim), dtype=np.float32)
        translated = max(0, min(count, half - start))
        y[:translated] = x[:translated] + 0.8 * y[:translated] / np.sqrt(dim)  # make_embeddings' expression
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        yield y


def check_generator() -> None:
    x, y = make_embeddings(1000, 32, shuffle=False)
    for side, whole in (("src", x), ("tgt", y)):
        if not np.array_equal(np.concatenate(list(planted_chunks(1000, 32, side, rows=96))), whole):
            raise SystemExit(f"planted_chunks({side!r}) differs from make_embeddings: fix the generator")


def write_side(folder: Path, n: int, dim: int, side: str, file_rows: int) -> float:
    """A shard folder of one side, by ``write_shards`` (its encode callback hands out the next rows in order)."""
    from bitext_hf.encoding.shards import MANIFEST, write_shards

    if (folder / MANIFEST).exists():
        return 0.0
    shutil.rmtree(folder, ignore_errors=True)  # an unfinished folder: the generator restarts from row 0
    folder.parent.mkdir(parents=True, exist_ok=True)
    chunks, pending = planted_chunks(n, dim, side), np.empty((0, dim), dtype=np.float32)

    def next_rows(texts: list[str]) -> np.ndarray:
        nonlocal pending
        while pending.shape[0] < len(texts):
            pending = np.concatenate([pending, next(chunks)])
        rows, pending = pending[: len(texts)], pending[len(texts) :]
        return rows

    start = time.perf_counter()
    texts = [str(i) for i in range(n)]
    write_shards(folder, texts, next_rows, encoder=f"planted-{side}-seed0", shard_size=file_rows)
    return time.perf_counter() - start


def data_folders(args) -> tuple[Path, Path]:
    base = Path(args.workdir) / f"planted-n{args.n}-d{args.dim}"
    return base / "src", base / "tgt"


# ----------------------------------------------------------------------------------------------------- child


class _Monitor(threading.Thread):
    """Every ``interval`` s: the driver's anonymous memory, and RSS / private memory / CPU of each Ray process."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        import psutil

        self.psutil, self.interval, self.stop = psutil, interval, threading.Event()
        self.me = psutil.Process()
        self.driver_anon = rss_mb("RssAnon")
        self.workers: dict[int, dict] = {}  # pid -> peak rss / private MB, cpu s (last sample)
        self.services: dict[int, float] = {}  # pid -> cpu s
        self.cpu_at_start = self.sample()

    def sample(self) -> dict[int, float]:
        cpu = {}
        self.driver_anon = max(self.driver_anon, rss_mb("RssAnon"))
        for process in self.me.children(recursive=True):
            try:
                with process.oneshot():
                    title, times, memory = process.cmdline()[:1], process.cpu_times(), process.memory_info()
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue
            cpu[process.pid] = times.user + times.system
            worker = bool(title) and title[0].startswith("ray::") and not title[0].endswith("Agent")
            if worker:
                seen = self.workers.setdefault(process.pid, {"rss_mb": 0.0, "private_mb": 0.0})
                seen.setdefault("start_private_mb", (memory.rss - memory.shared) / MB)  # imports, warm-up
                seen["rss_mb"] = max(seen["rss_mb"], memory.rss / MB)
                seen["private_mb"] = max(seen["private_mb"], (memory.rss - memory.shared) / MB)
                seen["cpu_s"] = cpu[process.pid]
            else:
                self.services[process.pid] = cpu[process.pid]
        return cpu

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.sample()

    def finish(self) -> dict:
        self.stop.set()
        self.join()
        self.sample()
        start = self.cpu_at_start
        worker_cpu = {pid: seen["cpu_s"] - start.get(pid, 0.0) for pid, seen in self.workers.items()}
        return {
            "driver_peak_anon_mb": self.driver_anon,
            "workers_cpu_s": sum(worker_cpu.values()),
            "services_cpu_s": sum(cpu - start.get(pid, 0.0) for pid, cpu in self.services.items()),
            # workers that ran something in the timed run, largest peak first
            "worker_peaks_mb": sorted(
                ((seen["rss_mb"], seen["private_mb"]) for pid, seen in self.workers.items() if worker_cpu[pid] > 0.5),
                reverse=True,
            ),
            "worker_start_private_mb": max((seen["start_private_mb"] for seen in self.workers.values()), default=0),
        }


class _TrainTime(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.train_s = None

    def emit(self, record: logging.LogRecord) -> None:
        found = re.search(r"trained in ([0-9.]+)s", record.getMessage())
        self.train_s = float(found[1]) if found else self.train_s


def task_seconds(ray, since_us: float) -> dict[str, list[float]]:
    """Seconds of each task (arguments read, run, result stored) by function name, from Ray's timeline."""
    found: dict[str, list[float]] = {}
    for event in ray.timeline():
        if str(event.get("cat", "")).startswith("task::") and event.get("ts", 0) >= since_us:
            found.setdefault(event["name"].rsplit(".", 1)[-1], []).append(event["dur"] / 1e6)
    return found


def exact_recall(src, tgt, forward: np.ndarray, queries: int, block: int = 131072) -> float:
    """recall@k of ``forward`` on ``queries`` sources sampled as ``recall_at_k(seed=1)`` samples them, against
    ``faiss.knn`` over the targets, one block of targets at a time (never a whole side in memory)."""
    import faiss

    rows = np.sort(np.random.default_rng(1).choice(src.shape[0], size=min(queries, src.shape[0]), replace=False))
    sample = np.ascontiguousarray(src[rows])
    sims, found = [], []
    for start in range(0, tgt.shape[0], block):
        s, i = faiss.knn(
            sample, np.ascontiguousarray(tgt[start : start + block]), K, metric=faiss.METRIC_INNER_PRODUCT
        )
        sims.append(s), found.append(i + start)
    sims, found = np.concatenate(sims, axis=1), np.concatenate(found, axis=1)
    exact = np.take_along_axis(found, np.argsort(-sims, axis=1, kind="stable")[:, :K], axis=1)
    hits = sum(len(set(a) & set(b)) for a, b in zip(exact.tolist(), forward[rows].tolist()))
    return hits / exact.size


def resolve(args, n: int, dim: int):
    """The IndexSpec searched: "ivf" is auto's IVF-Flat rule at any size (auto is exact up to EXACT_MAX_PAIRS)."""
    from bitext_hf.mining.index import auto_ivf_flat, resolve_index

    if args.index == "ivf":
        spec = auto_ivf_flat(n, n)
        return type(spec)(spec.factory, args.nprobe or spec.nprobe)
    return resolve_index(args.index, n, n, dim, nprobe=args.nprobe)


def filled_bytes_per_row(spec, dim: int) -> tuple[int, int]:
    """(bytes per stored vector with its id, fixed bytes: the coarse centroids) of ``spec``'s filled index."""
    import faiss

    from bitext_hf.mining.index import build_factory_index, ivf_of

    index = build_factory_index(dim, spec.factory)
    ivf = ivf_of(index)
    if ivf is not None:
        return int(ivf.code_size) + 8, int(ivf.nlist) * int(ivf.d) * 4
    return int(getattr(faiss.downcast_index(index), "code_size", dim * 4)), 0


def list_bytes_per_query_probe(spec, dim: int) -> int:
    """Bytes the object store holds per query and probed list for a tile's lists: an int32 list id, and a float32
    centroid similarity where FAISS's own search (codes of residuals) needs it; 0 without inverted lists."""
    from bitext_hf.mining.distributed_index import scanned_list_by_list
    from bitext_hf.mining.index import build_factory_index, ivf_of

    index = build_factory_index(dim, spec.factory)  # kept: the IVF part lives inside it
    ivf = ivf_of(index)
    if ivf is None:
        return 0
    return 4 if scanned_list_by_list(ivf) else 8


def driver_seconds_per_task(ray, workers: int, count: int = 3000) -> float:
    """The driver's CPU seconds per task of the library's own submit-and-wait loop (``TaskSlots``), on tasks that do
    nothing and return as a search task does (two objects, the driver fetching the small one): the part of the
    driver's work that grows with the number of tasks, not with the rows."""
    from bitext_hf.mining.distributed_index import TaskSlots

    nothing = ray.remote(lambda: (None, (0, 0))).options(num_cpus=1, num_returns=2)
    list(TaskSlots(ray, workers, "warm-up").run((i, lambda: nothing.remote()[1]) for i in range(100)))
    cpu0 = time.process_time()
    list(TaskSlots(ray, workers, "measure").run((i, lambda: nothing.remote()[1]) for i in range(count)))
    return (time.process_time() - cpu0) / count


def child(args, workers: int, out: Path) -> None:
    import faiss
    import ray

    from bitext_hf.encoding.shards import open_shards
    from bitext_hf.mining.distributed_index import knn_ray_index
    from bitext_hf.mining.index import IndexSpec, candidate_count
    from bitext_hf.mining.retrieval import retrieve

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    src, tgt = (open_shards(folder) for folder in data_folders(args))
    open_s = time.perf_counter() - start
    spec = resolve(args, src.shape[0], src.shape[1])
    if spec.exact:
        raise SystemExit(f"index {args.index!r} is exact search at {args.n} x {args.n} x {args.dim}: use --index ivf")
    start = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    ray_start_s = time.perf_counter() - start
    # Warm-up, untimed: FAISS and bitext_hf imported in the workers (one small tile per worker).
    warm = np.ascontiguousarray(src[: 1024 * workers])
    knn_ray_index(warm, warm, K, index=IndexSpec("IVF16,Flat", 4), workers=workers, tile_rows=1024)
    trained = _TrainTime()
    logging.getLogger("bitext_hf").addHandler(trained)
    logging.getLogger("bitext_hf").setLevel(logging.INFO)
    tasks: Counter = Counter()
    rows: dict[str, list[int]] = {"fill": [], "search": []}

    def on_task(kind: str, query_rows: int, database_rows: int) -> None:
        tasks[kind] += 1
        if kind in rows:
            rows[kind].append(query_rows if kind == "search" else database_rows)

    Path("/proc/self/clear_refs").write_text("5")  # VmHWM restarts here: the run's own peak
    monitor = _Monitor(args.sample_s)
    monitor.start()
    since_us, cpu0, wall0 = time.time() * 1e6, time.process_time(), time.perf_counter()
    knn = knn_ray_index(
        src, tgt, K, index=spec, workers=workers, tile_rows=args.tile_rows, shard_rows=args.shard_rows, on_task=on_task
    )
    pairs = retrieve(knn, margin="ratio", mode="max")
    wall, driver_cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    measured = monitor.finish()
    driver_peak_rss = rss_mb("VmHWM")
    seconds = task_seconds(ray, since_us)
    submit_s = driver_seconds_per_task(ray, workers)
    ray.shutdown()
    load_after = os.getloadavg()[0]
    half = args.n // 2
    planted = int(np.count_nonzero((pairs.src_indices == pairs.tgt_indices) & (pairs.src_indices < half)))
    start = time.perf_counter()
    recall = exact_recall(src, tgt, knn.forward_indices, args.recall_queries)
    per_row, fixed = filled_bytes_per_row(spec, args.dim)
    mean_tile = int(np.mean(rows["search"])) if rows["search"] else args.tile_rows
    result = {
        "workers": workers,
        "n": args.n,
        "dim": args.dim,
        "index": str(spec),
        "width": candidate_count(spec, K, tgt),
        "filled_bytes_per_row": per_row,
        "filled_fixed_bytes": fixed,
        "tile_rows": args.tile_rows,
        "shard_rows": args.shard_rows,
        "mean_tile_rows": mean_tile,
        "nprobe": spec.nprobe or 1,
        "list_bytes_per_probe": list_bytes_per_query_probe(spec, args.dim),
        "mean_shard_rows": float(np.mean(rows["fill"])) if rows["fill"] else 0.0,
        "open_s": open_s,
        "ray_start_s": ray_start_s,
        "wall_s": wall,
        "train_s": trained.train_s,
        "driver_cpu_s": driver_cpu,
        "driver_s_per_task": submit_s,
        "driver_peak_rss_mb": driver_peak_rss,
        "tasks": dict(tasks),
        "task_mean_s": {name: float(np.mean(values)) for name, values in seconds.items()},
        "task_total_s": {name: float(np.sum(values)) for name, values in seconds.items()},
        "pairs": len(pairs),
        "planted_kept": planted / max(1, half),
        "recall": recall,
        "recall_s": time.perf_counter() - start,
        "load": [load_before, load_after],
        "threads": faiss.omp_get_max_threads(),
        "ray": ray.__version__,
        "faiss": faiss.__version__,
    }
    result.update(measured)
    out.write_text(json.dumps(result, indent=1))


# ----------------------------------------------------------------------------------------------------- report


def result_path(args, workers: int) -> Path:
    index = "".join(c if c.isalnum() else "_" for c in args.index + (f"-np{args.nprobe}" if args.nprobe else ""))
    name = f"ray-index-n{args.n}-d{args.dim}-{index}-t{args.tile_rows}-s{args.shard_rows}-w{workers}.json"
    return Path(args.workdir) / name


def _gb(value: float) -> str:
    return f"{value / (1 << 30):,.1f} GB" if value >= 1 << 30 else f"{value / MB:,.0f} MB"


def print_plan(result: dict, args) -> None:
    """The ``--plan_n`` x ``--plan_n`` run with the measured index, tile and shard rows, from one run's rates."""
    n, d, width = args.plan_n, result["dim"], result["width"]
    tile, shard = result["mean_tile_rows"], result["mean_shard_rows"]
    shards, tiles = math.ceil(n / shard), math.ceil(n / tile)
    fill_s, search_s = result["task_mean_s"].get("_fill_shard"), result["task_mean_s"].get("_search_tile")
    if fill_s is None or search_s is None:
        print("\n(no task seconds in Ray's timeline: no plan)")
        return
    train_s = result["train_s"] or 0.0
    assign_s = result["task_mean_s"].get("_assign_tile", 0.0)  # none without inverted lists, or before they existed
    fills, assigns, searches = 2 * shards, (2 * tiles if assign_s else 0), 2 * tiles * shards
    task_s = fills * fill_s + assigns * assign_s + searches * search_s
    # The driver's own work besides training, serial: submitting and waiting for each task (measured apart, per
    # task) and the rest (putting each tile's and shard's name and row norms in the object store, the tasks reading
    # the rows from the shard folders themselves; fetching each tile's candidates once; retrieval), which grows with
    # the rows.
    per_task = result.get("driver_s_per_task", 0.0)
    measured_tasks = sum(result["tasks"].values())
    rows_s = max(0.0, result["driver_cpu_s"] - train_s - per_task * measured_tasks) * n / result["n"]
    driver_s = rows_s + per_task * (fills + assigns + searches)
    filled = shard * result["filled_bytes_per_row"] + result["filled_fixed_bytes"]
    tile_b, shard_b = tile * d * 4, shard * d * 4
    worker_b = tile_b + shard_b + 2 * filled + tile * width * 20  # the filled index read, and deserialized
    lists_b = n * result.get("nprobe", 0) * result.get("list_bytes_per_probe", 0)  # every tile's lists stay too
    candidates_b = n * width * 16  # every tile's candidates so far (approximate and exact similarity, index)
    names_b = n * 8  # each tile's name holds its rows' float64 norms; the rows stay in the shard folders
    store_b = names_b + lists_b + candidates_b + 2 * filled
    driver_b = tile * width * 16 + 2 * n * K * 12
    print(
        f"\n### {n:,} x {n:,} plan (from the {result['workers']}-worker run: {result['index']}, d={d}, tiles of "
        f"{tile:,.0f} rows, shards of {shard:,.0f})\n"
    )
    print(
        f"{shards:,} shards and {tiles:,} tiles a side: {fills:,} fill tasks x {fill_s:.2f} s + {assigns:,} "
        f"assignment tasks (one a tile) x {assign_s:.2f} s + {searches:,} search tasks (tile x shard) x "
        f"{search_s:.2f} s = **{task_s:,.0f} task-seconds ({task_s / 3600:,.0f} h)**, plus "
        f"training in the driver ({train_s:.0f} s measured; the same index trains on the same sample size) and the "
        f"driver's own work, serial: {per_task * 1e3:.2f} ms to submit and collect a task (measured on empty tasks) "
        f"and {rows_s / 3600:,.1f} h for the rows (names put, candidates fetched once a tile, retrieval; the run's "
        f"other driver CPU, scaled by the rows), {driver_s / 3600:,.1f} h in all."
    )
    for workers in args.plan_workers:
        wall = train_s + max(task_s / workers, driver_s)
        print(f"- {workers} workers: about {wall / 3600:,.1f} h wall (tasks {task_s / workers / 3600:,.1f} h each)")
    print(
        f"\nMemory: each worker about {_gb(worker_b)} (a tile {_gb(tile_b)}, a shard's rows {_gb(shard_b)}, its filled "
        f"index {_gb(filled)} twice: the object store's copy and the deserialized one; above its imports, "
        f"{result['worker_start_private_mb']:,.0f} MB private here; measured peak here "
        f"{max((p[0] for p in result['worker_peaks_mb']), default=0):,.0f} MB RSS); the object store about "
        f"{_gb(store_b)} per direction (every tile's name with its rows' norms, {_gb(names_b)}, its lists, "
        f"{_gb(lists_b)}, and its candidates so far, {_gb(candidates_b)}, stay until the direction ends, plus two "
        f"shards' filled indexes; the rows themselves are read by the tasks from the shard folders, seen by every "
        f"node at the same path); the driver about {_gb(driver_b)} (one tile's candidates and both "
        f"neighbour lists). With auto's rule at this size the index "
        f"would differ (more lists, PQ beyond 8 GiB a side): a tile's assignment task costs more with more lists "
        f"(once per tile, not per shard); these figures hold for the index measured."
    )


def print_table(results: list[dict], args) -> None:
    first = results[0]
    loads = [value for result in results for value in result["load"]]
    print(
        f"# Ray {first['ray']}, faiss {first['faiss']} ({first['threads']} thread(s) in the driver, 1 per task); "
        f"{os.cpu_count()} cores; N = M = {first['n']:,}, d = {first['dim']}, index {first['index']}, k={K}, ratio, "
        f"max; tiles of {args.tile_rows:,} rows, shards of {args.shard_rows:,}; load average {min(loads):.1f}-"
        f"{max(loads):.1f} (before / after each run)\n"
    )
    header = (
        "| workers | wall s | train s | CPU s driver | CPU s workers | CPU s Ray services | driver peak MB anon / RSS "
        "| each worker peak MB RSS / private | shards x tiles a direction | tasks fill / search / exact "
        "| s per fill | s per tile x shard | pairs | planted kept | recall@4 | load before / after |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for r in results:
        tasks, means = r["tasks"], r["task_mean_s"]
        fills, searches = tasks.get("fill", 0), tasks.get("search", 0)
        peaks = ", ".join(f"{rss:,.0f} / {private:,.0f}" for rss, private in r["worker_peaks_mb"])
        print(
            f"| {r['workers']} | {r['wall_s']:.1f} | {r['train_s'] or 0:.1f} | {r['driver_cpu_s']:.1f} "
            f"| {r['workers_cpu_s']:.1f} | {r['services_cpu_s']:.1f} | {r['driver_peak_anon_mb']:,.0f} / "
            f"{r['driver_peak_rss_mb']:,.0f} | {peaks} | {fills // 2} x {searches // max(1, fills)} "
            f"| {fills} / {searches} / {tasks.get('exact', 0)} | {means.get('_fill_shard', float('nan')):.2f} "
            f"| {means.get('_search_tile', float('nan')):.2f} | {r['pairs']:,} | {r['planted_kept']:.2%} "
            f"| {r['recall']:.4f} | {r['load'][0]:.1f} / {r['load'][1]:.1f} |"
        )
    print(
        f"\n(worker private memory after the imports and warm-up: {first['worker_start_private_mb']:,.0f} MB; "
        f"outside the timing: opening both shard folders {first['open_s']:.1f} s, Ray start {first['ray_start_s']:.1f}"
        f" s, recall@4 on {args.recall_queries:,} sources {first['recall_s']:.1f} s)"
    )
    print_plan(min(results, key=lambda r: r["workers"]), args)  # the fewest workers: the least contention


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=lambda v: int(float(v)), default=1_000_000, help="N = M")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--index", default="auto", help="auto, ivf (auto's IVF-Flat rule at any size) or a factory")
    parser.add_argument("--nprobe", type=int, default=None)
    parser.add_argument("--tile_rows", type=int, default=None, help="default: the library's DEFAULT_TILE_ROWS")
    parser.add_argument("--shard_rows", type=int, default=None, help="default: the library's DEFAULT_SHARD_ROWS")
    parser.add_argument("--file_rows", type=int, default=262_144, help="rows per .npy file of the shard folders")
    parser.add_argument("--recall_queries", type=int, default=2000)
    parser.add_argument("--sample_s", type=float, default=0.5, help="seconds between memory / CPU samples")
    parser.add_argument("--plan_n", type=lambda v: int(float(v)), default=100_000_000)
    parser.add_argument("--plan_workers", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--workdir", default="/tmp/bench_ray_index", help="shard folders and results")
    parser.add_argument("--reuse", action="store_true", help="print saved results only (missing ones skipped)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from bitext_hf.mining.distributed_index import DEFAULT_SHARD_ROWS, DEFAULT_TILE_ROWS

    args.tile_rows, args.shard_rows = args.tile_rows or DEFAULT_TILE_ROWS, args.shard_rows or DEFAULT_SHARD_ROWS
    if args.child:
        child(args, args.child, result_path(args, args.child))
        return
    os.makedirs(args.workdir, exist_ok=True)
    if not args.reuse:
        check_generator()
        for folder, side in zip(data_folders(args), ("src", "tgt")):
            if took := write_side(folder, args.n, args.dim, side, args.file_rows):
                print(f"wrote {folder} ({args.n:,} x {args.dim}) in {took:.1f} s", flush=True)
    results = []
    for workers in args.workers:
        out = result_path(args, workers)
        if not args.reuse:
            command = [sys.executable, __file__, *sys.argv[1:], "--child", str(workers)]
            subprocess.run(command, check=True)
        if out.exists():
            results.append(json.loads(out.read_text()))
    if results:
        print_table(results, args)


if __name__ == "__main__":
    main()
