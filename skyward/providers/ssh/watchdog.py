"""The watchdog: one small process per remote node, the pool's dead-man switch there.

Started over SSH with the pool directory; the client writes a line to its stdin every
``HEARTBEAT`` seconds. It stops every process of this pool on the node (those whose
command line names the pool directory, and their descendants), removes the pool
directory and exits:
- on "stop" (the pool closes), at once;
- when its stdin ends (the client's SSH connection closed: the client exited or was
  killed), ``ttl`` seconds later (``Spec.ttl``; 0: at once);
- when no line arrived for ``max(ttl, 3 * HEARTBEAT)`` seconds (the network is gone).
In ``halt`` mode (machines created for the pool) it is the machine's dead-man switch:
it cancels the shutdown the machine scheduled at boot for a client that never came,
and when the client vanished it shuts the machine down after the cleanup (a cloud then
terminates it). Run as a script: ``python watchdog.py POOL_DIR TTL HEARTBEAT stay|halt``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import psutil

TERM_GRACE = 3.0
TICK = 0.2


def pool_processes(pool_dir: str) -> list[psutil.Process]:
    """Processes started for the pool: command line names ``pool_dir``, plus descendants."""
    found: dict[int, psutil.Process] = {}
    me = os.getpid()
    for process in psutil.process_iter(["cmdline"]):
        try:
            if process.pid != me and any(pool_dir in part for part in process.info["cmdline"] or ()):
                found[process.pid] = process
                for child in process.children(recursive=True):
                    found[child.pid] = child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    found.pop(me, None)
    return list(found.values())


def stop_pool(pool_dir: str) -> None:
    """Terminate the pool's processes (then kill stragglers) and remove its directory."""
    for _ in range(3):
        processes = pool_processes(pool_dir)
        if not processes:
            break
        for process in processes:
            try:
                process.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(processes, timeout=TERM_GRACE)
        for process in alive:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=TERM_GRACE)
    shutil.rmtree(pool_dir, ignore_errors=True)


def shut_down(*arguments: str) -> None:
    """Run ``shutdown`` with ``arguments`` as root (through sudo when not root)."""
    command = ["shutdown", *arguments]
    if os.geteuid() != 0:
        command = ["sudo", "-n", *command]
    try:
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        pass


def main(pool_dir: str, ttl: float, heartbeat: float, halt: bool) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    state = {"seen": time.monotonic(), "stop": False, "ended": None}

    def listen() -> None:
        for line in sys.stdin:
            state["seen"] = time.monotonic()
            if line.strip() == "stop":
                state["stop"] = True
                return
        state["ended"] = time.monotonic()

    threading.Thread(target=listen, daemon=True).start()
    if halt:
        shut_down("-c")  # a client has come: the boot-time shutdown is this watchdog's job now
    print("::watching", flush=True)
    silence = max(ttl, 3 * heartbeat)
    while not state["stop"]:
        now = time.monotonic()
        ended = state["ended"]
        if ended is not None and now - ended >= ttl:
            break
        if now - state["seen"] > silence:
            break
        time.sleep(TICK)
    stop_pool(pool_dir)
    try:
        print("::stopped", flush=True)
    except OSError:
        pass
    if halt and not state["stop"]:
        shut_down("-h", "now")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "halt")
