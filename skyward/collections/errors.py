"""Errors raised by distributed collections."""

from __future__ import annotations

import threading

from skyward.core.errors import CollectionClosedError, CollectionUnavailableError

__all__ = ["BrokenBarrierError", "CollectionClosedError", "CollectionUnavailableError"]


class BrokenBarrierError(threading.BrokenBarrierError):
    """A ``sky.barrier`` round cannot complete: a participant died or its task failed,
    a waiter timed out, or ``reset()`` was called while others waited. The barrier
    stays broken until ``reset()``. Also catchable as ``threading.BrokenBarrierError``."""
