"""Errors raised by distributed collections."""

from __future__ import annotations

import threading


class BrokenBarrierError(threading.BrokenBarrierError):
    """A ``sky.barrier`` round cannot complete: a participant died or its task failed,
    a waiter timed out, or ``reset()`` was called while others waited. The barrier
    stays broken until ``reset()``. Also catchable as ``threading.BrokenBarrierError``."""


class CollectionUnavailableError(RuntimeError):
    """The actor holding a collection is gone (the pool closed, or the actor crashed)."""
