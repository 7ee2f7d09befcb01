"""The collection factories: ``sky.dict(name)`` & co. and ``pool.dict(name)`` & co.

Inside a task they use the node's operations (the pool the task runs in); on the client
the active pool's. Outside any pool they raise NoActivePoolError, and on a pool opened
with ``Options(cluster=False)`` RuntimeError (``config.DISABLED``). Collections are
created lazily: the first operation on a name creates it, and the same name gives the
same collection on every node. A proxy sent to a task (captured or passed as an
argument) reconnects there to the same collection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skyward.collections import installed as runtime
from skyward.collections.barrier import SharedBarrier
from skyward.collections.config import check_name, check_timeout, resolve
from skyward.collections.counter import SharedCounter
from skyward.collections.lock import SharedLock
from skyward.collections.operations import Operations
from skyward.collections.shared_dict import SharedDict
from skyward.collections.shared_set import SharedSet
from skyward.collections.work_queue import SharedQueue
from skyward.core.context import NO_ACTIVE_POOL, active_pool
from skyward.core.errors import NoActivePoolError

DEFAULT_LOCK_TIMEOUT = 30.0


class PoolCollections:
    """The ``dict``/``set``/``counter``/``queue``/``barrier``/``lock`` methods of a pool;
    the pool provides ``_collections_operations()``."""

    def _collections_operations(self) -> Operations:
        raise NotImplementedError

    def dict(self, name: str, *, consistency: str | None = None) -> SharedDict[Any, Any]:
        """The shared dict ``name`` (created on first use). ``consistency``: "strong" or
        "eventual" (None: the default, "eventual")."""
        return SharedDict(self._collections_operations(), check_name("dict", name), resolve("dict", consistency))

    def set(self, name: str, *, consistency: str | None = None) -> SharedSet[Any]:
        """The shared set ``name`` (created on first use)."""
        return SharedSet(self._collections_operations(), check_name("set", name), resolve("set", consistency))

    def counter(self, name: str, *, consistency: str | None = None) -> SharedCounter:
        """The shared counter ``name`` (created on first use, at 0)."""
        return SharedCounter(self._collections_operations(), check_name("counter", name), resolve("counter", consistency))

    def queue(self, name: str) -> SharedQueue[Any]:
        """The shared FIFO queue ``name`` (created on first use)."""
        return SharedQueue(self._collections_operations(), check_name("queue", name))

    def barrier(self, name: str, n: int) -> SharedBarrier:
        """The barrier ``name`` for ``n`` participants; registers the caller as one.
        ValueError if ``n`` differs from the ``n`` the barrier was created with."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"barrier({name!r}, n={n!r}): n must be an int >= 1 (the number of participants)")
        barrier = SharedBarrier(self._collections_operations(), check_name("barrier", name), n)
        barrier.join()
        return barrier

    def lock(self, name: str, timeout: float | None = DEFAULT_LOCK_TIMEOUT) -> SharedLock:
        """The lock ``name``; ``timeout`` is how long ``acquire()`` and ``with lock:`` wait
        by default (None: no limit)."""
        timeout = check_timeout(f"lock({name!r}, ...)", timeout)
        return SharedLock(self._collections_operations(), check_name("lock", name), timeout)


class _Current(PoolCollections):
    """The collections of wherever the caller runs: its node's pool, else the active pool."""

    def _collections_operations(self) -> Operations:
        if runtime.on_node():
            return runtime.node_operations()
        pool = active_pool()
        operations = getattr(pool, "_collections_operations", None)
        if operations is None:
            raise NoActivePoolError(f"{NO_ACTIVE_POOL} ({type(pool).__name__} has no collections)")
        return operations()


_current = _Current()
shared_dict = _current.dict
shared_set = _current.set
counter = _current.counter
queue = _current.queue
barrier = _current.barrier
lock = _current.lock


def rebuild(kind: str, name: str, args: tuple[object, ...]) -> object:
    """Recreate a proxy after unpickling, bound to the operations of the process where it landed
    (NoActivePoolError where no pool is open)."""
    operations = _current._collections_operations()
    classes: dict[str, Callable[..., object]] = {"dict": SharedDict, "set": SharedSet, "counter": SharedCounter, "queue": SharedQueue, "barrier": SharedBarrier, "lock": SharedLock}
    return classes[kind](operations, name, *args)
