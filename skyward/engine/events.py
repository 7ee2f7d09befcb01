"""The client's end of the nodes' event streams: ``EventFeed`` takes each node's event
batches from whichever transport brings them and hands the events to the pool's
handlers on one thread, ``skyward-events``, in order per node, so a slow handler never
stalls a transport. It counts what it delivered per node, so a result can wait until the
output its task printed was delivered first (``wait_delivered``)."""

from __future__ import annotations

import pickle
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from msgspec import Struct

from skyward.core.codec import load_payload
from skyward.observe.events import Event

STOP_TIMEOUT = 5.0
DELIVERY_WAIT = 2.0


class EventBatch(Struct, frozen=True):
    """What a node's outbox gave in one take: its events, how many were dropped since the
    last take, and how many it had published in all (the last event's number)."""

    events: list[Event]
    dropped: int
    published: int

    def encode(self) -> bytes:
        """The batch as bytes (a relay forwards it without opening it)."""
        return pickle.dumps(self, protocol=5)

    @staticmethod
    def decode(data: bytes) -> EventBatch:
        batch = load_payload(data)
        if not isinstance(batch, EventBatch):
            raise TypeError(f"expected an EventBatch, got {type(batch).__name__}")
        return batch


class EventSink(Protocol):
    """Where a transport delivers its nodes' event batches: a pool's ``EventFeed``, or
    the pool daemon's forwarder of a kept pool (``daemon.remote_backend``)."""

    def submit(self, node: int, batch: EventBatch) -> None: ...

    def report(self, message: str) -> None: ...

    def wants_metrics(self) -> bool: ...


class EventFeed:
    """Delivers node event batches to ``deliver``; ``on_error`` gets a message when a
    node's events were dropped or its stream ended. ``wants_metrics`` says whether anyone
    listens for ``Metric`` events now: transports pause the nodes' sampling while not."""

    def __init__(
        self,
        deliver: Callable[[Event], None],
        on_error: Callable[[str], None],
        wants_metrics: Callable[[], bool] = lambda: True,
    ) -> None:
        self._deliver = deliver
        self._on_error = on_error
        self.wants_metrics = wants_metrics
        self._queue: queue.SimpleQueue[tuple[int, EventBatch] | str | None] = queue.SimpleQueue()  # None: stop
        self._delivered: dict[int, int] = {}
        self._progress = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="skyward-events", daemon=True)
        self._thread.start()

    def submit(self, node: int, batch: EventBatch) -> None:
        """Queue ``batch`` of ``node`` for delivery (any thread; returns at once)."""
        self._queue.put((node, batch))

    def report(self, message: str) -> None:
        """Queue an error message, delivered in order with the events."""
        self._queue.put(message)

    def wait_delivered(self, node: int, count: int, timeout: float = DELIVERY_WAIT) -> None:
        """Block until ``node``'s first ``count`` events were delivered (or ``timeout``)."""
        with self._progress:
            self._progress.wait_for(lambda: self._delivered.get(node, 0) >= count or self._stopped, timeout)

    def stop(self) -> None:
        """Deliver what was submitted, then end the thread (bounded)."""
        self._queue.put(None)
        self._thread.join(STOP_TIMEOUT)
        with self._progress:
            self._stopped = True
            self._progress.notify_all()

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, str):
                self._on_error(item)
                continue
            node, batch = item
            if batch.dropped:
                self._on_error(f"{batch.dropped} events of node {node} were dropped because the client fell behind")
            for event in batch.events:
                self._deliver(event)
            with self._progress:
                self._delivered[node] = batch.published  # a replaced agent counts from 0 again
                self._progress.notify_all()
