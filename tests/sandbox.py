"""The processes that still name a path (a sandbox of tests/e2e/conftest.py): what the
lifecycle tests count as left behind."""

from __future__ import annotations

import time

import psutil


def processes_using(marker: str) -> list[str]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in process.info["cmdline"] or []):
                found.append(" ".join(process.info["cmdline"])[:200])
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
    from skyward.providers.reaper import MARKER

    found = []
    for process in psutil.process_iter(["environ", "cmdline", "status"]):
        try:
            value = (process.info["environ"] or {}).get(MARKER, "")
            if value.startswith(prefix) and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(" ".join(process.info["cmdline"] or [])[:200])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
