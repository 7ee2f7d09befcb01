"""``sky.queue(name)``: a FIFO work queue shared by every node of the pool."""

from __future__ import annotations

from typing import Generic, TypeVar, cast

from skyward.collections.config import check_timeout
from skyward.collections.operations import Operations, Reduced
from skyward.collections.steps import Steps, async_twin, run, steps

T = TypeVar("T")


class SharedQueue(Generic[T]):
    """A distributed FIFO queue: ``put``, ``get(timeout=None)``, ``empty``, ``len(q)``,
    each with an ``_async`` twin (``len_async`` for ``len``). Always strong.

    ``get`` returns the oldest item, waiting up to ``timeout`` seconds (None: as long as
    it takes) and returning None if nothing came. A waiting ``get`` receives a ``put``
    item directly, without polling. Generic in its item type (``sky.queue`` leaves it
    open); items are the putters' word, not checked at runtime.
    """

    __slots__ = ("name", "_operations")

    def __init__(self, operations: Operations, name: str) -> None:
        self.name = name
        self._operations = operations

    @steps
    def put(self, value: T) -> Steps[None]:
        """Append ``value``."""
        yield from self._operations.queue_put(self.name, value)

    @steps
    def get(self, timeout: float | None = None) -> Steps[T | None]:
        """The oldest item, or None if none came within ``timeout`` seconds."""
        timeout = check_timeout(f"sky.queue({self.name!r}).get", timeout)
        _, item = yield from self._operations.queue_get(self.name, timeout)
        return cast("T | None", item)

    @steps
    def empty(self) -> Steps[bool]:
        """True if the queue holds no item now."""
        return (yield from self._operations.queue_size(self.name)) == 0

    @steps
    def len(self) -> Steps[int]:
        """``len(q)``: items waiting now."""
        return (yield from self._operations.queue_size(self.name))

    put_async = async_twin(put)
    get_async = async_twin(get)
    empty_async = async_twin(empty)
    len_async = async_twin(len)

    def __len__(self) -> int:
        return int(run(self._operations.queue_size(self.name)))

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, ("queue", self.name, ()))

    def __repr__(self) -> str:
        return f"sky.queue({self.name!r})"
