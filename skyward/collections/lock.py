"""``sky.lock(name)``: mutual exclusion across the pool."""

from __future__ import annotations

from types import TracebackType
from typing import Any

from skyward.collections.holders import holder_id
from skyward.collections.steps import Steps, async_twin, steps


class SharedLock:
    """A distributed mutex: ``acquire``, ``release``, ``locked``, ``with lock:`` and
    ``async with lock:``; each method has an ``_async`` twin. Always strong.

    The lock belongs to the task that acquired it (outside tasks: the client thread):
    another holder's ``release`` raises RuntimeError. It is a lease: freed when the
    holder's task ends, or within ``LEASE_TTL`` + ``CHECK_EVERY`` seconds (see
    ``leases``) after the holder's process or node dies. ``timeout`` is the default wait
    of ``acquire`` and of ``with lock:`` (None: no limit).
    """

    __slots__ = ("name", "timeout", "_engine")

    def __init__(self, engine: Any, name: str, timeout: float | None) -> None:
        self.name = name
        self.timeout = timeout
        self._engine = engine

    @steps
    def acquire(self, blocking: bool = True, timeout: float | None = None) -> Steps[bool]:
        """Take the lock; True once held, False if ``timeout`` seconds (default: the
        lock's ``timeout``) passed first. ``blocking=False`` tries once."""
        wait = 0.0 if not blocking else (self.timeout if timeout is None else timeout)
        if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0):
            raise ValueError(f"sky.lock({self.name!r}).acquire(timeout={timeout!r}): use None or a number >= 0")
        return (yield from self._engine.lock_acquire(self.name, holder_id(), wait))

    @steps
    def release(self) -> Steps[None]:
        """Let go; RuntimeError if the caller does not hold the lock."""
        yield from self._engine.lock_release(self.name, holder_id())

    @steps
    def locked(self) -> Steps[bool]:
        """True if someone holds the lock now."""
        return (yield from self._engine.lock_locked(self.name))

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

    def __reduce__(self) -> Any:
        from skyward.collections.factories import rebuild

        return (rebuild, ("lock", self.name, (self.timeout,)))

    def __repr__(self) -> str:
        return f"sky.lock({self.name!r}, timeout={self.timeout!r})"


def _not_acquired(lock: SharedLock) -> str:
    return (
        f"sky.lock({lock.name!r}) could not be acquired within its timeout of {lock.timeout:g}s; "
        "pass a longer timeout to sky.lock(name, timeout=...)"
    )
