"""The processes that still name a path (a sandbox of tests/e2e/conftest.py): what the
lifecycle tests count as left behind; and an environment with a skyward home of its own
for a client a test kills."""

from __future__ import annotations

import ast
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psutil


def runs_agent_stand_in(cmdline: Sequence[str], role: str | None = None) -> bool:
    """Whether ``cmdline`` runs the stand-in for one of Ray's agents (for ``role``'s, when
    given: ``ray_start.AGENTS``): ``python -S`` and that script (``ray_start.STAND_IN``),
    wherever it is installed (a test host's copy lies in its own environment, not where
    the client's does)."""
    from skyward.providers.ray_start import STAND_IN

    return (
        len(cmdline) > 3 and cmdline[1] == "-S" and os.path.basename(cmdline[2]) == os.path.basename(STAND_IN)
        and (role is None or cmdline[3] == role)
    )


def processes_using(marker: str) -> list[str]:
    """Live processes whose command line names ``marker`` or that hold a file open whose
    path does (a Ray agent that retitled itself, "ray::RuntimeEnvAgent", still holds its
    logs in its temp dir)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if process.pid == os.getpid() or process.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = process.info["cmdline"] or []
            if any(marker in part for part in cmdline) or any(marker in file.path for file in process.open_files()):
                found.append(" ".join(cmdline)[:200])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def wait_for_no_processes(marker: str, within: float) -> list[str]:
    deadline = time.monotonic() + within
    while True:
        left = processes_using(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.25)




def marked_under(prefix: str) -> list[str]:
    """Live processes of a local Ray instance whose temp dir lies under ``prefix`` (found by
    the marker in their environment: Ray renames its processes, so a command line may not
    show the path)."""
    from skyward.providers.local.reaper import MARKER

    found = []
    for process in psutil.process_iter(["environ", "cmdline", "status"]):
        try:
            value = (process.info["environ"] or {}).get(MARKER, "")
            if value.startswith(prefix) and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(" ".join(process.info["cmdline"] or [])[:200])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def lines_of(process: subprocess.Popen[str], until: str, keys: tuple[str, ...], timeout: float = 120) -> dict[str, object]:
    """The script's ``KEY value`` lines for ``keys`` (each value a Python literal), read
    from its stdout until the line starting with ``until``; AssertionError with the
    output's tail when that line never comes."""
    found: dict[str, object] = {}
    output = []
    deadline = time.monotonic() + timeout
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        output.append(line)
        key, _, value = line.rstrip("\n").partition(" ")
        if key in keys:
            found[key] = ast.literal_eval(value)
        if key == until:
            return found
    raise AssertionError(f"never saw {until}; output: {''.join(output)[-3000:]}")


def daemon_logs(home: Path) -> str:
    """What every pool daemon of the skyward home ``home`` logged."""
    return "".join(path.read_text() for path in home.glob("daemon/*/daemon.log"))


def own_home(root: str | Path) -> dict[str, str]:
    """This process's environment with ``SKYWARD_HOME`` at ``root``/skyward: a client
    killed with it leaves its pool's record there, in the test's directory, not in the
    user's home."""
    home = Path(root) / "skyward"
    home.mkdir(mode=0o700, exist_ok=True)
    share_wheels(home)
    return {**os.environ, "SKYWARD_HOME": str(home)}


def share_wheels(home: Path) -> None:
    """Give the skyward home ``home`` the user's wheel cache, so nothing is built again."""
    shared = Path("~/.skyward/wheels").expanduser()
    shared.mkdir(parents=True, exist_ok=True)
    (home / "wheels").symlink_to(shared)
