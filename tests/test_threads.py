"""The CPU thread count: what this process may use (affinity, cgroup quota), the limit over every pool, and
``--threads`` / ``-v`` before or after a command's name."""

from __future__ import annotations

import contextlib

import pytest
import torch
from cli_fakes import FakeEncoder, FakeEncoders, install_fake_encoders, write_lines
from threadpoolctl import threadpool_info

import bitext_hf.threads
from bitext_hf.cli import EXIT_OK, EXIT_USAGE, main
from bitext_hf.cli.parser import build_parser
from bitext_hf.encoders import load_encoder
from bitext_hf.errors import UsageError
from bitext_hf.jobs.mine import MiningConfig, run_mining
from bitext_hf.threads import cgroup_cpu_quota, default_threads, limit_threads, usable_cpus


@pytest.fixture
def eight_cpus(monkeypatch):
    """An affinity mask of eight CPUs, whatever this machine has."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)), raising=False)


def _write(folder, name: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text + "\n", encoding="ascii")


# ------------------------------------------------------------------------------------------------ usable_cpus


def test_a_cgroup_v2_quota_rounds_up_and_caps_the_affinity(tmp_path, eight_cpus):
    _write(tmp_path, "cpu.max", "150000 100000")
    assert usable_cpus(tmp_path) == 2


def test_no_cgroup_v2_quota_leaves_the_affinity(tmp_path, eight_cpus):
    _write(tmp_path, "cpu.max", "max 100000")
    assert usable_cpus(tmp_path) == 8
    assert usable_cpus(tmp_path / "missing") == 8


def test_a_quota_above_the_affinity_changes_nothing(tmp_path, eight_cpus):
    _write(tmp_path, "cpu.max", "1600000 100000")
    assert usable_cpus(tmp_path) == 8


@pytest.mark.parametrize("folder", ["cpu", "cpu,cpuacct"])
def test_a_cgroup_v1_quota(tmp_path, eight_cpus, folder):
    _write(tmp_path / folder, "cpu.cfs_quota_us", "300000")
    _write(tmp_path / folder, "cpu.cfs_period_us", "100000")
    assert usable_cpus(tmp_path) == 3
    _write(tmp_path / folder, "cpu.cfs_quota_us", "-1")
    assert usable_cpus(tmp_path) == 8


def test_a_quota_below_one_cpu_still_gives_one_thread(tmp_path, eight_cpus):
    _write(tmp_path, "cpu.max", "20000 100000")
    assert usable_cpus(tmp_path) == 1


def test_unreadable_cgroup_files_mean_no_quota(tmp_path, eight_cpus):
    _write(tmp_path, "cpu.max", "lots 0")
    _write(tmp_path / "cpu", "cpu.cfs_quota_us", "")
    assert usable_cpus(tmp_path) == 8


def test_the_quota_of_a_cgroup_above_the_process_counts(tmp_path):
    _write(tmp_path / "jobs" / "run", "cpu.max", "max 100000")
    _write(tmp_path / "jobs", "cpu.max", "100000 100000")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("0::/jobs/run\n", encoding="ascii")
    assert cgroup_cpu_quota(tmp_path, proc) == 1.0
    proc.write_text("4:cpu,cpuacct:/jobs/run\n0::/\n", encoding="ascii")
    _write(tmp_path / "cpu,cpuacct" / "jobs" / "run", "cpu.cfs_quota_us", "250000")
    _write(tmp_path / "cpu,cpuacct" / "jobs" / "run", "cpu.cfs_period_us", "100000")
    assert cgroup_cpu_quota(tmp_path, proc) == 2.5  # the v1 hierarchy's, the v2 one being the root
    _write(tmp_path, "cpu.max", "100000 100000")
    assert cgroup_cpu_quota(tmp_path, proc) == 1.0  # the smallest of both


def test_without_affinity_the_machines_count_is_used(tmp_path, monkeypatch):
    monkeypatch.delattr("os.sched_getaffinity", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    assert usable_cpus(tmp_path) == 6
    monkeypatch.setattr("os.cpu_count", lambda: None)
    assert usable_cpus(tmp_path) == 1


# ---------------------------------------------------------------------------------------------- limit_threads


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_limit_threads_sets_torch_and_blas_and_restores_them():
    import numpy  # noqa: F401  (its BLAS is loaded, as in every run)

    before_torch, before_blas = torch.get_num_threads(), _blas_threads()
    wanted = 1 if before_torch > 1 else 2
    with limit_threads(wanted) as limit:
        assert limit.threads == wanted and default_threads() == wanted
        assert torch.get_num_threads() == wanted and _blas_threads() == {wanted}
        with limit_threads():  # no count: the one in force
            assert torch.get_num_threads() == wanted
    assert torch.get_num_threads() == before_torch and _blas_threads() == before_blas
    plain = limit_threads(wanted)  # a plain call stays until restored
    assert torch.get_num_threads() == wanted and default_threads() == wanted
    plain.restore()
    assert torch.get_num_threads() == before_torch and default_threads() == usable_cpus()


@pytest.mark.parametrize("threads", [0, -1, True, 1.5, "2"])
def test_limit_threads_refuses_a_count_below_one_in_one_line(threads):
    with pytest.raises(UsageError) as raised:
        limit_threads(threads)
    assert "threads must be an integer >= 1" in str(raised.value) and "\n" not in str(raised.value)
    with pytest.raises(UsageError):
        MiningConfig("a.txt", "b.txt", threads=threads)


def test_the_default_encoder_takes_the_count_in_force():
    assert load_encoder(threads=3).threads == 3
    with limit_threads(1):
        assert load_encoder().threads == 1
    assert load_encoder().threads == usable_cpus()
    with pytest.raises(UsageError):
        load_encoder(threads=0)


class _ThreadRecordingEncoder(FakeEncoder):
    def encode(self, sentences, batch_size=64, show_progress=False):
        self.threads = torch.get_num_threads()
        return super().encode(sentences, batch_size, show_progress)


class _ThreadRecordingEncoders(FakeEncoders):
    def __call__(self, spec=None, *, pooling=None, **kwargs):
        self.loaded.append(spec)
        self.encoders.append(_ThreadRecordingEncoder(spec))
        return self.encoders[-1]


def test_run_mining_encodes_and_searches_on_its_threads(tmp_path):
    src = write_lines(tmp_path / "src.txt", ["cat|en", "dog|en", "tree|en"])
    tgt = write_lines(tmp_path / "tgt.txt", ["tree|de", "cat|de", "dog|de"])
    before = torch.get_num_threads()
    wanted = 1 if before > 1 else 2
    encoders = _ThreadRecordingEncoders()
    result = run_mining(MiningConfig(src, tgt, k=2, threads=wanted, quiet=True, no_cache=True), load_encoder=encoders)
    assert len(result.pairs) == 3
    assert [encoder.threads for encoder in encoders.encoders] == [wanted]
    assert torch.get_num_threads() == before


# ------------------------------------------------------------------------------------------------ the CLI


@pytest.fixture
def recorded_limits(monkeypatch) -> list:
    limits = []

    def record(threads=None):
        limits.append(threads)
        return contextlib.nullcontext()

    monkeypatch.setattr(bitext_hf.threads, "limit_threads", record)
    return limits


@pytest.mark.parametrize("where", ["before", "after"])
def test_threads_before_or_after_the_command_reaches_the_limit(tmp_path, monkeypatch, recorded_limits, where):
    install_fake_encoders(monkeypatch)
    text = write_lines(tmp_path / "in.txt", ["cat|en", "dog|en"])
    command = ["encode", "--input", text, "--out", str(tmp_path / "out.npy"), "--no-cache", "-q"]
    argv = ["--threads", "1", *command] if where == "before" else [*command, "--threads", "1"]
    assert main(argv) == EXIT_OK
    assert recorded_limits == [1]


def test_the_command_runs_under_its_thread_limit(tmp_path, monkeypatch):
    encoders = _ThreadRecordingEncoders()
    monkeypatch.setattr("bitext_hf.encoders.load_encoder", encoders)
    text = write_lines(tmp_path / "in.txt", ["cat|en", "dog|en"])
    before = torch.get_num_threads()
    wanted = 1 if before > 1 else 2
    argv = ["encode", "--input", text, "--out", str(tmp_path / "out.npy"), "--no-cache", "-q", "--threads"]
    assert main([*argv, str(wanted)]) == EXIT_OK
    assert encoders.encoders[0].threads == wanted and torch.get_num_threads() == before


def test_without_threads_the_limit_is_the_commands_count(tmp_path, monkeypatch, recorded_limits):
    install_fake_encoders(monkeypatch)
    monkeypatch.setattr(bitext_hf.threads, "command_threads", lambda: 7)
    text = write_lines(tmp_path / "in.txt", ["cat|en"])
    assert main(["encode", "--input", text, "--out", str(tmp_path / "out.npy"), "--no-cache", "-q"]) == EXIT_OK
    assert recorded_limits == [7]


def _stat(path, busy: list[int], idle: list[int]) -> None:
    """A /proc/stat whose CPUs have spent ``busy`` user ticks and ``idle`` idle ticks."""
    cpus = [f"cpu{n} {b} 0 0 {i} 0 0 0 0 0 0" for n, (b, i) in enumerate(zip(busy, idle, strict=True))]
    path.write_text("\n".join(["cpu  0 0 0 0 0 0 0 0 0 0", *cpus, "intr 0"]) + "\n", encoding="ascii")


@pytest.mark.parametrize(
    ("busy_ticks", "idle_ticks", "idle", "threads"),
    [
        ([0, 0], [10, 10], 2.0, 2),  # a quiet machine: every CPU
        ([10, 0], [0, 10], 1.0, 1),  # another process keeps one CPU busy
        ([10, 10], [0, 0], 0.0, 1),  # both busy: still one thread
        ([3, 2], [7, 8], 1.5, 2),  # light background work rounds up
    ],
)
def test_the_commands_count_follows_the_idle_cpus(tmp_path, monkeypatch, busy_ticks, idle_ticks, idle, threads):
    """idle_cpus reads the kernel's per-CPU counters before and after its sample; command_threads rounds it."""
    stat = tmp_path / "stat"
    _stat(stat, [100, 100], [100, 100])
    later = [100 + b for b in busy_ticks], [100 + i for i in idle_ticks]
    monkeypatch.setattr(bitext_hf.threads.time, "sleep", lambda seconds: _stat(stat, *later))
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(bitext_hf.threads, "usable_cpus", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert bitext_hf.threads.idle_cpus(stat=stat) == pytest.approx(idle)
    real_idle_cpus = bitext_hf.threads.idle_cpus
    monkeypatch.setattr(bitext_hf.threads, "idle_cpus", lambda seconds: real_idle_cpus(seconds, stat=stat))
    _stat(stat, [100, 100], [100, 100])
    assert bitext_hf.threads.command_threads() == threads


def test_omp_num_threads_is_the_commands_count_and_unreadable_counters_are_every_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert bitext_hf.threads.command_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert bitext_hf.threads.idle_cpus(stat=tmp_path / "missing") is None
    monkeypatch.setattr(bitext_hf.threads, "idle_cpus", lambda seconds: None)
    assert bitext_hf.threads.command_threads() == usable_cpus()


@pytest.mark.parametrize(
    ("argv", "given"),
    [
        (["--threads", "0", "encode", "--input", "in.txt", "--out", "out.npy"], 0),
        (["encode", "--threads", "0", "--input", "in.txt", "--out", "out.npy"], 0),
        (["push", "--threads", "-2", "--model", "runs/x", "--repo", "me/x"], -2),  # no thread pool: still checked
    ],
)
def test_threads_below_one_is_a_one_line_usage_error(capsys, argv, given):
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"threads={given} (--threads): must be an integer >= 1" in err and err.count("\n") == 1


def test_a_command_without_thread_pools_sets_no_limit(tmp_path, recorded_limits, capsys):
    main(["data", "gettext", "--list", "--no-system-catalogs", "--catalogs", str(tmp_path), "--threads", "1", "-q"])
    assert recorded_limits == []


@pytest.mark.parametrize(
    "argv",
    [
        ["push", "-v", "--repo", "me/x", "--model", "m"],
        ["-v", "push", "--repo", "me/x", "--model", "m"],
        ["push", "--verbose", "--repo", "me/x", "--pairs", "p.tsv"],
        ["data", "gettext", "--list", "-v"],
        ["mine", "-v"],
    ],
)
def test_verbose_goes_before_or_after_the_command(argv):
    args = build_parser().parse_args(argv)
    assert args.verbose is True and args.quiet is False and args.threads is None


def test_quiet_and_debug_go_before_or_after_the_command():
    assert build_parser().parse_args(["-q", "--debug", "data", "gettext", "--list"]).quiet is True
    args = build_parser().parse_args(["push", "--debug", "-q", "--repo", "me/x", "--model", "m"])
    assert args.quiet is True and args.debug is True
    args = build_parser().parse_args(["--threads", "3", "score", "--out", "x.tsv", "--threads", "2"])
    assert args.threads == 2  # the last one given wins, as for any option


def test_every_command_lists_the_shared_options():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    helps = [parser.format_help()] + [command.format_help() for command in commands.values()]
    helps.append(commands["data"]._subparsers._group_actions[0].choices["gettext"].format_help())
    for text in helps:
        assert "--threads N" in text and "-v, --verbose" in text and "-q, --quiet" in text, text
        assert "affinity and cgroup" in " ".join(text.split())
