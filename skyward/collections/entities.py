"""The state of each collection inside a host actor (an "entity"): a dict shard, a set,
a counter, a queue, a barrier, a lock.

Every method is called with the host's lock held. Data entities keep a ``version`` that
grows with every write and report written slots through ``Hooks.changed`` (a dict key,
a set member, or ``None`` for the counter), which is how node caches learn what to
refresh; ``read(slot)`` gives a slot's value as a cache holds it. Waiting methods take
``wait`` (seconds, at most one slice of the caller's timeout), wait on
``Hooks.condition`` (which releases the host's lock meanwhile) and return instead of
raising when it runs out, so callers wait in slices and a caller that went away never
leaves anything waiting for long. Holders are strings naming a node, a process and a
task (see ``keeper``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from skyward.collections.config import LEASE_TTL
from skyward.collections.errors import BrokenBarrierError, StaleFenceError
from skyward.collections.markers import MISSING

KEPT_OUTCOMES = 1024


def wait_until(condition: threading.Condition, ready: Callable[[], bool], wait: float) -> bool:
    """Wait on ``condition`` (its lock held) until ``ready()`` or ``wait`` seconds pass;
    returns ``ready()``."""
    deadline = time.monotonic() + wait
    while not ready():
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        condition.wait(left)
    return True


@dataclass(frozen=True, slots=True)
class Hooks:
    """``changed(slot)`` after a write (for caches watching that slot); ``hold(holder)`` /
    ``unhold(holder)`` when a holder starts or stops depending on this entity (a lock's
    owner, a barrier's participant), so the host keeps that holder's lease;
    ``condition`` (on the host's lock) is what waiting methods wait on."""

    name: str
    changed: Callable[[Hashable], None]
    hold: Callable[[str], None]
    unhold: Callable[[str], None]
    condition: threading.Condition


class DataEntity:
    """Base of the data entities (a dict shard, a set, a counter): ``version`` grows
    with every write, which ``_changed(slot)`` counts and reports through
    ``Hooks.changed`` (``slot``: the key or member written, ``None`` for the counter)."""

    def __init__(self, hooks: Hooks) -> None:
        self.version = 0
        self._hooks = hooks

    def _changed(self, slot: Hashable) -> None:
        self.version += 1
        self._hooks.changed(slot)


class DictShard(DataEntity):
    """The keys of one dict that hash to this host. A multi-shard ``update`` first
    ``prepare``s its keys on every shard (operations on them wait), then ``commit``s."""

    def __init__(self, hooks: Hooks) -> None:
        super().__init__(hooks)
        self._data: dict[Hashable, object] = {}
        self._fences: dict[Hashable, int] = {}
        """The newest fencing token each fenced key was written with."""
        self._locked: dict[Hashable, str] = {}
        self._transactions: dict[str, tuple[Hashable, ...]] = {}

    def read(self, slot: Hashable) -> object:
        return self._data.get(slot, MISSING)

    def get(self, key: Hashable) -> object:
        """The value, or MISSING."""
        return self._data.get(key, MISSING)

    def contains(self, key: Hashable) -> bool:
        return key in self._data

    def set(self, key: Hashable, value: object, fence: int = 0) -> None:
        """``key`` = ``value``. A ``fence`` (a lock's fencing token, 0: none) is checked
        first: StaleFenceError, and nothing written, when ``key`` was written with a
        newer one."""
        if fence:
            newest = self._fences.get(key, 0)
            if fence < newest:
                raise StaleFenceError(
                    f"sky.dict({self._hooks.name!r}).set(key={key!r}, fence={fence}): refused, the key was written "
                    f"with the newer fencing token {newest} (most likely this writer's lock lease ran out and a "
                    "later holder wrote); nothing was written: acquire the lock again, read the key again and "
                    "redo the work with the new token"
                )
            self._fences[key] = fence
        self._data[key] = value
        self._changed(key)

    def delete(self, key: Hashable) -> bool:
        """Remove ``key``; False if it was not there."""
        if key not in self._data:
            return False
        del self._data[key]
        self._changed(key)
        return True

    def pop(self, key: Hashable) -> object:
        """Remove ``key`` and return its value, or MISSING."""
        value = self._data.pop(key, MISSING)
        if value is not MISSING:
            self._changed(key)
        return value

    def update(self, items: Iterable[tuple[Hashable, object]]) -> None:
        for key, value in items:
            self._data[key] = value
            self._changed(key)

    def busy(self, keys: Iterable[object]) -> bool:
        """True while a prepared multi-shard update holds one of ``keys``."""
        return bool(self._locked) and any(key in self._locked for key in keys)

    def settle(self, keys: Iterable[object], wait: float) -> bool:
        """Wait up to ``wait`` s until no prepared update holds any of ``keys``."""
        keys = tuple(keys)
        return wait_until(self._hooks.condition, lambda: not self.busy(keys), wait)

    def prepare(self, transaction: str, keys: tuple[Hashable, ...], wait: float) -> bool:
        """Hold ``keys`` for ``transaction`` once the updates before it let go; False if
        they did not within ``wait`` s."""
        if not self.settle(keys, wait):
            return False
        self._transactions[transaction] = keys
        for key in keys:
            self._locked[key] = transaction
        return True

    def commit(self, transaction: str, items: list[tuple[Hashable, object]]) -> None:
        """Write ``items`` and let go of the transaction's keys, in one step."""
        self.update(items)
        self.abort(transaction)

    def abort(self, transaction: str) -> None:
        """Let go of the transaction's keys without writing."""
        for key in self._transactions.pop(transaction, ()):
            self._locked.pop(key, None)
        self._hooks.condition.notify_all()


class SetStore(DataEntity):
    """A whole set (not sharded, so ``size`` is exact)."""

    def __init__(self, hooks: Hooks) -> None:
        super().__init__(hooks)
        self._members: set[Hashable] = set()

    def read(self, slot: Hashable) -> bool:
        return slot in self._members

    def contains(self, value: Hashable) -> bool:
        return value in self._members

    def add(self, value: Hashable) -> None:
        if value not in self._members:
            self._members.add(value)
            self._changed(value)

    def discard(self, value: Hashable) -> None:
        if value in self._members:
            self._members.discard(value)
            self._changed(value)

    def size(self) -> int:
        return len(self._members)


class CounterStore(DataEntity):
    """An integer; every operation is applied whole, so none is lost or split."""

    def __init__(self, hooks: Hooks) -> None:
        super().__init__(hooks)
        self._value = 0

    def read(self, slot: Hashable) -> int:
        return self._value

    def get(self) -> int:
        return self._value

    def add(self, amount: int) -> int:
        """Add ``amount`` (negative to subtract); returns the new value."""
        self._value += amount
        self._changed(None)
        return self._value

    def reset(self, value: int) -> None:
        self._value = value
        self._changed(None)


class QueueState:
    """FIFO items; a ``put`` wakes the waiting ``get``s at once (no polling)."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks
        self._items: deque[object] = deque()

    def put(self, item: object) -> None:
        self._items.append(item)
        self._hooks.condition.notify_all()

    def put_many(self, items: tuple[object, ...]) -> None:
        """``put`` of each of ``items``, in order, at once (a node's concurrent puts)."""
        self._items.extend(items)
        self._hooks.condition.notify_all()

    def get(self, wait: float) -> tuple[bool, object]:
        """``(True, item)``, or ``(False, None)`` if nothing came within ``wait`` s."""
        if wait_until(self._hooks.condition, lambda: bool(self._items), wait):
            return True, self._items.popleft()
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
        self._why = ""
        self._outcomes: dict[int, str] = {}
        self._participants: set[str] = set()

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
            why = self._why or (
                "a participant died, failed or timed out, or reset() was called while others waited"
            )
            raise BrokenBarrierError(f"sky.barrier({self._hooks.name!r}) is broken ({why}); call reset() to reuse it")
        generation, index = self._generation, self._count
        self._count += 1
        if self._count == self.parties:
            self._finish("done")
        return generation, index

    def await_round(self, generation: int, wait: float) -> str:
        """"done", "broken" (followed by ": why" when the pool's membership broke it), or
        "waiting" if the round is still open after ``wait`` s."""
        wait_until(self._hooks.condition, lambda: generation < self._generation or self._broken, wait)
        if generation < self._generation:
            return self._outcomes.get(generation, "done")
        if self._broken:
            return f"broken: {self._why}" if self._why else "broken"
        return "waiting"

    def abandon(self, generation: int) -> None:
        """A waiter of ``generation`` gave up (its timeout): break that round."""
        if generation == self._generation:
            self.break_()

    def break_(self, why: str = "") -> None:
        if not self._broken:
            self._broken = True
            self._why = why
            self._notify()

    def reset(self) -> None:
        """Release waiters with BrokenBarrierError and start a fresh round."""
        if self._count or self._broken:
            self._finish("broken")
        self._broken = False
        self._why = ""

    def holder_gone(self, holder: str, failed: bool, why: str = "") -> None:
        """``holder`` ended; if it died or failed the barrier breaks (``why``: the
        pool's membership change that took it, if that is what happened)."""
        if holder in self._participants:
            self._participants.discard(holder)
            self._hooks.unhold(holder)
            if failed:
                self.break_(why)

    def membership_changed(self) -> None:
        """The pool's nodes changed: between rounds, the party count is fixed anew by the
        next arrival (so it can be sized for the new membership)."""
        if not self._count and not self._broken:
            self.parties = None

    def _finish(self, outcome: str) -> None:
        self._outcomes[self._generation] = outcome
        self._outcomes.pop(self._generation - KEPT_OUTCOMES, None)
        self._generation += 1
        self._count = 0
        self._notify()

    def _notify(self) -> None:
        self._hooks.condition.notify_all()


class _Ticket:
    """A holder's place in a lock's queue of waiters."""

    __slots__ = ("holder", "cancelled")

    def __init__(self, holder: str) -> None:
        self.holder = holder
        self.cancelled = False


LOST_REMEMBERED = 1_000
"""How many holders that lost a lock to their lease a lock remembers (the oldest go)."""


class LockState:
    """A mutex owned by one holder at a time; waiters are served first come, first served.
    A holder whose lease ran out while it held the lock (``lease_ran_out``) is told so
    when it releases."""

    def __init__(self, hooks: Hooks) -> None:
        self._hooks = hooks
        self.holder: str | None = None
        self._queue: deque[_Ticket] = deque()
        self._lost: dict[str, None] = {}
        """Holders whose lease ran out while they held the lock, oldest first."""
        self._token = 0
        """The fencing token of the latest grant."""

    def acquire(self, holder: str, wait: float) -> int:
        """The fencing token of ``holder``'s hold once it owns the lock (see ``_grant``);
        0 if it did not within ``wait`` s."""
        if self.holder is None and not self._queue:
            return self._grant(holder)
        if wait <= 0:
            return 0
        ticket = _Ticket(holder)
        self._queue.append(ticket)
        wait_until(self._hooks.condition, lambda: ticket.cancelled or self._next_is(ticket), wait)
        granted = not ticket.cancelled and self._next_is(ticket)
        if ticket in self._queue:
            self._queue.remove(ticket)
        token = self._grant(holder) if granted else 0
        self._hooks.condition.notify_all()
        return token

    def release(self, holder: str) -> None:
        """Let go; RuntimeError if ``holder`` does not own the lock, saying so when it lost
        it to its lease."""
        if self.holder != holder:
            if holder in self._lost:
                del self._lost[holder]
                raise RuntimeError(
                    f"release() of sky.lock({self._hooks.name!r}): this holder lost the lock while it held it: "
                    f"its lease ran out (its process could not renew it for {LEASE_TTL:g}s: cut off from the lock's host, "
                    "or stalled), and another holder may have held the lock since; what ran under it may not have "
                    "run alone"
                )
            state = "it is not locked" if self.holder is None else "another task holds it"
            raise RuntimeError(
                f"release() of sky.lock({self._hooks.name!r}) by a holder that does not hold "
                f"it ({state}); only the task (or client thread) that acquired it may release it"
            )
        self._let_go()

    def locked(self) -> bool:
        return self.holder is not None

    def holder_gone(self, holder: str, failed: bool, why: str = "") -> None:
        """``holder`` ended or died: it stops waiting, and the lock is freed if it owned it."""
        for ticket in [t for t in self._queue if t.holder == holder]:
            ticket.cancelled = True
            self._queue.remove(ticket)
        if self.holder == holder:
            self._let_go()
        self._hooks.condition.notify_all()

    def lease_ran_out(self, holder: str) -> None:
        """``holder``'s lease ran out: as ``holder_gone``, and if it held the lock its
        release will say that it lost it."""
        if self.holder == holder:
            self._lost[holder] = None
            while len(self._lost) > LOST_REMEMBERED:
                del self._lost[next(iter(self._lost))]
        self.holder_gone(holder, failed=True)

    def _next_is(self, ticket: _Ticket) -> bool:
        return self.holder is None and bool(self._queue) and self._queue[0] is ticket

    def _grant(self, holder: str) -> int:
        """Give the lock to ``holder``; its fencing token: larger than every token this
        lock gave before (the clock's microseconds, or one more than the last token when
        grants come faster), so while clocks agree, also larger than those a lock of the
        same name gave in an earlier pool, for storage that outlives pools."""
        self._lost.pop(holder, None)  # held again: what it lost before is past
        self.holder = holder
        self._hooks.hold(holder)
        self._token = max(self._token + 1, time.time_ns() // 1_000)
        return self._token

    def _let_go(self) -> None:
        previous, self.holder = self.holder, None
        if previous is not None:
            self._hooks.unhold(previous)
        self._hooks.condition.notify_all()
