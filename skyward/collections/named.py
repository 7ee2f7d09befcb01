"""What ``sky.counter``, ``sky.dict`` and ``sky.set`` share: a name, a consistency
("strong" or "eventual"), the operations that serves them, and how they pickle and show."""

from __future__ import annotations

from typing import ClassVar

from skyward.collections.lock import holds_lock
from skyward.collections.operations import Operations, Reduced


class NamedCollection:
    """The collection ``name`` of kind ``KIND`` ("counter", "dict", "set"), served by
    ``operations``; it pickles as its name and consistency, and is rebuilt on the other side
    against that process's operations."""

    KIND: ClassVar[str]
    __slots__ = ("name", "consistency", "_operations", "_strong")

    def __init__(self, operations: Operations, name: str, consistency: str) -> None:
        self.name = name
        self.consistency = consistency
        self._operations = operations
        self._strong = consistency == "strong"

    def _fresh(self) -> bool:
        """Whether an eventual read asks the owner (the caller holds a ``sky.lock``)."""
        return not self._strong and holds_lock()

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, (self.KIND, self.name, (self.consistency,)))

    def __repr__(self) -> str:
        return f"sky.{self.KIND}({self.name!r}, consistency={self.consistency!r})"
