"""Errors raised by distributed collections."""

from __future__ import annotations

import threading

from skyward.core.errors import CollectionClosedError, CollectionUnavailableError

__all__ = ["BrokenBarrierError", "CollectionClosedError", "CollectionUnavailableError", "StaleFenceError"]


class BrokenBarrierError(threading.BrokenBarrierError):
    """A ``sky.barrier`` round cannot complete: a participant died or its task failed,
    a waiter timed out, or ``reset()`` was called while others waited. The barrier
    stays broken until ``reset()``. Also catchable as ``threading.BrokenBarrierError``."""


class StaleFenceError(RuntimeError):
    """A fenced write to a strong ``sky.dict`` key (``set(key, value, fence=token)``)
    was refused: a write with a newer fencing token (``sky.lock(...).token``) reached
    that key first: most likely the writer lost its lock to its lease (cut off, or
    stalled) and someone who held the lock after it has written. Nothing was written."""
