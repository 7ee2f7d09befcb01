"""``LocalOperations``: the operations of every collection, for a process that is part of the
Ray cluster (the client, or a node agent and the tasks on its threads).

Each operation is a generator of steps (see ``steps``): the proxies run it blocking or
from asyncio, and the process-executor bridge runs it on behalf of a child. "strong"
operations are one call to the owning shard of the pool's hosts; "eventual" ones go through the
process's ``NodeCache``. Queue, barrier and lock operations are always strong.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable
from typing import Concatenate, ParamSpec, TypeVar

import cloudpickle

from skyward.collections.actors import WAIT_GROUP, pack
from skyward.collections.cache import NodeCache
from skyward.collections.combiner import Combiner, Failed
from skyward.collections.config import NAMESPACE, OP_TIMEOUT, CollectionsConfig
from skyward.collections.errors import BrokenBarrierError, CollectionClosedError, CollectionUnavailableError
from skyward.collections.host_lane import HostLaneClient, lane_path
from skyward.collections.leases import LeaseKeeper
from skyward.collections.markers import BUSY, MISSING, NO_SLOT, UNKNOWN
from skyward.collections.placement import home_of, shard_of
from skyward.collections.remote import HostHandle, HostsHandle, Items, ShardHandle
from skyward.collections.replies import Tickets, with_ticket
from skyward.collections.steps import WAIT_SLICE, Inline, Steps, Wait, sent_again, translated
from skyward.core.codec import load_payload
from skyward.core.loop_thread import LoopThread
from skyward.core.validation import shown

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
WAIT_GRACE = 5.0
"""How long after a waiting operation's own deadline (a slice of the caller's timeout)
the host's answer may take before TimeoutError; normally it takes one round trip."""

PUTS_AT_ONCE = 64
"""The most queue items one call carries (the items may be large)."""


def _while_open(method: Callable[Concatenate[LocalOperations, P], Steps[T]]) -> Callable[Concatenate[LocalOperations, P], Steps[T]]:
    """An operation of ``LocalOperations`` that raises CollectionClosedError, before its first
    step, once they are closed (no stale cached value, no write into the void)."""

    @functools.wraps(method)
    def guarded(self: LocalOperations, /, *args: P.args, **kwargs: P.kwargs) -> Steps[T]:
        self.check_open()
        return (yield from method(self, *args, **kwargs))

    return guarded


