"""The main thread's sliced waits keep a Future's meaning: results, errors, timeouts and
cancellation pass through as with ``run_coroutine_threadsafe``."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import time
from collections.abc import Iterator

import pytest

from skyward.engine import interruptible


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


async def _after(seconds: float, value: object) -> object:
    await asyncio.sleep(seconds)
    if isinstance(value, BaseException):
        raise value
    return value


def test_result_and_error_pass_through(loop: asyncio.AbstractEventLoop) -> None:
    assert interruptible.submit(_after(0.6, 7), loop).result() == 7  # longer than a slice
    future = interruptible.submit(_after(0.01, KeyError("k")), loop)
    with pytest.raises(KeyError):
        future.result()
    assert isinstance(future.exception(), KeyError)


def test_a_timeout_is_kept_to_within_a_slice(loop: asyncio.AbstractEventLoop) -> None:
    future = interruptible.submit(_after(30, 1), loop)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        future.result(timeout=0.4)
    assert 0.4 <= time.monotonic() - started < 0.4 + interruptible.SLICE
    future.cancel()


def test_cancelling_the_future_cancels_the_coroutine(loop: asyncio.AbstractEventLoop) -> None:
    cancelled = threading.Event()

    async def waits() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = interruptible.submit(waits(), loop)
    time.sleep(0.1)
    assert future.cancel()
    assert cancelled.wait(5)
    with pytest.raises(concurrent.futures.CancelledError):
        future.result()


def test_a_future_cancelled_before_its_coroutine_started_never_runs_it() -> None:
    loop = asyncio.new_event_loop()  # not running yet: nothing submitted to it starts
    ran = threading.Event()

    async def marks() -> None:
        ran.set()

    future = interruptible.submit(marks(), loop)
    assert future.cancel()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    time.sleep(0.1)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()
    assert not ran.is_set()


def test_a_cancelled_task_cancels_its_future(loop: asyncio.AbstractEventLoop) -> None:
    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(concurrent.futures.CancelledError):
        interruptible.submit(cancelled(), loop).result(5)


def test_a_cancelled_future_counts_as_done_for_waiters(loop: asyncio.AbstractEventLoop) -> None:
    """``concurrent.futures.wait`` (and so ``interruptible.as_completed``) sees a cancelled
    future done, as one of ``run_coroutine_threadsafe`` is."""
    future = interruptible.submit(_after(30, None), loop)
    time.sleep(0.1)
    assert future.cancel()
    done, _ = concurrent.futures.wait([future], timeout=5)
    assert future in done


def test_what_cannot_become_a_task_fails_its_future() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        future = interruptible.submit(object(), loop)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            future.result(5)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def test_a_settled_future_lets_go_of_its_task(loop: asyncio.AbstractEventLoop) -> None:
    """A caller holding many done futures holds no tasks, coroutines or second Futures
    through them (what the garbage collector walks grows with them)."""
    future = interruptible.submit(_after(0.01, 7), loop)
    assert future.result(5) == 7
    assert future._work is None
    reached, level = [], [future]
    for _ in range(4):  # the future, its attributes, their contents (its callbacks), theirs
        level = [r for obj in level for r in gc.get_referents(obj) if not isinstance(r, type)]
        reached += level
    assert not [r for r in reached if isinstance(r, (asyncio.Future, concurrent.futures.Future)) and r is not future]


def test_wait_and_as_completed(loop: asyncio.AbstractEventLoop) -> None:
    slow, fast = interruptible.submit(_after(0.5, "slow"), loop), interruptible.submit(_after(0.05, "fast"), loop)
    assert [f.result() for f in interruptible.as_completed([slow, fast])] == ["fast", "slow"]
    late = interruptible.submit(_after(30, None), loop)
    started = time.monotonic()
    interruptible.wait([late], timeout=0.3)
    assert not late.done() and time.monotonic() - started < 0.3 + interruptible.SLICE
    late.cancel()
