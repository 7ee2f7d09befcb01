"""The watchdog's sweep of a pool's processes on a host: what names the pool directory on
its command line or in its environment goes, with its descendants; another pool's stays."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from skyward.core import messages
from skyward.core.codec import read_marker
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


def _raylet(pool_dir: str, termed: Path) -> subprocess.Popen[bytes]:
    """A process named as Ray's raylet whose SIGTERM writes ``termed`` and is otherwise
    ignored, as a joining raylet's is while it tells a store that is gone that it leaves."""
    code = (
        "import ctypes, pathlib, signal, time; "
        f"signal.signal(signal.SIGTERM, lambda *_: pathlib.Path({str(termed)!r}).touch()); "
        "ctypes.CDLL(None).prctl(15, b'raylet', 0, 0, 0); print(flush=True); time.sleep(60)"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, POOL_ENV: pool_dir}, stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    process.stdout.readline()  # renamed, its handler set
    return process


@pytest.mark.parametrize("leaving", [False, True])
def test_a_raylet_is_killed_when_the_pool_closes_and_terminated_when_its_host_leaves(
    tmp_path: Path, leaving: bool,
) -> None:
    """When every host stops the pool at once, the head's store may be gone before a
    joining host's raylet has told it that it leaves, and that raylet then waits out
    its whole grace: so it is killed, without one, once the rest have ended. A host
    that leaves a pool that goes on terminates it, so the store hears it left."""
    pool_dir = str(tmp_path / "skyward-abc-n1")
    termed = tmp_path / "termed"
    raylet = _raylet(pool_dir, termed)
    try:
        assert psutil.Process(raylet.pid).name() == "raylet"
        started = time.monotonic()
        stop_pool(pool_dir, leaving=leaving)
        took = time.monotonic() - started
        assert raylet.wait(10) is not None
        assert termed.exists() == leaving
        if not leaving:
            assert took < TERM_GRACE, f"the pool's close waited {took:.1f} s for a raylet whose store was gone"
    finally:
        if raylet.poll() is None:
            raylet.kill()


def test_a_client_that_rejoins_before_ttl_keeps_the_pool_and_stops_it(tmp_path: Path) -> None:
    """The pool daemon's successor rejoins a watchdog whose client died (``--rejoin``):
    the countdown stops while it heartbeats, and its ``CLOSE`` ends the pool, said back to it."""
    from skyward.providers.ssh import watchdog

    pool_dir = tmp_path / "skyward-abc-n0"
    pool_dir.mkdir(mode=0o700)
    script = watchdog.__file__
    dog = subprocess.Popen(
        [sys.executable, "-u", script, str(pool_dir), "2", "0.5", "stay"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    proxy: subprocess.Popen[str] | None = None
    try:
        assert dog.stdout is not None and dog.stdin is not None
        assert read_marker(dog.stdout.readline()) == messages.Watching()
        dog.stdin.close()  # the client died: ttl=2 s from now
        proxy = subprocess.Popen(
            [sys.executable, "-u", script, watchdog.REJOIN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert proxy.stdin is not None and proxy.stdout is not None
        proxy.stdin.write(f"{pool_dir}\n")
        proxy.stdin.flush()
        assert read_marker(proxy.stdout.readline()) == messages.Watching()
        for _ in range(10):  # 5 s: past ttl and the silence limit
            proxy.stdin.write("beat\n")
            proxy.stdin.flush()
            time.sleep(0.5)
        assert dog.poll() is None and pool_dir.is_dir(), "the rejoined pool was stopped"
        proxy.stdin.write(f"{watchdog.CLOSE}\n")
        proxy.stdin.flush()
        assert read_marker(proxy.stdout.readline()) == messages.Stopped()
        assert dog.wait(10) == 0 and proxy.wait(10) == 0
        assert not pool_dir.exists()
    finally:
        for process in (dog, proxy):
            if process is not None and process.poll() is None:
                process.kill()


def test_rejoining_a_pool_whose_watchdog_is_gone_says_so(tmp_path: Path) -> None:
    from skyward.providers.ssh import watchdog

    done = subprocess.run(
        [sys.executable, watchdog.__file__, watchdog.REJOIN], input=f"{tmp_path}\n", capture_output=True, text=True,
        timeout=30,
    )
    assert done.returncode == 1 and isinstance(read_marker(done.stdout), messages.WatchdogGone), done.stdout + done.stderr


def test_another_account_cannot_rejoin_a_watchdog() -> None:
    """The rejoin socket is this user's alone (mode 0600, peer uid checked), even in a
    pool directory another account can enter."""
    from stranger import stranger

    from skyward.providers.ssh import watchdog

    base = tempfile.mkdtemp(prefix="skyward-dog-", dir="/tmp")
    pool_dir = os.path.join(base, "skyward-abc-n0")
    os.mkdir(pool_dir)
    os.chmod(base, 0o755)
    os.chmod(pool_dir, 0o755)  # open, as a misconfigured host's would be: the socket still refuses
    dog = subprocess.Popen(
        [sys.executable, "-u", watchdog.__file__, pool_dir, "0", "5", "stay"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert dog.stdout is not None and read_marker(dog.stdout.readline()) == messages.Watching()
        socket_path = os.path.join(pool_dir, watchdog.SOCKET)
        assert os.stat(socket_path).st_mode & 0o777 == 0o600
        with stranger() as probe:
            assert probe.run({"op": "unix", "paths": [socket_path]}) == {socket_path: "EACCES"}
        assert dog.poll() is None, "a stranger's attempt ended the watchdog"
    finally:
        dog.kill()
        dog.wait()
        shutil.rmtree(base, ignore_errors=True)
