"""Inside a host actor: which node caches watch which slots, and what changed for each.

A cache (one per process using eventual collections, the "subscriber") watches every
slot it has read or written. A write marks the slot dirty for each watcher and wakes
its pending ``poll``. Subscribers that stop polling are forgotten after ``IDLE_FORGET``.
Called with the host's lock held; ``poll`` waits on a condition of that lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Hashable

from skyward.collections.entities import wait_until
from skyward.collections.remote import EntityKey

IDLE_FORGET = 120.0

WatchedKey = tuple[EntityKey, Hashable]
"""A watched key: (the entity, the key or slot within it)."""


class _Subscriber:
    __slots__ = ("dirty", "watched", "polling", "seen")

    def __init__(self) -> None:
        self.dirty: set[WatchedKey] = set()
        self.watched: set[WatchedKey] = set()
        self.polling = False
        self.seen = time.monotonic()


class Subscriptions:
    """Watchers per slot and dirty slots per subscriber."""

    def __init__(self, condition: threading.Condition) -> None:
        self._condition = condition
        self._watchers: dict[WatchedKey, set[str]] = {}
        self._subscribers: dict[str, _Subscriber] = {}

    def watch(self, subscriber: str, slot: WatchedKey) -> None:
        """From now on, tell ``subscriber`` when ``slot`` changes."""
        state = self._subscriber(subscriber)
        if slot not in state.watched:
            state.watched.add(slot)
            self._watchers.setdefault(slot, set()).add(subscriber)

    def changed(self, slot: WatchedKey) -> None:
        """``slot`` was written: mark it dirty for its watchers and wake their polls."""
        woken = False
        for subscriber in self._watchers.get(slot, ()):
            state = self._subscribers[subscriber]
            state.dirty.add(slot)
            woken = woken or state.polling
        if woken:
            self._condition.notify_all()

    def poll(self, subscriber: str, wait: float) -> set[WatchedKey]:
        """The slots changed for ``subscriber`` since its last poll, waiting up to ``wait``
        seconds for one if there are none yet."""
        state = self._subscriber(subscriber)
        state.polling = True
        try:
            wait_until(self._condition, lambda: bool(state.dirty), wait)
        finally:
            state.polling = False
        state.seen = time.monotonic()
        dirty, state.dirty = state.dirty, set()
        return dirty

    def forget_idle(self) -> None:
        """Drop subscribers that have not polled for ``IDLE_FORGET`` seconds."""
        limit = time.monotonic() - IDLE_FORGET
        for subscriber, state in list(self._subscribers.items()):
            if state.seen < limit and not state.polling:
                for slot in state.watched:
                    watchers = self._watchers.get(slot)
                    if watchers is not None:
                        watchers.discard(subscriber)
                        if not watchers:
                            del self._watchers[slot]
                del self._subscribers[subscriber]

    def __len__(self) -> int:
        return len(self._subscribers)

    def _subscriber(self, subscriber: str) -> _Subscriber:
        state = self._subscribers.get(subscriber)
        if state is None:
            state = self._subscribers[subscriber] = _Subscriber()
        state.seen = time.monotonic()
        return state
