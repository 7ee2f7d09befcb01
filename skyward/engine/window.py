"""``ChunkWindow``: back-pressure for a streamed ``pool.map``.

The driver reserves a place before it sends a chunk; the consumer frees it once it has
yielded every result of that chunk. So at most ``size`` chunks are in flight or waiting
to be read, whatever the pace of the consumer, and the client's memory is bounded by
them rather than by the whole map.
"""

from __future__ import annotations

import asyncio


class ChunkWindow:
    """At most ``size`` chunks between dispatch and consumption."""

    def __init__(self, size: int, loop: asyncio.AbstractEventLoop) -> None:
        if size < 1:
            raise ValueError(f"ChunkWindow(size={size}): it must be >= 1")
        self.size = size
        self._loop = loop
        self._free = asyncio.Semaphore(size)

    async def reserve(self) -> None:
        """Wait (on the pool's loop) for a free place."""
        await self._free.acquire()

    def release(self) -> None:
        """A reserved place is free again: its chunk was consumed or failed (any thread)."""
        if self._loop.is_closed():
            return
        try:
            self._loop.call_soon_threadsafe(self._free.release)
        except RuntimeError:  # the loop stopped with the pool
            pass
