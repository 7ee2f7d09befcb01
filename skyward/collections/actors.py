"""``CollectionHosts``: the Ray actor that owns a pool's collections, and the shards
(``CollectionShard``) it holds.

A pool has ``CollectionsConfig.hosts`` shards, all in one process: one actor a pool
starts beside its agents, before any task (``start_hosts``), under a Ray name derived
from the pool id; no other process ever starts it, so hosts that are gone (dead, or
killed as the pool closes) are never replaced by fresh, empty ones. Each shard holds
many entities, one per (kind, name) it owns: a shard of every dict (keys are spread
over all shards by a stable hash), and whole sets, counters, queues, barriers and locks
(each on the shard its name hashes to). The kind is part of the
entity key, so a dict and a counter of the same name never collide. One process for
every shard, rather than one per shard, is what lets the pool start it with its agents:
an idle Ray worker costs about 57 MiB and half a percent of a core, and the first use
of a shard no longer waits for a Ray worker's boot (about 0.5 s).

The actor is threaded with two concurrency groups: the default group has one thread per
shard and serves every operation that never waits (``call``, ``exchange``, ``renew``: a
plain actor call, the fastest Ray has), and ``WAIT_GROUP`` has ``WAIT_THREADS`` threads
per shard for those that may wait (``call_waiting``: queue ``get``, lock ``acquire``,
barrier ``await_round``; cache ``poll``; ``update_many``). Each method of a shard takes
the shard's index first. One lock per shard guards its state, so each operation is
applied whole; waits release it (see ``entities``). An operation sent to the default
group that would have to wait for a prepared multi-shard update answers ``BUSY`` and is
sent again to ``WAIT_GROUP``.

``call`` takes one pickled request and answers a pickled ``(True, result)`` or
``(False, exception)`` rather than raising, so the caller re-raises the original
exception type without Ray's wrapping. The ticket ahead of the request lets the caller
send it again while the shard cannot be reached: the shard applies it once (``replies``).
On a local pool each shard also serves ``call`` on a Unix socket to the processes of its
machine (``host_lane``), on threads of its own beside the actor's; the shard's lock
keeps each operation whole there too.
"""

from __future__ import annotations

import functools
import logging
import pickle
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterable

import cloudpickle

from skyward.collections.config import CHECK_EVERY, LEASE_TTL, NAMESPACE, SYNC, CollectionsConfig
from skyward.collections.entities import BarrierState, CounterStore, DictShard, Hooks, LockState, QueueState, SetStore
from skyward.collections.errors import CollectionUnavailableError
from skyward.collections.host_lane import HostLaneServer, lane_path
from skyward.collections.markers import BUSY, NO_SLOT, Marker
from skyward.collections.remote import EntityKey, Exchanged, HostsClass, HostsHandle, Items, Outcome, Snapshot, Ticket, WireOp
from skyward.collections.replies import Replies, ticketed
from skyward.collections.subscriptions import Subscriptions, WatchedKey
from skyward.core.codec import load_payload

log = logging.getLogger("skyward.collections")

WAIT_GROUP = "wait"
WAIT_THREADS = 128
PREPARE_TIMEOUT = 30.0
FORGET_EVERY = 40

_remote_hosts: dict[int, HostsClass] = {}
_remote_lock = threading.Lock()

Entity = DictShard | SetStore | CounterStore | QueueState | BarrierState | LockState
KINDS: dict[str, Callable[[Hooks], Entity]] = {
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
    "queue": frozenset({"put", "put_many", "get", "size"}),
    "barrier": frozenset({"join", "arrive", "await_round", "abandon", "reset"}),
    "lock": frozenset({"acquire", "release", "locked"}),
}
WAITING = frozenset({("queue", "get"), ("lock", "acquire"), ("barrier", "await_round")})
EXCHANGES = {
    "dict": frozenset({"read", "set", "delete", "pop"}),
    "set": frozenset({"read", "add", "discard", "size"}),
    "counter": frozenset({"read", "add", "reset"}),
}


