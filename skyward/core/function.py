"""Defining work: ``@sky.function``, ``PendingFunction``, ``&`` groups and ``gather``.

Calling a decorated function runs nothing: it returns a frozen ``PendingFunction``.
An operator sends it to a pool: ``>>`` one node, ``@`` every node, ``>`` a Future,
and ``(a() & b()) >> pool`` a group in parallel.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NoReturn, TypeVar, overload

from skyward.core.context import resolve_target
from skyward.core.frames import shows_users_frames
from skyward.core.validation import check_flag, check_number

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

PRECEDENCE_HINT = (
    "`>>` binds tighter than `&`, so `a() & b() >> pool` runs b() alone first. "
    "Add parentheses: `(a() & b()) >> pool`."
)


def _check_timeout(timeout: float | None) -> None:
    check_number("sky.function", "timeout", timeout, strictly_positive=True, optional=True)


@dataclass(frozen=True, slots=True)
class PendingFunction(Generic[T_co]):
    """A call that has not run yet: ``fn(*args, **kwargs)`` with an optional timeout.

    ``T_co`` is the function's result type: what ``>>`` returns. The arguments are the
    user's, pickled to the node and never looked into here (hence ``object``)."""

    fn: Callable[..., T_co]
    args: tuple[object, ...] = ()
    kwargs: dict[str, object] = field(default_factory=dict)
    timeout: float | None = None
    source: Callable[..., object] | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The function's qualified name, used in errors and events."""
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)

    @property
    def callable(self) -> Callable[..., object]:
        """What is sent to the node: the decorated function when there is one, so a
        function from an importable module travels by reference."""
        return self.source if self.source is not None else self.fn

    def with_timeout(self, seconds: float | None) -> PendingFunction[T_co]:
        """A copy with a wall-clock timeout in seconds (None for the pool's default)."""
        _check_timeout(seconds)
        return replace(self, timeout=seconds)

    @shows_users_frames
    def __rshift__(self, target: object) -> T_co:
        return resolve_target(target, ">>").run(self)

    @shows_users_frames
    def __matmul__(self, target: object) -> list[T_co]:
        return resolve_target(target, "@").broadcast(self)

    @shows_users_frames
    def __gt__(self, target: object) -> Future[T_co]:
        return resolve_target(target, ">").run_async(self)

    def __and__(self, other: object) -> PendingFunctionGroup:
        if isinstance(other, PendingFunction):
            return PendingFunctionGroup((self, other))
        if isinstance(other, PendingFunctionGroup):
            return replace(other, items=(self, *other.items))
        raise TypeError(
            f"`&` joins pending calls, but its right side is {type(other).__name__} {other!r}. "
            + PRECEDENCE_HINT
        )

    def __rand__(self, other: object) -> NoReturn:
        raise TypeError(
            f"`&` joins pending calls, but its left side is {type(other).__name__} {other!r}. "
            + PRECEDENCE_HINT
        )

    def __bool__(self) -> bool:
        raise TypeError(
            f"{self.name}(...) has not run: it is a pending call. Send it to a pool with "
            "`>> pool` and use the result."
        )


@dataclass(frozen=True, slots=True)
class PendingFunctionGroup:
    """Pending calls run in parallel by ``>>``: a tuple of results, or a generator when
    ``stream`` (in submission order when ``ordered``, else as each completes); with
    ``progress``, a bar while they run (as ``pool.map(..., progress=True)``)."""

    items: tuple[PendingFunction[object], ...]
    stream: bool = False
    ordered: bool = True
    progress: bool = False

    def __post_init__(self) -> None:
        for item in self.items:
            if not isinstance(item, PendingFunction):
                raise TypeError(
                    f"A group holds pending calls such as f(x), got {type(item).__name__} {item!r}."
                )

    def __len__(self) -> int:
        return len(self.items)

    @shows_users_frames
    def __rshift__(self, target: object) -> Any:
        # a tuple of the calls' results, or a generator of them when ``stream``: the calls
        # return whatever they return, of as many types as there are calls
        return resolve_target(target, ">>").run_parallel(self)

    def __and__(self, other: object) -> PendingFunctionGroup:
        if isinstance(other, PendingFunction):
            return replace(self, items=(*self.items, other))
        if isinstance(other, PendingFunctionGroup):
            return replace(self, items=(*self.items, *other.items))
        raise TypeError(
            f"`&` joins pending calls, but its right side is {type(other).__name__} {other!r}. "
            + PRECEDENCE_HINT
        )

    def __matmul__(self, target: object) -> NoReturn:
        raise TypeError(
            "A group cannot be broadcast with `@`: broadcast each call (`f() @ pool`), "
            "or run the group in parallel with `>>`."
        )

    def __gt__(self, target: object) -> NoReturn:
        raise TypeError(
            "A group has no `>` (Future) form: use `>>` for the results, "
            "sky.gather(..., stream=True) >> pool to receive them as they finish, "
            "or `f() > pool` per call for Futures."
        )

    def __bool__(self) -> bool:
        raise TypeError("A group has not run: send it to a pool with `>> pool`.")


