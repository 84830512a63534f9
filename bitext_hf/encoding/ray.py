"""Ray sessions, and encoding across workers and machines with Ray (the ``distributed`` extra: ``pip install ray``).

Ray does the scheduling, the data transfer (its object store) and the retries of tasks whose worker died; nothing
here is a scheduler or an RPC layer of its own. :func:`ray_session` starts a local Ray instance (``workers`` CPUs) or
joins a cluster at an address, after a bounded check that a Ray head answers there (Ray itself retries an unreachable
address for minutes, and one that answers but is not Ray, an HTTP server for instance, for ever). A SIGTERM during a
session shuts Ray down and then ends the process as it would have without Ray (Ray's own handlers exit 1 or abort).
The Ray search of ``mine`` (:mod:`bitext_hf.mining.distributed`) runs in the same sessions.

:func:`encode_shards_ray` writes the same shard folder as :func:`bitext_hf.encoding.shards.write_shards` (it *is*
``write_shards``, fed by Ray tasks that encode its batches ahead, in parallel): same bytes, same manifest, the same
``--resume``; :func:`encode_ray` returns the embeddings of a text side in memory the same way (``mine``), and
:func:`encode_runs_ray` those of runs of consecutive sentences (``align``'s overlaps), each task given the runs
starting in a stretch of sentences and the sentences they cover, so that an encoder that composes runs from one pass
over the sentences does so in the task. Each
worker process loads the encoder once and keeps it for every batch it is given; with a GPU in the
cluster every task asks for one (``num_gpus=1``).

A task whose worker dies is retried by Ray (``retries``); past that, or when a task raises, the error is one line
and nothing is presented as complete (shards: no manifest).

No task is ever cancelled (``ray.cancel``), here or in the Ray searches of ``mine``: Ray's driver aborts the whole
process (``Check failed: ... Tried to complete task that was not pending``) when a cancellation reaches a task
whose reply it is processing (the driver takes the task out of its executing set, then completes it; a cancellation
in between fails it first), with or without ``force`` (ray-project/ray#54846). The tasks still in flight after a
failure or a signal end with the session instead: a local instance is shut down with its workers, and a cluster
kills a job's tasks when its driver disconnects. In a session of the caller's own (``ray.init`` before the call),
which is left running, they finish their batch (at most ``workers`` of them) and their results are dropped (Ray
logs the error of one that fails as unhandled).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn
from urllib.parse import urlsplit

import numpy as np

from bitext_hf.encoders.base import check_runs, check_sentences
from bitext_hf.errors import BitextError, UsageError

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_RETRIES",
    "check_ray",
    "check_ray_address",
    "encode_ray",
    "encode_runs_ray",
    "encode_shards_ray",
    "encoder_loader",
    "gpus_per_task",
    "import_ray",
    "ray_failure",
    "ray_session",
]

logger = logging.getLogger("bitext_hf")

# Seconds the check of --ray-address waits in all (the TCP connection and Ray's answer): a cluster's head answers in
# milliseconds; Ray's own client would retry an unreachable address for minutes.
DEFAULT_CONNECT_TIMEOUT = 10.0
# Times Ray runs a task again after its worker died (killed, out of memory, a machine lost).
DEFAULT_RETRIES = 2
_RAY_PORT, _CLIENT_PORT = 6379, 10001


def import_ray():
    """The ``ray`` module; a ``UsageError`` (exit 2) saying how to install it when it is not installed."""
    try:
        import ray
    except ImportError:
        raise UsageError(
            '--distributed ray needs Ray: pip install "bitext-hf[distributed]" (or pip install ray)'
        ) from None
    return ray


# ----------------------------------------------------------------------------------------------------- session


def check_ray(address: str | None) -> None:
    """What a job asked to run with Ray checks before it reads anything: Ray installed (:func:`import_ray`) and
    ``address``, when given, answering as a Ray head (:func:`check_ray_address`)."""
    import_ray()
    if address:
        check_ray_address(address)


def check_ray_address(address: str, timeout: float = DEFAULT_CONNECT_TIMEOUT) -> None:
    """Refuse (``UsageError``, exit 2) a Ray address where no Ray head answers within ``timeout`` seconds in all:
    ``HOST:PORT`` (the head's GCS, port 6379 by default) or ``ray://HOST:PORT`` (Ray Client, 10001). ``auto`` (the
    cluster this machine belongs to) is left to Ray, which answers at once when there is none.

    First a TCP connection (a closed port or an unreachable host is named as such), then one call that only a Ray
    head answers (:func:`_ray_head_answer`): a server of another kind on that port (HTTP, or one that accepts and
    stays silent) would otherwise make ``ray.init`` retry for ever without a word."""
    if address == "auto":
        return
    deadline = time.monotonic() + timeout
    client = address.startswith("ray://")
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port or (_CLIENT_PORT if client else _RAY_PORT)
    except ValueError:
        host = None
    if not host:
        raise UsageError(f"--ray-address {address}: not an address; give HOST:PORT, ray://HOST:PORT or auto")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as error:
        reason = f"no answer within {timeout:g} s" if isinstance(error, TimeoutError) else error.strerror or error
        raise UsageError(
            f"--ray-address {address}: no Ray cluster reachable at {host}:{port} ({reason}); "
            "start one with `ray start --head`, or leave out --ray-address for a local Ray instance"
        ) from None
    refusal = _ray_head_answer(host, port, client, max(0.1, deadline - time.monotonic()))
    if refusal is not None:
        service = "a Ray Client server" if client else "a Ray cluster's head (GCS)"
        raise UsageError(
            f"--ray-address {address}: {host}:{port} answers but is not {service} ({refusal}); give the address "
            "`ray start --head` printed, or leave out --ray-address for a local Ray instance"
        )


def _ray_head_answer(host: str, port: int, client: bool, timeout: float) -> str | None:
    """None when a Ray head answers at ``host:port`` within ``timeout`` seconds, else why not (one line).

    The call is one every Ray head serves and nothing else does, made with gRPC (what Ray speaks, installed with it)
    under a deadline: the GCS's ``GetClusterId``, or Ray Client's ping (``ClusterInfo`` of type ``PING``, the call
    Ray's own client connects with); an answer, or a refusal for want of Ray's auth token, is a Ray head. With TLS
    on (``RAY_USE_TLS``) the call would need Ray's certificates, so the TCP check is all that is made."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
        return None
    import grpc

    # Ray's own channels ignore http_proxy unless this is set: a probe through a proxy would test another path.
    proxy = int(os.environ.get("RAY_grpc_enable_http_proxy", "0").lower() in ("1", "true"))  # noqa: SIM112
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", proxy)]) as channel:
        try:
            if client:
                from ray.core.generated import ray_client_pb2, ray_client_pb2_grpc

                ping = ray_client_pb2.ClusterInfoRequest(type=ray_client_pb2.ClusterInfoType.PING)
                ray_client_pb2_grpc.RayletDriverStub(channel).ClusterInfo(ping, timeout=timeout)
            else:
                from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

                stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
                stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout)
        except grpc.RpcError as error:
            if error.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                return None  # a head that wants Ray's token (token auth): Ray, which ray.init authenticates to
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                return f"no Ray answer within {timeout:.0f} s"
            # gRPC's details end with the cause ("...: Failed parsing HTTP/2 (...)"): that part says what answered.
            cause = (error.details() or "").strip().splitlines()[:1]
            return ": ".join([error.code().name.lower(), *(line.rsplit(": ", 1)[-1] for line in cause)])
    return None


