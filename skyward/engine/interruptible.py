"""Waits that a Ctrl-C always ends, however long the work they wait for.

Python runs a signal's handler in the main thread, between two bytecodes. A SIGINT that
arrives just before the main thread blocks in a wait with no timeout (a lock, a Future's
``result()``, a socket read) is taken by the C handler but its ``KeyboardInterrupt`` is
raised only once the wait ends, which for a task that runs for hours is hours later. A
wait here, in the main thread, is cut into slices of ``SLICE`` seconds: a signal that
came in just before a slice began is handled when that slice ends. Other threads receive
no signals, so they wait in one piece.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import time
from collections.abc import Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from skyward.core.frames import shows_users_frames

SLICE = 0.25
"""The longest the main thread waits in one piece (so the longest a Ctrl-C can wait)."""

T = TypeVar("T")


def sliced() -> bool:
    """True in the main thread, whose waits must be cut into slices."""
    return threading.current_thread() is threading.main_thread()


def _until_done(future: concurrent.futures.Future[T], timeout: float | None) -> None:
    """Return once ``future`` is done or ``timeout`` seconds have passed, whichever is first."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not future.done():
        left = SLICE if deadline is None else min(SLICE, deadline - time.monotonic())
        if left <= 0:
            return
        concurrent.futures.wait((future,), timeout=left)


def _settle(future: concurrent.futures.Future[T], timeout: float | None) -> None:
    """Wait in slices until ``future`` is done; TimeoutError if ``timeout`` passes first."""
    _until_done(future, timeout)
    if not future.done():
        raise TimeoutError(f"the result was not in within {timeout:g}s")


def result(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
    """``future.result(timeout)``, which a Ctrl-C ends in the main thread."""
    if sliced():
        _settle(future, timeout)
        return future.result(0)
    return future.result(timeout)


class InterruptibleFuture(concurrent.futures.Future[T]):
    """A Future whose ``result()`` and ``exception()`` a Ctrl-C ends in the main thread.
    One made by ``submit`` cancels its task when it is cancelled."""

    _work: tuple[asyncio.AbstractEventLoop, asyncio.Future[T]] | None = None
    """The loop and task of ``submit``, until the task ends."""

    @shows_users_frames
    def result(self, timeout: float | None = None) -> T:
        if sliced():
            _settle(self, timeout)
            return super().result(0)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if sliced():
            _settle(self, timeout)
            return super().exception(0)
        return super().exception(timeout)

    def cancel(self) -> bool:
        cancelled = super().cancel()
        work, self._work = self._work, None
        if cancelled and work is not None:
            _cancel_on(*work)
        return cancelled


def submit(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> InterruptibleFuture[T]:
    """Run ``coroutine`` on ``loop`` (from another thread), as ``run_coroutine_threadsafe``
    does; cancelling the Future returned cancels the coroutine. The task settles the
    Future itself, with no second Future or callbacks between them, and lets go of the
    task once it ended: a caller may hold 50,000 of these at once, and each object one
    holds is one more for the garbage collector to walk."""
    outer: InterruptibleFuture[T] = InterruptibleFuture()

    def start() -> None:
        if outer.cancelled():  # the caller cancelled it before it started
            coroutine.close()
            outer.set_running_or_notify_cancel()  # its waiters see it done
            return
        try:
            task = loop.create_task(coroutine)
        except BaseException as exc:  # not a coroutine, or the loop is closing: the caller is told
            with contextlib.suppress(Exception):
                coroutine.close()
            if outer.set_running_or_notify_cancel():
                outer.set_exception(exc)
            return
        task.add_done_callback(functools.partial(_settle_from, outer))
        outer._work = (loop, task)
        if outer.cancelled():  # cancelled while the task was being made
            task.cancel()

    loop.call_soon_threadsafe(start)
    return outer


def _settle_from(outer: InterruptibleFuture[T], task: asyncio.Future[T]) -> None:
    """On the loop: ``task`` ended; ``outer`` takes its outcome."""
    outer._work = None
    if task.cancelled():
        outer.cancel()
        outer.set_running_or_notify_cancel()  # its waiters (``concurrent.futures.wait``) see it done
    elif outer.set_running_or_notify_cancel():  # False: the caller cancelled it first
        error = task.exception()
        if error is None:
            outer.set_result(task.result())
        else:
            outer.set_exception(error)


def _cancel_on(loop: asyncio.AbstractEventLoop, task: asyncio.Future[T]) -> None:
    """Cancel ``task`` on ``loop`` from any thread (nothing if the loop has closed: the
    task went with it)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(task.cancel)


def wait(futures: Iterable[concurrent.futures.Future[T]], timeout: float | None) -> None:
    """Return once every one of ``futures`` is done or ``timeout`` seconds have passed."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for future in futures:
        _until_done(future, None if deadline is None else max(0.0, deadline - time.monotonic()))


def as_completed(futures: Iterable[concurrent.futures.Future[T]]) -> Iterator[concurrent.futures.Future[T]]:
    """``futures`` in the order they finish."""
    pending = set(futures)
    while pending:
        done, pending = concurrent.futures.wait(
            pending, timeout=SLICE if sliced() else None, return_when=concurrent.futures.FIRST_COMPLETED
        )
        yield from done