class LocalOperations:
    """Collections of the pool ``config`` as seen from this process."""

    def __init__(self, config: CollectionsConfig, where: str) -> None:
        self.config = config
        self.hosts = config.hosts
        self.closed = False
        self._hosts: HostsHandle | None = None
        self._shards: list[HostHandle] = []
        self._lanes: list[HostLaneClient | None] = [
            HostLaneClient(path) if (path := lane_path(config.lanes_dir, config.pool_id, index)) else None
            for index in range(config.hosts)
        ]
        self._lock = threading.Lock()
        self._loop = LoopThread(f"skyward-collections-{config.pool_id[:8]}")
        caller = f"{where}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self._cache = NodeCache(self._loop, self.handle, caller)
        self._tickets = Tickets(caller)
        self._keeper = LeaseKeeper(self._loop, self.handle)
        self._increments: Combiner[int, int] = Combiner("increment", self._add_all)
        self._puts: Combiner[object, None] = Combiner("put", self._put_all, most=PUTS_AT_ONCE)

    # ------------------------------------------------------------------ plumbing

    def handle(self, index: int) -> HostHandle:
        """Shard ``index`` of the pool's hosts (``hosts_handle``)."""
        self.check_open()
        if not self._shards:
            self.hosts_handle()
        return self._shards[index]

    def hosts_handle(self) -> HostsHandle:
        """The actor handle of the pool's hosts, once they are ready (the pool starts them
        with its agents, before any task: ``start_hosts``), so that no operation's own
        timeout pays for an actor's start. No process of the pool ever starts them:
        CollectionUnavailableError once they are gone, killed as the pool closes or dead
        (their state is lost; no fresh, empty hosts replace them); CollectionClosedError
        once this process saw the pool close."""
        self.check_open()
        hosts = self._hosts
        if hosts is None:
            with self._lock:
                hosts = self._hosts
                if hosts is None:
                    name = self.config.hosts_name
                    hosts = _existing_hosts(name)
                    _wait_ready(hosts, name)
                    self._shards = [ShardHandle(hosts, index) for index in range(self.hosts)]
                    self._hosts = hosts  # last: whoever sees it sees the shards
        return hosts

    def call(
        self, host: int, kind: str, name: str, op: str, args: tuple[object, ...], timeout: float = OP_TIMEOUT,
        waiting: bool = False,
    ) -> Steps[object]:
        """One operation on the owning host; returns its result or raises its error. An
        operation that may wait (``waiting``) goes to the host's wait group; so does one
        the host answers BUSY (its dict keys are held by a multi-shard update). While the
        host cannot be reached just now (a reset connection, a partition) the same call is
        sent again every ``RESEND_AFTER`` s within ``timeout``: the host applies it once
        (``replies``). One that does not wait goes by the host's lane when it has one
        (``host_lane``), else, or when the lane cannot carry it, through Ray."""
        request = _packed(kind, name, op, args)
        return (yield from self._request(host, f"sky.{kind}({name!r}).{op}", request, timeout, waiting))

    def _request(self, host: int, what: str, request: bytes, timeout: float, waiting: bool) -> Steps[object]:
        """``call`` of a packed request, under one ticket however often it is sent."""
        handle = self.handle(host)
        lane = self._lanes[host]
        number = self._tickets.issue()
        waits = waiting

        def send(left: float) -> Steps[object]:
            nonlocal waits
            until = time.monotonic() + left
            while True:
                sent = with_ticket(self._tickets.ticket(number), request)
                answer = None
                if lane is not None and lane.usable and not waits:
                    answer = yield Wait(Inline(functools.partial(lane.call, sent)), max(0.0, until - time.monotonic()), what)
                if answer is None:  # no lane, it could not carry this, or an asyncio run: Ray, same ticket
                    method = handle.call_waiting.options(concurrency_group=WAIT_GROUP) if waits else handle.call
                    answer = yield Wait(method.remote(sent), max(0.0, until - time.monotonic()), what)
                ok, value = load_payload(answer)
                if value is BUSY:  # keys held by a prepared update: wait in the wait group
                    waits = True
                    continue
                if ok:
                    return value
                raise value

        try:
            return (yield from sent_again(send, timeout, what))
        finally:
            self._tickets.settle(number)

    def call_as(
        self, result: type[R], host: int, kind: str, name: str, op: str, args: tuple[object, ...],
        timeout: float = OP_TIMEOUT, waiting: bool = False,
    ) -> Steps[R]:
        """``call`` for an operation whose result is a ``result``; TypeError naming the
        operation and the answer if the host answered something else."""
        value = yield from self.call(host, kind, name, op, args, timeout, waiting)
        if not isinstance(value, result):
            raise TypeError(
                f"sky.{kind}({name!r}).{op}: the collection host answered {shown(value)} "
                f"({type(value).__name__}), not a {result.__name__}"
            )
        return value

    def end_task(self, task_id: str, ok: bool) -> None:
        """Task ``task_id`` ended: free its locks, leave its barriers (breaking them if it failed)."""
        self._keeper.end_task(task_id, failed=not ok)

    def writes_lost(self) -> int:
        """A mark of the eventual writes this process has lost so far, for ``settle_writes``."""
        return self._cache.losses()

    def settle_writes(self, since: int) -> None:
        """Wait (at most ``OP_TIMEOUT`` each) until every eventual write this process made
        is applied by its owner: the end of a task is a release point, as a lock's release
        is, so whoever gets the task's result reads its writes. CollectionUnavailableError
        if the link to a host this process wrote to broke since ``writes_lost`` returned
        ``since``, dropping writes it had not applied (the host crashed, failed the batch,
        or stayed unreachable for ``OP_TIMEOUT``)."""
        for future in self._cache.sync():
            with contextlib.suppress(Exception):  # a failed sync is a broken link: counted below
                future.result(OP_TIMEOUT)
        lost = self._cache.lost_since(since)
        if lost:
            raise CollectionUnavailableError(
                f"{'; '.join(lost)}. These eventual writes, made on this node while the task ran, "
                "may not have been applied, so the task's result is withheld: run it again once the "
                "collections' hosts answer (a crashed host's collections are gone until the pool is reopened)"
            )

    def results_arrived(self) -> None:
        """A task's result came back to this process (the client): see ``NodeCache.results_arrived``."""
        self._cache.results_arrived()

    def close(self) -> None:
        """Stop this process's background work for the pool; every later operation
        raises CollectionClosedError."""
        self.closed = True
        self._loop.stop()
        for lane in self._lanes:
            if lane is not None:
                lane.close()

    def check_open(self) -> None:
        """CollectionClosedError (a PoolClosedError and a CollectionUnavailableError) once
        the pool closed (nothing is started to answer)."""
        if self.closed:
            raise CollectionClosedError(
                "this collection belongs to a pool that is closed: its contents are gone. Use "
                "collections inside `with sky.Compute(...) as pool:`, or open a new pool"
            )

    # ------------------------------------------------------------------ pool

    @_while_open
    def pool_membership_changed(self, left: int | None, reason: str) -> Steps[None]:
        """Tell the pool's hosts, if they run, that its nodes changed (see
        ``CollectionShard.membership_changed``)."""
        try:
            hosts = self.hosts_handle()
        except CollectionUnavailableError:
            return
        yield Wait(hosts.membership_changed.remote(left, reason), OP_TIMEOUT, "telling collections of a node change")

    # ------------------------------------------------------------------ dict

    @_while_open
    def dict_get(self, name: str, key: Hashable, strong: bool, fresh: bool = False) -> Steps[object]:
        """The value of ``key``, or MISSING. ``fresh``: an eventual read asks the owner."""
        host = _dict_shard(name, "get", key, self.hosts)
        if strong:
            return (yield from self.call(host, "dict", name, "get", (key,)))
        return (yield from self._cache.read(host, "dict", name, key, fresh))

    @_while_open
    def dict_contains(self, name: str, key: Hashable, strong: bool, fresh: bool = False) -> Steps[bool]:
        host = _dict_shard(name, "contains", key, self.hosts)
        if strong:
            return (yield from self.call_as(bool, host, "dict", name, "contains", (key,)))
        return (yield from self._cache.read(host, "dict", name, key, fresh)) is not MISSING

    @_while_open
    def dict_set(self, name: str, key: Hashable, value: object, strong: bool, fence: int = 0) -> Steps[None]:
        """``key`` = ``value``; a ``fence`` (strong only) is checked at the key's owner
        (``DictShard.set``)."""
        host = _dict_shard(name, "set", key, self.hosts)
        if strong:
            yield from self.call(host, "dict", name, "set", (key, value, fence) if fence else (key, value))
            return
        if fence:
            raise ValueError(f"sky.dict({name!r}).set(fence={fence}): fenced writes need consistency='strong'")
        _check_picklable(f"sky.dict({name!r})", value)
        self._cache.write(host, "dict", name, key, "set", (value,), (key, value))

    @_while_open
    def dict_delete(self, name: str, key: Hashable, strong: bool, fresh: bool = False) -> Steps[bool]:
        """Remove ``key``; False if it was not there (as far as this node knows, when
        eventual and not ``fresh``)."""
        host = _dict_shard(name, "delete", key, self.hosts)
        if strong:
            return (yield from self.call_as(bool, host, "dict", name, "delete", (key,)))
        if (yield from self._cache.read(host, "dict", name, key, fresh)) is MISSING:
            return False
        self._cache.write(host, "dict", name, key, "delete", (), (key,))
        return True

    @_while_open
    def dict_pop(self, name: str, key: Hashable, strong: bool) -> Steps[object]:
        """Remove ``key`` and return its value (or MISSING), atomically at the owner."""
        host = _dict_shard(name, "pop", key, self.hosts)
        if strong:
            return (yield from self.call(host, "dict", name, "pop", (key,)))
        future = self._cache.request(host, "dict", name, key, "pop", (key,))
        return (yield Wait(future, OP_TIMEOUT, f"sky.dict({name!r}).pop"))

    @_while_open
    def dict_update(self, name: str, items: Items, strong: bool) -> Steps[None]:
        """Write all ``items`` as one atomic step (across shards: prepare, then commit)."""
        groups: dict[int, Items] = {}
        for key, value in items:
            groups.setdefault(_dict_shard(name, "update", key, self.hosts), []).append((key, value))
        if not strong:
            for _, value in items:
                _check_picklable(f"sky.dict({name!r})", value)
        if len(groups) == 1:
            (host, group), = groups.items()
            if strong:
                yield from self.call(host, "dict", name, "update", (group,))
                return
            self._cache.write_many(host, "dict", name, [(key, "set", (value,), (key, value)) for key, value in group])
            return
        if not strong:
            for future in self._cache.sync():
                yield Wait(future, OP_TIMEOUT, f"sky.dict({name!r}).update waiting for earlier writes")
        subscriber = None if strong else self._cache.subscriber
        ref = self.hosts_handle().update_many.options(concurrency_group=WAIT_GROUP).remote(name, groups, subscriber)
        ok, value = yield Wait(ref, OP_TIMEOUT, f"sky.dict({name!r}).update")
        if not ok:
            raise value
        if not strong:
            self._cache.absorb(value)

    # ------------------------------------------------------------------ set

    @_while_open
    def set_contains(self, name: str, value: Hashable, strong: bool, fresh: bool = False) -> Steps[bool]:
        host = home_of("set", name, self.hosts)
        if strong:
            return (yield from self.call_as(bool, host, "set", name, "contains", (value,)))
        return bool((yield from self._cache.read(host, "set", name, value, fresh)))

    @_while_open
    def set_add(self, name: str, value: Hashable, strong: bool) -> Steps[None]:
        host = home_of("set", name, self.hosts)
        if strong:
            yield from self.call(host, "set", name, "add", (value,))
            return
        _check_picklable(f"sky.set({name!r})", value)
        self._cache.write(host, "set", name, value, "add", (), (value,))

    @_while_open
    def set_discard(self, name: str, value: Hashable, strong: bool) -> Steps[None]:
        host = home_of("set", name, self.hosts)
        if strong:
            yield from self.call(host, "set", name, "discard", (value,))
            return
        self._cache.write(host, "set", name, value, "discard", (), (value,))

    @_while_open
    def set_size(self, name: str, strong: bool) -> Steps[int]:
        """The owner's size; when eventual, after this process's earlier writes."""
        host = home_of("set", name, self.hosts)
        if strong:
            return (yield from self.call_as(int, host, "set", name, "size", ()))
        future = self._cache.request(host, "set", name, NO_SLOT, "size", ())
        size = yield Wait(future, OP_TIMEOUT, f"sky.set({name!r}) len()")
        return _int(f"sky.set({name!r}) len()", size)

    # ------------------------------------------------------------------ counter

    @_while_open
    def counter_get(self, name: str, strong: bool, fresh: bool = False) -> Steps[int]:
        host = home_of("counter", name, self.hosts)
        if strong:
            return (yield from self.call_as(int, host, "counter", name, "get", ()))
        value = yield from self._cache.read(host, "counter", name, None, fresh)
        return _int(f"sky.counter({name!r}).value", value)

    @_while_open
    def counter_add(self, name: str, amount: int, strong: bool) -> Steps[int]:
        """Add ``amount``; returns the new value (when eventual: this node's view of it)."""
        host = home_of("counter", name, self.hosts)
        if strong:  # concurrent increments of this process share one call (``combiner``)
            return (yield from self._increments.write(host, name, amount))
        if self._cache.lookup(host, "counter", name, None) is UNKNOWN:
            yield from self._cache.read(host, "counter", name, None)
        value = self._cache.write(host, "counter", name, None, "add", (amount,), (amount,))
        return _int(f"sky.counter({name!r}).increment", value)

    @_while_open
    def counter_reset(self, name: str, value: int, strong: bool) -> Steps[None]:
        host = home_of("counter", name, self.hosts)
        if strong:
            yield from self.call(host, "counter", name, "reset", (value,))
            return
        self._cache.write(host, "counter", name, None, "reset", (value,), (value,))

    # ------------------------------------------------------------------ queue

    @_while_open
    def queue_put(self, name: str, item: object) -> Steps[None]:
        """Append ``item``; concurrent puts of this process share one call (``combiner``)."""
        yield from self._puts.write(home_of("queue", name, self.hosts), name, item)

    def _add_all(self, host: int, name: str, amounts: list[int]) -> Steps[list[int]]:
        """Strong counter ``name`` incremented by ``amounts`` in one call: the value each
        increment left, in order."""
        total = sum(amounts)
        value = yield from self.call_as(int, host, "counter", name, "add", (total,))
        left: list[int] = []
        running = value - total
        for amount in amounts:
            running += amount
            left.append(running)
        return left

    def _put_all(self, host: int, name: str, items: list[object]) -> Steps[list[None | Failed]]:
        """Queue ``name`` given ``items`` in one call, in order. If one of them cannot be
        pickled, each is sent alone, so that only its own put fails."""
        if len(items) == 1:
            yield from self.call(host, "queue", name, "put", (items[0],))
            return [None]
        try:
            request = _packed("queue", name, "put_many", (tuple(items),))
        except TypeError:
            answers: list[None | Failed] = []
            for item in items:
                try:
                    yield from self.call(host, "queue", name, "put", (item,))
                    answers.append(None)
                except Exception as exc:  # noqa: BLE001 - this put's own error, raised to its caller
                    answers.append(Failed(exc))
            return answers
        yield from self._request(host, f"sky.queue({name!r}).put", request, OP_TIMEOUT, False)
        return [None] * len(items)

    @_while_open
    def queue_get(self, name: str, timeout: float | None) -> Steps[tuple[bool, object]]:
        """``(True, item)``, or ``(False, None)`` when nothing came within ``timeout``
        seconds (None: wait as long as it takes)."""
        host = home_of("queue", name, self.hosts)
        deadline = _deadline(timeout)
        while True:
            wait = _slice(deadline)
            found = yield from self.call_as(tuple, host, "queue", name, "get", (wait,), wait + WAIT_GRACE, waiting=True)
            if found[0] or _passed(deadline):
                return found

    @_while_open
    def queue_size(self, name: str) -> Steps[int]:
        return (yield from self.call_as(int, home_of("queue", name, self.hosts), "queue", name, "size", ()))

    # ------------------------------------------------------------------ barrier

    @_while_open
    def barrier_join(self, name: str, parties: int, holder: str) -> Steps[None]:
        """Register ``holder`` as a participant (its death or failure breaks the barrier)."""
        host = home_of("barrier", name, self.hosts)
        yield from self.call(host, "barrier", name, "join", (holder, parties))
        self._keeper.hold(host, holder)

    @_while_open
    def barrier_wait(self, name: str, parties: int, timeout: float | None) -> Steps[int]:
        """Arrive and wait for the round to complete; returns the arrival index. Raises
        BrokenBarrierError if the round breaks or ``timeout`` passes (which breaks it)."""
        host = home_of("barrier", name, self.hosts)
        generation, index = yield from self.call_as(tuple, host, "barrier", name, "arrive", (parties,))
        deadline = _deadline(timeout)
        while True:
            wait = _slice(deadline)
            outcome = yield from self.call_as(
                str, host, "barrier", name, "await_round", (generation, wait), wait + WAIT_GRACE, waiting=True
            )
            if outcome == "done":
                return index
            if outcome.startswith("broken"):
                why = outcome.partition(": ")[2] or (
                    "a participant died, failed or timed out, or reset() was called"
                )
                raise BrokenBarrierError(f"sky.barrier({name!r}) broke while waiting: {why}")
            if _passed(deadline):
                yield from self.call(host, "barrier", name, "abandon", (generation,))
                raise BrokenBarrierError(
                    f"sky.barrier({name!r}).wait() timed out after {timeout:g}s with fewer than "
                    f"{parties} arrivals; the barrier is now broken for every waiter"
                )

    @_while_open
    def barrier_reset(self, name: str) -> Steps[None]:
        yield from self.call(home_of("barrier", name, self.hosts), "barrier", name, "reset", ())

    # ------------------------------------------------------------------ lock

    @_while_open
    def lock_acquire(self, name: str, holder: str, timeout: float | None) -> Steps[int]:
        """The hold's fencing token (positive) once ``holder`` owns the lock; 0 if
        ``timeout`` s passed first (None: no limit)."""
        host = home_of("lock", name, self.hosts)
        deadline = _deadline(timeout)
        while True:
            wait = _slice(deadline)
            token = yield from self.call_as(
                int, host, "lock", name, "acquire", (holder, wait), wait + WAIT_GRACE, waiting=True
            )
            if token:
                self._keeper.hold(host, holder)
                return token
            if _passed(deadline):
                return 0

    @_while_open
    def lock_release(self, name: str, holder: str) -> Steps[None]:
        """Let go, once every eventual write this node made before is applied by its owner
        (so the next holder's reads see them)."""
        for future in self._cache.sync():
            yield Wait(future, OP_TIMEOUT, f"sky.lock({name!r}).release waiting for earlier writes")
        yield from self.call(home_of("lock", name, self.hosts), "lock", name, "release", (holder,))

    @_while_open
    def lock_locked(self, name: str) -> Steps[bool]:
        return (yield from self.call_as(bool, home_of("lock", name, self.hosts), "lock", name, "locked", ()))


