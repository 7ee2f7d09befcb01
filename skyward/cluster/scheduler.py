"""Task slots per node, handed out on the pool's event loop.

``acquire(None)`` gives the next node round-robin that has a free slot; ``acquire(i)``
a slot on node ``i``; ``acquire(ALL)`` one slot on every node at once, so two
broadcasts can never each hold half the nodes and wait for the other. Waiters are served
in arrival order, and a waiting broadcast holds back later requests so it cannot starve.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

ALL = "all"
Want = int | str | None


class SlotScheduler:
    """Counts free slots per node; must only be used from one event loop."""

    def __init__(self, nodes: int, slots: int) -> None:
        self._free = [slots] * nodes
        self._slots = slots
        self._next = 0
        self._waiters: deque[tuple[Want, asyncio.Future[Any]]] = deque()

    @property
    def nodes(self) -> int:
        return len(self._free)

    def busy(self) -> int:
        """Slots currently taken across all nodes."""
        return sum(self._slots - free for free in self._free)

    async def acquire(self, want: Want) -> Any:
        """A node index (or, for ALL, the list of every index) whose slot is now yours."""
        if not self._waiters:
            granted = self._try(want)
            if granted is not None:
                return granted
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        entry = (want, future)
        self._waiters.append(entry)
        try:
            return await future
        except asyncio.CancelledError:
            if entry in self._waiters:
                self._waiters.remove(entry)
            elif future.done() and not future.cancelled():
                self.release(future.result())
            raise

    def release(self, nodes: int | list[int]) -> None:
        """Give back a slot on each node named."""
        for node in nodes if isinstance(nodes, list) else [nodes]:
            self._free[node] += 1
        self._serve()

    def _serve(self) -> None:
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
