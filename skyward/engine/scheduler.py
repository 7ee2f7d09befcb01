"""Task slots per node.

``acquire(None)`` gives the next node round-robin that has a free slot; ``acquire(i)``
a slot on node ``i``; ``acquire(ALL)`` one slot on every node at once, so two
broadcasts can never each hold half the nodes and wait for the other. Waiters are served
in arrival order, and a waiting broadcast holds back later requests so it cannot starve.
Waiting happens on the pool's event loop; ``try_acquire`` and ``release`` may be called
from any thread.

Waiters sit in one queue per kind of want (any node, node ``i``, every node), each in
arrival order, so serving a release looks at the head of each queue only: the cost of a
grant does not grow with the number of waiters (50,000 pending futures cost per task
what 1,000 do).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import deque
from typing import Any

ALL = "all"
Want = int | str | None


class _Waiter:
    __slots__ = ("seq", "want", "future")

    def __init__(self, seq: int, want: Want, future: asyncio.Future[Any]) -> None:
        self.seq = seq
        self.want = want
        self.future = future


class SlotScheduler:
    """Counts free slots per node; waiters wait on ``loop``."""

    def __init__(self, nodes: int, slots: int, loop: asyncio.AbstractEventLoop) -> None:
        self._free = [slots] * nodes
        self._slots = slots
        self._next = 0
        self._loop = loop
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._any: deque[_Waiter] = deque()
        self._pinned: list[deque[_Waiter]] = [deque() for _ in range(nodes)]
        self._all: deque[_Waiter] = deque()
        self._waiting = 0

    @property
    def nodes(self) -> int:
        return len(self._free)

    def busy(self) -> int:
        """Slots currently taken across all nodes."""
        return sum(self._slots - free for free in self._free)

    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return self._waiting

    def try_acquire(self, want: Want) -> Any:
        """Like ``acquire`` but never waits: None when no slot is free (or others wait)."""
        with self._lock:
            return None if self._waiting else self._try(want)

    async def acquire(self, want: Want) -> Any:
        """A node index (or, for ALL, the list of every index) whose slot is now yours.
        Must be awaited on the scheduler's loop."""
        with self._lock:
            granted = None if self._waiting else self._try(want)
            if granted is not None:
                return granted
            waiter = _Waiter(next(self._seq), want, self._loop.create_future())
            self._queue_of(want).append(waiter)
            self._waiting += 1
        try:
            return await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                granted = waiter.future.done() and not waiter.future.cancelled()
                if not granted:
                    waiter.future.cancel()  # left in its queue; dropped when it reaches the head
                    self._waiting -= 1
            if granted:
                self.release(waiter.future.result())
            raise

    def release(self, nodes: int | list[int]) -> None:
        """Give back a slot on each node named (from any thread)."""
        with self._lock:
            for node in nodes if isinstance(nodes, list) else [nodes]:
                self._free[node] += 1
            waiting = self._waiting > 0
        if not waiting or self._loop.is_closed():
            return
        if _on_loop(self._loop):
            self._serve()
        else:
            self._loop.call_soon_threadsafe(self._serve)

    def _queue_of(self, want: Want) -> deque[_Waiter]:
        if want == ALL:
            return self._all
        if isinstance(want, int):
            return self._pinned[want]
        return self._any

    def _serve(self) -> None:
        """Grant slots to waiters in arrival order until none can be served."""
        with self._lock:
            while True:
                candidates = [
                    queue for node, queue in enumerate(self._pinned) if self._free[node] > 0 and _live_head(queue)
                ]
                if _live_head(self._any) and any(free > 0 for free in self._free):
                    candidates.append(self._any)
                first = min(candidates, key=lambda q: q[0].seq, default=None)
                if _live_head(self._all) and (first is None or self._all[0].seq < first[0].seq):
                    if not all(free > 0 for free in self._free):
                        return  # a waiting broadcast holds back everything that came later
                    first = self._all
                if first is None:
                    return
                waiter = first.popleft()
                self._waiting -= 1
                waiter.future.set_result(self._try(waiter.want))

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


def _live_head(queue: deque[_Waiter]) -> bool:
    """Drop cancelled waiters from the head of ``queue``; True if a live one is left."""
    while queue and queue[0].future.done():
        queue.popleft()
    return bool(queue)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