def _existing_hosts(name: str) -> HostsHandle:
    """The running hosts actor ``name``; CollectionUnavailableError if it is gone."""
    import ray

    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        raise CollectionUnavailableError(
            f"the actor holding the pool's collections ({name}) is gone (it died, or the pool is closing) "
            "and their state is lost; every collection stays unavailable until the pool is reopened"
        ) from None


def _wait_ready(handle: HostsHandle, name: str) -> None:
    import ray
    from ray.exceptions import GetTimeoutError

    try:
        ray.get(handle.__ray_ready__.remote(), timeout=OP_TIMEOUT)
    except GetTimeoutError:
        raise TimeoutError(
            f"the collections actor {name} did not start within {OP_TIMEOUT:g}s; the machine may "
            "be out of memory or processes"
        ) from None
    except Exception as exc:
        raise translated(exc) from None


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def _slice(deadline: float | None) -> float:
    if deadline is None:
        return WAIT_SLICE
    return max(0.0, min(WAIT_SLICE, deadline - time.monotonic()))


def _passed(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _check_picklable(collection: str, value: object) -> None:
    """Refuse, at once, a value an eventual write could not send later."""
    try:
        cloudpickle.dumps(value)
    except Exception as exc:
        raise TypeError(
            f"{collection}: the value {shown(value)} ({type(value).__name__}) cannot be pickled ({exc}); "
            "store something picklable"
        ) from None


def _dict_shard(name: str, op: str, key: Hashable, hosts: int) -> int:
    """The host owning key ``key`` of ``sky.dict(name)``; TypeError naming the
    collection, the operation, the key and the fix if the key cannot be pickled."""
    try:
        return shard_of(key, hosts)
    except Exception as exc:
        raise TypeError(
            f"sky.dict({name!r}).{op}(key={shown(key)}): the key ({type(key).__name__}) cannot be pickled "
            f"({type(exc).__name__}: {exc}); use a str, int, bytes or tuple key"
        ) from None


def _packed(kind: str, name: str, op: str, args: tuple[object, ...]) -> bytes:
    """The request bytes; TypeError naming the collection, the operation and the key or
    value that cannot be pickled."""
    try:
        return pack((kind, name, op, args))
    except Exception as exc:
        pairs = args[0] if op == "update" else None
        parts = list(pairs) if isinstance(pairs, list) else list(args)
        culprit = next((part for part in parts if not _picklable(part)), args)
        what = f"the key/value {shown(culprit)}" if kind == "dict" else f"the value {shown(culprit)}"
        raise TypeError(
            f"sky.{kind}({name!r}).{op}: {what} ({type(culprit).__name__}) cannot be pickled "
            f"({type(exc).__name__}: {exc}); store something picklable"
        ) from None


def _int(what: str, value: object) -> int:
    """``value``, an int; TypeError naming ``what`` and ``value`` otherwise."""
    if not isinstance(value, int):
        raise TypeError(f"{what}: expected an int, got {shown(value)} ({type(value).__name__})")
    return value


def _picklable(value: object) -> bool:
    try:
        cloudpickle.dumps(value)
        return True
    except Exception:
        return False
