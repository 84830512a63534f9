"""A TCP port of this machine that nothing listens on (bound, then released), for the tests that start servers,
launchers and clusters, or need an address where no server answers."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
