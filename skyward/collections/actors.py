"""``CollectionHost``: the async Ray actor that owns collections.

A pool has ``CollectionsConfig.hosts`` of them, created on first use under Ray names
derived from the pool id. Each holds many entities, one per (kind, name) it owns: a
shard of every dict (keys are spread over all hosts by a stable hash), and whole sets,
counters, queues, barriers and locks (each on the host its name hashes to). The kind is
part of the entity key, so a dict and a counter of the same name never collide.

Every method answers ``(True, result)`` or ``(False, exception)`` rather than raising,
so the caller re-raises the original exception type without Ray's wrapping. Methods run
on one event loop, so each operation is applied whole, without interleaving.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Iterable
from typing import Any

from skyward.collections.config import CollectionsConfig
from skyward.collections.hooks import Hooks
from skyward.collections.leases import CHECK_EVERY, LeaseTable
from skyward.collections.markers import NO_SLOT
from skyward.collections.primitives import BarrierState, LockState, QueueState
from skyward.collections.stores import CounterStore, DictShard, SetStore
from skyward.collections.subscriptions import EntityKey, Slot, Subscriptions

MAX_CONCURRENCY = 10_000
PREPARE_TIMEOUT = 30.0
FORGET_EVERY = 40

KINDS: dict[str, Any] = {
    "dict": DictShard,
    "set": SetStore,
    "counter": CounterStore,
    "queue": QueueState,
    "barrier": BarrierState,
    "lock": LockState,
}
CALLS = {
    "dict": frozenset({"get", "contains", "set", "delete", "pop", "update"}),
    "set": frozenset({"contains", "add", "discard", "size"}),
    "counter": frozenset({"get", "add", "reset"}),
    "queue": frozenset({"put", "get", "size"}),
    "barrier": frozenset({"join", "arrive", "await_round", "abandon", "reset"}),
    "lock": frozenset({"acquire", "release", "locked"}),
}
EXCHANGES = {
    "dict": frozenset({"read", "set", "delete", "pop"}),
    "set": frozenset({"read", "add", "discard", "size"}),
    "counter": frozenset({"read", "add", "reset"}),
}
Outcome = tuple[bool, Any]
WireOp = tuple[str, str, str, tuple[Any, ...], Any]


class CollectionHost:
    """Owns the entities that hash to host ``index`` of the pool ``config``."""

    def __init__(self, config: CollectionsConfig, index: int) -> None:
        self._config = config
        self._index = index
        self._entities: dict[EntityKey, Any] = {}
        self._subscriptions = Subscriptions()
        self._acked: dict[str, int] = {}
        self._leases = LeaseTable()
        self._held: dict[str, set[EntityKey]] = {}
        self._checker: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ strong path

    async def call(self, kind: str, name: str, op: str, args: tuple[Any, ...]) -> Outcome:
        """Apply one operation to the (kind, name) entity and return its result."""
        try:
            entity = self._entity(kind, name, op, CALLS)
            if kind == "dict":
                keys = _dict_keys(op, args)
                if entity.busy(keys):
                    await entity.settle(keys)
            result = getattr(entity, op)(*args)
            if asyncio.iscoroutine(result):
                result = await result
            return True, result
        except Exception as exc:
            return False, exc

    async def update_many(
        self, name: str, groups: dict[int, list[tuple[Any, Any]]], hosts: dict[int, Any], subscriber: str | None
    ) -> Outcome:
        """Write ``groups`` (items per host index) to dict ``name`` atomically across
        hosts: prepare every shard in host order (their keys wait), then commit all.
        Returns the written slots' snapshots per host index (watched by ``subscriber``
        when given)."""
        transaction = uuid.uuid4().hex
        order = sorted(groups)
        prepared: list[int] = []
        try:
            for index in order:
                keys = tuple(key for key, _ in groups[index])
                if index == self._index:
                    await self.prepare(transaction, name, keys)
                else:
                    await hosts[index].prepare.remote(transaction, name, keys)
                prepared.append(index)
            commits = [
                self.commit(transaction, name, groups[index], subscriber)
                if index == self._index
                else hosts[index].commit.remote(transaction, name, groups[index], subscriber)
                for index in order
            ]
            snapshots = dict(zip(order, await asyncio.gather(*commits)))
        except Exception as exc:
            for index in prepared:
                if index == self._index:
                    await self.abort(transaction, name)
                else:
                    hosts[index].abort.remote(transaction, name)
            return False, exc
        return True, snapshots

    async def prepare(self, transaction: str, name: str, keys: tuple[Any, ...]) -> None:
        """Hold ``keys`` of dict ``name`` for ``transaction`` (dropped after PREPARE_TIMEOUT
        if no commit comes)."""
        shard = self._entity("dict", name)
        await shard.prepare(transaction, keys)
        asyncio.get_running_loop().call_later(PREPARE_TIMEOUT, shard.abort, transaction)

    async def commit(
        self, transaction: str, name: str, items: list[tuple[Any, Any]], subscriber: str | None
    ) -> list[tuple[Any, ...]]:
        shard = self._entity("dict", name)
        shard.commit(transaction, items)
        slots = [(("dict", name), key) for key, _ in items]
        if subscriber is not None:
            for slot in slots:
                self._subscriptions.watch(subscriber, slot)
        return self._snapshots(slots)

    async def abort(self, transaction: str, name: str) -> None:
        self._entity("dict", name).abort(transaction)

    # ------------------------------------------------------------------ caches

    async def exchange(self, subscriber: str, first_seq: int, ops: list[WireOp]) -> tuple[list[Outcome], list[Any], int]:
        """Apply a batch of a node cache's operations in order, as one step. Returns each
        operation's outcome, snapshots of the slots they touched (now watched by
        ``subscriber``) and the sequence number of the last operation applied."""
        await self._settle([(kind, name, slot) for kind, name, _, _, slot in ops if kind == "dict"])
        outcomes: list[Outcome] = []
        slots: list[Slot] = []
        for kind, name, op, args, slot in ops:
            try:
                entity = self._entity(kind, name, op, EXCHANGES)
                outcomes.append((True, getattr(entity, op)(*args)))
            except Exception as exc:
                outcomes.append((False, exc))
            if slot is not NO_SLOT:
                slots.append(((kind, name), slot))
        acked = self._acked[subscriber] = first_seq + len(ops) - 1
        for slot in slots:
            self._subscriptions.watch(subscriber, slot)
        return outcomes, self._snapshots(slots), acked

    async def poll(self, subscriber: str, wait: float) -> tuple[list[Any], int]:
        """Snapshots of the slots changed for ``subscriber`` since its last poll (waiting
        up to ``wait`` s for a change) and the last of its operations applied."""
        self._ensure_checker()
        dirty = await self._subscriptions.poll(subscriber, wait)
        return self._snapshots(dirty), self._acked.get(subscriber, -1)

    # ------------------------------------------------------------------ leases

    async def renew(self, holders: list[str]) -> list[str]:
        """Extend the leases of ``holders``; returns those that hold nothing here."""
        return self._leases.renew(holders)

    async def holder_ended(self, holder: str, failed: bool) -> None:
        """``holder``'s task ended: free its locks and leave its barriers (breaking them
        when ``failed``)."""
        self._release_holder(holder, failed)

    # ------------------------------------------------------------------ internals

    def _entity(self, kind: str, name: str, op: str | None = None, allowed: dict[str, frozenset[str]] | None = None) -> Any:
        if allowed is not None and op not in allowed.get(kind, ()):
            raise ValueError(f"{kind}.{op} is not an operation of a collection host")
        key = (kind, name)
        entity = self._entities.get(key)
        if entity is None:
            hooks = Hooks(
                name,
                functools.partial(self._changed, key),
                functools.partial(self._hold, key),
                functools.partial(self._unhold, key),
            )
            entity = self._entities[key] = KINDS[kind](hooks)
        return entity

    def _changed(self, key: EntityKey, slot: Any) -> None:
        self._subscriptions.changed((key, slot))

    def _snapshots(self, slots: Iterable[Slot]) -> list[tuple[Any, ...]]:
        snapshots = []
        for slot in dict.fromkeys(slots):
            (kind, name), inner = slot
            entity = self._entities[(kind, name)]
            snapshots.append((kind, name, inner, entity.read(inner), entity.version))
        return snapshots

    async def _settle(self, dict_slots: list[tuple[str, str, Any]]) -> None:
        """Wait until no prepared multi-shard update holds any key these ops touch."""
        while True:
            for _, name, key in dict_slots:
                shard = self._entities.get(("dict", name))
                if shard is not None and shard.busy((key,)):
                    await shard.settle((key,))
                    break
            else:
                return

    def _hold(self, key: EntityKey, holder: str) -> None:
        self._held.setdefault(holder, set()).add(key)
        self._leases.grant(holder)
        self._ensure_checker()

    def _unhold(self, key: EntityKey, holder: str) -> None:
        keys = self._held.get(holder)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._held[holder]
                self._leases.drop(holder)

    def _release_holder(self, holder: str, failed: bool) -> None:
        for key in self._held.pop(holder, set()):
            self._entities[key].holder_gone(holder, failed)
        self._leases.drop(holder)

    def _ensure_checker(self) -> None:
        if self._checker is None or self._checker.done():
            self._checker = asyncio.get_running_loop().create_task(self._check())

    async def _check(self) -> None:
        ticks = 0
        while True:
            await asyncio.sleep(CHECK_EVERY)
            for holder in self._leases.expired():
                self._release_holder(holder, failed=True)
            ticks += 1
            if ticks % FORGET_EVERY == 0:
                self._subscriptions.forget_idle()


def _dict_keys(op: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
    if op == "update":
        return tuple(key for key, _ in args[0])
    return (args[0],)
