"""Which map item a worker process runs, shared with the agent that started it through
one page of memory (``Worker(executor="process")``).

The child stores the item's index in the cell before the item starts: a store into
shared memory, where a message per item on the pipe cost more than a trivial item's
work. The agent reads the cell to time the item out and, after the child died, to name
the item that was running, which the cell still holds.
"""

from __future__ import annotations

import functools
import mmap
import os
import tempfile
from collections.abc import Callable


class ItemCell:
    """One shared integer: the index of the map item running (-1 before the first)."""

    def __init__(self, fd: int) -> None:
        """The cell of the file ``fd`` (which stays the caller's to close)."""
        self._memory = mmap.mmap(fd, mmap.PAGESIZE)
        self._index = memoryview(self._memory).cast("q")

    @classmethod
    def create(cls) -> tuple[ItemCell, int]:
        """A new cell and a descriptor of its file, which has no name (pass it to the
        child, then close it)."""
        with tempfile.TemporaryFile() as file:
            file.write(bytes(mmap.PAGESIZE))  # written, not a hole: a full disk fails here, not in a store
            file.flush()
            return cls(file.fileno()), os.dup(file.fileno())

    def setter(self) -> Callable[[int], None]:
        """``set(index)``, called before each item: a C call, no Python frame."""
        return functools.partial(self._index.__setitem__, 0)

    def get(self) -> int:
        """The index last set."""
        return int(self._index[0])

    def set(self, index: int) -> None:
        """Store ``index`` (the agent stores -1 before it sends a task)."""
        self._index[0] = index
