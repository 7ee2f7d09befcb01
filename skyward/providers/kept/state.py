"""What the pool daemon writes down so that a successor can adopt its kept pools if it
dies: its detached Ray instance (``local.detached_ray``) and, for each kept pool, what
it was opened as and, for a remote one, its ``ssh.handover.Handover``.

One JSON file, ``STATE_FILE`` in the daemon's private directory (mode 0700), written
whole (a temporary file renamed over it), mode 0600: it holds the Ray token and the
remote pools' secrets. A pool's definition is pickled bytes (the Spec and Options, as
``AdoptPool`` answers carry them), and so is a handover; ``load`` reads the file only
when it and its directory belong to this user and nobody else can write them, so only
what this user's daemon wrote is ever unpickled.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skyward.core.codec import load_payload
from skyward.core.private_dir import is_private, replace_private
from skyward.providers.local.detached_ray import DetachedRay

if TYPE_CHECKING:
    from skyward.model.spec import Options, Spec

STATE_FILE = "kept.json"
ALIVE_FILE = "alive"
"""Touched by the running daemon every few seconds (``mark_alive``)."""


@dataclass(frozen=True, slots=True)
class KeptRecord:
    """A kept pool as its daemon opened it."""

    name: str
    fingerprint: str
    keep_alive: float
    pool_id: str
    nodes: int
    opened: float
    """When it was opened (epoch seconds)."""
    definition: bytes
    """The pickled (Spec, Options) it was opened with."""
    handover: bytes = b""
    """A remote pool's pickled ``Handover`` (empty: a local pool, on the daemon's Ray)."""


def pool_definition(spec: Spec, options: Options) -> bytes:
    """What a kept pool is written down as having been opened with (``KeptRecord.definition``)."""
    import cloudpickle  # the daemon's alone: not on the path of a `sky` command that only reads state

    return cloudpickle.dumps((spec, options))


def opened_with(definition: bytes) -> tuple[Spec, Options]:
    """The Spec and Options of a ``pool_definition``. Only for bytes this user's daemon
    wrote (``kept.state``, read as ``load`` says) or sent over a channel whose peer was
    checked: they are unpickled."""
    loaded: tuple[Spec, Options] = load_payload(definition)  # this user's daemon's (see the docstring)
    return loaded


@dataclass(frozen=True, slots=True)
class DaemonState:
    """The daemon's Ray instance (None: it is gone) and its kept pools."""

    ray: DetachedRay | None
    pools: tuple[KeptRecord, ...] = ()

    def without_ray(self) -> DaemonState:
        """What is left once the Ray instance is gone: the remote pools."""
        return DaemonState(None, tuple(p for p in self.pools if p.handover))


def save(directory: Path, state: DaemonState) -> None:
    """Write ``state`` (see the module)."""
    ray = state.ray
    text = json.dumps({
        "ray": {"address": ray.address, "token": ray.token, "temp_dir": ray.temp_dir} if ray is not None else None,
        "pools": [
            {
                "name": p.name, "fingerprint": p.fingerprint, "keep_alive": p.keep_alive, "pool_id": p.pool_id,
                "nodes": p.nodes, "opened": p.opened, "definition": base64.b64encode(p.definition).decode(),
                "handover": base64.b64encode(p.handover).decode(),
            }
            for p in state.pools
        ],
    })
    replace_private(str(directory / STATE_FILE), text)


def load(directory: Path) -> DaemonState | None:
    """What a predecessor wrote in ``directory``; None when nothing was, or when the file
    or its directory is not this user's alone (then it is not read), or it is malformed."""
    path = directory / STATE_FILE
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if not is_private(str(directory)) or not _private_file(found):
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        found = raw["ray"]
        ray = DetachedRay(str(found["address"]), str(found["token"]), str(found["temp_dir"])) if found else None
        pools = tuple(
            KeptRecord(
                str(p["name"]), str(p["fingerprint"]), float(p["keep_alive"]), str(p["pool_id"]), int(p["nodes"]),
                float(p["opened"]), base64.b64decode(str(p["definition"])), base64.b64decode(str(p.get("handover", ""))),
            )
            for p in raw["pools"]
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return DaemonState(ray, pools)


def mark_alive(directory: Path) -> None:
    """Say that the daemon of ``directory`` runs now (``silent_for`` reads it)."""
    (directory / ALIVE_FILE).touch(mode=0o600)


def silent_for(directory: Path) -> float:
    """Seconds since the daemon of ``directory`` last said it ran (a dead one: about how
    long ago it died); infinite when none ever did."""
    try:
        return max(0.0, time.time() - os.stat(directory / ALIVE_FILE).st_mtime)
    except FileNotFoundError:
        return float("inf")


def remote_pools(directory: Path) -> int:
    """How many remote kept pools are written down in ``directory`` (a new daemon takes
    each over before it answers)."""
    state = load(directory)
    return sum(1 for pool in state.pools if pool.handover) if state is not None else 0


def forget(directory: Path) -> None:
    """Remove the state file (the daemon stopped in order: nothing to adopt)."""
    with contextlib.suppress(FileNotFoundError):
        (directory / STATE_FILE).unlink()


def kept_names(directory: Path) -> set[str]:
    """The names of the kept pools written down in ``directory`` (by a live daemon or a
    dead one)."""
    state = load(directory)
    return {record.name for record in state.pools} if state is not None else set()


def kept_by_a_dead_daemon(directory: Path) -> bool:
    """Whether ``directory`` holds kept pools written down that may still run: remote
    ones, and local ones whose Ray instance still runs (a live daemon there serves them;
    without one, starting a daemon adopts them). A state with neither is removed:
    nothing of it can be adopted."""
    state = load(directory)
    if state is None or not state.pools:
        return False
    if (state.ray is not None and state.ray.alive()) or state.without_ray().pools:
        return True
    forget(directory)
    return False


def _private_file(found: os.stat_result) -> bool:
    return (
        stat.S_ISREG(found.st_mode) and found.st_uid == os.geteuid()
        and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_IRGRP | stat.S_IROTH)
    )