class CollectionShard:
    """Owns the entities that hash to shard ``index`` of the pool ``config``."""

    def __init__(self, config: CollectionsConfig, index: int) -> None:
        self._config = config
        self._index = index
        self._lock = threading.Lock()
        self._entities: dict[EntityKey, Entity] = {}
        self._subscriptions = Subscriptions(threading.Condition(self._lock))
        self._acked: dict[str, int] = {}
        self._replies = Replies(self._lock)
        self._leases = LeaseTable()
        self._held: dict[str, set[EntityKey]] = {}
        self._prepared: dict[str, tuple[str, float]] = {}
        self._lane = _lane_server(config, index, self.call)  # listening before anyone can find the host
        threading.Thread(target=self._check_forever, name="skyward-collections-check", daemon=True).start()

    # ------------------------------------------------------------------ strong path

    def call(self, request: bytes) -> bytes:
        """Apply one operation that does not wait, ``pack((kind, name, op, args))`` headed
        by its ticket (``replies.with_ticket``), once per ticket; answers ``pack((ok,
        result))``, or ``pack((False, BUSY))`` when dict keys it touches are held by a
        prepared update, or its first copy still runs (send it again with
        ``call_waiting``)."""
        return pack(self._applied_once(request, waiting=False))

    def call_waiting(self, request: bytes) -> bytes:
        """Like ``call``, for operations that may wait (``WAIT_GROUP``)."""
        return pack(self._applied_once(request, waiting=True))

    def _applied_once(self, request: bytes, waiting: bool) -> Outcome:
        ticket, operation = ticketed(request)
        kind, name, op, args = load_payload(operation)
        with self._lock:
            return self._admitted(ticket, kind, name, op, args, waiting)

    def _admitted(
        self, ticket: Ticket, kind: str, name: str, op: str, args: tuple[object, ...], waiting: bool
    ) -> Outcome:
        try:
            earlier = self._replies.admit(ticket, can_wait=waiting)
        except TimeoutError as exc:
            return False, exc
        if earlier is not None:
            return earlier
        outcome = self._apply(kind, name, op, args, waiting)
        self._replies.record(ticket, outcome)
        return outcome

    def _apply(self, kind: str, name: str, op: str, args: tuple[object, ...], waiting: bool) -> Outcome:
        try:
            if (kind, op) in WAITING and not waiting:
                raise ValueError(f"{kind}.{op} may wait: send it with call_waiting")
            entity = self._entity(kind, name, op, CALLS)
            if isinstance(entity, DictShard):
                keys = _dict_keys(op, args)
                if entity.busy(keys):
                    if not waiting:
                        return False, BUSY
                    if not entity.settle(keys, PREPARE_TIMEOUT):
                        raise TimeoutError(f"sky.dict({name!r}): keys held by an update for {PREPARE_TIMEOUT:g}s")
            return True, getattr(entity, op)(*args)
        except Exception as exc:
            return False, exc

    def prepare(self, transaction: str, name: str, keys: tuple[Hashable, ...], wait: float, until: float) -> bool:
        """Hold ``keys`` of dict ``name`` for ``transaction`` once the updates before it
        let go; False if they did not within ``wait`` s. Dropped at ``until`` (a
        ``time.monotonic()`` time) if no commit or abort came by then."""
        with self._lock:
            if not self._shard(name).prepare(transaction, keys, wait):
                return False
            self._prepared[transaction] = (name, until)
            return True

    def confirm(self, transaction: str) -> bool:
        """Whether ``transaction``'s hold is still here; from then on it lasts until its
        ``commit`` or ``abort``, past the time ``prepare`` gave. False once that time
        dropped it (the caller stalled past it): the update must not be written."""
        with self._lock:
            return self._prepared.pop(transaction, None) is not None

    def commit(
        self, transaction: str, name: str, items: Items, subscriber: str | None
    ) -> list[Snapshot]:
        """Write ``items`` to dict ``name`` and let go of ``transaction``'s hold, in one
        step, once ``confirm`` kept it; returns the written slots' snapshots (watched by
        ``subscriber`` when given)."""
        with self._lock:
            self._shard(name).commit(transaction, items)
            slots: list[WatchedKey] = [(("dict", name), key) for key, _ in items]
            if subscriber is not None:
                for slot in slots:
                    self._subscriptions.watch(subscriber, slot)
            return self._snapshots(slots)

    def abort(self, transaction: str, name: str) -> None:
        with self._lock:
            self._shard(name).abort(transaction)
            self._prepared.pop(transaction, None)

    # ------------------------------------------------------------------ caches

    def exchange(self, subscriber: str, first_seq: int, ops: list[WireOp]) -> Exchanged | Marker:
        """Apply a batch of a node cache's operations in order, as one step. Returns each
        operation's outcome, snapshots of the slots they touched (now watched by
        ``subscriber``) and the sequence number of the last operation applied; or BUSY,
        applying nothing, if the batch touches keys of a prepared update (send it again
        with ``exchange_waiting``)."""
        with self._lock:
            if self._busy(ops):
                return BUSY
            return self._exchange(subscriber, first_seq, ops)

    def exchange_waiting(self, subscriber: str, first_seq: int, ops: list[WireOp]) -> Exchanged:
        """``exchange`` that waits for prepared updates to let go (``WAIT_GROUP``)."""
        with self._lock:
            deadline = time.monotonic() + PREPARE_TIMEOUT
            for kind, name, _, _, slot in ops:
                if kind == "dict" and not self._shard(name).settle((slot,), deadline - time.monotonic()):
                    raise TimeoutError(f"sky.dict({name!r}): keys held by an update for {PREPARE_TIMEOUT:g}s")
            return self._exchange(subscriber, first_seq, ops)

    def _exchange(self, subscriber: str, first_seq: int, ops: list[WireOp]) -> Exchanged:
        """Apply ``ops`` (sequence numbers ``first_seq`` on) once each: a batch sent again
        because its answer was lost (``NodeCache``) skips what was applied when it came
        first, and an operation's answer that is lost so says."""
        outcomes: list[Outcome] = []
        slots: list[WatchedKey] = []
        applied = self._acked.get(subscriber, -1)
        for seq, (kind, name, op, args, slot) in enumerate(ops, first_seq):
            if kind == SYNC:
                outcomes.append((True, None))
                continue
            if seq <= applied:
                outcomes.append((False, CollectionUnavailableError(
                    f"sky.{kind}({name!r}).{op} was applied when first sent; its answer was lost as the "
                    "network to the collection's host failed"
                )))
            else:
                try:
                    entity = self._entity(kind, name, op, EXCHANGES)
                    outcomes.append((True, getattr(entity, op)(*args)))
                except Exception as exc:
                    outcomes.append((False, exc))
            if slot is not NO_SLOT:
                slots.append(((kind, name), slot))
        acked = self._acked[subscriber] = max(applied, first_seq + len(ops) - 1)
        for slot in slots:
            self._subscriptions.watch(subscriber, slot)
        return outcomes, self._snapshots(slots), acked

    def poll(self, subscriber: str, wait: float) -> tuple[list[Snapshot], int]:
        """Snapshots of the slots changed for ``subscriber`` since its last poll (waiting
        up to ``wait`` s for a change; ``WAIT_GROUP``) and the last of its operations
        applied."""
        with self._lock:
            dirty = self._subscriptions.poll(subscriber, wait)
            return self._snapshots(dirty), self._acked.get(subscriber, -1)

    # ------------------------------------------------------------------ leases

    def renew(self, holders: list[str]) -> list[str]:
        """Extend the leases of ``holders``; returns those that hold nothing here."""
        with self._lock:
            return self._leases.renew(holders)

    def holder_ended(self, holder: str, failed: bool) -> None:
        """``holder``'s task ended: free its locks and leave its barriers (breaking them
        when ``failed``)."""
        with self._lock:
            self._release_holder(holder, failed)

    def membership_changed(self, left: int | None, reason: str) -> None:
        """The pool's nodes changed (``left``: the rank of a node that left, or None for
        one that joined): the holders of the node that left end as failed (its locks are
        freed, the barriers it joined break, naming ``reason``), and barriers between
        rounds may be sized anew."""
        with self._lock:
            if left is not None:
                prefix = f"{left}/"
                for holder in [holder for holder in self._held if holder.startswith(prefix)]:
                    self._release_holder(holder, True, reason)
            for entity in self._entities.values():
                if isinstance(entity, BarrierState):
                    entity.membership_changed()

    # ------------------------------------------------------------------ internals (lock held)

    def _entity(
        self, kind: str, name: str, op: str | None = None, allowed: dict[str, frozenset[str]] | None = None
    ) -> Entity:
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
                threading.Condition(self._lock),
            )
            entity = self._entities[key] = KINDS[kind](hooks)
        return entity

    def _shard(self, name: str) -> DictShard:
        """The entity of dict ``name`` on this host."""
        entity = self._entity("dict", name)
        if not isinstance(entity, DictShard):
            raise TypeError(f"the entity of sky.dict({name!r}) is a {type(entity).__name__}, not a DictShard")
        return entity

    def _changed(self, key: EntityKey, slot: Hashable) -> None:
        self._subscriptions.changed((key, slot))

    def _snapshots(self, slots: Iterable[WatchedKey]) -> list[Snapshot]:
        snapshots: list[Snapshot] = []
        for slot in dict.fromkeys(slots):
            (kind, name), inner = slot
            entity = self._entities[(kind, name)]
            if not isinstance(entity, (DictShard, SetStore, CounterStore)):
                raise TypeError(f"sky.{kind}({name!r}) has no cached slots (it is a {type(entity).__name__})")
            snapshots.append((kind, name, inner, entity.read(inner), entity.version))
        return snapshots

    def _busy(self, ops: list[WireOp]) -> bool:
        """True if a prepared multi-shard update holds a dict key one of ``ops`` touches."""
        for kind, name, _, _, slot in ops:
            if kind == "dict":
                shard = self._entities.get(("dict", name))
                if isinstance(shard, DictShard) and shard.busy((slot,)):
                    return True
        return False

    def _hold(self, key: EntityKey, holder: str) -> None:
        self._held.setdefault(holder, set()).add(key)
        self._leases.grant(holder)

    def _unhold(self, key: EntityKey, holder: str) -> None:
        keys = self._held.get(holder)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._held[holder]
                self._leases.drop(holder)

    def _release_holder(self, holder: str, failed: bool, why: str = "", expired: bool = False) -> None:
        """``holder`` is gone (``expired``: its lease ran out): the locks it held are freed
        and the barriers it joined break when it ``failed``."""
        for key in self._held.pop(holder, set()):
            entity = self._entities[key]
            if isinstance(entity, LockState) and expired:
                entity.lease_ran_out(holder)
            elif isinstance(entity, (BarrierState, LockState)):
                entity.holder_gone(holder, failed, why)
        self._leases.drop(holder)

    def _check_forever(self) -> None:
        """Every CHECK_EVERY s: release the holders whose lease expired, abort updates
        prepared too long ago; now and then forget subscribers that stopped polling and
        callers that stopped calling."""
        ticks = 0
        while True:
            time.sleep(CHECK_EVERY)
            ticks += 1
            with self._lock:
                for holder in self._leases.expired():
                    self._release_holder(holder, failed=True, expired=True)
                now = time.monotonic()
                for transaction, (name, deadline) in list(self._prepared.items()):
                    if deadline <= now:
                        self._shard(name).abort(transaction)
                        del self._prepared[transaction]
                if ticks % FORGET_EVERY == 0:
                    self._subscriptions.forget_idle()
                    self._replies.forget_idle()


