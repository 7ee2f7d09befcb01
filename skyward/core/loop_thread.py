"""An asyncio event loop on a daemon thread of its own: the one helper every part of
skyward that runs coroutines next to synchronous code uses (a pool's loop, the SSH
connections a provider keeps open, the collections' cache and lease keeper, the pool
daemon).

The loop starts on first use (``loop``, ``submit``, ``call_soon``) and again after
``stop``. Stopping cancels what still runs on the loop and lets it unwind (its ``finally``
blocks close the connections it holds) for at most ``UNWIND_TIMEOUT`` seconds, joins the
thread for at most ``join_timeout`` seconds and closes the loop only once its thread has
ended, so a stuck coroutine cannot make ``stop`` hang or raise, and nothing is left
pending on a closed loop (whose coroutines, finalized later, would fail in their
``finally`` blocks with "Event loop is closed")."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

JOIN_TIMEOUT = 5.0
UNWIND_TIMEOUT = 1.0
"""Seconds the coroutines still running at ``stop`` have to unwind once cancelled."""


class LoopThread:
    """An event loop on a daemon thread named ``name``, started on first use."""

    def __init__(self, name: str, join_timeout: float = JOIN_TIMEOUT) -> None:
        self.name = name
        self._join_timeout = join_timeout
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started now if it was not)."""
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def is_current(self) -> bool:
        """Whether the caller runs on this loop's thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def is_alive(self) -> bool:
        """Whether the loop's thread runs."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def submit(self, coroutine: Coroutine[object, None, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop (from any thread); a Future of its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call_soon(self, callback: Callable[[*Ts], object], *args: *Ts) -> None:
        """Run ``callback(*args)`` on the loop (from any thread)."""
        self.loop.call_soon_threadsafe(callback, *args)

    def stop(self) -> None:
        """Stop the loop and end its thread: what still runs on it is cancelled and has
        ``UNWIND_TIMEOUT`` seconds to unwind, the thread is waited for at most
        ``join_timeout``, and the loop is closed once its thread has ended. A loop never
        started, or already stopped, is left as it is."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        asyncio.run_coroutine_threadsafe(_unwind_and_stop(), loop)
        if thread is not threading.current_thread():
            thread.join(timeout=self._join_timeout)
        if not thread.is_alive():
            loop.close()


async def _unwind_and_stop() -> None:
    """Cancel every other task of the running loop, wait (at most ``UNWIND_TIMEOUT``)
    for them to end, finalize its async generators, then stop it."""
    loop = asyncio.get_running_loop()
    running = asyncio.all_tasks(loop) - {asyncio.current_task()}
    for task in running:
        task.cancel()
    try:
        if running:
            await asyncio.wait(running, timeout=UNWIND_TIMEOUT)
        await asyncio.wait_for(loop.shutdown_asyncgens(), UNWIND_TIMEOUT)
    except TimeoutError:
        pass
    finally:
        loop.stop()
