"""``sky.lock(name)``: mutual exclusion across the pool."""

from __future__ import annotations

import threading
from types import TracebackType

from skyward.collections.config import check_timeout
from skyward.collections.leases import holder_id, holder_task
from skyward.collections.operations import Operations, Reduced
from skyward.collections.steps import Steps, async_twin, steps

_holds: dict[str, dict[tuple[Operations, str], int]] = {}
"""The locks held in this process: by holder, each hold's fencing token by the pool's
operations and the lock's name. A holder is present only while it holds something."""
_holds_lock = threading.Lock()


def holds_lock() -> bool:
    """True if the caller (task or thread) holds a ``sky.lock`` acquired in this process:
    its eventual reads then ask the owner (see ``SharedDict``)."""
    return bool(_holds) and holder_id() in _holds


def forget_task(task_id: str) -> None:
    """Task ``task_id`` ended: whatever it held is freed (see ``runtime.end_task``)."""
    if not _holds:
        return
    with _holds_lock:
        for holder in [h for h in _holds if holder_task(h) == task_id]:
            del _holds[holder]


class SharedLock:
    """A distributed mutex: ``acquire``, ``release``, ``locked``, ``with lock:`` and
    ``async with lock:``; each method has an ``_async`` twin. Always strong.

    The lock belongs to the task that acquired it (outside tasks: the client thread):
    another holder's ``release`` raises RuntimeError. It is a lease: freed when the
    holder's task ends, or within 3.75 s (``RENEW_EVERY`` + ``LEASE_TTL`` +
    ``CHECK_EVERY``, see ``config``) after the holder's process or node dies. ``release``
    first waits until this node's earlier eventual writes are applied, and a holder's
    eventual reads ask the owner, so a critical section sees every write made in the
    critical sections before it. ``timeout`` is the default wait of ``acquire`` and of
    ``with lock:`` (None: no limit).

    Each hold has a fencing token (``token``), larger than every earlier hold's: a
    strong dict refuses a write fenced with a token older than one its key was written
    with (``SharedDict.set(..., fence=)``), so a holder that lost the lock to its lease
    cannot overwrite what a later holder wrote.
    """

    __slots__ = ("name", "timeout", "_operations")

    def __init__(self, operations: Operations, name: str, timeout: float | None) -> None:
        self.name = name
        self.timeout = timeout
        self._operations = operations

    @steps
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> Steps[bool]:
        """Take the lock; True once held, False if ``timeout`` seconds (default: the
        lock's ``timeout``) passed first. ``blocking=False`` tries once."""
        if not isinstance(blocking, bool):
            raise TypeError(f"sky.lock({self.name!r}).acquire(blocking={blocking!r}): use True or False")
        wait = 0.0 if not blocking else (self.timeout if timeout is None else timeout)
        wait = check_timeout(f"sky.lock({self.name!r}).acquire", wait)
        holder = holder_id()
        token = yield from self._operations.lock_acquire(self.name, holder, wait)
        if token:
            with _holds_lock:
                _holds.setdefault(holder, {})[(self._operations, self.name)] = token
        return bool(token)

    @steps
    def release(self) -> Steps[None]:
        """Let go, once this node's earlier eventual writes are applied; RuntimeError if
        the caller does not hold the lock."""
        holder = holder_id()
        lock = (self._operations, self.name)
        mine = _holds.get(holder, {}).get(lock)
        try:
            yield from self._operations.lock_release(self.name, holder)
        finally:
            if mine is not None:
                _forget_hold(holder, lock, mine)

    @property
    def token(self) -> int:
        """The fencing token of the caller's hold of this lock (a positive int, larger
        than any earlier hold's); pass it as ``fence=`` to a strong dict's ``set``, or
        write it beside what the critical section writes elsewhere and refuse older
        ones there. It is this process's record of the hold: a holder that lost the lock
        to its lease still reads its old token, which fenced writes then refuse.
        RuntimeError unless the caller (task or client thread) acquired the lock and has
        not released it."""
        token = _holds.get(holder_id(), {}).get((self._operations, self.name))
        if token is None:
            raise RuntimeError(
                f"sky.lock({self.name!r}).token: the caller does not hold the lock; read it inside "
                f"`with sky.lock({self.name!r}):` (or after acquire() returned True)"
            )
        return token

    @steps
    def locked(self) -> Steps[bool]:
        """True if someone holds the lock now."""
        return (yield from self._operations.lock_locked(self.name))

    acquire_async = async_twin(acquire)
    release_async = async_twin(release)
    locked_async = async_twin(locked)

    def __enter__(self) -> SharedLock:
        if not self.acquire():
            raise TimeoutError(_not_acquired(self))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    async def __aenter__(self) -> SharedLock:
        if not await self.acquire_async():
            raise TimeoutError(_not_acquired(self))
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        await self.release_async()

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, ("lock", self.name, (self.timeout,)))

    def __repr__(self) -> str:
        return f"sky.lock({self.name!r}, timeout={self.timeout!r})"


def _forget_hold(holder: str, lock: tuple[Operations, str], token: int) -> None:
    """The hold of ``lock`` with ``token`` is over (released, or lost to its lease); a
    newer hold of the same lock by the same holder (another coroutine of its task, granted
    meanwhile) stays."""
    with _holds_lock:
        held = _holds.get(holder)
        if held is not None and held.get(lock) == token:
            del held[lock]
            if not held:
                del _holds[holder]


def _not_acquired(lock: SharedLock) -> str:
    return (
        f"sky.lock({lock.name!r}) could not be acquired within its timeout of {lock.timeout:g}s; "
        "pass a longer timeout to sky.lock(name, timeout=...)"
    )
