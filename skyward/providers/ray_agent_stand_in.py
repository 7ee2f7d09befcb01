"""Takes the place of Ray's dashboard agent on a node skyward starts (``ray_start.lean``).

Run by the raylet as ``python -S ray_agent_stand_in.py ARGS`` with the arguments Ray
gives its dashboard agent. It does what Ray's minimal dashboard agent does for a node
that runs no dashboard: it reports "no service" (-1) for the metrics agent, metrics
export and HTTP ports, which the raylet waits for before it registers with the GCS, and
lives as long as the raylet (which ends itself when an agent ends). It imports the
standard library only (``-S`` leaves site-packages, skyward included, off the path), so
it is ready in tens of milliseconds, where Ray's agent boots Ray in Python first
(0.4-0.7 s of CPU on a start's busiest moment).
"""

from __future__ import annotations

import os
import stat
import sys
import time

PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port")
"""The ports Ray's dashboard agent reports (``ray._raylet``'s ``*_PORT_NAME``)."""
NO_SERVICE = "-1"
"""What a port file holds for a service that does not run (Ray's minimal agent writes it)."""
PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"
"""Set by the raylet when it holds the write end of a pipe on the agent's stdin."""
POLL = 1.0
"""Seconds between checks that the raylet lives, when it does not hold a pipe."""


def option(name: str, argv: list[str]) -> str:
    """The value of ``--name=VALUE`` in ``argv``; SystemExit naming it when absent."""
    prefix = f"--{name}="
    for arg in argv:
        if arg.startswith(prefix):
            return arg[len(prefix):]
    raise SystemExit(f"skyward's Ray agent stand-in: no --{name}= among its arguments")


def report(session_dir: str, node_id: str) -> None:
    """Write each of ``PORTS`` as not in use, as Ray's port files are named and read."""
    for port in PORTS:
        path = os.path.join(session_dir, f"{port}_{node_id}")
        partial = f"{path}.{os.getpid()}"
        with open(partial, "w", encoding="ascii") as file:
            file.write(NO_SERVICE)
        os.replace(partial, path)


def wait_for_raylet_end(raylet: int) -> None:
    """Return once the raylet (pid ``raylet``, this process's parent) has ended."""
    if os.environ.get(PIPE_CHECK, "").lower() in ("1", "true") and _piped():
        while os.read(0, 4096):  # the raylet writes nothing; end of file: it is gone
            pass
        return
    while os.getppid() == raylet:
        time.sleep(POLL)


def _piped() -> bool:
    """Whether stdin is a pipe (not /dev/null, a file or closed)."""
    try:
        return stat.S_ISFIFO(os.fstat(0).st_mode)
    except OSError:
        return False


def main(argv: list[str]) -> None:
    report(option("session-dir", argv), option("node-id", argv))
    wait_for_raylet_end(int(os.environ.get("RAY_RAYLET_PID", os.getppid())))


if __name__ == "__main__":
    main(sys.argv[1:])
