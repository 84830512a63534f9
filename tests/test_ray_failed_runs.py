"""A failed Ray run leaves no task of its own running, without cancelling any (bitext_hf.encoding.ray's docstring:
a ``ray.cancel`` that meets a task's reply aborts Ray's driver, ray-project/ray#54846): the local instance the run
started is shut down with its workers, and a cluster the run joined kills the run's tasks when it disconnects.

Each run is a separate process (its own Ray session, as the CLI's); its first batch waits until the second one is
running, then fails, so that the second is in flight when the error comes. The second batch takes 5 s and then
leaves a file; 8 s after the error that file must not be there, and ``ray.cancel`` must not have been called. The
local instance is a new one even where an earlier `ray start` left its address file (Ray's ``ray.init()`` would try
to join that cluster)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
from ports import free_port

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray")

# Cloudpickle sends the encoder by value (it is defined in __main__), so the workers need nothing importable.
RUN = textwrap.dedent(
    """
    import os, sys, time
    import numpy as np
    import ray
    from bitext_hf.encoding.ray import encode_ray, encode_runs_ray

    folder, how, address = sys.argv[1], sys.argv[2], sys.argv[3] or None
    STARTED, FINISHED = os.path.join(folder, "started"), os.path.join(folder, "finished")
    cancels = []
    ray.cancel = lambda *args, **kwargs: cancels.append(args)

    def load():
        def encode(texts):
            if texts[0] == "t0":
                deadline = time.monotonic() + 60
                while not os.path.exists(STARTED) and time.monotonic() < deadline:
                    time.sleep(0.05)
                raise ValueError("the first batch fails")
            open(STARTED, "w").close()
            time.sleep(5)
            open(FINISHED, "w").close()
            return np.zeros((len(texts), 4), np.float32)
        return encode

    texts = [f"t{i}" for i in range(16_400)]  # two batches of encode_ray (16,384 texts a batch)
    try:
        if how == "runs":  # two tasks of 500 sentences each with --workers 2
            encode_runs_ray(texts[:1000], [(i, i + 1) for i in range(1000)], load, address=address, workers=2)
        else:
            encode_ray(texts, load, address=address, workers=2)
    except ValueError as error:
        print("failed:", error)
    time.sleep(8)
    print("second batch", "finished" if os.path.exists(FINISHED) else "stopped", "cancels", len(cancels))
    """
)


@pytest.fixture
def ray_tmpdir():
    """Ray's folder for this test (RAY_TMPDIR; short: Ray's sockets live there), so that a `ray start` leaves its
    address file there, not in /tmp/ray where every later ray.init on this machine would find it."""
    folder = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _environment(ray_tmpdir: str) -> dict:
    # A head started by `ray start` wants a token by default (Ray 2.60); the test's cluster and driver go without.
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_TMPDIR": ray_tmpdir}


def _run(tmp_path, ray_tmpdir: str, how: str, address: str = "") -> str:
    script = tmp_path / "run.py"
    script.write_text(RUN)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), how, address],
        capture_output=True,
        text=True,
        timeout=180,
        env=_environment(ray_tmpdir),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("how", ["texts", "runs"])
def test_a_failed_run_shuts_its_local_instance_down_with_the_batch_in_flight(tmp_path, ray_tmpdir, how):
    # The address file of a `ray start` whose cluster has stopped: ray.init() alone would try to join it, and fail.
    os.makedirs(os.path.join(ray_tmpdir, "ray"))
    with open(os.path.join(ray_tmpdir, "ray", "ray_current_cluster"), "w") as stale:
        stale.write(f"127.0.0.1:{free_port()}")
    out = _run(tmp_path, ray_tmpdir, how)
    assert "failed: the first batch fails" in out
    assert (tmp_path / "started").exists()  # the second batch was running when the first failed
    assert "second batch stopped cancels 0" in out


@pytest.fixture
def cluster(ray_tmpdir):
    """A one-machine Ray cluster (`ray start --head --block`), ended with its processes at the end of the test."""
    port = free_port()
    head = subprocess.Popen(
        [
            "ray",
            "start",
            "--head",
            "--block",
            f"--port={port}",
            f"--ray-client-server-port={free_port()}",
            "--num-cpus=2",
            "--include-dashboard=false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_environment(ray_tmpdir),
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if head.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("the test's Ray head did not start")
                time.sleep(0.2)
        yield address
    finally:
        head.terminate()
        head.wait(timeout=60)


def test_a_failed_run_on_a_cluster_it_joined_leaves_no_task_running(tmp_path, ray_tmpdir, cluster):
    out = _run(tmp_path, ray_tmpdir, "texts", cluster)
    assert "failed: the first batch fails" in out
    assert (tmp_path / "started").exists()
    assert "second batch stopped cancels 0" in out
