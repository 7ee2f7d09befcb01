"""The node-local cache behind eventual collections.

One ``NodeCache`` per process and pool (a node agent, or the client); executor children
use their agent's through the bridge, so a node has one cache. For every entity it has
touched, a ``Replica`` keeps:

- ``confirmed``: the owner's value of each slot it read or wrote, with the owner's
  version (a later version always wins, whatever order answers arrive in);
- ``pending``: this process's writes not yet acknowledged by the owner, per slot;
- ``view``: ``confirmed`` with ``pending`` applied on top: what reads return, in-process,
  without waiting (read-your-writes: a node sees its own writes at once).

Writes go to a per-host ``_Link`` and are sent in batches (one ``exchange`` call in
flight per host; writes made meanwhile join the next batch, and consecutive counter
increments merge into one). The host applies a batch in order and answers with the new
values of the slots it touched and the last sequence number applied. A long poll per
host (``poll``) brings the values of watched slots other nodes changed. So, once writes
stop, every node's view equals the owner's within one batch round trip plus one poll
round trip (plus ``POLL_LINGER``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from skyward.collections.actors import WAIT_GROUP
from skyward.collections.config import OP_TIMEOUT, SYNC
from skyward.collections.markers import MISSING, NO_SLOT, UNKNOWN, Marker
from skyward.collections.remote import Exchanged, HostHandle, Snapshot, WireOp
from skyward.collections.steps import Steps, Wait, run_async, sent_again
from skyward.core.loop_thread import LoopThread

POLL_WAIT = 2.0
POLL_LINGER = 0.005


Write = tuple[Hashable, str, tuple[object, ...], tuple[object, ...]]
"""(slot, op, args, wire_args) of one write: ``args`` fold into the view, ``wire_args``
go to the owner."""


def _fold_dict(current: object, op: str, args: tuple[object, ...]) -> object:
    return args[0] if op == "set" else MISSING


def _fold_set(current: object, op: str, args: tuple[object, ...]) -> object:
    return op == "add"


def _fold_counter(current: object, op: str, args: tuple[object, ...]) -> object:
    if op == "reset":
        return args[0]
    return UNKNOWN if current is UNKNOWN else _count(current) + _count(args[0])


def _count(value: object) -> int:
    """A counter's value or amount; TypeError naming ``value`` for anything but an int."""
    if not isinstance(value, int):
        raise TypeError(f"a sky.counter holds ints, not {type(value).__name__} {value!r}")
    return value


FOLDS: dict[str, Callable[[object, str, tuple[object, ...]], object]] = {
    "dict": _fold_dict,
    "set": _fold_set,
    "counter": _fold_counter,
}


class Replica:
    """This process's copy of one entity (see the module docstring)."""

    __slots__ = ("kind", "name", "view", "confirmed", "pending", "read_at", "_fold")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        self.view: dict[Hashable, object] = {}
        self.confirmed: dict[Hashable, tuple[object, int]] = {}
        self.pending: dict[Hashable, deque[_Pending]] = {}
        self.read_at: dict[Hashable, int] = {}
        """The results epoch (``NodeCache.results_arrived``) of each slot's last read from its owner."""
        self._fold = FOLDS[kind]

    def apply_local(self, slot: Hashable, op: str, args: tuple[object, ...]) -> object:
        """Put a local write on top of the view; returns the slot's new view value."""
        value = self._fold(self.view.get(slot, UNKNOWN), op, args)
        self._show(slot, value)
        return value

    def confirm(self, slot: Hashable, value: object, version: int) -> bool:
        """Record the owner's ``value`` at ``version``; False if older than what is known."""
        known = self.confirmed.get(slot)
        if known is not None and known[1] >= version:
            return False
        self.confirmed[slot] = (value, version)
        return True

    def refresh(self, slot: Hashable) -> None:
        """Recompute the view of ``slot`` from confirmed and pending."""
        known = self.confirmed.get(slot)
        value = UNKNOWN if known is None else known[0]
        for write in self.pending.get(slot, ()):
            value = self._fold(value, write.op, write.args)
        self._show(slot, value)

    def _show(self, slot: Hashable, value: object) -> None:
        if value is UNKNOWN:
            self.view.pop(slot, None)
        else:
            self.view[slot] = value


