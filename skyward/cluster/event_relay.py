"""A client thread that hands events to the pool's handlers, so a slow handler never
blocks the thread (or event loop) that received the events."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

_STOP = object()


class EventRelay:
    """Delivers submitted events, in order, on a thread named ``skyward-events``."""

    def __init__(self, deliver: Callable[[Any], None]) -> None:
        self._deliver = deliver
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._submitted = 0
        self._delivered = 0
        self._progress = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="skyward-events", daemon=True)
        self._thread.start()

    @property
    def submitted(self) -> int:
        """How many events were submitted so far."""
        return self._submitted

    def submit(self, events: list[Any]) -> None:
        """Queue ``events`` for delivery (any thread; returns at once)."""
        self._submitted += len(events)
        self._queue.put(events)

    def wait_delivered(self, count: int, timeout: float = 2.0) -> None:
        """Block until the first ``count`` submitted events were delivered (or timeout)."""
        with self._progress:
            self._progress.wait_for(lambda: self._delivered >= count, timeout)

    def is_delivered(self, count: int) -> bool:
        """Whether the first ``count`` submitted events were delivered."""
        return self._delivered >= count

    def stop(self, timeout: float = 5.0) -> None:
        """Deliver what was submitted, then end the thread (waits at most ``timeout`` s)."""
        self._queue.put(_STOP)
        self._thread.join(timeout)

    def _loop(self) -> None:
        while (events := self._queue.get()) is not _STOP:
            for event in events:
                self._deliver(event)
            with self._progress:
                self._delivered += len(events)
                self._progress.notify_all()
