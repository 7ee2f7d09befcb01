"""``sky.counter(name)``: an integer shared by every node of the pool."""

from __future__ import annotations

from skyward.collections.named import NamedCollection
from skyward.collections.steps import Steps, async_twin, run, run_async, steps


class SharedCounter(NamedCollection):
    """A distributed counter: ``value``, ``increment(n=1)``, ``decrement(n=1)``,
    ``reset(value=0)``, ``int(c)``, each with an ``_async`` twin (``value_async()``).

    Every operation is applied whole at the owner, so no update is lost. With
    "eventual", increments are applied to this node's view at once and sent in batches;
    ``increment``/``decrement`` then return this node's view of the new value.
    """

    KIND = "counter"
    __slots__ = ()

    @property
    def value(self) -> int:
        """The current value."""
        return int(run(self._operations.counter_get(self.name, self._strong, self._fresh())))

    async def value_async(self) -> int:
        """The current value, awaitable."""
        return int(await run_async(self._operations.counter_get(self.name, self._strong, self._fresh())))

    @steps
    def increment(self, n: int = 1) -> Steps[int]:
        """Add ``n``; returns the new value."""
        return (yield from self._operations.counter_add(self.name, _amount(self.name, "increment", n), self._strong))

    @steps
    def decrement(self, n: int = 1) -> Steps[int]:
        """Subtract ``n``; returns the new value."""
        return (yield from self._operations.counter_add(self.name, -_amount(self.name, "decrement", n), self._strong))

    @steps
    def reset(self, value: int = 0) -> Steps[None]:
        """Set the value to ``value``, atomically."""
        yield from self._operations.counter_reset(self.name, _amount(self.name, "reset", value), self._strong)

    increment_async = async_twin(increment)
    decrement_async = async_twin(decrement)
    reset_async = async_twin(reset)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value


def _amount(name: str, method: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"sky.counter({name!r}).{method}() takes an int, got {type(value).__name__} {value!r}")
    return value