class CollectionHosts:
    """Every shard (``CollectionShard``) of the pool ``config``, in this process."""

    def __init__(self, config: CollectionsConfig) -> None:
        self._shards = tuple(CollectionShard(config, index) for index in range(config.hosts))

    def call(self, index: int, request: bytes) -> bytes:
        """Shard ``index``'s ``CollectionShard.call``."""
        return self._shards[index].call(request)

    def call_waiting(self, index: int, request: bytes) -> bytes:
        """Shard ``index``'s ``CollectionShard.call_waiting`` (``WAIT_GROUP``)."""
        return self._shards[index].call_waiting(request)

    def exchange(self, index: int, subscriber: str, first_seq: int, ops: list[WireOp]) -> Exchanged | Marker:
        """Shard ``index``'s ``CollectionShard.exchange``."""
        return self._shards[index].exchange(subscriber, first_seq, ops)

    def exchange_waiting(self, index: int, subscriber: str, first_seq: int, ops: list[WireOp]) -> Exchanged:
        """Shard ``index``'s ``CollectionShard.exchange_waiting`` (``WAIT_GROUP``)."""
        return self._shards[index].exchange_waiting(subscriber, first_seq, ops)

    def poll(self, index: int, subscriber: str, wait: float) -> tuple[list[Snapshot], int]:
        """Shard ``index``'s ``CollectionShard.poll`` (``WAIT_GROUP``)."""
        return self._shards[index].poll(subscriber, wait)

    def renew(self, index: int, holders: list[str]) -> list[str]:
        """Shard ``index``'s ``CollectionShard.renew``."""
        return self._shards[index].renew(holders)

    def holder_ended(self, index: int, holder: str, failed: bool) -> None:
        """Shard ``index``'s ``CollectionShard.holder_ended``."""
        self._shards[index].holder_ended(holder, failed)

    def membership_changed(self, left: int | None, reason: str) -> None:
        """``CollectionShard.membership_changed`` on every shard."""
        for shard in self._shards:
            shard.membership_changed(left, reason)

    def update_many(self, name: str, groups: dict[int, Items], subscriber: str | None) -> Outcome:
        """Write ``groups`` (items per shard index) to dict ``name`` atomically across
        shards (``WAIT_GROUP``): prepare every shard in index order (their keys wait),
        within PREPARE_TIMEOUT for all of them, then commit all; a shard's hold lasts
        until the commit, however long the later shards' prepares waited. Nothing is
        written unless every hold is still there once all are prepared (``confirm``: a
        process stalled past a hold's time gets TimeoutError, as when a prepare waits
        too long). Returns the written slots' snapshots per shard index (watched by
        ``subscriber`` when given)."""
        transaction = uuid.uuid4().hex
        deadline = time.monotonic() + PREPARE_TIMEOUT
        held_until = deadline + PREPARE_TIMEOUT  # past the last prepare's end, so no hold lapses before the commit
        prepared: list[CollectionShard] = []
        try:
            for index in sorted(groups):
                shard = self._shards[index]
                keys = tuple(key for key, _ in groups[index])
                if not shard.prepare(transaction, name, keys, max(0.0, deadline - time.monotonic()), held_until):
                    raise TimeoutError(
                        f"sky.dict({name!r}).update: its keys stayed held by other updates for {PREPARE_TIMEOUT:g}s"
                    )
                prepared.append(shard)
            lapsed = [shard for shard in prepared if not shard.confirm(transaction)]
            if lapsed:
                raise TimeoutError(
                    f"sky.dict({name!r}).update: this process stalled past its hold on {len(lapsed)} of its "
                    f"{len(prepared)} shards ({PREPARE_TIMEOUT:g}s after its prepares' limit); nothing was written: "
                    "call update again"
                )
            return True, {
                index: self._shards[index].commit(transaction, name, items, subscriber) for index, items in groups.items()
            }
        except Exception as exc:
            for shard in prepared:  # each one's hold goes, whatever another's abort does
                try:
                    shard.abort(transaction, name)
                except Exception:  # noqa: BLE001 - logged; the update's own error is the answer
                    log.exception("sky.dict(%r).update: aborting its hold on a shard failed", name)
            return False, exc


