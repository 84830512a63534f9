"""Threads on a shared machine: the commands' default thread count against one thread and against every CPU, on a
quiet machine and under a reproducible background load, in one run.

The jobs are command lines, each run in a fresh process as a user types it, on real text: English-French pairs
from this machine's gettext catalogs (``bitext_hf.data.gettext_pairs``, a seeded sample):

* ``encode``: ``bitext-hf encode`` of ``--encode_lines`` English messages with the default encoder (USE v3);
* ``mine``: ``bitext-hf mine`` of ``--mine_lines`` English x the same number of shuffled French messages, from text.

Each runs with the default thread count (no ``--threads``: :func:`bitext_hf.threads.command_threads`), with
``--threads 1`` and with ``--threads N`` (N: the CPUs this process may use, the default before the count followed
the load), first on the machine as it is, then with ``--busy`` processes that spin on a CPU each, started by this
script and stopped after. No encoding cache (``--no-cache``). The table gives wall and CPU seconds (user + system
of the command's process) and the wall-time ratios default / one thread and N threads / one thread. The load
average before each part is printed: "quiet" means only what else ran on the machine then.

    python benchmarks/bench_threads.py
    python benchmarks/bench_threads.py --encode_lines 5000 --mine_lines 5000 --busy 2
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def spin() -> None:
    while True:
        pass


def write_inputs(folder: Path, encode_lines: int, mine_lines: int) -> dict[str, Path]:
    from bitext_hf.data import gettext_pairs

    pairs = gettext_pairs("fr", min_words=2)
    rng = random.Random(0)
    rng.shuffle(pairs)
    needed = max(encode_lines, mine_lines)
    if len(pairs) < needed:
        sys.exit(f"this machine's catalogs hold {len(pairs)} English-French pairs; {needed} are needed")
    files = {"encode": folder / "encode.en", "src": folder / "mine.en", "tgt": folder / "mine.fr"}
    files["encode"].write_text("".join(en + "\n" for en, _ in pairs[:encode_lines]), encoding="utf-8")
    sample = pairs[:mine_lines]
    files["src"].write_text("".join(en + "\n" for en, _ in sample), encoding="utf-8")
    french = [fr for _, fr in sample]
    rng.shuffle(french)
    files["tgt"].write_text("".join(fr + "\n" for fr in french), encoding="utf-8")
    return files


def run(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encode_lines", type=int, default=5000)
    parser.add_argument("--mine_lines", type=int, default=5000)
    parser.add_argument("--busy", type=int, default=2, help="spinning processes of the loaded part")
    args = parser.parse_args()
    from bitext_hf.threads import usable_cpus

    cpus = usable_cpus()
    cli = [sys.executable, "-m", "bitext_hf.cli"]
    env_note = {name: os.environ[name] for name in ("OMP_NUM_THREADS",) if name in os.environ}
    if env_note:
        sys.exit(f"unset {', '.join(env_note)} first: the default would follow it")
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        files = write_inputs(folder, args.encode_lines, args.mine_lines)
        jobs = {
            "encode": [*cli, "encode", "-q", "--no-cache", "--input", str(files["encode"]), "--out"],
            "mine": [
                *cli,
                "mine",
                "-q",
                "--no-cache",
                "--src",
                str(files["src"]),
                "--tgt",
                str(files["tgt"]),
                "--out",
            ],
        }
        settings = {"default": [], "1 thread": ["--threads", "1"], f"{cpus} threads": ["--threads", str(cpus)]}
        rows = []
        for part in ("quiet", "loaded"):
            spinners = []
            if part == "loaded":
                spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
                for process in spinners:
                    process.start()
                time.sleep(1)
            print(f"{part}: load average {os.getloadavg()[0]:.2f}, {cpus} usable CPUs", flush=True)
            try:
                for job, command in jobs.items():
                    times = {}
                    for name, flags in settings.items():
                        out = folder / f"{job}-{part}-{name.replace(' ', '')}.{'npy' if job == 'encode' else 'tsv'}"
                        times[name] = run([*command, str(out), *flags])
                        print(
                            f"  {job:<7}{name:<10} wall {times[name][0]:7.1f} s  cpu {times[name][1]:7.1f} s",
                            flush=True,
                        )
                    rows.append((part, job, times))
            finally:
                for process in spinners:
                    process.terminate()
    one = "1 thread"
    every = f"{cpus} threads"
    print(
        f"\n| machine | job | default wall (cpu) | 1 thread wall (cpu) | {cpus} threads wall (cpu) "
        f"| default / 1 thread | {cpus} threads / 1 thread |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for part, job, times in rows:
        cells = " | ".join(f"{times[name][0]:.1f} s ({times[name][1]:.1f} s)" for name in ("default", one, every))
        print(
            f"| {part} | {job} | {cells} | {times['default'][0] / times[one][0]:.2f} "
            f"| {times[every][0] / times[one][0]:.2f} |"
        )


if __name__ == "__main__":
    main()
