"""Sentinels that keep their identity across pickling (they pickle by reference)."""

from __future__ import annotations


class Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


MISSING = Marker("MISSING")
"""A dict key that holds no value (distinct from a stored None)."""

UNKNOWN = Marker("UNKNOWN")
"""A cache slot this process has not read from the owner yet."""

NO_SLOT = Marker("NO_SLOT")
"""An operation that reads or writes no cached slot (queue, barrier, lock, set size)."""

BUSY = Marker("BUSY")
"""A host's answer to an operation it would have to wait for in its one-thread group."""
