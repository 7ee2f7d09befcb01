"""``core.loop_thread.LoopThread.stop``: what still runs on the loop is cancelled and
unwinds before the loop closes (its ``finally`` blocks may await, as closing a connection
does), so nothing is left pending on a closed loop; a coroutine that will not end cannot
make ``stop`` hang."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time

import pytest

from skyward.core import loop_thread
from skyward.core.loop_thread import LoopThread


def test_stop_lets_what_runs_unwind_before_the_loop_closes(caplog: pytest.LogCaptureFixture) -> None:
    thread = LoopThread("test-unwind")
    unwound = threading.Event()
    began = threading.Event()

    async def holds_a_connection() -> None:
        began.set()
        try:
            await asyncio.sleep(60)
        finally:
            await asyncio.sleep(0.05)  # closing what it holds takes a round of the loop, or more
            unwound.set()

    thread.submit(holds_a_connection())
    assert began.wait(10)
    loop = thread.loop
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        thread.stop()
        gc.collect()
    assert unwound.is_set() and loop.is_closed() and not thread.is_alive()
    assert "Task was destroyed but it is pending" not in caplog.text


def test_a_coroutine_that_will_not_end_delays_stop_by_the_unwind_timeout_only() -> None:
    thread = LoopThread("test-stuck")
    began = threading.Event()

    async def refuses() -> None:
        began.set()
        while True:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                continue

    thread.submit(refuses())
    assert began.wait(10)
    started = time.monotonic()
    thread.stop()
    assert time.monotonic() - started < loop_thread.UNWIND_TIMEOUT + 3
    assert not thread.is_alive()


def test_the_loop_starts_again_after_stop() -> None:
    thread = LoopThread("test-again")
    assert thread.submit(asyncio.sleep(0, "first")).result(10) == "first"
    thread.stop()
    assert thread.submit(asyncio.sleep(0, "second")).result(10) == "second"
    thread.stop()
    thread.stop()  # already stopped: nothing to do
