"""What the pool daemon's dashboard (``observe.dashboard``, served by ``daemon.http_api``)
learns of a kept pool, on the pool's ``Board``:

- the pool and its nodes as the daemon opened, took over or resized them (``show``,
  ``joined``, ``left``: the events a pool of one's own reports for the same);
- its notes and every event its nodes send, metric samples too (``daemon.pool_log``);
- what the script holding it observes (task events, a map's progress, cost), which that
  script sends along (``Observed``, ``engine.observed``; the relay server hands it here);
- while a page follows the board, the nodes sample their metrics whether or not the
  script listens for them (``Watched``), so the dashboard shows CPU and memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from skyward.core.instance import InstanceInfo
from skyward.engine.relay_server import RelayBackend
from skyward.engine.transport import Shared
from skyward.engine.wire import Payload
from skyward.model.nodes import NodeHandle
from skyward.observe.dashboard.board import Board
from skyward.observe.events import (
    ClusterReady,
    ClusterRequested,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstanceProvisioned,
)


def show(
    board: Board, name: str, provider: str, priced: bool, opened: float,
    members: list[tuple[NodeHandle, InstanceInfo]],
) -> None:
    """Put a kept pool on ``board``: named ``name``, of ``provider`` (``priced``: its
    nodes cost what their handles say), opened at ``opened`` (Unix time), with ``members``."""
    board.apply(ClusterRequested(name, provider, len(members), timestamp=opened, kept=True))
    for handle, info in members:
        joined(board, provider, priced, info.node, handle)
    board.apply(ClusterReady(name, len(members), 0.0))


def joined(board: Board, provider: str, priced: bool, rank: int, handle: NodeHandle) -> None:
    """Node ``rank`` is up: what it is and what it costs (as ``api.opening.announce`` says)."""
    ondemand = handle.ondemand_price if handle.ondemand_price is not None else handle.hourly_price
    board.apply(InstanceProvisioned(
        rank, handle.id, handle.address, handle.spot, provider, handle.instance_type,
        ondemand if priced else None, handle.hourly_price if priced and handle.spot else None,
    ))
    board.apply(InstanceBootstrapped(rank, handle.id, 0.0))


def left(board: Board, rank: int, handle_id: str) -> None:
    """Node ``rank`` left the pool."""
    board.apply(InstanceDestroyed(rank, handle_id))


class Followed(Protocol):
    """Whether a page follows a pool: its ``Board``, or what a remote kept pool's host
    process is told of it (``daemon.pool_host``)."""

    @property
    def watched(self) -> bool: ...

    def on_watch(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        """Call ``listener`` when that changes; returns a function that stops calling it."""


class Watched:
    """``backend``, whose nodes sample their metrics while the script asks for them or
    a page follows the pool (``followed``; see the module)."""

    def __init__(self, backend: RelayBackend, followed: Followed) -> None:
        self._backend = backend
        self._followed = followed
        self._asked = True  # a backend starts sampling until its client says otherwise
        self._forget: Callable[[], None] = followed.on_watch(lambda _: self._tell())
        self._tell()

    def _tell(self) -> None:
        self._backend.set_metrics(self._asked or self._followed.watched)

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        return await self._backend.call(node, payload, timeout)

    async def share(self, payload: Payload | bytearray) -> Shared:
        return await self._backend.share(payload)

    def unshare(self, shared: Shared) -> None:
        self._backend.unshare(shared)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        return await self._backend.collection(call_id, request)

    def forget_collection(self, call_id: int) -> None:
        self._backend.forget_collection(call_id)

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        return await self._backend.attach(node, serial, setup)

    def detach(self, node: int, reason: str) -> None:
        self._backend.detach(node, reason)

    def set_metrics(self, on: bool) -> None:
        self._asked = on
        self._tell()

    def release_holds(self) -> None:
        self._backend.release_holds()

    def end(self) -> None:
        self._forget()
        self._backend.end()
