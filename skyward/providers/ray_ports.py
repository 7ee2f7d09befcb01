"""Ray's ports, bound by their owners: ``ray start`` arguments that name no port number
in advance, and where the GCS's port is found afterwards.

Every user of a machine can read every command line in /proc. A port number picked by
skyward (bind port 0, close, pass the number on) is on ``ray start``'s command line a
second or more before its owner binds it; another user who binds it first receives
Ray's token from every process that connects (the token travels as a gRPC header). So
each Ray process binds port 0 itself and reports the port it got (Ray 2.54 and later),
and ``ray start`` writes the GCS's address to ``ray_current_cluster`` in its temp dir.
"""

from __future__ import annotations

import os

SELF_BOUND = (
    "--dashboard-agent-listen-port=0",  # ray start's default is a fixed 52365
    "--dashboard-agent-grpc-port=0",
    "--runtime-env-agent-port=0",
    "--metrics-export-port=0",
    "--min-worker-port=0",  # workers bind port 0, not one of 10002-19999 the raylet hands out
    "--max-worker-port=0",
)
"""``ray start`` arguments for every node: each agent and worker binds a port of its own."""
HEAD = ("--port=0", *SELF_BOUND)
"""``ray start --head`` arguments: the GCS too binds a port of its own."""
ADDRESS_FILE = "ray_current_cluster"
"""The file in Ray's temp dir where ``ray start`` writes the GCS's ``host:port``."""


def gcs_port(ray_dir: str) -> int:
    """The GCS's port that ``ray start --head --temp-dir=ray_dir`` wrote down.
    RuntimeError naming the file when it is missing or unreadable."""
    path = os.path.join(ray_dir, ADDRESS_FILE)
    try:
        with open(path, encoding="utf-8") as file:
            return port_of(file.read())
    except (OSError, ValueError) as error:
        raise RuntimeError(f"`ray start` left no GCS address in {path}: {error}") from None


def port_of(address: str) -> int:
    """The port of a ``host:port`` address; ValueError naming it when there is none."""
    host, _, port = address.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"not a host:port address: {address.strip()!r}")
    return int(port)
