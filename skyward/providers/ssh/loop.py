"""The loop where a provider keeps its SSH connections: ``core.loop_thread.LoopThread``
with ``run``, which blocks the caller until a coroutine finishes (Ctrl-C included)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TypeVar

from skyward.core.loop_thread import LoopThread as _LoopThread
from skyward.engine import interruptible

T = TypeVar("T")


class LoopThread(_LoopThread):
    """Runs coroutines on its own loop; ``run`` blocks the caller until one finishes."""

    def run(self, coro: Coroutine[object, object, T], timeout: float) -> T:
        """Run ``coro`` on the loop; TimeoutError (and the coroutine cancelled) after ``timeout``."""
        return interruptible.result(self.submit(asyncio.wait_for(coro, timeout)))
