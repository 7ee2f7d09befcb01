"""``ObservedForwarder``: what the script holding a kept pool observes of it (its task
events, a map's progress, its cost), sent to the pool daemon that keeps the pool, for its
dashboard (``daemon.dashboard_feed``): the events are gathered from the pool's event bus
and sent as one encoded ``EventBatch`` every ``FLUSH_EVERY`` seconds (``Observed``); past
``MAX_PENDING`` events waiting, the rest are counted as dropped."""

from __future__ import annotations

import threading
from collections.abc import Callable

from skyward.engine.events import EventBatch
from skyward.observe.bus import Subscribe
from skyward.observe.events import (
    BroadcastStarted,
    ClusterResized,
    CostFinal,
    CostUpdate,
    Event,
    Progress,
    TaskCompleted,
    TaskStarted,
)

FORWARDED: tuple[type[Event], ...] = (
    TaskStarted, TaskCompleted, Progress, BroadcastStarted, ClusterResized, CostUpdate, CostFinal,
)
"""The events the daemon cannot see for itself (its relay sees the nodes' own)."""
FLUSH_EVERY = 0.5
MAX_PENDING = 20_000


class ObservedForwarder:
    """Subscribes through ``subscribe`` (``pool.on``) and hands each batch's bytes to
    ``send`` (``RelayTransport.observe``) from a thread of its own until ``close``."""

    def __init__(self, send: Callable[[bytes], None], subscribe: Subscribe) -> None:
        self._send = send
        self._lock = threading.Lock()
        self._pending: list[Event] = []
        self._dropped = 0
        self._published = 0
        self._stop = threading.Event()
        self._unsubscribe = [subscribe(kind, self._take) for kind in FORWARDED]
        self._thread = threading.Thread(target=self._run, name="skyward-observed", daemon=True)
        self._thread.start()

    def _take(self, event: Event) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                self._dropped += 1
                return
            self._pending.append(event)
            self._published += 1

    def _run(self) -> None:
        while not self._stop.wait(FLUSH_EVERY):
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            taken, self._pending = self._pending, []
            dropped, self._dropped = self._dropped, 0
            published = self._published
        if taken or dropped:
            try:
                self._send(EventBatch(taken, dropped, published).encode())
            except Exception:  # noqa: BLE001, S110 - the dashboard misses a batch; the pool goes on
                pass

    def close(self) -> None:
        """Stop listening, send what is left, end the thread."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._stop.set()
        self._thread.join(FLUSH_EVERY * 4)
        self._flush()