def start_hosts(config: CollectionsConfig, detached: bool) -> HostsHandle:
    """Begin starting the hosts of the pool ``config`` without waiting for them: a pool
    calls this as it starts its agents, so that its collections are ready as soon as its
    nodes are. The actor's name is registered before this returns, so every process of the
    pool finds it from its first task on. ``detached``: it outlives this process (a kept
    pool's, one on a pool's own head); else it ends with this process, and Ray also ends
    it once no handle to it is left, so the caller keeps the one returned."""
    where: dict[str, object] = (
        {"resources": dict(config.placement)} if config.placement else {"scheduling_strategy": "SPREAD"}
    )
    return _hosts_class(config.hosts).options(
        name=config.hosts_name,
        namespace=NAMESPACE,
        get_if_exists=True,
        lifetime="detached" if detached else None,
        num_cpus=0,
        max_restarts=0,
        max_concurrency=config.hosts,
        **where,
    ).remote(config)


def _hosts_class(shards: int) -> HostsClass:
    """``CollectionHosts`` as a Ray actor class for ``shards`` shards: ``WAIT_THREADS`` in
    ``WAIT_GROUP`` per shard (a class's concurrency groups cannot be set per actor)."""
    with _remote_lock:
        made = _remote_hosts.get(shards)
        if made is None:
            import ray

            made = _remote_hosts[shards] = ray.remote(  # type: ignore[call-overload]  # Ray's stubs lack the actor options
                concurrency_groups={WAIT_GROUP: WAIT_THREADS * shards}
            )(CollectionHosts)
        return made


