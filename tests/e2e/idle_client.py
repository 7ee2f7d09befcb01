"""A client with an idle local pool that a test kills (``python -m tests.e2e.fault_client
idle`` in a subprocess), and a wait for what its death must take with it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from sandbox import own_home

from skyward.providers.local.reaper import live_marked

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class IdleClient:
    """A started idle client. Its processes are psutil processes, which know their start
    time: a pid reused later is not theirs; those that ended before the test looked are
    left out."""

    process: subprocess.Popen[str]
    temp_dir: str
    """Its pool's Ray temp dir: the value of the mark its pool's processes carry."""
    agents: list[psutil.Process]
    """Its pool's two node agents."""
    started: list[psutil.Process]
    """Every process the client had started when it opened the pool: Ray's, its reaper."""
    bystander: psutil.Process
    """A process the client started of its own: no end of the pool may touch it."""
    shm: set[str]
    """What was in /dev/shm before the client started."""

    def wait_for_its_pool_to_go(self, within: float) -> None:
        """Wait up to ``within`` seconds until no process of the pool is left (those that
        carry its mark, and all the client had started: the reaper too) and its temp dir
        is gone."""
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            left = live_marked(self.temp_dir) + [process for process in self.started if running(process)]
            if not left and not os.path.exists(self.temp_dir):
                return
            time.sleep(0.2)


@contextlib.contextmanager
def idle_client(home: Path, **popen: Any) -> Iterator[IdleClient]:
    """Start the client (its skyward home in ``home``: a killed one leaves its pool's
    record there; ``popen``: further arguments of its ``Popen``) and yield it once its
    pool runs its tasks; on exit, kill its bystander, and the client if still running."""
    shm = set(os.listdir("/dev/shm"))
    with subprocess.Popen([sys.executable, "-m", "tests.e2e.fault_client", "idle"], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=own_home(home), **popen) as process:
        try:
            info = json.loads(process.stdout.readline())
            client = IdleClient(
                process, info["temp_dir"], _processes(info["agents"]), _processes(info["started"]),
                psutil.Process(info["bystander"]), shm,
            )
            try:
                assert process.stdout.readline().strip() == "READY"
                assert live_marked(client.temp_dir)  # the test sees the pool's processes
                yield client
            finally:
                with contextlib.suppress(psutil.NoSuchProcess):
                    client.bystander.kill()  # psutil checks that the pid is still that process's
        finally:
            if process.poll() is None:
                process.kill()


def _processes(pids: list[int]) -> list[psutil.Process]:
    """The processes of ``pids`` that still run."""
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(psutil.Process(pid))
    return found


def running(process: psutil.Process) -> bool:
    """Whether ``process`` has not ended (a zombie has; a pid reused by another has)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

