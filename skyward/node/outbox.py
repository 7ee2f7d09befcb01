"""A node agent's outbox: the events of its node (task output, task events, metrics),
held until the client's ``EventPoller`` takes them."""

from __future__ import annotations

import threading
from collections import deque

from skyward.observe.events import Event

MAX_BUFFERED = 100_000


class Outbox:
    """Events in the order they were put; past ``MAX_BUFFERED`` the oldest are dropped
    (and counted). Thread-safe."""

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        self._changed = threading.Condition()
        self._published = 0
        self._dropped = 0
        self._woken = False

    @property
    def published(self) -> int:
        """How many events were put so far."""
        return self._published

    def put(self, event: Event) -> None:
        """Hold ``event`` for the client."""
        with self._changed:
            self._events.append(event)
            self._published += 1
            if len(self._events) > MAX_BUFFERED:
                self._events.popleft()
                self._dropped += 1
            self._changed.notify_all()

    def take(self, wait: float) -> tuple[list[Event], int, int]:
        """Everything held (waiting up to ``wait`` s for something unless woken), how many
        were dropped since the last take, and how many were put so far: the events
        returned are the last of those."""
        with self._changed:
            self._changed.wait_for(lambda: self._events or self._woken, wait)
            events = list(self._events)
            self._events.clear()
            dropped, self._dropped = self._dropped, 0
            return events, dropped, self._published

    def wake(self) -> None:
        """End a waiting ``take`` now; later takes no longer wait until ``resume`` (the
        client is leaving)."""
        with self._changed:
            self._woken = True
            self._changed.notify_all()

    def resume(self) -> None:
        """Let takes wait again: a client polls after the last one left (a kept pool's
        next script)."""
        with self._changed:
            self._woken = False
