"""Inside a host actor: which node caches watch which slots, and what changed for each.

A cache (one per process using eventual collections, the "subscriber") watches every
slot it has read or written. A write marks the slot dirty for each watcher and wakes
its pending ``poll``. Subscribers that stop polling are forgotten after ``IDLE_FORGET``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

IDLE_FORGET = 120.0

EntityKey = tuple[str, str]
Slot = tuple[EntityKey, Any]


class _Subscriber:
    __slots__ = ("dirty", "watched", "woken", "seen")

    def __init__(self) -> None:
        self.dirty: set[Slot] = set()
        self.watched: set[Slot] = set()
        self.woken: asyncio.Event | None = None
        self.seen = time.monotonic()


class Subscriptions:
    """Watchers per slot and dirty slots per subscriber."""

    def __init__(self) -> None:
        self._watchers: dict[Slot, set[str]] = {}
        self._subscribers: dict[str, _Subscriber] = {}

    def watch(self, subscriber: str, slot: Slot) -> None:
        """From now on, tell ``subscriber`` when ``slot`` changes."""
        state = self._subscriber(subscriber)
        if slot not in state.watched:
            state.watched.add(slot)
            self._watchers.setdefault(slot, set()).add(subscriber)

    def changed(self, slot: Slot) -> None:
        """``slot`` was written: mark it dirty for its watchers and wake their polls."""
        for subscriber in self._watchers.get(slot, ()):
            state = self._subscribers[subscriber]
            state.dirty.add(slot)
            if state.woken is not None:
                state.woken.set()

    async def poll(self, subscriber: str, wait: float) -> set[Slot]:
        """The slots changed for ``subscriber`` since its last poll, waiting up to ``wait``
        seconds for one if there are none yet."""
        state = self._subscriber(subscriber)
        if not state.dirty and wait > 0:
            state.woken = asyncio.Event()
            try:
                await asyncio.wait_for(state.woken.wait(), wait)
            except asyncio.TimeoutError:
                pass
            finally:
                state.woken = None
        state.seen = time.monotonic()
        dirty, state.dirty = state.dirty, set()
        return dirty

    def forget_idle(self) -> None:
        """Drop subscribers that have not polled for ``IDLE_FORGET`` seconds."""
        limit = time.monotonic() - IDLE_FORGET
        for subscriber, state in list(self._subscribers.items()):
            if state.seen < limit and state.woken is None:
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
