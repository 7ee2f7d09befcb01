"""The pools open on this machine that created cloud resources: one small file each in
``$SKYWARD_HOME/pools``, written when such a pool launches and removed when it stops.
``sky gc`` treats a resource of a pool as owned while that pool's file names a process
that is still alive."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass

import psutil

from skyward.api.paths import skyward_dir


@dataclass(frozen=True, slots=True)
class LivePool:
    """A pool some process on this machine has open."""

    pool_id: str
    provider: str
    region: str | None
    pid: int
    host: str
    started: float


def register(pool_id: str, provider: str, region: str | None) -> None:
    """Record that this process holds ``pool_id`` open."""
    record = LivePool(pool_id, provider, region, os.getpid(), socket.gethostname(), time.time())
    path = skyward_dir("pools") / f"{pool_id}.json"
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps(asdict(record)))
    partial.replace(path)


def unregister(pool_id: str) -> None:
    (skyward_dir("pools") / f"{pool_id}.json").unlink(missing_ok=True)


def is_live(pool_id: str) -> bool:
    """Whether a live process on this machine holds ``pool_id`` open."""
    try:
        record = LivePool(**json.loads((skyward_dir("pools") / f"{pool_id}.json").read_text()))
    except (OSError, ValueError, TypeError):
        return False
    return record.host == socket.gethostname() and _alive(record.pid, record.started)


def live_pools() -> list[LivePool]:
    """The pools open on this machine now (stale records are removed)."""
    found = []
    for path in skyward_dir("pools").glob("*.json"):
        try:
            record = LivePool(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if record.host == socket.gethostname() and _alive(record.pid, record.started):
            found.append(record)
        elif record.host == socket.gethostname():
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda r: r.started)


def _alive(pid: int, started: float) -> bool:
    """The process exists and is the one that registered (not a reused pid)."""
    try:
        return psutil.Process(pid).create_time() <= started + 1
    except psutil.Error:
        return False
