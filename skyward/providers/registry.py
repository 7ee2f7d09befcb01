"""The pools open on this machine: one small file each in ``$SKYWARD_HOME/pools``,
written when a pool opens (a cloud provider writes one as soon as it starts creating
machines, so ``sky gc`` never takes them for orphans) and removed when it closes. Beside
it, a pool whose machines were created for it keeps their SSH key and known_hosts in a
private directory of its own (``files_of``): the pool removes it when it closes, and
``forget`` when its process died (``sky down``, ``sky gc``, the pool daemon).

``sky ls`` lists them (provider, nodes, prices, cost so far), ``sky down`` finds the
process that holds one, ``sky logs`` its log file, and ``sky gc`` treats a cloud
resource of a pool as owned while that pool's file names a live process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import psutil
from msgspec import Struct, field, structs, to_builtins

from skyward.core.paths import skyward_dir
from skyward.core.private_dir import private_directory, replace_private
from skyward.model.nodes import NodeHandle


class NodeRecord(Struct, frozen=True):
    """One node of a live pool."""

    id: str
    address: str
    instance_type: str = ""
    hourly_price: float = 0.0
    spot: bool = False
    ssh: str = ""
    """How the client logs in to it, ``user@host:port`` ("": a local process)."""
    key_path: str | None = None
    """The private key it logs in with (None: the user's default keys and ssh-agent)."""

    @classmethod
    def of(cls, node: NodeHandle) -> NodeRecord:
        """The record of ``node``."""
        login = node.ssh
        return cls(node.id, node.address, node.instance_type, node.hourly_price, node.spot,
                   str(login) if login else "", login.key_path if login else None)


class LivePool(Struct, frozen=True):
    """A pool some process on this machine has open."""

    pool_id: str
    provider: str
    region: str | None
    pid: int
    host: str
    started: float
    name: str = ""
    nodes: tuple[NodeRecord, ...] = ()
    log_file: str | None = None
    opened: float = field(default_factory=time.time)
    """When the nodes were up (epoch seconds), for the cost so far."""
    keep_alive: float | None = None
    """Seconds the pool daemon keeps it after its last client left (None: not a kept
    pool; ``pid`` is then the client's, else the daemon's)."""

    @property
    def hourly_rate(self) -> float:
        return sum(node.hourly_price for node in self.nodes)

    def cost_so_far(self, now: float | None = None) -> float:
        """Dollars its nodes have cost since they came up."""
        return self.hourly_rate * max(0.0, (now or time.time()) - self.opened) / 3600


def register(
    pool_id: str, provider: str, region: str | None, *, name: str = "", nodes: Sequence[NodeRecord] = (),
    log_file: str | None = None, keep_alive: float | None = None,
) -> None:
    """Record (or update) that this process holds ``pool_id`` open (``keep_alive``: as
    a kept pool of the pool daemon). ``opened`` stays what it was once a record had
    nodes: a pool taken over by the pool daemon has cost since its nodes came up."""
    previous = _read(_path(pool_id))
    now = time.time()
    record = LivePool(
        pool_id, provider, region, os.getpid(), socket.gethostname(),
        previous.started if previous is not None and previous.pid == os.getpid() else now,
        name or (previous.name if previous else ""), tuple(nodes) or (previous.nodes if previous else ()),
        log_file or (previous.log_file if previous else None),
        previous.opened if previous is not None and previous.nodes else now, keep_alive,
    )
    text = json.dumps(to_builtins(record))

    _in_records(f"{pool_id}.json", lambda path: replace_private(str(path), text))


def renew_nodes(pool_id: str, nodes: Sequence[NodeRecord]) -> None:
    """``pool_id``'s record with its nodes as they are now (a node replaced, added or
    gone since it was registered), the rest as it was; nothing when it has no record."""
    previous = _read(_path(pool_id))
    if previous is None:
        return
    text = json.dumps(to_builtins(structs.replace(previous, nodes=tuple(nodes))))
    _in_records(f"{pool_id}.json", lambda path: replace_private(str(path), text))


def unregister(pool_id: str) -> None:
    """Remove the pool's record, and the records' directory once it is empty."""
    path = _path(pool_id)
    path.unlink(missing_ok=True)
    _remove_if_empty(path.parent)


def files_of(pool_id: str) -> Path:
    """The pool's private directory (mode 0700) for the files it keeps on this machine,
    made if missing."""
    return _in_records(pool_id, lambda path: private_directory(str(path)))


def known_hosts_of(pool_id: str) -> Path:
    """Where the pool's machines' host keys are recorded when they were created for it
    (in ``files_of``; SSH hosts of your own use ``SSH.known_hosts``)."""
    return skyward_dir("pools") / pool_id / "known_hosts"


def remove_files(pool_id: str) -> None:
    """Delete the pool's directory (``files_of``), and the records' directory once it is
    empty."""
    path = skyward_dir("pools") / pool_id
    shutil.rmtree(path, ignore_errors=True)
    _remove_if_empty(path.parent)


def forget(pool_id: str) -> None:
    """Remove what a pool whose process died left on this machine: its files and its
    record."""
    remove_files(pool_id)
    unregister(pool_id)


def forget_dead(pools: Iterable[str]) -> None:
    """``forget`` each recorded pool whose process is gone and whose id is or starts with
    one of ``pools`` (a cloud's names carry a pool id's first characters)."""
    wanted = [pool for pool in pools if pool]
    for record in records():
        if not alive(record) and any(record.pool_id.startswith(pool) for pool in wanted):
            forget(record.pool_id)


def is_live(pool: str) -> bool:
    """Whether a live process on this machine holds a pool whose id is or starts with ``pool``."""
    return any(record.pool_id.startswith(pool) for record in live_pools())


def records() -> list[LivePool]:
    """Every pool recorded on this machine, live or not (a record whose process died
    without closing it stays until ``sky down`` or ``sky gc`` has dealt with it)."""
    try:
        paths = list(skyward_dir("pools").glob("*.json"))
    except FileNotFoundError:  # the last pool's close removed the emptied directory just now
        paths = []
    found = [_read(path) for path in paths]
    return sorted((r for r in found if r is not None and r.host == socket.gethostname()), key=lambda r: r.started)


def live_pools() -> list[LivePool]:
    """The pools open on this machine now."""
    return [record for record in records() if alive(record)]


def alive(record: LivePool) -> bool:
    """Whether the process that holds ``record``'s pool is still running."""
    return _alive(record.pid, record.started)


def find(reference: str, live_only: bool = True) -> LivePool | None:
    """The pool named ``reference``, or whose id starts with it (a live one, or any with
    ``live_only=False``); ValueError when several match."""
    candidates = live_pools() if live_only else records()
    matching = [r for r in candidates if reference in (r.name, r.pool_id) or r.pool_id.startswith(reference)]
    if len(matching) > 1:
        names = ", ".join(f"{r.name} ({r.pool_id[:12]})" for r in matching)
        raise ValueError(f"{reference!r} names {len(matching)} live pools: {names}; give more of the pool id")
    return matching[0] if matching else None


def _path(pool_id: str) -> Path:
    return skyward_dir("pools") / f"{pool_id}.json"


def _in_records(name: str, make: Callable[[Path], object]) -> Path:
    """``make(path)`` for ``name`` in the records' directory, again if another process
    removed that directory, emptied, in between; returns the path. OSError after three
    tries."""
    for _ in range(3):
        path = skyward_dir("pools") / name
        try:
            make(path)
            return path
        except FileNotFoundError:
            continue
    raise OSError(f"could not make {path}: another process kept removing {path.parent}")


def _remove_if_empty(records: Path) -> None:
    """Remove the records' directory once it is empty."""
    with contextlib.suppress(OSError):  # another pool's record or directory is still there
        records.rmdir()


def _read(path: Path) -> LivePool | None:
    try:
        data = json.loads(path.read_text())
        data["nodes"] = tuple(NodeRecord(**node) for node in data.get("nodes", ()))
        return LivePool(**data)
    except (OSError, ValueError, TypeError):
        return None


def _alive(pid: int, started: float) -> bool:
    """The process exists, runs (not a zombie) and is the one that registered (not a
    reused pid)."""
    try:
        process = psutil.Process(pid)
        return process.create_time() <= started + 1 and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False



