"""A daemon thread running an asyncio loop: where a process's cache and lease keeper
talk to the host actors in the background."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import TypeVar, TypeVarTuple

STOP_TIMEOUT = 5.0

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class BackgroundLoop:
    """Started on first use, stopped by ``stop``."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def call_soon(self, callback: Callable[[*Ts], object], *args: *Ts) -> None:
        """Run ``callback(*args)`` on the loop (from any thread)."""
        self._ensure().call_soon_threadsafe(callback, *args)

    def submit(self, coroutine: Coroutine[object, None, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop; returns a Future of its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._ensure())

    def stop(self) -> None:
        """Cancel what runs on the loop and end the thread (waits up to STOP_TIMEOUT)."""
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(_cancel_all_and_stop, loop)
        thread.join(timeout=STOP_TIMEOUT)
        if not thread.is_alive():
            loop.close()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop


def _cancel_all_and_stop(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)
