"""Task slots per node, over a node set that may change while work waits.

``acquire(None)`` gives the next node round-robin that has a free slot; ``acquire(i)``
a slot on node ``i``; ``acquire(ALL)`` one slot on every node present at once (so two
broadcasts can never each hold half the nodes and wait for the other), returning the
ranks it took. Waiters are served in arrival order, and a waiting broadcast holds back
later requests so it cannot starve. Waiting happens on the pool's event loop;
``try_acquire`` and ``release`` may be called from any thread.

Waiters sit in one queue per kind of want (any node, node ``i``, every node), each in
arrival order, so serving a release looks at the head of each queue only: the cost of a
grant does not grow with the number of waiters (50,000 pending futures cost per task
what 1,000 do). Nor with the number of nodes: the nodes with a free slot are kept as a
set and the rank order is sorted once per membership change; a grant looks at a few
nodes from the round-robin cursor, else (most nodes busy) takes the first open node
after it from the set, so a grant at 1,000 busy nodes costs what it costs at 10.

Membership: ``add(i)`` brings node ``i`` in with every slot free; ``drain(i)`` stops
granting its slots (it is about to leave; ``undrain(i)`` if it stays); ``expect(i)`` takes it out while a
replacement comes (work pinned to ``i`` keeps waiting for it); ``remove(i)`` takes it
out for good (work pinned to ``i`` fails with ``NodeRemovedError``). Slots held on a
node that left are "stale": their ``release`` is counted off and never frees a slot of
the node that later takes the same rank.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Final, Literal, overload

from skyward.core.errors import NodeRemovedError

ALL: Final = "all"
SCAN: Final = 8
"""How many nodes from the round-robin cursor on a grant looks at; past them it takes
the first node with a free slot after the cursor from the set of those (few, then)."""
Want = int | str | None
Grant = int | list[int]
"""A node's rank, or for ``ALL`` the ranks of every node present."""


class _Waiter:
    __slots__ = ("seq", "want", "future")

    def __init__(self, seq: int, want: Want, future: asyncio.Future[Grant | None]) -> None:
        self.seq = seq
        self.want = want
        self.future = future