@contextlib.contextmanager
def _stderr_to_devnull() -> Iterator[None]:
    """File descriptor 2 to /dev/null: Ray's C++ client logs every retry of an address that answers but is not a Ray
    cluster on stderr (a line a second, past the logging module), and the command's failure is to be one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class _Terminated(BaseException):
    """Raised by the SIGTERM handler of a Ray session: it unwinds the command (each output removes its temp file)
    like a KeyboardInterrupt, and is no ``Exception``, so that no handler takes it for an error."""


def _raise_terminated(signum: int, frame) -> None:
    raise _Terminated


def _end_as_without_ray(previous) -> NoReturn:
    """Give SIGTERM back the handler it had before Ray and deliver it: by default the process dies of it, the
    status a run without Ray ends with (-15 to its parent)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    signal.raise_signal(signal.SIGTERM)
    raise KeyboardInterrupt  # SIGTERM is ignored or blocked here: the run is stopped all the same


def _init_ray(ray, address: str | None, options: dict, sigterm_before) -> None:
    """``ray.init`` with stderr silenced and its failures as one line (exit 2).

    ``ray.init`` replaces the SIGTERM handler with one that exits 1 without a word (``SystemExit``, also while it
    runs), and Ray's core worker with one that aborts (SIGABRT, a C++ stack on stderr): afterwards the handler the
    process had is put back (ignored, or the application's own), and the default one is replaced by
    :func:`_raise_terminated`, which :func:`ray_session` turns into a Ray shutdown and then the signal as before."""
    try:
        with _stderr_to_devnull():
            # "local": a new instance even where Ray would join another by itself (RAY_ADDRESS, or the address
            # file of the last `ray start` on this machine, still there after that cluster stopped).
            ray.init(address=address or "local", **options)
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"--ray-address {address}" if address else "a local Ray instance"
        raise UsageError(f"{where}: Ray could not start or connect ({str(error).splitlines()[0]})") from None
    except SystemExit:  # Ray's SIGTERM handler, while ray.init ran
        if threading.current_thread() is not threading.main_thread():
            raise
        with contextlib.suppress(Exception):
            ray.shutdown()
        _end_as_without_ray(sigterm_before)
    if threading.current_thread() is threading.main_thread():  # the only thread that may set handlers
        default = sigterm_before in (signal.SIG_DFL, None)
        signal.signal(signal.SIGTERM, _raise_terminated if default else sigterm_before)


