"""Local Ray with 1 and 2 workers against one process: encoding into shards and exact mining
(``bitext_hf.encoding.ray`` and ``bitext_hf.mining.distributed``).

Encoding: gettext sentences (``bitext_hf.data.gettext_pairs``, English and German messages of at least
``--min_words`` English words, a seeded sample) encoded by the default encoder (the embedded USE v3) into a shard
folder of ``--shard_size`` rows, the way ``bitext-hf encode --out FOLDER/`` does; (a) one process
(``write_shards``) with 1 and with 2 BLAS threads, (b) ``encode_shards_ray`` with 1 and 2 workers of one thread
each. Every run loads its encoder(s) itself, as the CLI would; the shard folders must be identical to (a)'s.

Mining: the planted data of ``bench_mining.make_embeddings`` (d = ``--dim``), ``--n_src`` x ``--n_tgt`` (the
target side in whole column blocks of 8,192, so that 2 workers get equal halves), k=4, ratio margin, max mode;
(a) ``mine_shards`` in one process with 1 and 2 torch threads, (b) ``mine_ray`` with 1 and 2 workers; pairs and
scores must be identical.

Ray is started once beforehand (its start-up time is printed on its own line), so the times are those of the work.
Wall time depends on other jobs sharing the machine: the load average is printed before and after.

    python benchmarks/bench_distributed.py
    python benchmarks/bench_distributed.py --sentences 4000 --shard_size 250 --n_src 20000 --n_tgt 32768
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import tempfile
import time

import numpy as np
from bench_encoder import gettext_sentences  # the same seeded gettext sample as the encoder benchmark
from bench_mining import make_embeddings

# (name, threads of one process or of each Ray worker, Ray workers or None for one process)
RUNS = (
    ("one process, 1 thread", 1, None),
    ("one process, 2 threads", 2, None),
    ("Ray, 1 worker", 1, 1),
    ("Ray, 2 workers", 1, 2),
)


def load_use(threads: int, batch_size: int = 128):
    """The default encoder with ``threads`` BLAS threads, as an ``encode`` callable (pickled to Ray workers)."""
    from bitext_hf.encoders import load_encoder

    encoder = load_encoder(threads=threads)
    return lambda texts: encoder.encode(texts, batch_size=batch_size, show_progress=False)


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def _same_folders(a: str, b: str) -> bool:
    names = sorted(os.listdir(a))
    return names == sorted(os.listdir(b)) and all(filecmp.cmp(f"{a}/{n}", f"{b}/{n}", shallow=False) for n in names)


def bench_encode(args, work: str) -> None:
    import functools

    from bitext_hf.encoding.ray import encode_shards_ray
    from bitext_hf.encoding.shards import open_shards, write_shards

    texts = gettext_sentences(args.sentences, args.min_words)
    settings = dict(encoder="use-multilingual-v3", shard_size=args.shard_size)
    mean_chars = sum(map(len, texts)) / len(texts)
    print(f"\n## encode: {len(texts):,} gettext sentences ({mean_chars:.0f} chars on average)")
    print(f"shards of {args.shard_size}; load average {_load()}\n")
    # Warm-up, untimed: the modules imported in this process and in both Ray workers (each timed run still loads its
    # encoder, once per process or per worker).
    start = time.perf_counter()
    load_use(1)(texts[:8])
    warm = os.path.join(work, "warm-up")
    encode_shards_ray(warm, texts[:16], functools.partial(load_use, 1), workers=2, encoder="x", shard_size=8)
    shutil.rmtree(warm)
    print(f"(warm-up of this process and the Ray workers, untimed below: {time.perf_counter() - start:.1f} s)\n")
    print("| run | wall s | sentences/s | same shards as one process |")
    print("|---|---:|---:|---|")
    reference = None
    for name, threads, workers in RUNS:
        folder = os.path.join(work, f"enc-{threads}-{workers}")
        start = time.perf_counter()
        if workers is None:
            write_shards(folder, texts, load_use(threads), **settings)
        else:
            encode_shards_ray(folder, texts, functools.partial(load_use, threads), workers=workers, **settings)
        wall = time.perf_counter() - start
        reference = reference or folder
        if folder == reference:
            same = "reference"
        elif _same_folders(folder, reference):
            same = "yes, byte for byte"
        else:  # more BLAS threads sum in another order: the encoder's own last bits, not the sharding
            diff = np.abs(np.asarray(open_shards(folder)) - np.asarray(open_shards(reference))).max()
            same = f"no: max abs difference {diff:.1e}"
        print(f"| {name} | {wall:.1f} | {len(texts) / wall:,.0f} | {same} |", flush=True)


def bench_mine(args) -> None:
    import torch

    from bitext_hf.mining.distributed import mine_ray
    from bitext_hf.mining.sharded import mine_shards

    # The planted data of bench_mining (noisy translations at cosine ~0.78, unshuffled: the first half of the
    # sources are translated), so this mines the same kind of pairs as the other mining benchmarks.
    x, y = make_embeddings(args.n_src, args.dim, n_tgt=args.n_tgt, shuffle=False)
    print(f"\n## mine: {args.n_src:,} x {args.n_tgt:,}, d={args.dim}, k=4, ratio, max; load average {_load()}\n")
    # Warm-up, untimed: the numba kernel loaded in this process and in the Ray workers (two column blocks each).
    start = time.perf_counter()
    mine_shards(x[:64], y[: 2 * 8192]), mine_ray(x[:64], y[: 2 * 8192], workers=2)
    print(f"(warm-up of this process and the Ray workers, untimed below: {time.perf_counter() - start:.1f} s)\n")
    print("| run | wall s | same pairs and scores as one process |")
    print("|---|---:|---|")
    reference = None
    for name, threads, workers in RUNS:
        torch.set_num_threads(threads)
        start = time.perf_counter()
        pairs = mine_shards(x, y) if workers is None else mine_ray(x, y, workers=workers)
        wall = time.perf_counter() - start
        if reference is None:
            reference, same = pairs, "reference"
        else:
            same = all(
                np.array_equal(getattr(pairs, f), getattr(reference, f))
                for f in ("src_indices", "tgt_indices", "scores")
            )
            same = f"yes ({len(pairs):,} pairs)" if same else "NO"
        print(f"| {name} | {wall:.1f} | {same} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--min_words", type=int, default=8)
    parser.add_argument("--shard_size", type=int, default=250)
    parser.add_argument("--n_src", type=int, default=10000)
    parser.add_argument("--n_tgt", type=int, default=32768)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--skip", choices=("encode", "mine"), default=None)
    args = parser.parse_args()

    import ray

    start = time.perf_counter()
    # Workers of one thread each: Ray sets OMP_NUM_THREADS=1 for one-CPU tasks; the USE loader asks for 1 thread.
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    print(
        f"# Ray {ray.__version__}, local instance of 2 CPUs started in {time.perf_counter() - start:.1f} s; "
        f"{os.cpu_count()} cores; load average {_load()}"
    )
    work = tempfile.mkdtemp(prefix="bench-distributed-")
    try:
        if args.skip != "encode":
            bench_encode(args, work)
        if args.skip != "mine":
            bench_mine(args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        ray.shutdown()
    print(f"\n# load average after the runs: {_load()}")


if __name__ == "__main__":
    main()
