"""The relay backend of a kept remote pool (SSH hosts, cloud machines) in the pool
daemon: the daemon is the pool's client, holding its SSH connection and its stream to
the head relay (``RelayTransport``), and passes each call, shared payload and collection
operation of the script that holds the pool through it as the bytes they are; the
pool's event batches go back to that script as the head relay sent them (dropped while
no script holds the pool).

A kept pool has a fixed size: attaching or detaching a node is refused. The head relay
knows only the daemon as its client, and one script at a time holds the pool: when the
script leaves, the daemon has the head relay free every collection lock and lease its
client holds, which are that script's.
"""

from __future__ import annotations

import asyncio
import threading

from skyward.engine.events import EventBatch
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


class ClusterSession(TransportBackend):
    """The backend (``engine.relay_server.RelayBackend``) serving one script a kept
    remote pool through the daemon's stream to its head relay."""

    _transport: RelayTransport

    def __init__(self, transport: RelayTransport, forwarder: EventForwarder, sink: Sink) -> None:
        self._transport = transport
        self._forwarder = forwarder
        forwarder.to(sink)

    async def collection(self, call_id: int, request: bytes) -> bytes:
        return await asyncio.wrap_future(self._transport.collection_call(request))

    def forget_collection(self, call_id: int) -> None:
        """Nothing to do: the answer, when it comes, is dropped with the call."""

    async def attach(self, node: int, serial: int, setup: bytes) -> None:
        raise NotImplementedError("a kept pool has a fixed size: nodes cannot join it while it runs")

    def detach(self, node: int, reason: str) -> None:
        """Ignored: a kept pool's nodes are not removed by its scripts."""

    def set_metrics(self, on: bool) -> None:
        self._forwarder.set_metrics(on)

    def release_holds(self) -> None:
        self._transport.release_holds()

    def end(self) -> None:
        """The script left: its events stop here, its locks and leases are freed; the pool stays."""
        self._forwarder.to(None)
        self._transport.release_holds()
