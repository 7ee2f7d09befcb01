"""Operations written once, run blocking or from asyncio.

A collection operation is a generator ("steps") that yields ``Wait`` objects (a Ray
ObjectRef or a ``concurrent.futures.Future`` to wait for, or an ``Inline`` call to make)
and returns its result. ``run``
drives it from a plain thread; ``run_async`` from a coroutine. ``steps`` turns a generator
method into the blocking method, and ``async_twin`` makes its ``_async`` counterpart.

Blocking waits are cut into slices of at most ``WAIT_SLICE`` seconds, so an interrupt
sent to the task's thread (the executor's timeout) lands within a slice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from msgspec import Struct

from skyward.collections.config import RESEND_AFTER
from skyward.collections.errors import CollectionUnavailableError

if TYPE_CHECKING:
    from ray import ObjectRef

WAIT_SLICE = 1.0

P = ParamSpec("P")
T = TypeVar("T")


class Inline(Struct, frozen=True):
    """A blocking call, ``call(timeout)``, made by the thread of a blocking run that
    waits for it. It bounds its own wait by ``timeout`` (None: none), raising
    TimeoutError, and lets an interrupt of its thread land within a ``WAIT_SLICE``. A run
    from asyncio does not make it (it would hold the event loop) and sends the steps None
    instead: steps that yield one take None as "not made" and go another way."""

    call: Callable[[float | None], object]


class Wait(Struct, frozen=True):
    """Wait for ``target`` (ObjectRef, Future or ``Inline`` call) for at most ``timeout``
    seconds (None: until it resolves). ``what`` names the operation in a timeout message."""

    target: concurrent.futures.Future[Any] | ObjectRef[Any] | Inline
    timeout: float | None
    what: str


Steps = Generator[Wait, Any, T]
"""An operation: it yields Waits and is sent back what each resolved to (whatever the
awaited ObjectRef or Future holds), and returns its result."""


def run(steps: Steps[T], stop: threading.Event | None = None) -> T:
    """Drive ``steps`` to completion in this thread and return its result. Once ``stop``
    is set, the next wait raises CancelledError into the steps instead (so a long wait
    ends within one slice)."""
    try:
        wait = steps.send(None)
        while True:
            if stop is not None and stop.is_set():
                wait = steps.throw(concurrent.futures.CancelledError(f"{wait.what}: cancelled"))
                continue
            try:
                value = _resolve(wait)
            except BaseException as exc:  # handed to the steps, which may clean up
                wait = steps.throw(exc)
            else:
                wait = steps.send(value)
    except StopIteration as done:
        return done.value


async def run_async(steps: Steps[T]) -> T:
    """Drive ``steps`` to completion from a coroutine and return its result."""
    try:
        wait = steps.send(None)
        while True:
            try:
                value = await _resolve_async(wait)
            except BaseException as exc:
                wait = steps.throw(exc)
            else:
                wait = steps.send(value)
    except StopIteration as done:
        return done.value


def steps(method: Callable[P, Steps[T]]) -> Callable[P, T]:
    """Make a generator method the blocking method of the same name."""

    @functools.wraps(method)
    def blocking(*args: P.args, **kwargs: P.kwargs) -> T:
        return run(method(*args, **kwargs))

    blocking.__steps__ = method  # type: ignore[attr-defined]
    return blocking


def async_twin(blocking: Callable[P, T]) -> Callable[P, Coroutine[object, None, T]]:
    """The ``_async`` twin of a method made with ``steps``: same arguments, awaitable."""
    method = blocking.__steps__  # type: ignore[attr-defined]

    @functools.wraps(method)
    async def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return await run_async(method(*args, **kwargs))

    twin.__name__ = twin.__qualname__ = f"{method.__name__}_async"
    return twin


def pause(seconds: float) -> Steps[None]:
    """Wait ``seconds``, as a step (so that a blocking run and an asyncio one both can)."""
    try:
        yield Wait(concurrent.futures.Future(), seconds, "a pause")
    except TimeoutError:
        return


def sent_again(send: Callable[[float], Steps[T]], within: float, what: str) -> Steps[T]:
    """``send(seconds_left)`` to a host, and again every ``RESEND_AFTER`` seconds while
    it raises HostUnreachableError, for ``within`` seconds from the first send: for an
    operation the host applies once whichever copy comes first. Raises what ``send``
    raised otherwise, and HostUnreachableError naming ``what`` once the time is up."""
    deadline = time.monotonic() + within
    while True:
        try:
            return (yield from send(max(0.0, deadline - time.monotonic())))
        except HostUnreachableError as unreachable:
            if time.monotonic() + RESEND_AFTER >= deadline:
                raise HostUnreachableError(
                    f"{what}: its collection's host could still not be reached after it was sent again "
                    f"every {RESEND_AFTER:g}s for {within:g}s; it may or may not have taken effect"
                ) from unreachable
        yield from pause(RESEND_AFTER)


class HostUnreachableError(CollectionUnavailableError):
    """Ray's ``ActorUnavailableError``, translated (``translated``): the host of a
    collection could not be reached just now (the network failed, as a partition does,
    or its process is restarting). An operation that is safe to send again may be
    (``sent_again``)."""


class _SliceOver(Exception):
    """The current wait slice ended without an answer."""


def _resolve(wait: Wait) -> object:
    target = wait.target
    if isinstance(target, Inline):
        return _inline(target, wait)
    deadline = None if wait.timeout is None else time.monotonic() + wait.timeout
    while True:
        left = WAIT_SLICE if deadline is None else min(WAIT_SLICE, max(0.0, deadline - time.monotonic()))
        try:
            if isinstance(target, concurrent.futures.Future):
                return _future_result(target, left)
            return _ray_get(target, left)
        except _SliceOver:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"{wait.what} got no answer within {wait.timeout:g}s") from None


def _inline(target: Inline, wait: Wait) -> object:
    try:
        return target.call(wait.timeout)
    except TimeoutError:
        raise TimeoutError(f"{wait.what} got no answer within {wait.timeout:g}s") from None


async def _resolve_async(wait: Wait) -> object:
    target = wait.target
    if isinstance(target, Inline):
        return None
    if isinstance(target, concurrent.futures.Future):
        return await _awaited(asyncio.wrap_future(target), wait)
    try:
        return await _awaited(asyncio.wrap_future(target.future()), wait)
    except TimeoutError:
        raise
    except Exception as exc:
        raise translated(exc) from None


async def _awaited(future: asyncio.Future[T], wait: Wait) -> T:
    done, _ = await asyncio.wait({future}, timeout=wait.timeout)
    if not done:
        future.cancel()
        raise TimeoutError(f"{wait.what} got no answer within {wait.timeout:g}s")
    return future.result()


def _future_result(future: concurrent.futures.Future[T], timeout: float) -> T:
    done, _ = concurrent.futures.wait((future,), timeout=timeout)
    if not done:
        raise _SliceOver
    return future.result()


def _ray_get(ref: ObjectRef[T], timeout: float) -> T:
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        return ray.get(ref, timeout=timeout)
    except GetTimeoutError:
        raise _SliceOver from None
    except Exception as exc:
        raise translated(exc) from None


def translated(exc: Exception) -> Exception:
    """Ray's actor failures as a clear error; anything else unchanged."""
    from ray.exceptions import ActorUnavailableError, RayActorError

    if isinstance(exc, ActorUnavailableError):
        return HostUnreachableError(
            "the host of this collection could not be reached just now (the network between this process "
            "and it failed, as a partition does, or its process is restarting); the operation may or may "
            f"not have taken effect: retry it if that is safe ({str(exc).strip().splitlines()[0]})"
        )
    if isinstance(exc, RayActorError):
        return CollectionUnavailableError(
            "the actor holding this collection is gone: the pool was closed, or the actor "
            f"crashed and its state is lost ({str(exc).strip().splitlines()[0]})"
        )
    return exc
