"""The state of coordination collections inside a host actor: a queue, a barrier, a lock.

Waiting methods take ``wait`` (seconds, at most one slice of the caller's timeout) and
return instead of raising when it runs out, so callers can wait in slices and a caller
that went away never leaves anything waiting for long. Holders are strings naming a
node, a process and a task (or thread); see ``skyward.collections.runtime.holder_id``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from skyward.collections.errors import BrokenBarrierError
from skyward.collections.hooks import Hooks

KEPT_OUTCOMES = 1024


class QueueState:
    """FIFO items; a ``get`` waiting when an item is ``put`` receives it directly."""

    def __init__(self, hooks: Hooks) -> None:
        self._items: deque[Any] = deque()
        self._getters: deque[asyncio.Future[Any]] = deque()

    def put(self, item: Any) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(item)
                return
        self._items.append(item)

    async def get(self, wait: float) -> tuple[bool, Any]:
        """``(True, item)``, or ``(False, None)`` if nothing came within ``wait`` s."""
        if self._items:
            return True, self._items.popleft()
        if wait <= 0:
            return False, None
        getter = asyncio.get_running_loop().create_future()
        self._getters.append(getter)
        await asyncio.wait({getter}, timeout=wait)
        if getter.done():
            return True, getter.result()
        getter.cancel()
        self._getters.remove(getter)
        return False, None

    def size(self) -> int:
        return len(self._items)


class BarrierState:
    """A reusable barrier for ``parties`` arrivals per round (a "generation").

    ``arrive`` returns the round and the arrival index (0 first, ``parties - 1`` last,
    as ``threading.Barrier.wait`` does); the last arrival completes the round.
    Participants ``join`` when they create their proxy; one that dies (or whose task
    fails) breaks the barrier, and it stays broken until ``reset``.
    """

    def __init__(self, hooks: Hooks) -> None:
        self.parties: int | None = None
        self._hooks = hooks
        self._generation = 0
        self._count = 0
        self._broken = False
        self._outcomes: dict[int, str] = {}
        self._participants: set[str] = set()
        self._moved: asyncio.Event | None = None

    def check_parties(self, parties: int) -> None:
        """Fix the party count on first use; ValueError if another count was used."""
        if self.parties is None:
            self.parties = parties
        elif self.parties != parties:
            raise ValueError(
                f"sky.barrier({self._hooks.name!r}) was created with n={self.parties}, "
                f"not n={parties}: every participant must pass the same n"
            )

    def join(self, holder: str, parties: int) -> None:
        self.check_parties(parties)
        if holder not in self._participants:
            self._participants.add(holder)
            self._hooks.hold(holder)

    def arrive(self, parties: int) -> tuple[int, int]:
        """Count one arrival; returns ``(generation, index)``. Raises BrokenBarrierError."""
        self.check_parties(parties)
        if self._broken:
            raise BrokenBarrierError(f"sky.barrier({self._hooks.name!r}) is broken; call reset() to reuse it")
        generation, index = self._generation, self._count
        self._count += 1
        if self._count == self.parties:
            self._finish("done")
        return generation, index

    async def await_round(self, generation: int, wait: float) -> str:
        """"done", "broken", or "waiting" if the round is still open after ``wait`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            if generation < self._generation:
                return self._outcomes.get(generation, "done")
            if self._broken:
                return "broken"
            left = deadline - loop.time()
            if left <= 0:
                return "waiting"
            if self._moved is None:
                self._moved = asyncio.Event()
            try:
                await asyncio.wait_for(self._moved.wait(), left)
            except asyncio.TimeoutError:
                pass

    def abandon(self, generation: int) -> None:
        """A waiter of ``generation`` gave up (its timeout): break that round."""
        if generation == self._generation:
            self.break_()

    def break_(self) -> None:
        if not self._broken:
            self._broken = True
            self._notify()

    def reset(self) -> None:
        """Release waiters with BrokenBarrierError and start a fresh round."""
        if self._count or self._broken:
            self._finish("broken")
        self._broken = False

    def holder_gone(self, holder: str, failed: bool) -> None:
        """``holder`` ended; if it died or failed the barrier breaks."""
        if holder in self._participants:
            self._participants.discard(holder)
            self._hooks.unhold(holder)
            if failed:
                self.break_()

    def _finish(self, outcome: str) -> None:
        self._outcomes[self._generation] = outcome
        self._outcomes.pop(self._generation - KEPT_OUTCOMES, None)
        self._generation += 1
        self._count = 0
        self._notify()

    def _notify(self) -> None:
        if self._moved is not None:
            self._moved.set()
            self._moved = None


class LockState:
    """A mutex owned by one holder at a time; waiters are served first come, first served."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks
        self.holder: str | None = None
        self._waiters: deque[tuple[str, asyncio.Future[bool]]] = deque()

    async def acquire(self, holder: str, wait: float) -> bool:
        """True once ``holder`` owns the lock; False if it did not within ``wait`` s."""
        if self.holder is None and not self._waiters:
            self._grant(holder)
            return True
        if wait <= 0:
            return False
        granted = asyncio.get_running_loop().create_future()
        self._waiters.append((holder, granted))
        await asyncio.wait({granted}, timeout=wait)
        if granted.done() and not granted.cancelled():
            return True
        granted.cancel()
        if (holder, granted) in self._waiters:
            self._waiters.remove((holder, granted))
        return False

    def release(self, holder: str) -> None:
        """Let go; RuntimeError if ``holder`` does not own the lock."""
        if self.holder != holder:
            state = "it is not locked" if self.holder is None else "another task holds it"
            raise RuntimeError(
                f"release() of sky.lock({self._hooks.name!r}) by a holder that does not hold "
                f"it ({state}); only the task (or client thread) that acquired it may release it"
            )
        self._hand_over()

    def locked(self) -> bool:
        return self.holder is not None

    def holder_gone(self, holder: str, failed: bool) -> None:
        """``holder`` ended or died: it stops waiting, and the lock is freed if it owned it."""
        for waiter in [w for w in self._waiters if w[0] == holder]:
            self._waiters.remove(waiter)
            waiter[1].cancel()
        if self.holder == holder:
            self._hand_over()

    def _grant(self, holder: str) -> None:
        self.holder = holder
        self._hooks.hold(holder)

    def _hand_over(self) -> None:
        previous, self.holder = self.holder, None
        if previous is not None:
            self._hooks.unhold(previous)
        while self._waiters:
            holder, granted = self._waiters.popleft()
            if not granted.done():
                self._grant(holder)
                granted.set_result(True)
                return
