"""Mining from shard folders (memory-mapped, a block at a time) against mining arrays held in memory.

The same random L2-normalized embeddings (the first half of the targets are noisy translations of sources) are
saved once as two whole ``.npy`` files and once as shard folders (``bitext_hf.encoding.shards.write_shards``). Each
method runs in a fresh subprocess so that its peak memory (VmHWM, reset after the imports and the warm-up) is its
own, inputs included (above the memory of the imports; anonymous memory sampled every 10 ms, since the RSS peak
also counts the page cache of memory-mapped files):

(a) in memory: ``np.load`` both files whole, ``bitext_hf.mining.mine``;
(b) shards: ``open_shards`` (checks every shard's size, header and SHA-256, and the row norms), ``mine_shards``.

The script checks that both return the same pairs and scores, and prints wall time, CPU time and peak memory.

    python benchmarks/bench_shards.py --n-src 100000 --n-tgt 5000 --dim 768 --shard-size 25000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from bench_mining import make_embeddings, rss_mb


def child(method: str, folder: str, out: str) -> None:
    from bitext_hf.encoding.shards import open_shards
    from bitext_hf.mining import mine
    from bitext_hf.mining.sharded import mine_shards

    warm = np.eye(8, dtype=np.float32)
    mine(warm, warm)  # imports, thread pools and the cached numba kernel, outside the measurement
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM restarts from the current RSS (imports, torch)
    baseline, anon_baseline = rss_mb("VmRSS"), rss_mb("RssAnon")
    # VmHWM counts the pages of memory-mapped shards that were read: page cache the kernel can drop at any time.
    # What the process holds itself is anonymous memory, which has no peak counter: sample it.
    anon_peak, done = [anon_baseline], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            anon_peak[0] = max(anon_peak[0], rss_mb("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu = time.perf_counter(), time.process_time()
    if method == "memory":
        x, y = np.load(os.path.join(folder, "x.npy")), np.load(os.path.join(folder, "y.npy"))
        opened = time.perf_counter()
        pairs = mine(x, y)
    else:
        x, y = open_shards(os.path.join(folder, "x")), open_shards(os.path.join(folder, "y"))
        opened = time.perf_counter()
        pairs = mine_shards(x, y)
    end = time.perf_counter()
    done.set()
    sampler.join()
    np.savez(out, src=pairs.src_indices, tgt=pairs.tgt_indices, scores=pairs.scores)
    print(
        json.dumps(
            {
                "method": method,
                "open_s": opened - start,
                "wall_s": end - start,
                "cpu_s": time.process_time() - cpu,
                "peak_rss_above_imports_mb": rss_mb("VmHWM") - baseline,
                "peak_anon_above_imports_mb": anon_peak[0] - anon_baseline,
                "imports_mb": baseline,
                "pairs": len(pairs),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n-src", type=int, default=100_000)
    parser.add_argument("--n-tgt", type=int, default=5_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--shard-size", type=int, default=25_000)
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    parser.add_argument("--child", nargs=3, metavar=("METHOD", "FOLDER", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    from bitext_hf.encoding.shards import write_shards

    x, y = make_embeddings(args.n_src, args.dim, n_tgt=args.n_tgt, shuffle=False)
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as folder:
        for name, array in (("x", x), ("y", y)):
            stored = array.astype(args.dtype)
            np.save(os.path.join(folder, f"{name}.npy"), stored)
            start = time.perf_counter()
            write_shards(
                os.path.join(folder, name),
                [str(i) for i in range(len(array))],
                lambda texts, stored=stored: stored[int(texts[0]) : int(texts[-1]) + 1].astype(np.float32),
                encoder="random",
                shard_size=args.shard_size,
                dtype=args.dtype,
            )
            print(f"write_shards {name}: {len(array)} x {args.dim} {args.dtype} in {time.perf_counter() - start:.2f}s")
        del x, y
        results = {}
        for method in ("memory", "shards"):
            out = os.path.join(folder, f"{method}.npz")
            command = [sys.executable, __file__, "--child", method, folder, out]
            line = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            print(line)
            results[method] = np.load(out)
        same = all(np.array_equal(results["memory"][key], results["shards"][key]) for key in ("src", "tgt", "scores"))
        print(f"same pairs and scores: {same}")


if __name__ == "__main__":
    main()
