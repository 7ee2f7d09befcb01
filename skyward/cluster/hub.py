"""Event transport from nodes to the client: agents publish batches to an ``EventHub``
actor; a ``HubPoller`` thread in the client long-polls it and hands events on."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import ray

MAX_BUFFERED = 100_000


class EventHub:
    """Async Ray actor holding events until the client takes them (oldest dropped past
    ``MAX_BUFFERED``, counted in ``dropped``)."""

    def __init__(self) -> None:
        self._events: deque[Any] = deque()
        self._arrived = asyncio.Event()
        self._dropped = 0
        self._published = 0

    async def publish(self, events: list[Any]) -> int:
        """Store ``events``; returns how many events have been published so far."""
        self._events.extend(events)
        self._published += len(events)
        overflow = len(self._events) - MAX_BUFFERED
        for _ in range(max(0, overflow)):
            self._events.popleft()
        self._dropped += max(0, overflow)
        self._arrived.set()
        return self._published

    async def take(self, wait: float) -> tuple[list[Any], int, int]:
        """Everything not yet taken (waiting up to ``wait`` s for something), the number
        dropped since the last call, and the count published so far."""
        if not self._events:
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), wait)
            except asyncio.TimeoutError:
                pass
        events = list(self._events)
        self._events.clear()
        dropped, self._dropped = self._dropped, 0
        return events, dropped, self._published


class HubPoller:
    """Client thread that takes events from the hub and passes each to ``deliver``."""

    def __init__(self, hub: Any, deliver: Callable[[Any], None], on_error: Callable[[str], None]) -> None:
        self._hub = hub
        self._deliver = deliver
        self._on_error = on_error
        self._stop = threading.Event()
        self._delivered = 0
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="skyward-events", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self.drain(wait=0.5):
                return

    def drain(self, wait: float = 0.0) -> bool:
        """Fetch and deliver what the hub holds now; False once the hub is gone."""
        try:
            events, dropped, published = ray.get(self._hub.take.remote(wait), timeout=wait + 30)
        except Exception as exc:  # the hub is gone: the pool is closing or Ray died
            if not self._stop.is_set():
                self._on_error(f"event stream stopped: {exc}")
            return False
        if dropped:
            self._on_error(f"{dropped} events were dropped because the client fell behind")
        with self._progress:
            for event in events:
                self._deliver(event)
            self._delivered = max(self._delivered, published)
            self._progress.notify_all()
        return True

    def wait_delivered(self, count: int, timeout: float = 2.0) -> None:
        """Block until the first ``count`` published events were delivered (or timeout)."""
        with self._progress:
            self._progress.wait_for(lambda: self._delivered >= count or self._stop.is_set(), timeout)

    def stop(self) -> None:
        """Deliver what is left, then stop the thread."""
        self._stop.set()
        try:
            self._hub.publish.remote([])  # wakes the pending take
        except Exception:
            pass
        self._thread.join(timeout=5)
        self.drain()
