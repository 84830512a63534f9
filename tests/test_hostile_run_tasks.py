"""The hostile table of ``run_tasks`` and ``encode_runs_ray`` (bitext_hf.encoding.ray), the Python calls that split
runs of sentences into Ray tasks: wrong types from Python, absurd bounds, counts and sizes, paths (links, FIFOs,
devices, folders) where sentences or runs belong, and a signal during the split. Neither call reads or writes a
file: a path is refused by its type, never opened; every refusal of ``encode_runs_ray`` comes before Ray starts."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest

from bitext_hf.encoding import ray as encoding_ray
from bitext_hf.encoding.ray import run_tasks

pytestmark = pytest.mark.timeout(60)  # a FIFO opened by mistake would hang: fail instead


@pytest.fixture
def no_ray(monkeypatch):
    monkeypatch.setattr(encoding_ray, "import_ray", lambda: pytest.fail("Ray was started"))


@pytest.mark.parametrize("runs", [[(0, 4)], [(-1, 1)], [(2, 2)], [(2, 1)], [(0, 10**18)]])
def test_runs_outside_the_sentences_are_refused(runs):
    with pytest.raises(ValueError, match="outside"):
        run_tasks(runs, 3, 10)


@pytest.mark.parametrize(
    ("runs", "error"),
    [
        ([("0", "1")], TypeError),
        ([(0.0, 1.0)], TypeError),
        ([(False, True)], TypeError),
        ([(None, 1)], TypeError),
        ([(0, 1, 2)], ValueError),
        (["01"], ValueError),
        ([5], ValueError),
        ([None], ValueError),
    ],
)
def test_wrong_types_are_refused_as_the_composition_refuses_them(runs, error):
    """The same check as ``encode_runs`` (``check_runs``): numpy integers pass, strings, floats and bools do not."""
    with pytest.raises(error, match="run"):
        run_tasks(runs, 3, 10)
    assert run_tasks([(np.int64(0), np.int32(2))], 3, 10) == [((0, 2), [0])]


@pytest.mark.parametrize("size", [0, -1, 1.5, True, "10", None])
def test_absurd_task_sizes_are_refused(size):
    with pytest.raises(ValueError, match="at least 1"):
        run_tasks([(0, 1)], 3, size)


def test_bad_runs_are_refused_before_ray_starts(no_ray):
    """``encode_runs_ray`` checks its runs before it imports or starts Ray: a wrong run costs nothing."""
    from bitext_hf.errors import UsageError

    with pytest.raises(ValueError, match="outside"):
        encoding_ray.encode_runs_ray(["a", "b"], [(0, 3)], lambda: None)
    with pytest.raises(TypeError, match="integers"):
        encoding_ray.encode_runs_ray(["a", "b"], [("0", "1")], lambda: None)
    with pytest.raises(UsageError, match="nothing to encode"):
        encoding_ray.encode_runs_ray(["a", "b"], [], lambda: None)


def test_no_runs_no_tasks():
    assert run_tasks([], 5, 10) == []


@pytest.mark.parametrize("sentences", [-1, 2.5, True, "3", None, [3]])
def test_absurd_sentence_counts_are_refused(sentences):
    with pytest.raises(ValueError, match="number of sentences"):
        run_tasks([(0, 1)], sentences, 10)
    assert run_tasks([], 0, 10) == [] and run_tasks([(0, 1)], np.int64(1), 10) == [((0, 1), [0])]


@pytest.fixture(params=["link", "fifo", "device", "folder"])
def path(request, tmp_path):
    """A path of each kind the jobs refuse, given where sentences or runs belong."""
    if request.param == "link":
        (tmp_path / "target.txt").write_text("a\nb\n")
        os.symlink(tmp_path / "target.txt", tmp_path / "link.txt")
        return tmp_path / "link.txt"
    if request.param == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    if request.param == "device":
        return Path("/dev/null")
    return tmp_path


@pytest.mark.parametrize("as_text", [False, True])
def test_a_path_is_refused_by_its_type_never_opened(path, as_text, no_ray):
    """A path (or its text) in place of the sentences or the runs: refused without being opened (a FIFO opened
    would hang until the timeout)."""
    given = str(path) if as_text else path
    with pytest.raises((TypeError, ValueError)):
        run_tasks(given, 3, 10)
    with pytest.raises((TypeError, ValueError)):
        encoding_ray.encode_runs_ray(given, [(0, 1)], lambda: None)
    with pytest.raises((TypeError, ValueError)):
        encoding_ray.encode_runs_ray(["a", "b"], given, lambda: None)


@pytest.mark.parametrize("sentences", ["ab", ["a", 3], [b"a", "b"], ["a", None]])
def test_sentences_that_are_not_strings_are_refused_before_ray_starts(sentences, no_ray):
    with pytest.raises(TypeError):
        encoding_ray.encode_runs_ray(sentences, [(0, 1)], lambda: None)


class Interrupted(Exception):
    pass


def test_a_signal_during_the_split_leaves_nothing_behind():
    """SIGUSR1 with a handler that raises, sent while the split of a million runs goes on: the exception comes out of
    the call, and the next call gives what an uninterrupted one gives (the split holds no state)."""
    runs = [(start, start + 1 + start % 4) for start in range(1_000_000)]
    expected = run_tasks(runs[:1000], 1_000_003, 256)

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGUSR1, interrupt)
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Interrupted):
            while True:  # the signal comes during a call, whichever
                run_tasks(runs, 1_000_003, 256)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
    assert run_tasks(runs[:1000], 1_000_003, 256) == expected
