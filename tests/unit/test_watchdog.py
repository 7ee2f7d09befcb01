"""The watchdog's sweep of a pool's processes on a host: what names the pool directory on
its command line or in its environment goes, with its descendants; another pool's stays."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from skyward.providers.ssh.watchdog import POOL_ENV, TERM_GRACE, pool_processes, stop_pool

SLEEPER = "import time; time.sleep(60)"


def _start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", SLEEPER, *args], env={**os.environ, **(env or {})}, start_new_session=True,
    )


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        process.kill()
        process.wait()


def _orphan(pool_dir: str) -> int:
    """A process whose parent has exited and whose command line does not name the pool
    (a Ray worker that retitled itself and outlived its raylet); only its environment does."""
    spawner = (
        "import os, subprocess, sys; "
        f"p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], start_new_session=True, "
        "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(p.pid)"
    )
    out = subprocess.run(
        [sys.executable, "-c", spawner], env={**os.environ, POOL_ENV: pool_dir}, capture_output=True, check=True,
    )
    return int(out.stdout)


def test_the_sweep_takes_the_pool_s_processes_by_name_and_by_environment(
    tmp_path: Path, started: list[subprocess.Popen[bytes]],
) -> None:
    pool_dir = str(tmp_path / "skyward-abc-n1")
    named = _start(pool_dir + "/ray")
    marked = _start(env={POOL_ENV: pool_dir})
    other = _start(pool_dir + "0", env={POOL_ENV: pool_dir + "0"})  # /…-n10 is not /…-n1
    started += [named, marked, other]
    orphan = _orphan(pool_dir)
    try:
        found = {p.pid for p in pool_processes(pool_dir)}
        assert {named.pid, marked.pid, orphan} <= found
        assert other.pid not in found

        stop_pool(pool_dir)
        assert named.wait(10) is not None and marked.wait(10) is not None
        assert not psutil.pid_exists(orphan) or psutil.Process(orphan).status() == psutil.STATUS_ZOMBIE
        assert other.poll() is None, "another pool's process was stopped"
    finally:
        if psutil.pid_exists(orphan):
            psutil.Process(orphan).kill()


def test_a_process_that_ended_unreaped_does_not_hold_the_sweep(tmp_path: Path) -> None:
    """A stopped process whose parent has not reaped it yet (a zombie: init can take a
    second) has ended; the sweep does not wait out its grace for it."""
    pool_dir = str(tmp_path / "skyward-abc-n1")
    parent = (
        "import os, subprocess, sys, time; "
        f"env = dict(os.environ, {POOL_ENV}={pool_dir!r}); "
        f"p = subprocess.Popen([sys.executable, '-c', {SLEEPER!r}], env=env); print(p.pid, flush=True); time.sleep(60)"
    )
    keeper = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert keeper.stdout is not None
        child = int(keeper.stdout.readline())
        started = time.monotonic()
        stop_pool(pool_dir)
        assert time.monotonic() - started < TERM_GRACE, "the sweep waited out the grace for a process that had ended"
        assert psutil.Process(child).status() == psutil.STATUS_ZOMBIE
        assert keeper.poll() is None, "the unmarked parent was stopped"
    finally:
        keeper.kill()
        keeper.wait()
