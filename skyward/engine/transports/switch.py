"""``TransportSwitch``: the driver's one transport for a pool whose whole cluster comes and
goes while the pool stays open (a remote pool that scales to zero): calls go to the
transport of the cluster running now, and there is none while the pool sleeps.

``connect`` opens a new cluster's transport with the loop and the event feed the pool
opened the switch with, and makes it current; ``disconnect`` closes the current one. A
payload shared through one cluster's transport is forgotten through that transport only,
never through a later cluster's.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from skyward.core.errors import PoolClosedError
from skyward.engine.transport import NodeLost, Shared, Transport
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventSink

ASLEEP = "the pool has no node (it sleeps until work arrives)"
A = TypeVar("A")
"""What the clusters' transports reach a node's agent by."""


@dataclass(frozen=True, slots=True)
class _Stored(Generic[A]):
    """A payload shared through ``transport``, as it stored it."""

    transport: Transport[A]
    shared: Shared


class TransportSwitch(Generic[A]):
    """A ``Transport`` that forwards to the current cluster's transport (see the module)."""

    def __init__(self) -> None:
        self._current: Transport[A] | None = None
        self._opened: tuple[asyncio.AbstractEventLoop, EventSink] | None = None
        self._closed = False
        self._lock = threading.Lock()

    def connect(self, transport: Transport[A]) -> None:
        """Open ``transport`` as the pool's and make it current (from a thread other than
        the pool loop's). PoolClosedError, with ``transport`` closed, once the pool closes."""
        with self._lock:
            opened, closed = self._opened, self._closed
        if closed or opened is None:
            transport.close()
            raise PoolClosedError("the pool closed while its nodes were starting")
        try:
            transport.open(*opened)
        except BaseException:
            transport.close()
            raise
        with self._lock:
            if not self._closed:
                self._current = transport
                return
        transport.close()
        raise PoolClosedError("the pool closed while its nodes were starting")

    def disconnect(self) -> None:
        """Close the current transport (bounded, as ``Transport.close``); none is current after."""
        with self._lock:
            current, self._current = self._current, None
        if current is not None:
            current.close()

    # ------------------------------------------------------------------ Transport

    def attach(self, node: int, agent: A) -> None:
        self._now(node).attach(node, agent)

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventSink) -> None:
        """Remember ``loop`` and ``feed`` for the transports ``connect`` opens."""
        with self._lock:
            self._opened = (loop, feed)
            current = self._current
        if current is not None:
            current.open(loop, feed)

    @property
    def can_call_now(self) -> bool:
        current = self._current
        return current is not None and current.can_call_now

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        return self._now(node).call_now(node, payload, timeout)

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if isinstance(payload, Shared):
            stored = payload.handle
            assert isinstance(stored, _Stored)
            if stored.transport is not self._current:
                raise NodeLost(node, "the pool's nodes changed since the payload was stored")
            return await stored.transport.call(node, stored.shared, timeout)
        return await self._now(node).call(node, payload, timeout)

    async def share(self, payload: Payload | bytearray) -> Shared:
        current = self._now(-1)
        shared = await current.share(payload)
        return Shared(shared.key, _Stored(current, shared))

    def unshare(self, shared: Shared) -> None:
        stored = shared.handle
        if isinstance(stored, _Stored) and stored.transport is self._current:
            stored.transport.unshare(stored.shared)

    def detach(self, node: int, reason: str) -> None:
        current = self._current
        if current is not None:
            current.detach(node, reason)

    def close(self) -> None:
        """The pool closes: close the current transport; ``connect`` refuses from now on."""
        with self._lock:
            self._closed = True
        self.disconnect()

    def _now(self, node: int) -> Transport[A]:
        current = self._current
        if current is None:
            raise NodeLost(node, ASLEEP)
        return current