@contextlib.contextmanager
def ray_session(address: str | None = None, workers: int | None = None) -> Iterator[int]:
    """Ray for the duration of a ``with`` block; yields how many tasks run at a time (``workers``, else the CPUs of
    the cluster).

    A session that is already initialized (a caller's own ``ray.init``) is used as it is and left running. Otherwise
    ``address`` is checked (:func:`check_ray_address`) and joined, or, without one, a new local instance is started
    (never one found through ``RAY_ADDRESS`` or the address file of a ``ray start``) with ``workers`` CPUs (all of
    this machine's by default), no dashboard and quiet logs; it is shut down at the end, also on a SIGTERM, after
    which the signal does what it would have done without Ray (by default: the process dies of it).
    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise UsageError(f"--workers must be an integer >= 1, got {workers!r}")
    ray = import_ray()
    if ray.is_initialized():
        yield workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        return
    if address is not None:
        check_ray_address(address)
    options: dict[str, Any] = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address is None:
        options.update(num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
    sigterm_before = signal.getsignal(signal.SIGTERM)
    _init_ray(ray, address, options, sigterm_before)
    terminated = False
    try:
        yield workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    except _Terminated:
        terminated = True
    finally:
        # The handler back first: a second SIGTERM while Ray shuts down does what it would do without Ray.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_DFL if sigterm_before is None else sigterm_before)
        ray.shutdown()
    if terminated:
        _end_as_without_ray(sigterm_before)


def gpus_per_task(ray) -> int:
    """One GPU a task when the cluster has GPUs (the task then runs its encoder or products on it), else none."""
    return 1 if ray.cluster_resources().get("GPU", 0) >= 1 else 0


def ray_failure(error: BaseException, what: str) -> BaseException:
    """A Ray error as the error to raise: the task's own exception when it raised one (an EncoderLoadError keeps
    its exit code), else one line saying that workers died or were lost (exit 1)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return BitextError(f"{what}: a Ray worker died or was lost and the retries ran out ({first})")


# ----------------------------------------------------------------------------------------------------- encode

# The encoders this worker process has loaded, by the token of the run that sent the loader: one load per process.
_WORKER_ENCODERS: dict[str, Callable[[list[str]], np.ndarray]] = {}


def _encode_batch(token: str, load: Callable[[], Callable[[list[str]], np.ndarray]], texts: list[str]) -> np.ndarray:
    """Ray task: encode one batch with this worker's encoder for the run ``token`` (loaded at its first batch)."""
    if token not in _WORKER_ENCODERS:
        _WORKER_ENCODERS.clear()  # an encoder of an earlier run is not needed again
        _WORKER_ENCODERS[token] = load()
    return np.asarray(_WORKER_ENCODERS[token](texts))


