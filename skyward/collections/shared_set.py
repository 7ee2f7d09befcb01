"""``sky.set(name)``: a set of unique values shared by every node of the pool."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from skyward.collections.lock import holds_lock
from skyward.collections.operations import Engine, Reduced
from skyward.collections.steps import Steps, async_twin, run, steps

T = TypeVar("T", bound=Hashable)


class SharedSet(Generic[T]):
    """A distributed set: ``v in s``, ``len(s)``, ``add``, ``discard``, ``contains``,
    each with an ``_async`` twin (``len_async`` for ``len``).

    The whole set lives on one host actor, so ``len`` is exact: with "eventual" it asks
    the owner (after this node's own earlier writes), it is not served from the cache.
    Generic in its member type (``sky.set`` leaves it open).
    """

    __slots__ = ("name", "consistency", "_engine", "_strong")

    def __init__(self, engine: Engine, name: str, consistency: str) -> None:
        self.name = name
        self.consistency = consistency
        self._engine = engine
        self._strong = consistency == "strong"

    @steps
    def add(self, value: T) -> Steps[None]:
        """Add ``value`` (no effect if present)."""
        yield from self._engine.set_add(self.name, value, self._strong)

    @steps
    def discard(self, value: T) -> Steps[None]:
        """Remove ``value`` if present."""
        yield from self._engine.set_discard(self.name, value, self._strong)

    @steps
    def contains(self, value: T) -> Steps[bool]:
        """``value in s``."""
        return (yield from self._engine.set_contains(self.name, value, self._strong, self._fresh()))

    @steps
    def len(self) -> Steps[int]:
        """``len(s)``."""
        return (yield from self._engine.set_size(self.name, self._strong))

    add_async = async_twin(add)
    discard_async = async_twin(discard)
    contains_async = async_twin(contains)
    len_async = async_twin(len)

    def __contains__(self, value: T) -> bool:
        return bool(run(self._engine.set_contains(self.name, value, self._strong, self._fresh())))

    def __len__(self) -> int:
        return int(run(self._engine.set_size(self.name, self._strong)))

    def _fresh(self) -> bool:
        return not self._strong and holds_lock()

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, ("set", self.name, (self.consistency,)))

    def __repr__(self) -> str:
        return f"sky.set({self.name!r}, consistency={self.consistency!r})"
