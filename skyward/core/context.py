"""Which pool ``>> sky`` means: the active pool of this context, else the only open pool."""

from __future__ import annotations

import threading
import types
import weakref
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from skyward.core.errors import NoActivePoolError
from skyward.core.instance import current_task

if TYPE_CHECKING:
    from concurrent.futures import Future

    from skyward.core.function import PendingFunction, PendingFunctionGroup

R = TypeVar("R")


class DispatchTarget(Protocol):
    """What the operators need from a pool."""

    def run(self, pending: PendingFunction[R]) -> R: ...

    def run_async(self, pending: PendingFunction[R]) -> Future[R]: ...

    def broadcast(self, pending: PendingFunction[R]) -> list[R]: ...

    def run_parallel(self, group: PendingFunctionGroup) -> object: ...


_active: ContextVar[DispatchTarget | None] = ContextVar("skyward_active_pool", default=None)
_open: list[DispatchTarget] = []
_open_lock = threading.Lock()

NO_ACTIVE_POOL = (
    "No active pool: `>> sky` and sky.dict()/sky.counter()/... need an open pool. "
    "Use them inside `with sky.Compute(...) as pool:` or a @sky.pool function, "
    "or dispatch to the pool object directly (`>> pool`)."
)


NESTED_DISPATCH = (
    "Dispatching from inside a running task is not supported: a task cannot send work to "
    "its own pool. Return the data to the client and dispatch there, or share work between "
    "nodes with sky.queue()."
)


def activate(pool: DispatchTarget) -> Token[DispatchTarget | None]:
    """Make ``pool`` the active pool of the current context; returns the reset token."""
    with _open_lock:
        _open.append(pool)
    return _active.set(pool)


def deactivate(pool: DispatchTarget, token: Token[DispatchTarget | None] | None) -> None:
    """Undo ``activate``; tolerant of being called from another context."""
    with _open_lock:
        if pool in _open:
            _open.remove(pool)
    if token is not None:
        try:
            _active.reset(token)
        except ValueError:
            _active.set(None)


def active_pool() -> DispatchTarget:
    """The pool ``>> sky`` refers to.

    The context's active pool wins; in a thread that has no context (a plain
    ``threading.Thread`` started inside the ``with`` block) the most recently opened pool
    that is still open is used. Raises NoActivePoolError when no pool is open.
    """
    pool = _active.get()
    if pool is not None:
        return pool
    with _open_lock:
        if _open:
            return _open[-1]
    raise NoActivePoolError(NO_ACTIVE_POOL)


class ActivePool:
    """``skyward.sky``: the active pool as an operator target, for code written
    ``from skyward import sky`` (``f(x) >> sky`` then means what it means with the
    module: the pool ``active_pool()`` finds)."""

    __slots__ = ()

    def __repr__(self) -> str:
        pool = _active.get()
        return f"<sky: the active pool, now {pool!r}>" if pool is not None else "<sky: no active pool>"

    def __reduce__(self) -> str:
        return "ACTIVE"


ACTIVE = ActivePool()


_DISPATCH_METHODS = tuple(name for name in vars(DispatchTarget) if not name.startswith("_"))
_dispatching: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()


def _dispatches(kind: type) -> bool:
    """Whether instances of ``kind`` are a ``DispatchTarget``, decided once per type: the
    Protocol's own ``isinstance`` costs ~12 µs a ``>>``. A class itself (whose type is a
    metaclass) never is."""
    known = _dispatching.get(kind)
    if known is None:
        known = _dispatching[kind] = all(callable(getattr(kind, name, None)) for name in _DISPATCH_METHODS)
    return known


def resolve_target(target: object, operator: str) -> DispatchTarget:
    """Turn the right-hand side of an operator into a pool, or raise a TypeError that says why.

    Inside a running task any dispatch raises RuntimeError: tasks cannot dispatch.
    """
    if current_task() is not None:
        raise RuntimeError(NESTED_DISPATCH)
    if target is ACTIVE or (isinstance(target, types.ModuleType) and target.__name__ == "skyward"):
        return active_pool()
    if not _dispatches(type(target)):
        raise TypeError(
            f"The right side of `{operator}` must be a pool (from sky.Compute(...)) or the `sky` "
            f"module or singleton, got {type(target).__name__} {target!r}."
        )
    return cast("DispatchTarget", target)