class _EncodedAhead:
    """The ``encode`` callable handed to ``write_shards``: it answers each batch from Ray tasks that encoded it, and
    keeps at most ``window`` batches in flight, the ones ``write_shards`` will ask for next.

    Why matched by content: ``write_shards`` asks for its batches in a fixed order (shard by shard, each split at
    ``ENCODE_CHUNK``) from the first shard it has to write, which only it knows (``--resume``). The first batch
    locates that shard; every later one is checked against the plan, and a batch off the plan is located again.
    Equal texts give equal embeddings, so a batch matched at another place with the same texts is still right.
    """

    def __init__(self, ray, remote, texts: Sequence[str], shard_size: int, window: int, what: str) -> None:
        from bitext_hf.encoding.shards import ENCODE_CHUNK

        self.ray, self.remote, self.texts, self.window, self.what = ray, remote, texts, window, what
        self.batches = [
            (start, min(start + ENCODE_CHUNK, shard_start + shard_size, len(texts)))
            for shard_start in range(0, len(texts), shard_size)
            for start in range(shard_start, min(shard_start + shard_size, len(texts)), ENCODE_CHUNK)
        ]
        self.next_batch = 0  # the plan position of the next batch write_shards should ask for
        self.in_flight: deque = deque()  # (plan position, ObjectRef), in plan order

    def _locate(self, batch: list[str]) -> int:
        for position, (start, stop) in enumerate(self.batches):
            if stop - start == len(batch) and list(self.texts[start:stop]) == batch:
                return position
        raise RuntimeError(f"{self.what}: write_shards asked for a batch that is not in its plan")

    def _fill(self) -> None:
        submitted = self.in_flight[-1][0] + 1 if self.in_flight else self.next_batch
        while len(self.in_flight) < self.window and submitted < len(self.batches):
            start, stop = self.batches[submitted]
            self.in_flight.append((submitted, self.remote(list(self.texts[start:stop]))))
            submitted += 1

    def __call__(self, batch: list[str]) -> np.ndarray:
        position = self.next_batch
        if position >= len(self.batches) or batch != list(self.texts[slice(*self.batches[position])]):
            self.in_flight.clear()  # left to finish, not cancelled (the module's docstring says why)
            position = self._locate(batch)
        self.next_batch = position
        self._fill()
        # No refill while waiting: the batch waited for still runs, so ``window`` tasks (the --workers the user
        # allows) are the most that run at once, also on a cluster with more CPUs than that.
        _, ref = self.in_flight.popleft()
        self.next_batch = position + 1
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayError as error:
            raise ray_failure(error, self.what) from None


def _encoding_ahead(
    load_encoder, texts: Sequence[str], shard_size: int, slots: int, retries: int, what: str, token: str | None = None
):
    """An :class:`_EncodedAhead` over ``texts`` whose batches are Ray tasks of this session, ``slots`` at a time,
    each worker loading the encoder once for this run (its ``token``; default: this call's own)."""
    ray = import_ray()
    token = token or uuid.uuid4().hex
    load_ref = ray.put(load_encoder)
    task = ray.remote(_encode_batch).options(num_cpus=1, num_gpus=gpus_per_task(ray), max_retries=retries)
    return _EncodedAhead(ray, lambda batch: task.remote(token, load_ref, batch), texts, shard_size, slots, what)


def encode_shards_ray(
    folder: str | os.PathLike,
    texts: Sequence[str],
    load_encoder: Callable[[], Callable[[list[str]], np.ndarray]],
    *,
    encoder: str | None,
    shard_size: int | None = None,
    dtype: str = "float32",
    resume: bool = False,
    show_progress: bool = False,
    address: str | None = None,
    workers: int | None = None,
    retries: int = DEFAULT_RETRIES,
):
    """:func:`bitext_hf.encoding.shards.write_shards` with the encoding done by Ray tasks in parallel: the same folder,
    byte for byte, for a deterministic encoder.

    Args:
        load_encoder: called once in each worker process; returns sentences -> float32 (n, d) embeddings. It is
            pickled to the workers (cloudpickle): a ``functools.partial`` of an importable function, for instance.
        address, workers: see :func:`ray_session`.
        retries: times a batch is encoded again after its worker died.
        Other arguments as in ``write_shards``.

    Returns:
        (the manifest, how many sentences this call encoded), as ``write_shards``.

    Raises:
        BitextError: workers kept dying (exit 1); a shard folder in progress is left for ``--resume``.
        The task's own error when the encoder raised (``EncoderLoadError``: exit 4).
    """
    from bitext_hf.encoding.shards import DEFAULT_SHARD_SIZE, check_shard_folder, write_shards

    shard_size = shard_size or DEFAULT_SHARD_SIZE
    check_shard_folder(os.fspath(folder), resume=resume)  # before starting Ray: a wrong folder costs nothing
    with ray_session(address, workers) as slots:
        ahead = _encoding_ahead(load_encoder, texts, shard_size, slots, retries, f"encoding {folder}")
        return write_shards(
            folder,
            texts,
            ahead,
            encoder=encoder,
            shard_size=shard_size,
            dtype=dtype,
            resume=resume,
            show_progress=show_progress,
        )