class SlotScheduler:
    """Counts free slots per node; waiters wait on ``loop``."""

    def __init__(self, nodes: Iterable[int] | int, slots: int, loop: asyncio.AbstractEventLoop) -> None:
        ranks = range(nodes) if isinstance(nodes, int) else nodes
        now = time.monotonic()
        self._free: dict[int, int] = {rank: slots for rank in ranks}
        self._open: set[int] = set(self._free) if slots > 0 else set()
        """The present nodes with a free slot that are not draining, kept as slots are
        taken and given back, so a grant does not scan the pool."""
        self._order: list[int] | None = None
        """``_active()`` as last computed; None after a membership change."""
        self._idle_since: dict[int, float | None] = {rank: now for rank in self._free}
        self._draining: set[int] = set()
        self._expected: set[int] = set()
        self._stale: dict[int, int] = {}
        self._slots = slots
        self._next = 0
        """The rank the next round-robin grant starts from (the one after the last granted)."""
        self._loop = loop
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._any: deque[_Waiter] = deque()
        self._pinned: dict[int, deque[_Waiter]] = {}
        self._all: deque[_Waiter] = deque()
        self._waiting = 0
        self._waiting_any = 0
        self._waiting_all = 0

    # ------------------------------------------------------------------ state

    @property
    def slots(self) -> int:
        """Slots per node."""
        return self._slots

    def ranks(self) -> list[int]:
        """The nodes work can go to now (present and not draining), in rank order."""
        with self._lock:
            return self._active()

    def busy(self) -> int:
        """Slots currently taken across the nodes present."""
        with self._lock:
            return sum(self._slots - free for free in self._free.values())

    def busy_on(self, node: int) -> int:
        """Slots taken on ``node`` (0 when it is not present)."""
        with self._lock:
            return self._slots - self._free[node] if node in self._free else 0

    def idle_since(self, node: int) -> float | None:
        """When ``node`` last became idle (``time.monotonic``), or None while it runs work
        or is not present."""
        with self._lock:
            return self._idle_since.get(node)

    def waiting(self) -> int:
        """Requests waiting for a slot."""
        return self._waiting

    def pressure(self) -> int:
        """Requests that more nodes would serve: those waiting for a slot on any node,
        and broadcasts waiting while no node is present."""
        with self._lock:
            return self._waiting_any + (0 if self._active() else self._waiting_all)

    # ------------------------------------------------------------------ membership

    def add(self, node: int) -> None:
        """Node ``node`` is ready: its slots are free; waiters are served."""
        with self._lock:
            self._free[node] = self._slots
            self._idle_since[node] = time.monotonic()
            self._draining.discard(node)
            self._expected.discard(node)
            self._reopen(node)
            self._order = None
        self._serve_soon()

    def drain(self, node: int) -> None:
        """Grant no more slots on ``node`` (it is about to leave)."""
        with self._lock:
            if node in self._free:
                self._draining.add(node)
                self._open.discard(node)
                self._order = None
        self._serve_soon()  # a waiting broadcast no longer waits for it

    def undrain(self, node: int) -> None:
        """Grant ``node``'s slots again (it stays after all)."""
        with self._lock:
            self._draining.discard(node)
            self._reopen(node)
            self._order = None
        self._serve_soon()

    def expect(self, node: int) -> None:
        """Node ``node`` is gone and a replacement will take its rank: it gets no work
        until ``add``; work pinned to it waits."""
        with self._lock:
            self._leave(node)
            self._expected.add(node)
        self._serve_soon()

    def remove(self, node: int, reason: str) -> None:
        """Node ``node`` left for good: work pinned to it fails with NodeRemovedError
        (``reason`` says why)."""
        with self._lock:
            self._leave(node)
            self._expected.discard(node)
            queue = self._pinned.pop(node, deque())
            failed = [waiter for waiter in queue if not waiter.future.done()]
            self._waiting -= len(failed)
        error = NodeRemovedError(f"node {node} is no longer part of the pool ({reason}); pin work to a node it has")
        for waiter in failed:
            self._loop.call_soon_threadsafe(_fail, waiter.future, error)
        self._serve_soon()

    def fail_waiting(self, error: BaseException) -> int:
        """Fail every request waiting for a slot with ``error`` (a pool with no node that
        could not start one); how many failed. Call it on the scheduler's loop."""
        with self._lock:
            queues = [self._any, self._all, *self._pinned.values()]
            failed = [waiter for queue in queues for waiter in queue if not waiter.future.done()]
            for queue in queues:
                queue.clear()
            self._pinned.clear()
            for waiter in failed:
                self._count(waiter.want, -1)
        for waiter in failed:
            waiter.future.set_exception(error)
        return len(failed)

    def _leave(self, node: int) -> None:
        free = self._free.pop(node, None)
        if free is not None and free < self._slots:
            self._stale[node] = self._stale.get(node, 0) + self._slots - free
        self._idle_since.pop(node, None)
        self._draining.discard(node)
        self._open.discard(node)
        self._order = None

    def _reopen(self, node: int) -> None:
        """Count ``node`` among the open nodes if it is present, has a free slot and is
        not draining."""
        if self._free.get(node, 0) > 0 and node not in self._draining:
            self._open.add(node)

    def known(self, node: int) -> bool:
        """True if work may be pinned to ``node``: present, or expected back."""
        with self._lock:
            return node in self._free or node in self._expected

    # ------------------------------------------------------------------ slots

    @overload
    def try_acquire(self, want: Literal["all"]) -> list[int] | None: ...

    @overload
    def try_acquire(self, want: int | None) -> int | None: ...

    def try_acquire(self, want: Want) -> Grant | None:
        """Like ``acquire`` but never waits: None when no slot is free (or others wait)."""
        with self._lock:
            self._check_pinned(want)
            return None if self._waiting else self._try(want)

    @overload
    async def acquire(self, want: Literal["all"]) -> list[int]: ...

    @overload
    async def acquire(self, want: int | None) -> int: ...

    async def acquire(self, want: Want) -> Grant | None:
        """A node rank (or, for ALL, the list of the ranks present) whose slot is now
        yours. Must be awaited on the scheduler's loop. NodeRemovedError when ``want``
        is a node that is not (and will not be) part of the pool."""
        with self._lock:
            self._check_pinned(want)
            granted = None if self._waiting else self._try(want)
            if granted is not None:
                return granted
            waiter = _Waiter(next(self._seq), want, self._loop.create_future())
            self._queue_of(want).append(waiter)
            self._count(want, 1)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                served = waiter.future.done() and not waiter.future.cancelled()
                if not served:
                    waiter.future.cancel()  # left in its queue; dropped when it reaches the head
                    self._count(want, -1)
            got = waiter.future.result() if served else None
            if got is not None:
                self.release(got)
            raise

    def release(self, nodes: int | list[int]) -> None:
        """Give back a slot on each node named (from any thread)."""
        with self._lock:
            for node in nodes if isinstance(nodes, list) else (nodes,):
                if self._stale.get(node):
                    self._stale[node] -= 1
                elif node in self._free:
                    free = self._free[node] = self._free[node] + 1
                    self._reopen(node)
                    if free == self._slots:
                        self._idle_since[node] = time.monotonic()
            waiting = self._waiting > 0
        if waiting:
            self._serve_soon()

    def _count(self, want: Want, change: int) -> None:
        """Count a waiter in (``change`` 1) or out (-1), by its kind of want."""
        self._waiting += change
        if want is None:
            self._waiting_any += change
        elif want == ALL:
            self._waiting_all += change

    def _check_pinned(self, want: Want) -> None:
        if isinstance(want, int) and want not in self._free and want not in self._expected:
            raise NodeRemovedError(f"node {want} is not part of the pool; pin work to one of {self._active()}")

    def _serve_soon(self) -> None:
        if self._loop.is_closed():
            return
        if _on_loop(self._loop):
            self._serve()
        else:
            self._loop.call_soon_threadsafe(self._serve)

    def _queue_of(self, want: Want) -> deque[_Waiter]:
        if want == ALL:
            return self._all
        if isinstance(want, int):
            return self._pinned.setdefault(want, deque())
        return self._any

    def _active(self) -> list[int]:
        """The present nodes not draining, in rank order (a copy of the cached list)."""
        return list(self._ordered())

    def _ordered(self) -> list[int]:
        """``_active()``, computed once per membership change; not to be changed."""
        if self._order is None:
            self._order = sorted(node for node in self._free if node not in self._draining)
        return self._order

    def _serve(self) -> None:
        """Grant slots to waiters in arrival order until none can be served."""
        with self._lock:
            while True:
                candidates = [
                    queue for node, queue in self._pinned.items() if node in self._open and _live_head(queue)
                ]
                if _live_head(self._any) and self._open:
                    candidates.append(self._any)
                first = min(candidates, key=lambda q: q[0].seq, default=None)
                if _live_head(self._all) and (first is None or self._all[0].seq < first[0].seq):
                    active = self._ordered()
                    if not active or len(self._open) < len(active):
                        return  # a waiting broadcast holds back everything that came later
                    first = self._all
                if first is None:
                    return
                waiter = first.popleft()
                if isinstance(waiter.want, int) and not first:
                    del self._pinned[waiter.want]  # an empty queue per node ever pinned would be scanned on every grant
                self._count(waiter.want, -1)
                waiter.future.set_result(self._try(waiter.want))

    def _take(self, node: int) -> None:
        self._free[node] -= 1
        self._idle_since[node] = None
        if not self._free[node]:
            self._open.discard(node)

    def _try(self, want: Want) -> Grant | None:
        if want == ALL:
            active = self._ordered()
            if active and len(self._open) == len(active):
                for node in active:
                    self._take(node)
                return list(active)
            return None
        if isinstance(want, int):
            if want in self._open:
                self._take(want)
                return want
            return None
        if not self._open:
            return None
        active = self._ordered()
        count = len(active)
        start = bisect.bisect_left(active, self._next)
        for offset in range(min(SCAN, count)):
            chosen = active[(start + offset) % count]
            if chosen in self._open:
                break
        else:  # few nodes have a free slot: the first of them at or after the cursor
            chosen = min(self._open, key=lambda rank: (rank < self._next, rank))
        self._take(chosen)
        self._next = chosen + 1
        return chosen


def _fail(future: asyncio.Future[Grant | None], error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)


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
