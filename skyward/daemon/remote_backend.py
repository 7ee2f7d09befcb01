"""The relay backend of a kept remote pool (SSH hosts, cloud machines) in the pool's
host process (``daemon.pool_host``): the host is the pool's client, holding its SSH
connection and its stream to the head relay (``RelayTransport``), and passes each call,
shared payload and collection operation of the script that holds the pool through it
as the bytes they are; the pool's event batches go back to that script as the head
relay sent them (dropped while no script holds the pool).

The script's pool grows and shrinks it as any elastic pool (``kept.client.KeptMembership``):
its Attach and Detach ask the host, which adds and removes the node through the pool's
own membership (its provider's machines, its head relay) and answers with the node as
placed. The head relay knows only the host as its client, and one script at a time
holds the pool: when the script leaves, the host has the head relay free every
collection lock and lease its client holds, which are that script's.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Protocol

from skyward.engine.events import EventBatch
from skyward.engine.membership import Loss
from skyward.engine.relay_server import Sink, TransportBackend
from skyward.engine.transports.relay import RelayTransport


class EventForwarder:
    """Where a kept remote pool's transport delivers its event batches (it stands for
    the ``EventFeed`` a pool's driver would have): to the sink of the script holding the
    pool, re-encoded, or nowhere while none does."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sink: Sink | None = None
        self._metrics = False

    def to(self, sink: Sink | None) -> None:
        """Forward to ``sink`` from now on (None: drop)."""
        with self._lock:
            self._sink, self._metrics = sink, sink is not None

    def set_metrics(self, on: bool) -> None:
        with self._lock:
            self._metrics = on and self._sink is not None

    def submit(self, node: int, batch: EventBatch) -> None:
        with self._lock:
            sink = self._sink
        if sink is not None:
            sink.events(node, batch.encode())

    def report(self, message: str) -> None:
        with self._lock:
            sink = self._sink
        if sink is not None:
            sink.report(message)

    def wants_metrics(self) -> bool:
        with self._lock:
            return self._metrics

    def lost(self, loss: Loss) -> bool:
        """Tell the script holding the pool that a node was lost (its autoscaler replaces
        it); False when none holds it."""
        with self._lock:
            sink = self._sink
        if sink is not None:
            sink.lost(loss.node, loss.reason, loss.preempted)
        return sink is not None


class Resizable(Protocol):
    """A kept remote pool as its scripts grow and shrink it (``daemon.pool_host.PoolHost``)."""

    def add_node(self, node: int) -> bytes:
        """Add node ``node``; its pickled ``(NodeHandle, InstanceInfo)``. Raises why not."""

    def remove_node(self, node: int) -> None: ...


class KeptRemoteBackend(TransportBackend):
    """The backend (``engine.relay_server.RelayBackend``) serving one script a kept
    remote pool through its host's stream to its head relay."""

    _transport: RelayTransport

    def __init__(self, transport: RelayTransport, forwarder: EventForwarder, sink: Sink, pool: Resizable) -> None:
        self._transport = transport
        self._forwarder = forwarder
        self._pool = pool
        forwarder.to(sink)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        return await asyncio.wrap_future(self._transport.collection_call(request))

    def forget_collection(self, call_id: int) -> None:
        """Nothing to do: the answer, when it comes, is dropped with the call."""

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        """Node ``node`` added by the host (the script's ``serial`` and ``setup`` are
        not used: the pool places its own nodes); the node as placed."""
        return await asyncio.get_running_loop().run_in_executor(None, self._pool.add_node, node)

    def detach(self, node: int, reason: str) -> None:
        """Node ``node`` removed by the host (in the background; why it failed, if it
        did, is reported to the script)."""
        removing = asyncio.get_running_loop().run_in_executor(None, self._pool.remove_node, node)
        removing.add_done_callback(lambda done: self._failed(node, done))

    def _failed(self, node: int, done: asyncio.Future[None]) -> None:
        error = None if done.cancelled() else done.exception()
        if error is not None:
            self._forwarder.report(f"node {node} could not be removed from the kept pool: {type(error).__name__}: {error}")

    def set_metrics(self, on: bool) -> None:
        self._forwarder.set_metrics(on)

    def release_holds(self) -> None:
        self._transport.release_holds()

    def end(self) -> None:
        """The script left: its events stop here, its locks and leases are freed; the pool stays."""
        self._forwarder.to(None)
        self._transport.release_holds()
