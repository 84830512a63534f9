"""The CPU kernels of the OpenBLAS inside FAISS's wheels.

faiss-cpu's wheels bundle their own OpenBLAS (0.3.15 in faiss-cpu 1.15), which does not recognize recent x86 CPUs
(Sapphire Rapids and later) and falls back to its generic "Prescott" SSE3 kernels: every FAISS matrix product (its
k-means training, its exact search, an IVF index's list scans) then runs 4-5x slower than the CPU allows
(benchmarks/README.md, "FAISS's bundled OpenBLAS"). OpenBLAS reads ``OPENBLAS_CORETYPE`` once, when the library
loads, and uses that kernel family instead of its own guess. ``import bitext_hf`` sets it before FAISS is imported
(FAISS is imported lazily, inside the functions that search), unless the user set it, to the newest family the CPU
runs: SkylakeX on AVX-512 CPUs, Haswell on AVX2 ones. Libraries that recognize the CPU themselves (numpy's newer
OpenBLAS, which is loaded first anyway; torch's MKL and oneDNN) are not affected.
"""

from __future__ import annotations

import os

VARIABLE = "OPENBLAS_CORETYPE"
# OpenBLAS's SkylakeX kernels need all five; its Haswell kernels AVX2 and FMA.
SKYLAKEX_FLAGS = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"})
HASWELL_FLAGS = frozenset({"avx2", "fma"})


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first processor's feature flags (empty where there is no /proc/cpuinfo, as on macOS)."""
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def openblas_core_type(flags: frozenset[str]) -> str | None:
    """The OpenBLAS kernel family for a CPU with these flags, or None to leave OpenBLAS's own choice."""
    if flags >= SKYLAKEX_FLAGS:
        return "SkylakeX"
    if flags >= HASWELL_FLAGS:
        return "Haswell"
    return None


def choose_openblas_kernels(environ=os.environ, cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """Set ``OPENBLAS_CORETYPE`` for the libraries loaded from now on, unless it is set; returns what was set."""
    if environ.get(VARIABLE):
        return None
    core = openblas_core_type(cpu_flags(cpuinfo))
    if core is not None:
        environ[VARIABLE] = core
    return core
