"""``sky.counter(name)``: an integer shared by every node of the pool."""

from __future__ import annotations

from skyward.collections.lock import holds_lock
from skyward.collections.operations import Engine, Reduced
from skyward.collections.steps import Steps, async_twin, run, run_async, steps


class SharedCounter:
    """A distributed counter: ``value``, ``increment(n=1)``, ``decrement(n=1)``,
    ``reset(value=0)``, ``int(c)``, each with an ``_async`` twin (``value_async()``).

    Every operation is applied whole at the owner, so no update is lost. With
    "eventual", increments are applied to this node's view at once and sent in batches;
    ``increment``/``decrement`` then return this node's view of the new value.
    """

    __slots__ = ("name", "consistency", "_engine", "_strong")

    def __init__(self, engine: Engine, name: str, consistency: str) -> None:
        self.name = name
        self.consistency = consistency
        self._engine = engine
        self._strong = consistency == "strong"

    @property
    def value(self) -> int:
        """The current value."""
        return int(run(self._engine.counter_get(self.name, self._strong, self._fresh())))

    async def value_async(self) -> int:
        """The current value, awaitable."""
        return int(await run_async(self._engine.counter_get(self.name, self._strong, self._fresh())))

    @steps
    def increment(self, n: int = 1) -> Steps[int]:
        """Add ``n``; returns the new value."""
        return (yield from self._engine.counter_add(self.name, _amount(self.name, "increment", n), self._strong))

    @steps
    def decrement(self, n: int = 1) -> Steps[int]:
        """Subtract ``n``; returns the new value."""
        return (yield from self._engine.counter_add(self.name, -_amount(self.name, "decrement", n), self._strong))

    @steps
    def reset(self, value: int = 0) -> Steps[None]:
        """Set the value to ``value``, atomically."""
        yield from self._engine.counter_reset(self.name, _amount(self.name, "reset", value), self._strong)

    increment_async = async_twin(increment)
    decrement_async = async_twin(decrement)
    reset_async = async_twin(reset)

    def _fresh(self) -> bool:
        return not self._strong and holds_lock()

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __reduce__(self) -> Reduced:
        from skyward.collections.factories import rebuild

        return (rebuild, ("counter", self.name, (self.consistency,)))

    def __repr__(self) -> str:
        return f"sky.counter({self.name!r}, consistency={self.consistency!r})"


def _amount(name: str, method: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"sky.counter({name!r}).{method}() takes an int, got {type(value).__name__} {value!r}")
    return value
