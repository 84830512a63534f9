"""Throughput of the default encoder (the embedded USE v3, ``load_encoder()``) in sentences per second.

Two corpora, each encoded the way the CLI encodes (``encoder.encode(texts, batch_size=128)``, length-sorted
batches), on 1 and on 2 BLAS threads:

* ``demo``: the bundled demo's short interface messages (``bitext_hf/demo/en.txt`` and ``de.txt``, 320 Django
  messages), repeated in order up to ``--demo_sentences``;
* ``gettext``: longer real sentences, English and German gettext messages of at least ``--min_words`` English words
  from the catalogs installed on this machine (``bitext_hf.data.gettext_pairs``), a seeded sample of
  ``--gettext_sentences``.

Each condition runs once to warm up (the weights load lazily) and then ``--repeats`` times; the table gives the
best and the median run in sentences per wall-clock second, and sentences per CPU-second of this process (user +
system, all threads), which depends much less on other work sharing the machine. The load average before the runs
is printed in the header: compare numbers only between runs on an equally quiet machine.

    python benchmarks/bench_encoder.py
    python benchmarks/bench_encoder.py --threads 1 2 --repeats 5 --demo_sentences 8000
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DEMO = Path(__file__).resolve().parents[1] / "bitext_hf" / "demo"
CLI_BATCH_SIZE = 128  # the default of the CLI's --batch-size


def demo_sentences(count: int) -> list[str]:
    lines = [
        line.strip()
        for name in ("en.txt", "de.txt")
        for line in (DEMO / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return [lines[i % len(lines)] for i in range(count)]


def gettext_sentences(count: int, min_words: int, seed: int = 0) -> list[str]:
    from bitext_hf.data import gettext_pairs

    sentences = [sentence for pair in gettext_pairs("de", min_words=min_words) for sentence in pair]
    if len(sentences) < count:
        raise SystemExit(f"only {len(sentences)} gettext sentences of >= {min_words} words here, asked for {count}")
    rng = np.random.default_rng(seed)
    return [sentences[i] for i in rng.choice(len(sentences), size=count, replace=False)]


def measure(encoder, sentences: Sequence[str], batch_size: int, threads: int, repeats: int) -> dict[str, float]:
    """Best and median sentences/s over ``repeats`` runs, wall clock and CPU time, after one warm-up run."""
    from threadpoolctl import threadpool_info, threadpool_limits

    encoder.encode(sentences[:batch_size], batch_size=batch_size)  # loads the weights
    walls, cpus = [], []
    with threadpool_limits(limits=threads, user_api="blas"):  # USE limits BLAS itself too; this makes it visible
        blas_threads = max(info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas")
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            embeddings = encoder.encode(sentences, batch_size=batch_size)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    assert embeddings.shape == (len(sentences), encoder.dim)
    n = len(sentences)
    return {
        "blas_threads": blas_threads,
        "best": n / min(walls),
        "median": n / statistics.median(walls),
        "per_cpu_second": n / statistics.median(cpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo_sentences", type=int, default=4000, help="demo messages, repeated (default 4000)")
    parser.add_argument("--gettext_sentences", type=int, default=2000, help="gettext sentences (default 2000)")
    parser.add_argument("--min_words", type=int, default=8, help="shortest gettext message kept, in English words")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch_size", type=int, default=CLI_BATCH_SIZE)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from bitext_hf.encoders import DEFAULT_ENCODER, load_encoder

    corpora = {
        "demo": demo_sentences(args.demo_sentences),
        "gettext": gettext_sentences(args.gettext_sentences, args.min_words),
    }
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {DEFAULT_ENCODER} via load_encoder(); batch {args.batch_size}; best/median of {args.repeats} runs; "
        f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}; numpy {np.__version__}; "
        f"load average {load:.1f}"
    )
    print()
    print(
        "| corpus | sentences | mean chars | threads | best sentences/s | median sentences/s "
        "| sentences per CPU-second |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for threads in args.threads:
        encoder = load_encoder(threads=threads)  # a fresh encoder per thread count: nothing carried over
        for name, sentences in corpora.items():
            result = measure(encoder, sentences, args.batch_size, threads, args.repeats)
            mean_chars = sum(map(len, sentences)) / len(sentences)
            print(
                f"| {name} | {len(sentences):,} | {mean_chars:.0f} | {result['blas_threads']} "
                f"| {result['best']:,.0f} | {result['median']:,.0f} | {result['per_cpu_second']:,.0f} |",
                flush=True,
            )
    print(f"\n# load average after the runs: {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "")


if __name__ == "__main__":
    main()
