"""``sky.set(name)``: a set of unique values shared by every node of the pool."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from skyward.collections.named import NamedCollection
from skyward.collections.steps import Steps, async_twin, run, steps

T = TypeVar("T", bound=Hashable)


class SharedSet(NamedCollection, Generic[T]):
    """A distributed set: ``v in s``, ``len(s)``, ``add``, ``discard``, ``contains``,
    each with an ``_async`` twin (``len_async`` for ``len``).

    The whole set lives on one host actor, so ``len`` is exact: with "eventual" it asks
    the owner (after this node's own earlier writes), it is not served from the cache.
    Generic in its member type (``sky.set`` leaves it open).
    """

    KIND = "set"
    __slots__ = ()

    @steps
    def add(self, value: T) -> Steps[None]:
        """Add ``value`` (no effect if present)."""
        yield from self._operations.set_add(self.name, value, self._strong)

    @steps
    def discard(self, value: T) -> Steps[None]:
        """Remove ``value`` if present."""
        yield from self._operations.set_discard(self.name, value, self._strong)

    @steps
    def contains(self, value: T) -> Steps[bool]:
        """``value in s``."""
        return (yield from self._operations.set_contains(self.name, value, self._strong, self._fresh()))

    @steps
    def len(self) -> Steps[int]:
        """``len(s)``."""
        return (yield from self._operations.set_size(self.name, self._strong))

    add_async = async_twin(add)
    discard_async = async_twin(discard)
    contains_async = async_twin(contains)
    len_async = async_twin(len)

    def __contains__(self, value: T) -> bool:
        return bool(run(self._operations.set_contains(self.name, value, self._strong, self._fresh())))

    def __len__(self) -> int:
        return int(run(self._operations.set_size(self.name, self._strong)))
