"""Task slots per node.

``acquire(None)`` gives the next node round-robin that has a free slot; ``acquire(i)``
a slot on node ``i``; ``acquire(ALL)`` one slot on every node at once, so two
broadcasts can never each hold half the nodes and wait for the other. Waiters are served
in arrival order, and a waiting broadcast holds back later requests so it cannot starve.
Waiting happens on the pool's event loop; ``try_acquire`` and ``release`` may be called
from any thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any

ALL = "all"
Want = int | str | None


class SlotScheduler:
    """Counts free slots per node; waiters wait on ``loop``."""

    def __init__(self, nodes: int, slots: int, loop: asyncio.AbstractEventLoop) -> None:
        self._free = [slots] * nodes
        self._slots = slots
        self._next = 0
        self._loop = loop
        self._lock = threading.Lock()
        self._waiters: deque[tuple[Want, asyncio.Future[Any]]] = deque()

    @property
    def nodes(self) -> int:
        return len(self._free)

    def busy(self) -> int:
        """Slots currently taken across all nodes."""
        return sum(self._slots - free for free in self._free)

    def try_acquire(self, want: Want) -> Any:
        """Like ``acquire`` but never waits: None when no slot is free (or others wait)."""
        with self._lock:
            return None if self._waiters else self._try(want)

    async def acquire(self, want: Want) -> Any:
        """A node index (or, for ALL, the list of every index) whose slot is now yours.
        Must be awaited on the scheduler's loop."""
        with self._lock:
            granted = None if self._waiters else self._try(want)
            if granted is not None:
                return granted
            future: asyncio.Future[Any] = self._loop.create_future()
            entry = (want, future)
            self._waiters.append(entry)
        try:
            return await future
        except asyncio.CancelledError:
            with self._lock:
                waiting = entry in self._waiters
                if waiting:
                    self._waiters.remove(entry)
            if not waiting and future.done() and not future.cancelled():
                self.release(future.result())
            raise

    def release(self, nodes: int | list[int]) -> None:
        """Give back a slot on each node named (from any thread)."""
        with self._lock:
            for node in nodes if isinstance(nodes, list) else [nodes]:
                self._free[node] += 1
            waiting = bool(self._waiters)
        if not waiting or self._loop.is_closed():
            return
        if _on_loop(self._loop):
            self._serve()
        else:
            self._loop.call_soon_threadsafe(self._serve)

    def _serve(self) -> None:
        with self._lock:
            for entry in list(self._waiters):
                want, future = entry
                if future.done():
                    self._waiters.remove(entry)
                    continue
                granted = self._try(want)
                if granted is None:
                    if want == ALL:
                        return
                    continue
                self._waiters.remove(entry)
                future.set_result(granted)

    def _try(self, want: Want) -> Any:
        if want == ALL:
            if all(free > 0 for free in self._free):
                self._free = [free - 1 for free in self._free]
                return list(range(len(self._free)))
            return None
        if isinstance(want, int):
            if self._free[want] > 0:
                self._free[want] -= 1
                return want
            return None
        count = len(self._free)
        for offset in range(count):
            node = (self._next + offset) % count
            if self._free[node] > 0:
                self._free[node] -= 1
                self._next = (node + 1) % count
                return node
        return None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
