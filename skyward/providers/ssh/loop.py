"""An asyncio loop on a daemon thread, for the SSH connections a provider keeps open."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TypeVar

from skyward.engine import interruptible

T = TypeVar("T")


class LoopThread:
    """Runs coroutines on its own loop; ``run`` blocks the caller until one finishes."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[object, object, T], timeout: float) -> T:
        """Run ``coro`` on the loop; TimeoutError (and the coroutine cancelled) after ``timeout``."""
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        return interruptible.result(future)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self.loop.close()
