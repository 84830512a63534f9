"""How many CPU threads this package's work may use, and one call that caps every thread pool it runs.

The machine's core count is the wrong default: a process pinned to a few cores (``taskset``, a batch scheduler) or
held to a CPU quota (a container's ``--cpus``, a Kubernetes limit) that starts one thread per core oversubscribes
what it was given, and thread pools that spin waiting for each other then cost several times the CPU of one thread.
:func:`usable_cpus` counts what this process may really use; :func:`limit_threads` caps the pools to a count:

- torch's intra-op pool (``torch.set_num_threads``), and its inter-op pool once per process (torch refuses a second
  setting, and any setting after parallel work started);
- the BLAS and OpenMP libraries loaded in the process (``threadpoolctl``), FAISS's OpenMP pool among them;
- the fused numba top-k sweep of :mod:`bitext_hf.mining.knn`, which runs on as many threads as torch has;
- the embedded USE encoder, made with the count in force (:func:`default_threads`).

Nothing heavy is imported here until :func:`limit_threads` is called: ``--help`` stays fast.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path

from bitext_hf.errors import UsageError
from bitext_hf.interrupts import interrupts_held

__all__ = [
    "CGROUP_ROOT",
    "cgroup_cpu_quota",
    "check_threads",
    "command_threads",
    "default_threads",
    "idle_cpus",
    "limit_threads",
    "usable_cpus",
]

CGROUP_ROOT = Path("/sys/fs/cgroup")
# The cgroup v1 hierarchies that can hold the CPU controller, by the names their mount points take.
_V1_CPU_FOLDERS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")

# The limits in force, innermost last: limit_threads() without a count keeps the one around it.
_active: list[limit_threads] = []
_interop_set = False


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _quota_v2(folder: Path) -> float | None:
    """CPUs allowed by ``cpu.max`` ("QUOTA PERIOD" in microseconds; "max" means no quota)."""
    text = _read_text(folder / "cpu.max")
    fields = text.split() if text else []
    if len(fields) != 2 or fields[0] == "max":
        return None
    try:
        quota, period = int(fields[0]), int(fields[1])
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _quota_v1(folder: Path) -> float | None:
    """CPUs allowed by ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` (a quota of -1 means none)."""
    quota, period = _read_text(folder / "cpu.cfs_quota_us"), _read_text(folder / "cpu.cfs_period_us")
    try:
        quota_us, period_us = int(quota or ""), int(period or "")
    except ValueError:
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def _own_cgroups(proc_cgroup: Path) -> dict[str, str]:
    """This process's cgroup path per hierarchy from ``/proc/self/cgroup``: "" for v2, the controllers for v1."""
    text = _read_text(proc_cgroup) or ""
    paths = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    return paths


def _folders_up(base: Path, relative: str) -> list[Path]:
    """``base/relative`` and each folder above it up to ``base``: a quota set on any of them applies. Inside a
    container the process's path names nothing under the mount, whose root is then the container's own cgroup."""
    folders = [base]
    current = base
    for part in (p for p in relative.split("/") if p and p not in (".", "..")):
        current = current / part
        folders.append(current)
    return folders


def cgroup_cpu_quota(root: str | os.PathLike = CGROUP_ROOT, proc_cgroup: str | os.PathLike = "/proc/self/cgroup"):
    """The CPU quota of this process's cgroup (v2 ``cpu.max`` or v1 CFS quota) in CPUs, the smallest of its
    cgroup and those above it; None when there is none or it cannot be read."""
    root = Path(root)
    own = _own_cgroups(Path(proc_cgroup))
    quotas = [_quota_v2(folder) for folder in _folders_up(root, own.get("", ""))]
    v1_path = next((path for controllers, path in own.items() if "cpu" in controllers.split(",")), "")
    for name in _V1_CPU_FOLDERS:
        if (root / name).is_dir():
            quotas += [_quota_v1(folder) for folder in _folders_up(root / name, v1_path)]
            break
    found = [quota for quota in quotas if quota is not None]
    return min(found) if found else None


def usable_cpus(cgroup_root: str | os.PathLike = CGROUP_ROOT) -> int:
    """The CPUs this process may use: those of its affinity mask (the machine's count where the platform has no
    affinity), capped by its cgroup CPU quota rounded up (a quota of 1.5 CPUs runs two threads); at least 1."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        cpus = os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root)
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def _cpu_times(stat: Path, cpus: set[int]) -> dict[int, tuple[int, int]] | None:
    """(idle, total) clock ticks of each CPU in ``cpus`` from a ``/proc/stat`` file; None where it cannot be read."""
    text = _read_text(stat)
    if text is None:
        return None
    times = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times if set(times) == cpus else None


def idle_cpus(sample_seconds: float = 0.1, stat: str | os.PathLike = "/proc/stat") -> float | None:
    """How many of the CPUs this process may run on (its affinity) other work left idle over the next
    ``sample_seconds``, from the kernel's per-CPU counters; None where they cannot be read (not Linux)."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    before = _cpu_times(Path(stat), cpus)
    if before is None:
        return None
    time.sleep(sample_seconds)
    after = _cpu_times(Path(stat), cpus)
    if after is None:
        return None
    idle = 0.0
    for cpu in cpus:
        total = after[cpu][1] - before[cpu][1]
        idle += (after[cpu][0] - before[cpu][0]) / total if total > 0 else 1.0
    return idle


def command_threads(sample_seconds: float = 0.1) -> int:
    """The thread count of a command run without ``--threads``: ``OMP_NUM_THREADS`` when it is set (the usual way to
    say it), else :func:`usable_cpus`, fewer when other work keeps some of them busy (:func:`idle_cpus`, rounded).

    On a shared machine, threads that outnumber the idle CPUs wait for each other at every parallel step, and the
    command runs several times slower than on one thread (benchmarks/README.md, "Threads on a shared machine")."""
    from_environment = os.environ.get("OMP_NUM_THREADS", "").strip()
    if from_environment.isdigit() and int(from_environment) >= 1:
        return int(from_environment)
    cpus = usable_cpus()
    idle = idle_cpus(sample_seconds) if cpus > 1 else None
    if idle is None:
        return cpus
    return max(1, min(cpus, math.floor(idle + 0.5)))


def default_threads() -> int:
    """The thread count work takes when none is given: that of the :func:`limit_threads` in force, else
    :func:`usable_cpus`."""
    return _active[-1].threads if _active else usable_cpus()


def check_threads(threads) -> int | None:
    """``threads`` as an int (None stays None); anything but an integer >= 1 is a ``UsageError``."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not hasattr(threads, "__index__") or int(threads) < 1:
        raise UsageError(f"threads must be an integer >= 1, got {threads!r}")
    return int(threads)


class limit_threads:  # lower case: it is called like a function, limit_threads(2) or `with limit_threads(2):`
    """Cap every thread pool this package runs to ``threads`` (None: :func:`default_threads`).

    A plain call sets the limit for the rest of the process (the command line does that once); as a context
    manager it restores on exit what it changed. torch's inter-op pool is set once per process and never restored:
    torch refuses to change it again.

    Raises:
        UsageError: ``threads`` is not an integer >= 1.
    """

    def __init__(self, threads: int | None = None) -> None:
        threads = check_threads(threads)
        self.threads = default_threads() if threads is None else threads
        self._undo: list = []
        self._apply()
        _active.append(self)

    def _apply(self) -> None:
        global _interop_set
        # The command line's first import of torch and FAISS is here: a Ctrl-C during torch's must wait for its end
        # (bitext_hf.interrupts says why).
        with interrupts_held():
            import torch
            from threadpoolctl import threadpool_limits

            try:
                import faiss
            except ImportError:  # faiss-cpu is a dependency, but a broken install should not stop encoding
                faiss = None
        # torch and faiss first, so that the OpenMP and BLAS libraries they load are among those capped below.
        if faiss is not None and hasattr(faiss, "omp_set_num_threads"):
            faiss_threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(self.threads)
            self._undo.append(lambda: faiss.omp_set_num_threads(faiss_threads))
        limits = threadpool_limits(limits=self.threads)
        self._undo.append(limits.restore_original_limits)
        torch_threads = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        self._undo.append(lambda: torch.set_num_threads(torch_threads))
        if not _interop_set:
            _interop_set = True
            # torch refuses once parallel work has started or the pool was set: it then keeps its setting.
            with contextlib.suppress(RuntimeError):
                torch.set_num_interop_threads(self.threads)

    def restore(self) -> None:
        """Undo what this limit changed (the inter-op pool excepted) and end it."""
        while self._undo:
            self._undo.pop()()
        if self in _active:
            _active.remove(self)

    def __enter__(self) -> limit_threads:
        return self

    def __exit__(self, *exc_info) -> None:
        self.restore()

    def __repr__(self) -> str:
        return f"limit_threads({self.threads})"
