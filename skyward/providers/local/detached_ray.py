"""The pool daemon's Ray instance: one that outlives the daemon, so the local pools it
keeps survive the daemon's death (SIGKILL, an OOM kill) for its successor to adopt.

``ray.init`` binds the processes it starts to the process that called it (the kernel
kills them with it); ``ray start --head`` does not. So the daemon starts its instance
with ``ray start``, lean (``providers/ray_start.py``: 127.0.0.1, no API server,
autoscaler or log monitor, no one-second wait for the raylet; token auth with
a random token passed through the environment, usage stats off) in a private directory
(mode 0700, ``LocalRay``'s layout), and then joins it as any client joins the pool
daemon's instance. Every process of the instance carries ``reaper.mark``, so ``stop``
(and the daemon's reaper) end it all by that mark.

No port is named on ``ray start``'s command line (``ray_ports.SELF_BOUND``): every Ray
process binds port 0 and reports what it got, and the GCS's address is read afterwards
from the instance's private directory. A port picked in advance would be on a command
line every user can read, and whoever binds it first receives Ray's token from the
processes that connect to it (docs/security.md).
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from skyward.providers import ray_ports
from skyward.providers.local.reaper import live_marked, mark, sweep

START_TIMEOUT = 90.0
"""Seconds ``ray start`` may take."""


@dataclass(frozen=True, slots=True)
class DetachedRay:
    """A running detached instance: what a process needs to join it (``LocalRay``'s
    ``Engine``) and to stop it."""

    address: str
    token: str
    temp_dir: str

    def alive(self) -> bool:
        """Whether its GCS still answers on its port and its processes still run."""
        host, _, port = self.address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=2):
                pass
        except (OSError, ValueError):
            return False
        return bool(live_marked(self.temp_dir))

    def stop(self) -> None:
        """End every process of the instance and remove its directory."""
        sweep(self.temp_dir)


def start() -> DetachedRay:
    """Start a detached instance (see the module). RuntimeError with ``ray start``'s
    output when it fails; nothing of it is left running then."""
    from skyward.providers.local.ray_instance import ENVIRONMENT, RAY_DIR  # imports Ray: only here

    temp_dir = tempfile.mkdtemp(prefix="sky-")  # mode 0700
    token = secrets.token_hex(32)
    env = {**os.environ, **ENVIRONMENT, "RAY_AUTH_TOKEN": token, **mark(temp_dir)}
    ray_dir = os.path.join(temp_dir, RAY_DIR)
    command = [
        sys.executable, "-m", "skyward.providers.ray_start", "start", "--head", *ray_ports.HEAD,
        "--node-ip-address=127.0.0.1", f"--num-cpus={os.cpu_count() or 1}", f"--temp-dir={ray_dir}",
        "--include-dashboard=false", "--no-monitor", "--include-log-monitor=false", "--disable-usage-stats",
        "--log-style=record", "--log-color=false",
    ]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=START_TIMEOUT, start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        sweep(temp_dir)
        raise RuntimeError(f"`ray start` did not finish within {START_TIMEOUT:g}s") from None
    if done.returncode != 0:
        sweep(temp_dir)
        output = (done.stdout + done.stderr).replace(token, "***")[-3000:]
        raise RuntimeError(f"`ray start` failed (exit {done.returncode}):\n{output}")
    try:
        port = ray_ports.gcs_port(ray_dir)
    except RuntimeError:
        sweep(temp_dir)
        raise
    return DetachedRay(f"127.0.0.1:{port}", token, temp_dir)
