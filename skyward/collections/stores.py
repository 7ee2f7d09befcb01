"""The state of data collections inside a host actor: a dict shard, a set, a counter.

Each keeps a ``version`` that grows with every write and reports written slots through
``Hooks.changed`` (a dict key, a set member, or ``None`` for the counter), which is how
node caches learn what to refresh. ``read(slot)`` gives a slot's value as a cache holds it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from skyward.collections.hooks import Hooks
from skyward.collections.markers import MISSING


class DictShard:
    """The keys of one dict that hash to this host. A multi-shard ``update`` first
    ``prepare``s its keys on every shard (operations on them wait), then ``commit``s."""

    def __init__(self, hooks: Hooks) -> None:
        self.version = 0
        self._data: dict[Any, Any] = {}
        self._hooks = hooks
        self._locked: dict[Any, str] = {}
        self._transactions: dict[str, tuple[Any, ...]] = {}
        self._unlocked: asyncio.Event | None = None

    def read(self, slot: Any) -> Any:
        return self._data.get(slot, MISSING)

    def get(self, key: Any) -> Any:
        """The value, or MISSING."""
        return self._data.get(key, MISSING)

    def contains(self, key: Any) -> bool:
        return key in self._data

    def set(self, key: Any, value: Any) -> None:
        self._data[key] = value
        self._changed(key)

    def delete(self, key: Any) -> bool:
        """Remove ``key``; False if it was not there."""
        if key not in self._data:
            return False
        del self._data[key]
        self._changed(key)
        return True

    def pop(self, key: Any) -> Any:
        """Remove ``key`` and return its value, or MISSING."""
        value = self._data.pop(key, MISSING)
        if value is not MISSING:
            self._changed(key)
        return value

    def update(self, items: Iterable[tuple[Any, Any]]) -> None:
        for key, value in items:
            self._data[key] = value
            self._changed(key)

    def busy(self, keys: Iterable[Any]) -> bool:
        """True while a prepared multi-shard update holds one of ``keys``."""
        return bool(self._locked) and any(key in self._locked for key in keys)

    async def settle(self, keys: tuple[Any, ...]) -> None:
        """Wait until no prepared update holds any of ``keys``."""
        while self.busy(keys):
            if self._unlocked is None:
                self._unlocked = asyncio.Event()
            await self._unlocked.wait()

    async def prepare(self, transaction: str, keys: tuple[Any, ...]) -> None:
        """Hold ``keys`` for ``transaction`` (after the holders before it let go)."""
        await self.settle(keys)
        self._transactions[transaction] = keys
        for key in keys:
            self._locked[key] = transaction

    def commit(self, transaction: str, items: list[tuple[Any, Any]]) -> None:
        """Write ``items`` and let go of the transaction's keys, in one step."""
        self.update(items)
        self.abort(transaction)

    def abort(self, transaction: str) -> None:
        """Let go of the transaction's keys without writing."""
        for key in self._transactions.pop(transaction, ()):
            self._locked.pop(key, None)
        if self._unlocked is not None:
            self._unlocked.set()
            self._unlocked = None

    def _changed(self, key: Any) -> None:
        self.version += 1
        self._hooks.changed(key)


class SetStore:
    """A whole set (not sharded, so ``size`` is exact)."""

    def __init__(self, hooks: Hooks) -> None:
        self.version = 0
        self._members: set[Any] = set()
        self._hooks = hooks

    def read(self, slot: Any) -> bool:
        return slot in self._members

    def contains(self, value: Any) -> bool:
        return value in self._members

    def add(self, value: Any) -> None:
        if value not in self._members:
            self._members.add(value)
            self._changed(value)

    def discard(self, value: Any) -> None:
        if value in self._members:
            self._members.discard(value)
            self._changed(value)

    def size(self) -> int:
        return len(self._members)

    def _changed(self, value: Any) -> None:
        self.version += 1
        self._hooks.changed(value)


class CounterStore:
    """An integer; every operation is applied whole, so none is lost or split."""

    def __init__(self, hooks: Hooks) -> None:
        self.version = 0
        self._value = 0
        self._hooks = hooks

    def read(self, slot: Any) -> int:
        return self._value

    def get(self) -> int:
        return self._value

    def add(self, amount: int) -> int:
        """Add ``amount`` (negative to subtract); returns the new value."""
        self._value += amount
        self._changed()
        return self._value

    def reset(self, value: int) -> None:
        self._value = value
        self._changed()

    def _changed(self) -> None:
        self.version += 1
        self._hooks.changed(None)