class LeaseTable:
    """Expiry time per holder: a holder's process renews its leases every RENEW_EVERY s
    while alive; one not renewed for LEASE_TTL s has expired (the holder is dead)."""

    def __init__(self) -> None:
        self._expiry: dict[str, float] = {}

    def grant(self, holder: str) -> None:
        """Start (or extend) ``holder``'s lease."""
        self._expiry[holder] = time.monotonic() + LEASE_TTL

    def renew(self, holders: list[str]) -> list[str]:
        """Extend the leases of ``holders``; returns those that have none (any more)."""
        until = time.monotonic() + LEASE_TTL
        unknown = []
        for holder in holders:
            if holder in self._expiry:
                self._expiry[holder] = until
            else:
                unknown.append(holder)
        return unknown

    def drop(self, holder: str) -> None:
        self._expiry.pop(holder, None)

    def expired(self) -> list[str]:
        """Holders whose lease ran out; they are removed from the table."""
        now = time.monotonic()
        gone = [holder for holder, until in self._expiry.items() if until <= now]
        for holder in gone:
            del self._expiry[holder]
        return gone

    def __len__(self) -> int:
        return len(self._expiry)


def _lane_server(config: CollectionsConfig, index: int, serve: Callable[[bytes], bytes]) -> HostLaneServer | None:
    """Host ``index``'s lane, serving ``serve`` (its ``call``) to this machine's callers;
    None when the pool gives it no place or the socket cannot be made (then callers use
    Ray, as they do whenever the lane cannot carry a request)."""
    path = lane_path(config.lanes_dir, config.pool_id, index)
    if not path:
        return None
    try:
        return HostLaneServer(path, serve)
    except OSError as exc:
        log.warning("collection host %d of pool %s serves through Ray only: its lane %s failed (%s)",
                    index, config.pool_id, path, exc)
        return None


def pack(value: object) -> bytes:
    """``value`` pickled: by the standard pickler when it can (fast), else cloudpickle
    (lambdas, classes defined in ``__main__`` or in functions). ``pickle.loads`` reads both."""
    try:
        return pickle.dumps(value, protocol=5)
    except Exception:
        return cloudpickle.dumps(value, protocol=5)


def _dict_keys(op: str, args: tuple[object, ...]) -> tuple[object, ...]:
    if op == "update":
        items = args[0]
        if not isinstance(items, list):
            raise TypeError(f"sky.dict update takes a list of (key, value) pairs, got {type(items).__name__} {items!r}")
        return tuple(key for key, _ in items)
    return (args[0],)
