"""The stand-in for Ray's dashboard agent (skyward/providers/ray_agent_stand_in.py) reports
every port as not in use where the raylet reads them, then lives exactly as long as its
raylet: until the raylet's pipe on its stdin closes, or, without one, until its parent
is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from skyward.providers import ray_agent_stand_in
from skyward.providers.ray_start import STAND_IN

NODE = "ab" * 28
LIMIT = 10.0


def _arguments(session: Path) -> list[str]:
    """What the raylet passes (Ray's agent script first, as ``lean`` leaves it)."""
    return ["/ray/dashboard/agent.py", f"--node-id={NODE}", "--node-ip-address=127.0.0.1", f"--session-dir={session}"]


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not check():
        assert time.monotonic() < deadline, f"not within {LIMIT:g}s: {what}"
        time.sleep(0.02)


def test_it_reports_no_service_on_each_port_and_ends_when_the_raylets_pipe_closes(tmp_path: Path) -> None:
    env = {**os.environ, ray_agent_stand_in.PIPE_CHECK: "1", "RAY_RAYLET_PID": str(os.getpid())}
    agent = subprocess.Popen(
        [sys.executable, "-S", STAND_IN, *_arguments(tmp_path)], stdin=subprocess.PIPE, env=env
    )
    try:
        files = [tmp_path / f"{port}_{NODE}" for port in ray_agent_stand_in.PORTS]
        _wait_for(lambda: all(file.exists() for file in files), "the port files")
        assert [file.read_text() for file in files] == ["-1"] * 3
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files)  # no partial file left
        time.sleep(ray_agent_stand_in.POLL * 1.5)
        assert agent.poll() is None, "it ended while its raylet lives: the raylet would end with it"
        assert agent.stdin is not None
        agent.stdin.close()
        assert agent.wait(timeout=LIMIT) == 0
    finally:
        agent.kill()


def test_without_a_pipe_it_ends_once_its_parent_has(tmp_path: Path) -> None:
    """A parent that starts the stand-in (stdin from /dev/null) and exits 0.5 s later."""
    pid_file = tmp_path / "pid"
    parent = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-S', {STAND_IN!r}, *sys.argv[1:]], stdin=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(0.5)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in (ray_agent_stand_in.PIPE_CHECK, "RAY_RAYLET_PID")}
    subprocess.run([sys.executable, "-c", parent, *_arguments(tmp_path)], env=env, check=True, timeout=LIMIT)
    child = int(pid_file.read_text())
    assert (tmp_path / f"metrics_agent_port_{NODE}").read_text() == "-1"
    _wait_for(lambda: not _alive(child), "the stand-in's end after its parent's")


def test_it_names_a_missing_argument() -> None:
    done = subprocess.run(
        [sys.executable, "-S", STAND_IN, f"--node-id={NODE}"], capture_output=True, text=True, timeout=LIMIT, check=False
    )
    assert done.returncode != 0 and "--session-dir=" in done.stderr


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reparented to init and not reaped yet, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
