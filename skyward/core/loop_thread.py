"""An asyncio event loop on a daemon thread of its own: the one helper every part of
skyward that runs coroutines next to synchronous code uses (a pool's loop, the SSH
connections a provider keeps open, the collections' cache and lease keeper, the pool
daemon).

The loop starts on first use (``loop``, ``submit``, ``call_soon``) and again after
``stop``. Stopping joins the thread for at most ``join_timeout`` seconds and closes the
loop only once its thread has ended, so a stuck coroutine cannot make ``stop`` hang or
raise."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

JOIN_TIMEOUT = 5.0


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

    def stop(self, cancel: bool = False) -> None:
        """Stop the loop (``cancel``: cancelling what runs on it first) and end its thread,
        waiting at most ``join_timeout``; the loop is closed once its thread has ended. A
        loop never started, or already stopped, is left as it is."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        if cancel:
            loop.call_soon_threadsafe(_cancel_all_and_stop, loop)
        else:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not threading.current_thread():
            thread.join(timeout=self._join_timeout)
        if not thread.is_alive():
            loop.close()


def _cancel_all_and_stop(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)