def encode_ray(
    texts: Sequence[str],
    load_encoder: Callable[[], Callable[[list[str]], np.ndarray]],
    *,
    address: str | None = None,
    workers: int | None = None,
    retries: int = DEFAULT_RETRIES,
    what: str = "sentences",
    run_token: str | None = None,
) -> np.ndarray:
    """The embeddings of ``texts`` (float32, in order), encoded by Ray tasks in batches of the shard writer's size,
    at most ``workers`` at a time: what ``mine --distributed ray`` does with a side given as text. Arguments as in
    :func:`encode_shards_ray`; the batches are those a shard folder of one shard would be encoded in. ``run_token``:
    the workers keep the encoder loaded for every call with the same token (one run's calls; default: this call
    alone)."""
    if not len(texts):
        raise UsageError(f"{what}: nothing to encode")
    with ray_session(address, workers) as slots:
        ahead = _encoding_ahead(load_encoder, texts, len(texts), slots, retries, f"encoding {what}", run_token)
        parts = [ahead(list(texts[start:stop])) for start, stop in ahead.batches]
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


# Sentences a task of ``encode_runs_ray`` is given, at most: enough for the composition's pass to fill its batches,
# small enough that a few tasks keep every worker busy.
RUNS_TASK_SENTENCES = 4096
# ... and at least, where the runs are split among the workers.
RUNS_TASK_MIN_SENTENCES = 256