class SkywardFunction(Generic[T]):
    """A function marked for remote execution; calling it returns a ``PendingFunction``."""

    __qualname__: str  # the wrapped function's (functools.update_wrapper)

    def __init__(self, fn: Callable[..., T], timeout: float | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"@sky.function decorates a function, got {type(fn).__name__} {fn!r}")
        _check_timeout(timeout)
        self.local = fn
        self.timeout = timeout
        functools.update_wrapper(self, fn)

    def __call__(self, *args: object, **kwargs: object) -> PendingFunction[T]:
        return PendingFunction(self.local, args, kwargs, self.timeout, self)

    def __rshift__(self, target: object) -> NoReturn:
        raise self._not_called(">>")

    def __matmul__(self, target: object) -> NoReturn:
        raise self._not_called("@")

    def __gt__(self, target: object) -> NoReturn:
        raise self._not_called(">")

    def _not_called(self, operator: str) -> TypeError:
        name = self.__qualname__
        return TypeError(
            f"`{name} {operator} pool` sends the function itself; call it first: "
            f"`{name}(...) {operator} pool`."
        )

    def __repr__(self) -> str:
        return f"<skyward function {self.__qualname__}>"

    def __reduce__(self) -> str | tuple[type[SkywardFunction[T]], tuple[Callable[..., T], float | None]]:
        # An importable module-level function travels by reference (its name); anything
        # else (defined in __main__, in a closure, rebound) is rebuilt from its parts.
        module = sys.modules.get(self.__module__)
        if (
            module is not None
            and self.__module__ != "__main__"
            and "<locals>" not in self.__qualname__
            and _lookup(module, self.__qualname__) is self
        ):
            return self.__qualname__
        return (SkywardFunction, (self.local, self.timeout))


def _lookup(module: object, qualname: str) -> object:
    obj: object = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


@overload
def function(fn: Callable[..., T], *, timeout: float | None = None) -> SkywardFunction[T]: ...


@overload
def function(fn: None = None, *, timeout: float | None = None) -> Callable[[Callable[..., T]], SkywardFunction[T]]: ...


def function(
    fn: Callable[..., T] | None = None, *, timeout: float | None = None
) -> SkywardFunction[T] | Callable[[Callable[..., T]], SkywardFunction[T]]:
    """Mark ``fn`` for remote execution: ``@sky.function`` or ``@sky.function(timeout=600)``.

    ``timeout`` is a per-call wall-clock limit in seconds (TimeoutError when exceeded).
    """
    _check_timeout(timeout)
    if fn is None:
        return lambda inner: SkywardFunction(inner, timeout)
    return SkywardFunction(fn, timeout)


compute = function


def gather(
    *pendings: PendingFunction[object], stream: bool = False, ordered: bool = True, progress: bool = False
) -> PendingFunctionGroup:
    """Group pending calls to run in parallel with ``>>``.

    With ``stream=True`` the result is a generator yielding each result as it is ready:
    in submission order when ``ordered`` (the default), otherwise in completion order.
    ``progress=True`` draws a bar with the rate and the time left while they run, where
    ``pool.map(..., progress=True)`` draws one (a terminal's standard error, a notebook;
    nothing in a pipe). TypeError for a flag that is not True or False.
    """
    for field, value in (("stream", stream), ("ordered", ordered), ("progress", progress)):
        check_flag("gather", field, value)
    return PendingFunctionGroup(tuple(pendings), stream, ordered, progress)
