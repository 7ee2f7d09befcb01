"""The reaper: a tiny process that outlives a client killed outright (SIGKILL, a crash)
and removes what its private local Ray instance left.

``Reaper.start(temp_dir)`` runs ``python -m skyward.providers.local.reaper TEMP_DIR`` in a
session of its own (Ctrl-C in the terminal does not reach it), with a pipe from the
client on its stdin. Every process of the Ray instance (GCS, raylet, node agents,
collection hosts, executor children) inherits ``MARKER=TEMP_DIR`` (``mark``) from the
environment the client starts Ray with, and nothing else the client starts does
(``ray_instance``).
When the pipe closes, the client is gone, in order (``stop``) or not, and
the reaper kills every process carrying the marker and removes the temp dir, all within
a few seconds, then exits.

The pool daemon's reaper may **linger** (``Reaper.start(temp_dir, linger=True)``): while
the daemon keeps local pools it writes, in ``temp_dir/LINGER_FILE``, until when they are
to be kept if it dies (their ``keep_alive``). When the daemon dies, its reaper waits until
then for a successor to claim the instance (the successor writes its pid in
``temp_dir/OWNER_FILE``): claimed, it exits and leaves everything to the successor;
unclaimed by then, it sweeps as above.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

MARKER = "SKYWARD_LOCAL_RAY"
KEEP_ENVIRONMENT = "SPT_NOENV"
"""Set to 1 with the mark: a process that retitles itself through ``setproctitle`` (Ray's
dashboard and runtime-env agents do, "ray::RuntimeEnvAgent") then leaves its environment
in place, where ``live_marked`` reads the mark; without it the title overwrites the
environment with zeros and ``sweep`` cannot find those agents, which outlive their raylet
by seconds as a rule (once by two minutes). Ray sets it for its workers itself."""
SWEEP_TIMEOUT = 8.0
STOP_WAIT = 2.0
"""Seconds a pool's close waits for its reaper to end after an orderly stop (it finds
nothing left to sweep: a look through /proc)."""
LINGER_FILE = "linger"
"""In a lingering reaper's temp dir: the time (epoch seconds) until which a successor may claim it."""
OWNER_FILE = "owner"
"""In a lingering reaper's temp dir: the pid of the daemon that owns the instance now."""
LINGER_TICK = 1.0


class Reaper:
    """The client's handle on its reaper process."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process

    @classmethod
    def start(cls, temp_dir: str, linger: bool = False) -> Reaper:
        """Start the reaper of ``temp_dir`` (then start Ray's processes with ``mark``);
        ``linger``: the pool daemon's (see the module)."""
        process = subprocess.Popen(
            [sys.executable, "-m", "skyward.providers.local.reaper", temp_dir, *(["--linger"] if linger else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env={key: value for key, value in os.environ.items() if key != MARKER},
        )
        return cls(process)

    def stop(self) -> None:
        """The instance was stopped in order: the reaper sweeps stragglers and exits, and
        is waited for up to ``STOP_WAIT`` seconds (then on a daemon thread), so that no
        process of the pool outlives its close."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            threading.Thread(target=self._process.wait, name="skyward-reaper-wait", daemon=True).start()


def mark(temp_dir: str) -> dict[str, str]:
    """The environment variables that mark a process, and what it starts, as one of the
    instance of ``temp_dir``."""
    return {MARKER: temp_dir, KEEP_ENVIRONMENT: "1"}


def sweep(temp_dir: str, timeout: float = SWEEP_TIMEOUT) -> int:
    """Kill every process whose environment has ``MARKER=temp_dir`` (until none is left
    or ``timeout`` passes), remove ``temp_dir``; returns how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = live_marked(temp_dir)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        time.sleep(0.1)
    shutil.rmtree(temp_dir, ignore_errors=True)
    return len(killed)


def live_marked(temp_dir: str) -> list[int]:
    """Live processes (not zombies) whose environment has ``MARKER=temp_dir``."""
    wanted = f"{MARKER}={temp_dir}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if wanted not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", encoding="utf-8") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
        except (OSError, IndexError):
            continue
        found.append(int(entry))
    return found


def linger_until(temp_dir: str, deadline: float) -> None:
    """Say until when (epoch seconds; 0: not at all) a lingering reaper of ``temp_dir``
    waits for a successor if its daemon dies."""
    partial = os.path.join(temp_dir, LINGER_FILE + ".part")
    with open(partial, "w", encoding="utf-8") as file:
        file.write(repr(deadline))
    os.replace(partial, os.path.join(temp_dir, LINGER_FILE))


def claim(temp_dir: str) -> None:
    """Make this process the owner of the instance of ``temp_dir`` (a lingering reaper
    of a dead predecessor then leaves it alone)."""
    partial = os.path.join(temp_dir, OWNER_FILE + ".part")
    with open(partial, "w", encoding="utf-8") as file:
        file.write(str(os.getpid()))
    os.replace(partial, os.path.join(temp_dir, OWNER_FILE))


def _claimed(temp_dir: str, dead: int) -> bool:
    """Whether a live process other than ``dead`` owns the instance of ``temp_dir``."""
    try:
        with open(os.path.join(temp_dir, OWNER_FILE), encoding="utf-8") as file:
            owner = int(file.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if owner in (0, dead):
        return False
    try:
        os.kill(owner, 0)
    except OSError:
        return False
    return True


def _deadline(temp_dir: str) -> float:
    try:
        with open(os.path.join(temp_dir, LINGER_FILE), encoding="utf-8") as file:
            return float(file.read().strip() or 0)
    except (OSError, ValueError):
        return 0.0


def main(temp_dir: str, linger: bool) -> None:
    """Wait for the client's end of the pipe to close; then (lingering: unless a
    successor claims the instance in time) sweep."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = os.getppid()
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    while linger and time.time() < _deadline(temp_dir):
        if _claimed(temp_dir, client):
            return
        time.sleep(LINGER_TICK)
    if linger and _claimed(temp_dir, client):
        return
    sweep(temp_dir)


if __name__ == "__main__":
    main(sys.argv[1], "--linger" in sys.argv[2:])