def encode_runs_ray(
    sentences: Sequence[str],
    runs: Sequence[tuple[int, int]],
    load_encoder: Callable[[], Callable[[list[str]], np.ndarray]],
    *,
    address: str | None = None,
    workers: int | None = None,
    retries: int = DEFAULT_RETRIES,
    what: str = "runs",
    run_token: str | None = None,
) -> np.ndarray:
    """The embeddings of ``" ".join(sentences[start:end])`` for each ``(start, end)`` of ``runs`` (float32, in order),
    encoded by Ray tasks, at most ``workers`` at a time. Each task gets the runs starting in a stretch of consecutive
    sentences and the sentences they cover (``run_tasks``: at least one task a worker, of 256 to 4,096 sentences);
    it calls the loaded encoder's ``encode_runs(sentences, runs)`` where it has one (the default encoder composes the
    runs from one pass over the sentences), else encodes the joined texts. ``run_token``: the workers keep the
    encoder loaded for every call with the same token (one run's calls; default: this call alone). Other arguments
    as in :func:`encode_ray`."""
    if not len(runs):
        raise UsageError(f"{what}: nothing to encode")
    sentences = check_sentences(sentences)  # before Ray starts: a wrong sentence or run costs nothing
    runs = check_runs(runs, len(sentences))
    ray = import_ray()
    output = None
    with ray_session(address, workers) as slots:
        size = -(-len(sentences) // max(slots, 1))
        tasks = _tasks_of(runs, min(max(size, RUNS_TASK_MIN_SENTENCES), RUNS_TASK_SENTENCES))
        token = run_token or uuid.uuid4().hex
        load_ref = ray.put(load_encoder)
        task = ray.remote(_encode_runs_batch).options(num_cpus=1, num_gpus=gpus_per_task(ray), max_retries=retries)
        pending: deque = deque()
        submitted = 0
        while submitted < len(tasks) or pending:
            while submitted < len(tasks) and len(pending) < slots:
                (low, high), numbers = tasks[submitted]
                task_runs = [(runs[n][0] - low, runs[n][1] - low) for n in numbers]
                pending.append((numbers, task.remote(token, load_ref, list(sentences[low:high]), task_runs)))
                submitted += 1
            numbers, ref = pending.popleft()
            try:
                vectors = np.asarray(ray.get(ref), dtype=np.float32)
            except ray.exceptions.RayError as error:
                raise ray_failure(error, f"encoding {what}") from None
            if output is None:
                output = np.empty((len(runs), vectors.shape[1]), dtype=np.float32)
            output[numbers] = vectors
    return output


def run_tasks(runs: Sequence[tuple[int, int]], sentences: int, size: int) -> list[tuple[tuple[int, int], list[int]]]:
    """``runs`` (``(start, end)`` over ``sentences`` sentences) split into tasks by where they start, about ``size``
    sentences of starts a task: ``((low, high), run numbers)``, the sentences ``low .. high - 1`` covering every run
    of the task (two tasks share the few sentences that runs from the first reach into). Runs are checked as
    :func:`~bitext_hf.encoders.base.check_runs` checks them; ``size`` is a whole number of at least 1."""
    if not isinstance(size, int | np.integer) or isinstance(size, bool) or size < 1:
        raise ValueError(f"a task holds at least 1 sentence's starts, not {size!r}")
    if not isinstance(sentences, int | np.integer) or isinstance(sentences, bool) or sentences < 0:
        raise ValueError(f"the runs lie over a number of sentences (0 or more), not {sentences!r}")
    return _tasks_of(check_runs(runs, sentences), size)


def _tasks_of(runs: list[tuple[int, int]], size: int) -> list[tuple[tuple[int, int], list[int]]]:
    """:func:`run_tasks` of runs already checked."""
    tasks, low, reach, members = [], 0, 0, []
    for number in sorted(range(len(runs)), key=lambda number: runs[number]):
        start, end = runs[number]
        if members and start - low >= size:
            tasks.append(((low, reach), members))
            members = []
        if not members:
            low, reach = start, end
        members.append(number)
        reach = max(reach, end)
    if members:
        tasks.append(((low, reach), members))
    return tasks


def _encode_runs_batch(token: str, load: Callable[[], Any], sentences: list[str], runs: list) -> np.ndarray:
    """Ray task: the vectors of ``runs`` over ``sentences``, with this worker's encoder for the run ``token``."""
    if token not in _WORKER_ENCODERS:
        _WORKER_ENCODERS.clear()
        _WORKER_ENCODERS[token] = load()
    encode = _WORKER_ENCODERS[token]
    if hasattr(encode, "encode_runs"):
        return np.asarray(encode.encode_runs(sentences, runs))
    return np.asarray(encode([" ".join(sentences[start:end]) for start, end in runs]))


class _WorkerEncoder:
    """What a worker calls: ``encode(texts)``, and ``encode_runs`` where the encoder composes runs."""

    def __init__(self, encoder, batch_size: int) -> None:
        self.encoder, self.batch_size = encoder, batch_size
        if hasattr(encoder, "encode_runs"):
            self.encode_runs = lambda sentences, runs: encoder.encode_runs(sentences, runs, show_progress=False)

    def __call__(self, texts: list[str]) -> np.ndarray:
        return self.encoder.encode(texts, batch_size=self.batch_size, show_progress=False)


def _load_encode(loader: Callable[..., Any], spec: str | None, pooling: str | None, batch_size: int, runtime: dict):
    encoder = loader(spec, pooling=pooling, **{name: value for name, value in runtime.items() if value is not None})
    return _WorkerEncoder(encoder, batch_size)


def encoder_loader(
    spec: str | None,
    *,
    pooling: str | None = None,
    batch_size: int = 128,
    quantize: str | None = None,
    backend: str | None = None,
):
    """A picklable ``load_encoder`` for :func:`encode_shards_ray`: ``bitext_hf.encoders.load_encoder(spec,
    pooling=..., quantize=..., backend=...)`` in each worker (the last two only when given), encoding ``batch_size`` sentences a batch. The loader function is taken here, in
    the driver, so that a replaced one (a test's fake) is the one the workers run."""
    import functools

    from bitext_hf import encoders

    runtime = {"quantize": quantize, "backend": backend}
    return functools.partial(_load_encode, encoders.load_encoder, spec, pooling, batch_size, runtime)