@dataclass(slots=True, eq=False)
class _Pending:
    """One operation on its way to a host: a write (``local`` True: it is in the
    replica's pending writes) or a request whose answer someone waits for."""

    replica: Replica | None
    slot: Hashable
    op: str
    args: tuple[object, ...]
    wire_args: tuple[object, ...]
    local: bool
    future: concurrent.futures.Future[object] | None = None
    seq: int = -1


@dataclass(slots=True, eq=False)
class _Link:
    """What this process has going on with one host."""

    index: int
    handle: HostHandle
    replicas: dict[tuple[str, str], Replica] = field(default_factory=dict)
    unsent: list[_Pending] = field(default_factory=list)
    inflight: deque[_Pending] = field(default_factory=deque)
    next_seq: int = 0
    acked: int = -1
    flushing: bool = False
    polling: bool = False
    error: BaseException | None = None


class NodeCache:
    """The eventual-consistency cache of one process for one pool."""

    def __init__(self, loop: LoopThread, handle: Callable[[int], HostHandle], subscriber: str) -> None:
        self.subscriber = subscriber
        self._loop = loop
        self._handle = handle
        self._lock = threading.Lock()
        self._links: dict[int, _Link] = {}
        self._replicas: dict[tuple[int, str, str], Replica] = {}
        self._epoch = 0
        """How many times results came back from tasks (``results_arrived``)."""
        self._lost: list[str] = []
        """What each broken link dropped of this process's writes, in order (``lost_since``)."""

    # ------------------------------------------------------------------ user threads

    def lookup(self, host: int, kind: str, name: str, slot: Hashable) -> object:
        """The cached value of ``slot``, or UNKNOWN (never waits)."""
        replica = self._replicas.get((host, kind, name))
        if replica is None:
            return UNKNOWN
        return replica.view.get(slot, UNKNOWN)

    def read(self, host: int, kind: str, name: str, slot: Hashable, fresh: bool = False) -> Steps[object]:
        """The cached value of ``slot``; on a miss, when ``fresh``, or on the first read
        since a task's result came back (``results_arrived``), fetched from the owner
        after this process's earlier operations (and watched from then on)."""
        epoch = self._epoch
        replica = self._replicas.get((host, kind, name))
        fresh = fresh or (epoch > 0 and (replica is None or replica.read_at.get(slot, 0) < epoch))
        value = UNKNOWN if fresh else self.lookup(host, kind, name, slot)
        if value is UNKNOWN:
            fetched = yield Wait(self.request(host, kind, name, slot, "read", (slot,)), OP_TIMEOUT, f"reading {kind} {name!r}")
            value = self.lookup(host, kind, name, slot)
            if value is UNKNOWN:
                value = fetched
            replica = self._replicas.get((host, kind, name))
            if replica is not None:
                replica.read_at[slot] = epoch
        return value

    def results_arrived(self) -> None:
        """A task's result came back to this process: the task's eventual writes were
        applied by their owners before it (``LocalOperations.settle_writes`` on its node),
        so each slot's next read here asks its owner once (acquire, after the task's
        release)."""
        self._epoch += 1

    def write(
        self, host: int, kind: str, name: str, slot: Hashable, op: str, args: tuple[object, ...],
        wire_args: tuple[object, ...],
    ) -> object:
        """Apply a write to this process's view and send it without waiting; returns the
        slot's new view value (UNKNOWN if not known yet)."""
        return self.write_many(host, kind, name, [(slot, op, args, wire_args)])[-1]

    def write_many(self, host: int, kind: str, name: str, writes: list[Write]) -> list[object]:
        """Apply ``(slot, op, args, wire_args)`` writes to this process's view as one step
        and send them in one batch (the owner applies a batch as one step too); returns
        each slot's new view value."""
        values = []
        with self._lock:
            link = self._link(host)
            replica = self._replica(link, kind, name)
            for slot, op, args, wire_args in writes:
                if not self._merge_increment(link, replica, slot, op, args):
                    write = _Pending(replica, slot, op, args, wire_args, True)
                    replica.pending.setdefault(slot, deque()).append(write)
                    link.unsent.append(write)
                values.append(replica.apply_local(slot, op, args))
            start = self._claim_flush(link)
        if start:
            self._loop.call_soon(self._start_flush, link)
        return values

    def request(
        self, host: int, kind: str, name: str, slot: Hashable, op: str, wire_args: tuple[object, ...]
    ) -> concurrent.futures.Future[object]:
        """Send an operation whose answer the caller needs (after this process's earlier
        operations on that host); returns a Future of its result."""
        future: concurrent.futures.Future[object] = concurrent.futures.Future()
        with self._lock:
            link = self._link(host)
            replica = self._replica(link, kind, name)
            link.unsent.append(_Pending(replica, slot, op, (), wire_args, False, future))
            start = self._claim_flush(link)
        if start:
            self._loop.call_soon(self._start_flush, link)
        return future

    def sync(self) -> list[concurrent.futures.Future[object]]:
        """Futures that resolve once every host has applied this process's operations
        sent so far (only hosts with operations still on their way are asked)."""
        futures = []
        with self._lock:
            for link in self._links.values():
                if link.error is None and (link.unsent or link.inflight):
                    future: concurrent.futures.Future[object] = concurrent.futures.Future()
                    link.unsent.append(_Pending(None, NO_SLOT, SYNC, (), (), False, future))
                    futures.append(future)
                    if self._claim_flush(link):
                        self._loop.call_soon(self._start_flush, link)
        return futures

    def losses(self) -> int:
        """How many times a broken link has dropped writes of this process so far: a
        mark for ``lost_since``."""
        with self._lock:
            return len(self._lost)

    def lost_since(self, mark: int) -> list[str]:
        """What broken links dropped of this process's writes since ``losses`` returned
        ``mark``: one line per link ("3 writes to sky.counter('hits'), dropped as ...")."""
        with self._lock:
            return self._lost[mark:]

    def absorb(self, snapshots: dict[int, list[Snapshot]]) -> None:
        """Take in owner snapshots obtained outside the links (a multi-shard update)."""
        with self._lock:
            for host, items in snapshots.items():
                self._absorb(self._link(host), items, -1)

    # ------------------------------------------------------------------ internals

    def _link(self, host: int) -> _Link:
        link = self._links.get(host)
        if link is None:
            link = self._links[host] = _Link(host, self._handle(host))
        if link.error is not None:
            raise link.error
        return link

    def _replica(self, link: _Link, kind: str, name: str) -> Replica:
        replica = link.replicas.get((kind, name))
        if replica is None:
            replica = link.replicas[(kind, name)] = Replica(kind, name)
            self._replicas[(link.index, kind, name)] = replica
        return replica

    def _merge_increment(self, link: _Link, replica: Replica, slot: Hashable, op: str, args: tuple[object, ...]) -> bool:
        """Fold a counter increment into the unsent increment just before it, if any."""
        if op != "add" or replica.kind != "counter" or not link.unsent:
            return False
        last = link.unsent[-1]
        if last.replica is not replica or last.op != "add" or not last.local:
            return False
        last.args = last.wire_args = (_count(last.args[0]) + _count(args[0]),)
        return True

    def _claim_flush(self, link: _Link) -> bool:
        if link.flushing:
            return False
        link.flushing = True
        return True

    def _start_flush(self, link: _Link) -> None:
        asyncio.ensure_future(self._flush(link))

    async def _flush(self, link: _Link) -> None:
        try:
            while True:
                with self._lock:
                    batch, link.unsent = link.unsent, []
                    if not batch:
                        link.flushing = False
                        return
                    first = link.next_seq
                    for offset, operation in enumerate(batch):
                        operation.seq = first + offset
                    link.next_seq += len(batch)
                    link.inflight.extend(batch)
                ops: list[WireOp] = [
                    (SYNC, "", SYNC, (), NO_SLOT) if p.replica is None else (p.replica.kind, p.replica.name, p.op, p.wire_args, p.slot)
                    for p in batch
                ]
                try:
                    outcomes, snapshots, acked = await self._exchanged(link, first, ops)
                except Exception as exc:
                    self._break(link, exc)
                    return
                with self._lock:
                    self._absorb(link, snapshots, acked)
                    start_polling = not link.polling
                    link.polling = True
                for operation, (ok, value) in zip(batch, outcomes):
                    if operation.future is not None:
                        if ok:
                            operation.future.set_result(value)
                        else:
                            operation.future.set_exception(_error(value))
                if start_polling:
                    asyncio.ensure_future(self._poll(link))
        except BaseException:
            with self._lock:
                link.flushing = False
            raise

    async def _exchanged(self, link: _Link, first: int, ops: list[WireOp]) -> Exchanged:
        """The host's answer to ``ops`` (sequence numbers ``first`` on), sent again while
        the host cannot be reached (``sent_again``, for ``OP_TIMEOUT``): the host applies
        each operation once whichever copy comes first, so a partition delays this
        process's writes and loses none. Raises what the last attempt did."""
        what = f"a batch of {len(ops)} collection operations"

        def send(left: float) -> Steps[Exchanged]:
            until = time.monotonic() + left
            answer = yield Wait(link.handle.exchange.remote(self.subscriber, first, ops), left, what)
            if isinstance(answer, Marker):  # BUSY: keys held by a prepared update
                waiting = link.handle.exchange_waiting.options(concurrency_group=WAIT_GROUP)
                answer = yield Wait(waiting.remote(self.subscriber, first, ops), max(0.0, until - time.monotonic()), what)
            return answer

        return await run_async(sent_again(send, OP_TIMEOUT, what))

    async def _poll(self, link: _Link) -> None:
        """Take in what the host says changed, one long poll after another; a host that
        cannot be reached is asked again (``sent_again``) for ``OP_TIMEOUT``, then the
        link breaks. A poll a busy host has not answered within ``OP_TIMEOUT`` is sent
        again: the batches, not the polls, decide when a host is taken for gone."""
        poll = link.handle.poll.options(concurrency_group=WAIT_GROUP)

        def ask(left: float) -> Steps[tuple[list[Snapshot], int]]:
            return (yield Wait(poll.remote(self.subscriber, POLL_WAIT), left, "a poll for changes"))

        while True:
            try:
                snapshots, acked = await run_async(sent_again(ask, OP_TIMEOUT, "a poll for changes"))
            except TimeoutError:
                continue
            except Exception as exc:
                self._break(link, exc)
                return
            with self._lock:
                self._absorb(link, snapshots, acked)
            await asyncio.sleep(POLL_LINGER)

    def _absorb(self, link: _Link, snapshots: list[Snapshot], acked: int) -> None:
        """Apply owner snapshots, then drop the writes the owner has applied (up to
        ``acked``), and refresh the views of every slot involved. Holds the lock."""
        touched: set[tuple[Replica, Hashable]] = set()
        for kind, name, slot, value, version in snapshots:
            replica = self._replica(link, kind, name)
            if replica.confirm(slot, value, version):
                touched.add((replica, slot))
        if acked > link.acked:
            link.acked = acked
            while link.inflight and link.inflight[0].seq <= acked:
                operation = link.inflight.popleft()
                if operation.local and operation.replica is not None:
                    self._drop_pending(operation.replica, operation)
                    touched.add((operation.replica, operation.slot))
        for replica, slot in touched:
            replica.refresh(slot)

    def _drop_pending(self, replica: Replica, operation: _Pending) -> None:
        writes = replica.pending[operation.slot]
        if writes[0] is operation:
            writes.popleft()
        else:
            writes.remove(operation)
        if not writes:
            del replica.pending[operation.slot]

    def _break(self, link: _Link, error: BaseException) -> None:
        """The host is unreachable: fail what waits, forget the link's replicas, and
        record the writes dropped (``lost_since``)."""
        with self._lock:
            link.error = error
            link.flushing = False
            waiting = [*link.inflight, *link.unsent]
            dropped = [operation.replica for operation in waiting if operation.local and operation.replica]
            if dropped:
                names = ", ".join(sorted({f"sky.{replica.kind}({replica.name!r})" for replica in dropped}))
                why = str(error).strip().splitlines()[0] if str(error).strip() else "no message"
                self._lost.append(
                    f"{len(dropped)} write{'s' if len(dropped) > 1 else ''} to {names}, dropped as the link "
                    f"to their host failed ({type(error).__name__}: {why})"
                )
            link.inflight.clear()
            link.unsent.clear()
            for key in link.replicas:
                self._replicas.pop((link.index, *key), None)
        for operation in waiting:
            if operation.future is not None and not operation.future.done():
                operation.future.set_exception(error)


def _error(value: object) -> BaseException:
    """The exception in a failed outcome; TypeError naming ``value`` if it is none."""
    if not isinstance(value, BaseException):
        return TypeError(f"a collection host reported a failure without an exception: {value!r}")
    return value
