"""The client's dispatch engine, the same for every provider: slots per node, timeouts,
requests to node agents through a ``Transport``, and their outcomes (or the transport's
failures) turned into results and clear exceptions.

Every coroutine here runs on the pool's event loop thread; ``run_now`` runs on the
caller's thread. One attempt of a request on a node is written once, as steps
(``_attempt``: send the request, hand the reply's output to the listeners, turn the
reply or the failure into the outcome); the loop's coroutines drive those steps with the
transport's ``call``, and ``run_now`` drives them on the caller's thread with
``call_now``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Never, Protocol, TypeAlias, TypeVar

from msgspec import Struct, structs

from skyward.core.errors import NodeCrashedError, PoolClosedError
from skyward.core.function import PendingFunction
from skyward.core.instance import MembershipView
from skyward.core.validation import wait_limit
from skyward.engine.retry import Interrupted, exhausted
from skyward.engine.scheduler import ALL, SlotScheduler
from skyward.engine.shipping import Shipment, ShippedFunctionMissing, ShippedFunctions
from skyward.engine.transport import Disconnected, NodeLost, NoReply, Shared, Transport, TransportError
from skyward.engine.views import ViewTracker
from skyward.engine.window import ChunkWindow
from skyward.engine.wire import CALL, MAP, PROBE, Payload, TaskFailure, TaskRequest, decode, describe_unpicklable
from skyward.model.spec import Worker
from skyward.observe.events import BroadcastStarted, Error, Event, InstanceReplaced, TaskCompleted, TaskStarted

BACKSTOP_GRACE = 60.0
CALL_GRACE = 0.1
"""How long past a call's deadline the client waits for the agent's own TimeoutError:
a task blocked in a C call cannot be interrupted, so the client gives up on it here."""


class Again:
    """What ``run_now`` returns when the call must go through ``run`` instead: no slot
    was free right now, the transport cannot wait on the caller's thread, or its node
    was lost under it (``lost``: the attempts already lost, for ``run(lost=...)``)."""

    __slots__ = ("lost",)

    def __init__(self, lost: int) -> None:
        self.lost = lost


NOT_NOW = Again(0)


class _Send(Struct, frozen=True):
    """A step of an attempt: send ``payload`` to ``node``, waiting at most ``limit``
    seconds; it is resumed with the reply, or whatever the wait raised thrown into it."""

    node: int
    payload: Payload | Shared
    limit: float | None


class _Deliver(Struct, frozen=True):
    """A step of an attempt: tell the listeners that a reply carried ``events`` pieces of
    task output (which may block)."""

    node: int
    events: int


class _Done(Struct, frozen=True):
    """An attempt ended with ``value`` (what the task returned)."""

    value: Any


_Attempt: TypeAlias = "Generator[_Send | _Deliver, Payload | None, Any]"
"""One attempt of a request on a node (``Driver._attempt``); it returns what the task
returned."""


def _advance(steps: _Attempt, answer: Payload | None, failure: BaseException | None) -> _Send | _Deliver | _Done:
    """Resume ``steps`` with ``answer``, or with ``failure`` thrown into them; their next
    step, or ``_Done``. What the steps raise is raised."""
    try:
        return steps.throw(failure) if failure is not None else steps.send(answer)
    except StopIteration as done:
        return _Done(done.value)
CHUNKS_PER_SLOT = 2
SMALLEST_CHUNK_SHARE = 8
"""No chunk of a map gets fewer items than this share of its first chunks' (1/8): the
guided tail's imbalance stays within about 1/16 of a slot's part of the map, and a map
over many slots is not cut into more than about 6 chunks a slot. A chunk's pace, the
other floor, is its round trip, which grows with the chunks queued behind the client's
when many slots are fed at once, so it alone let 1,000 slots' map of trivial items end
in chunks of 3 items, 12 chunks a slot (N-map, docs/benchmarks.md)."""
MIN_CHUNK_SECONDS = 0.005
"""Once a map's first chunks have come back, no chunk is given less work than this (by
their pace): a chunk's round trip costs a few hundred microseconds, so a tail of
single trivial items would cost more than their work, while a tail of this much work
still lets every slot finish within it of the others."""
STREAM_CHUNK_BYTES = 4 << 20
"""A streamed map sizes its chunks so each one's results are about this big."""
Emit = Callable[[Event], None]
R = TypeVar("R")
"""What the function of a call returns (a map: of each item's call)."""


class Encoder(Protocol):
    """Turns a request into the bytes a node agent decodes (``wire.encode`` or a
    remote pool's by-value encoder); with a ``shipment``, functions its node holds
    travel as a reference (``engine.shipping``)."""

    def __call__(self, obj: TaskRequest, shipment: Shipment | None = None) -> Payload: ...


class PoolDriver:
    """Dispatches work to one agent per node through a ``SlotScheduler``, over a node
    set that may change (see ``engine.membership``): a request whose node is lost to
    the infrastructure runs again, up to ``retries`` times (see ``engine.retry``)."""

    def __init__(
        self,
        transport: Transport[Never],
        encode: Encoder,
        worker: Worker,
        default_timeout: float,
        emit: Emit,
        wants: Callable[[type], bool],
        output_delivered: Callable[[int, int], None],
        loop: asyncio.AbstractEventLoop,
        ranks: Iterable[int] | int,
        retries: int = 0,
        ceiling: int = 0,
        results_arrived: Callable[[], None] = lambda: None,
    ) -> None:
        self._transport = transport
        self._results_arrived = results_arrived
        """Told when a task's answer came back (its eventual writes are applied by then):
        the client's collections then read their owners afresh (``ClientCollections``)."""
        self._encode_payload = encode
        self._slots = worker.slots
        self._queues_on_node = worker.buffer > 0
        self._default_timeout = default_timeout
        self._emit = emit
        self._wants = wants
        self._output_delivered = output_delivered
        self.scheduler = SlotScheduler(ranks, worker.slots, loop)
        self.views = ViewTracker()
        self._shipped = ShippedFunctions()
        self._retries = retries
        self._ceiling = ceiling
        self._ids = itertools.count()
        self.closing = False

    @property
    def nodes(self) -> int:
        """How many nodes take work now."""
        return len(self.scheduler.ranks())

    @property
    def capacity(self) -> int:
        """Task slots a map plans for: those of the nodes present, or of the most nodes
        the pool may grow to when that is more."""
        return max(self.nodes, self._ceiling, 1) * self._slots

    def forget(self, node: int) -> None:
        """``node``'s agent is new, or gone: it has seen no membership view and holds no
        function shipped to it."""
        self.views.forget(node)
        self._shipped.forget(node)

    def close(self) -> None:
        """Refuse new work; work in flight ends with PoolClosedError if its node goes away."""
        self.closing = True

    def busy(self) -> int:
        """Task slots in use right now."""
        return self.scheduler.busy()

    def target_node(self, target: object) -> int | None:
        """Validate ``pool.run(target=...)``: None, "head" or a rank; ValueError otherwise."""
        if target is None:
            return None
        if target == "head":
            return 0
        if isinstance(target, int) and not isinstance(target, bool) and target >= 0 and self.scheduler.known(target):
            return target
        raise ValueError(
            f"target={target!r} is not valid: use None (any node), \"head\" or the rank of a node the pool "
            f"has ({_ranks_text(self.scheduler.ranks())})"
        )

    def _request(
        self, pending: PendingFunction[object], kind: str = CALL, chunk: list[object] | None = None,
        view: MembershipView | None = None,
    ) -> TaskRequest:
        timeout = wait_limit(pending.timeout if pending.timeout is not None else self._default_timeout)
        args: tuple[object, ...] = (chunk,) if kind == MAP else pending.args
        kwargs = {} if kind == MAP else pending.kwargs
        return TaskRequest(f"t{next(self._ids)}", pending.name, pending.callable, args, kwargs, timeout, kind, view)

    def run_now(self, pending: PendingFunction[R], target: object = None) -> R | Again:
        """Run on one node from the calling thread, without the event loop, if a slot is
        free right now and the transport can wait here; returns an ``Again`` otherwise
        (then use ``run``)."""
        self._check_open()
        if not self._transport.can_call_now:
            return NOT_NOW
        node = self.scheduler.try_acquire(self.target_node(target))
        if node is None:
            return NOT_NOW
        try:
            request = self._request(pending, view=self.views.pending(node))
            try:
                result: R = self._now(self._attempt(node, self._encode(request, node), request))
                return result
            except Interrupted as exc:
                if self._retries < 1:
                    raise exhausted(exc, request.name, 1, "") from None
                return Again(1)
        finally:
            self.scheduler.release(node)

    async def run(self, pending: PendingFunction[R], target: object = None, lost: int = 0) -> R:
        """Run on one node (round-robin over free slots, or the pinned target); ``lost``
        attempts were already lost to the infrastructure."""
        self._check_open()
        want = self.target_node(target)
        while True:
            node = await self.scheduler.acquire(want)
            try:
                request = self._request(pending, view=self.views.pending(node))
                result: R = await self._execute(self._attempt(node, self._encode(request, node), request))
                return result
            except Interrupted as exc:
                lost += 1
                if lost > self._retries:
                    raise exhausted(exc, request.name, lost, "") from None
            finally:
                self.scheduler.release(node)

    async def probe(self, pending: PendingFunction[R], node: int) -> R:
        """Run a health check on ``node`` beside its tasks (no slot is taken); its
        outcome, or the error that stands for it."""
        request = self._request(pending, PROBE, view=self.views.pending(node))
        try:
            reply = await self._transport.call(node, self._encode(request), self._wait_limit(request))
        except TransportError as exc:
            raise RuntimeError(f"node {node} gave no answer to its health check: {exc.detail}") from None
        ok, value, _ = decode(reply)
        self.views.acknowledge(node, request.view)
        if ok:
            result: R = value
            return result
        raise value.to_exception(request.name)

    async def broadcast(self, pending: PendingFunction[R]) -> list[R]:
        """Run on every node present when it starts, at once; the request is encoded and
        stored once for all. A node lost under it runs it again on its replacement."""
        self._check_open()
        nodes = await self.scheduler.acquire(ALL)
        held = set(nodes)
        request = self._request(pending, view=self.views.current)
        if self._wants(BroadcastStarted):
            self._emit(BroadcastStarted(request.task_id, request.name, tuple(nodes)))

        async def one(node: int, shared: Shared) -> R:
            lost = 0
            try:
                while True:
                    try:
                        result: R = await self._execute(self._attempt(node, shared, request))
                        return result
                    except Interrupted as exc:
                        lost += 1
                        if lost > self._retries:
                            raise exhausted(exc, request.name, lost, "") from None
                    held.discard(node)
                    self.scheduler.release(node)
                    await self.scheduler.acquire(node)  # its replacement
                    held.add(node)
            finally:
                if node in held:
                    held.discard(node)
                    self.scheduler.release(node)

        shared: Shared | None = None
        try:
            shared = await self._transport.share(self._encode(request))
            outcomes = await asyncio.gather(*(one(node, shared) for node in nodes), return_exceptions=True)
        finally:
            if shared is not None:
                self._transport.unshare(shared)
            if held:
                self.scheduler.release(list(held))
        failures = [(node, out) for node, out in zip(nodes, outcomes) if isinstance(out, BaseException)]
        if failures:
            node, first = failures[0]
            if len(failures) > 1 and not isinstance(first, asyncio.CancelledError):
                first.add_note(f"{len(failures)} of {len(nodes)} nodes failed; this is node {node}'s error")
            raise first
        return [out for out in outcomes if not isinstance(out, BaseException)]

    async def map(
        self,
        fn: PendingFunction[R],
        items: Sequence[object],
        on_chunk: Callable[[int, list[R]], None] | None = None,
        window: ChunkWindow | None = None,
    ) -> list[R]:
        """Apply ``fn`` to every item, in chunks sized from what is left (guided
        scheduling: big chunks first, smaller ones at the end, none under the floors of
        ``SMALLEST_CHUNK_SHARE`` and ``MIN_CHUNK_SECONDS``); results in input order.
        A chunk whose node is lost runs again elsewhere; finished chunks are kept.

        Streaming (``on_chunk`` given): ``on_chunk(start, values)`` is called as each
        chunk's results arrive and nothing is kept here (the list returned is empty); a
        chunk is sent only once ``window`` has a free place, and chunks are sized so that
        their results are about ``STREAM_CHUNK_BYTES``, so memory stays bounded by what
        is in flight. On a failure the error raised gets ``partial_results`` (item index
        to result, every item finished and not handed to ``on_chunk``) and
        ``failed_item`` (the index of the item that failed, or None)."""
        self._check_open()
        streaming = on_chunk is not None
        finished: dict[int, list[R]] = {}  # the results of each chunk done, by its first item
        position = 0
        feeders = self.capacity
        measured = _PerItem()  # result bytes
        pace = _PerItem()  # seconds

        def claim() -> tuple[int, int]:
            """The next chunk of items, sized from what is left (claimed before waiting
            for a slot, so a waiting feeder stands for real work)."""
            nonlocal position
            share = CHUNKS_PER_SLOT * self.capacity
            size = max(math.ceil((len(items) - position) / share), math.ceil(len(items) / (share * SMALLEST_CHUNK_SHARE)))
            size = max(size, pace.items_for(MIN_CHUNK_SECONDS))
            if streaming:
                size = min(size, measured.items_for(STREAM_CHUNK_BYTES))
            start, position = position, min(len(items), position + size)
            return start, position

        async def feed() -> None:
            while position < len(items):
                if window is not None:
                    await window.reserve()
                delivered = False
                try:
                    if position >= len(items):
                        return
                    start, end = claim()
                    began = time.monotonic()
                    values = await self._chunk(fn, items, start, end, measured)
                    pace.add(time.monotonic() - began, end - start)
                    if on_chunk is not None:
                        delivered = True
                        on_chunk(start, values)
                    else:
                        finished[start] = values
                finally:
                    if window is not None and not delivered:
                        window.release()

        tasks = [asyncio.ensure_future(feed()) for _ in range(min(feeders, len(items)))]
        try:
            await asyncio.gather(*tasks)
        except Exception as exc:
            _attach_partial(exc, finished)
            raise
        finally:
            for task in tasks:
                task.cancel()
        return [value for start in sorted(finished) for value in finished[start]]

    async def _chunk(
        self, fn: PendingFunction[R], items: Sequence[object], start: int, end: int, measured: _PerItem
    ) -> list[R]:
        """The results of items ``start..end-1``, run again on another node each time the
        node running them is lost (up to ``retries`` times)."""
        lost = 0
        while True:
            node = await self.scheduler.acquire(None)
            try:
                request = self._request(fn, MAP, list(items[start:end]), self.views.pending(node))
                results: list[R] = await self._execute(
                    self._attempt(node, self._encode(request, node), request, start, measured.add)
                )
                return results
            except Interrupted as exc:
                lost += 1
                if lost > self._retries:
                    raise exhausted(exc, f"map({request.name})", lost, f" (items {start}-{end - 1})") from None
            finally:
                self.scheduler.release(node)

    async def _execute(self, steps: _Attempt) -> Any:  # the value the task returned, as the agent pickled it
        """The outcome of an attempt (``_attempt``), driven on the loop with the
        transport's ``call``."""
        step = _advance(steps, None, None)
        while not isinstance(step, _Done):
            answer: Payload | None = None
            failure: BaseException | None = None  # thrown into the steps: they report it, then raise what stands for it
            try:
                if isinstance(step, _Deliver):
                    loop = asyncio.get_running_loop()
                    await loop.run_in_executor(None, self._output_delivered, step.node, step.events)
                else:
                    answer = await self._transport.call(step.node, step.payload, step.limit)
            except BaseException as exc:  # noqa: BLE001 - thrown into the steps (a cancel included)
                failure = exc
            step = _advance(steps, answer, failure)
        return step.value

    def _now(self, steps: _Attempt) -> Any:
        """The outcome of an attempt (``_attempt``), driven on this thread with the
        transport's ``call_now``."""
        step = _advance(steps, None, None)
        while not isinstance(step, _Done):
            answer: Payload | None = None
            failure: BaseException | None = None
            try:
                if isinstance(step, _Deliver):
                    self._output_delivered(step.node, step.events)
                else:
                    assert not isinstance(step.payload, Shared), "a call on the caller's thread sends its own payload"
                    answer = self._transport.call_now(step.node, step.payload, step.limit)
            except BaseException as exc:  # noqa: BLE001 - thrown into the steps (an interrupt included)
                failure = exc
            step = _advance(steps, answer, failure)
        return step.value

    def _attempt(
        self,
        node: int,
        payload: Payload | Shared,
        request: TaskRequest,
        offset: int = 0,
        measure: Callable[[int, int], None] | None = None,
    ) -> _Attempt:
        """One attempt of ``request`` on ``node`` (``offset``: the index of a map chunk's
        first item); ``measure(reply_bytes, items)`` learns the size of a chunk's reply.
        Its outcome: what the task returned, or its failure raised; ``Interrupted`` when
        the node was lost to the infrastructure under it."""
        started = self._started(node, request)
        error: BaseException | None = None
        try:
            try:
                reply = yield _Send(node, payload, self._wait_limit(request))
                assert reply is not None
                ok, value, events = decode(reply)
                if not ok and value.type_name == ShippedFunctionMissing.__qualname__:
                    self._shipped.forget(node)  # its agent is not the one that was sent the function
                    reply = yield _Send(node, self._encode(request, node), self._wait_limit(request))
                    assert reply is not None
                    ok, value, events = decode(reply)
            except TransportError as exc:
                raise self._transport_failure(exc, request, offset) from None
            if measure is not None:
                measure(_payload_bytes(reply), len(request.chunk))
            self._results_arrived()
            self.views.acknowledge(node, request.view)
            if events:
                yield _Deliver(node, events)
            return self._outcome(ok, value, request, offset)
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._completed(node, request, started, error)

    def _outcome(self, ok: bool, value: Any, request: TaskRequest, offset: int) -> Any:
        """``value`` (what the task returned) when ``ok``, else its ``TaskFailure`` raised."""
        if ok:
            return value
        raise self._failure(value, request, offset)

    def _started(self, node: int, request: TaskRequest) -> float:
        if self._wants(TaskStarted):
            self._emit(TaskStarted(request.task_id, request.name, node, _items(request)))
        return time.monotonic()

    def _completed(self, node: int, request: TaskRequest, started: float, error: BaseException | None) -> None:
        if self._wants(TaskCompleted):
            failed = None if error is None else f"{type(error).__name__}: {error}"
            cancelled = isinstance(error, (asyncio.CancelledError, KeyboardInterrupt))
            self._emit(TaskCompleted(
                request.task_id, request.name, node, time.monotonic() - started, failed, _items(request),
                cancelled=cancelled,
            ))

    def _wait_limit(self, request: TaskRequest) -> float | None:
        """How long to wait for an agent's answer. A call starts running as soon as it
        arrives (unless the node buffers), so its own timeout plus a grace applies;
        otherwise the agent enforces deadlines and this only guards against a hung agent.
        None (no limit) for a request without a timeout."""
        if request.timeout is None:
            return None
        if request.kind == PROBE or (request.kind == CALL and not self._queues_on_node):
            return request.timeout + CALL_GRACE
        items = len(request.chunk) if request.kind == MAP else 1
        return request.timeout * items * (1 + self._slots) + BACKSTOP_GRACE

    def _transport_failure(self, exc: TransportError, request: TaskRequest, offset: int) -> BaseException:
        """The error to raise for a failure of the way to the node rather than of the task
        (``offset``: the index of a map chunk's first item); ``Interrupted`` when the
        node was lost to the infrastructure (the caller may run it again)."""
        node = exc.node
        if isinstance(exc, NoReply):
            if request.kind == CALL and not self._queues_on_node:
                return TimeoutError(
                    f"{request.name} did not finish within its timeout of {request.timeout:g}s on node {node}"
                )
            return TimeoutError(
                f"node {node} gave no answer for {request.name} within {self._wait_limit(request):g}s "
                "(its agent is unresponsive)"
            )
        if isinstance(exc, NodeLost):
            if self.closing:
                return PoolClosedError(f"the pool closed while {request.name} was running")
            self.forget(node)
            item = offset if request.kind == MAP else None
            if node in self.scheduler.ranks() and self._wants(InstanceReplaced):
                # the node stays: its agent process died and is being restarted in place
                self._emit(InstanceReplaced(node, f"agent died while running {request.name}"))
            if not exc.by_task:
                return Interrupted(node, exc.detail, item)
            where = "" if item is None else (
                f" (items {offset}-{offset + len(request.chunk) - 1} of the map were running there; "
                f"item {item} is the first unfinished)"
            )
            return self._crashed(
                f"node {node}'s agent process died while running {request.name}{where}: {exc.detail}. "
                "The node's agent is replaced and the pool keeps working; the task was not retried "
                "(it ended its own process).",
                node, item,
            )
        if isinstance(exc, Disconnected):
            if self.closing:
                return PoolClosedError(f"the pool closed while {request.name} was running")
            return ConnectionError(f"{request.name} was lost with the connection to the pool: {exc.detail}")
        return RuntimeError(f"node {node} could not run {request.name}: {exc.detail}")

    def _failure(self, failure: TaskFailure, request: TaskRequest, offset: int) -> BaseException:
        if failure.item is not None:
            failure = structs.replace(failure, item=failure.item + offset)
        if failure.crashed:
            running = "" if failure.item is None else f" Item {failure.item} of the map was running."
            return self._crashed(failure.message + running, failure.node, failure.item)
        exc = failure.to_exception(request.name)
        if failure.item is not None:
            exc.failed_item = failure.item  # type: ignore[attr-defined]
        return exc

    def _crashed(self, message: str, node: int, item: int | None) -> NodeCrashedError:
        """A NodeCrashedError, also reported as an ``Error`` event (the cause named)."""
        self._emit(Error(message))
        crash = NodeCrashedError(message, node, item)
        crash.failed_item = item  # type: ignore[attr-defined]
        return crash

    def _encode(self, request: TaskRequest, node: int | None = None) -> Payload:
        """``request`` encoded for ``node`` (None: for any node, every function in full)."""
        try:
            return self._encode_payload(request, None if node is None else self._shipped.shipment(node))
        except Exception as exc:
            found = describe_unpicklable(request.fn, request.args, request.kwargs, request.name)
            raise (found if found is not None else exc) from None

    def _check_open(self) -> None:
        if self.closing:
            raise PoolClosedError("the pool is closed: open a new one to run more work")


class _PerItem:
    """One map item's share of a measure (its result's bytes, its seconds), learnt from
    the chunks back so far: their totals over their items. Seconds are each chunk's
    round trip, an overestimate for trivial items, which is the safe side for a floor."""

    def __init__(self) -> None:
        self._amount = 0.0
        self._items = 0

    def add(self, amount: float, items: int) -> None:
        self._amount += amount
        self._items += items

    def items_for(self, budget: float) -> int:
        """How many items fit in ``budget`` (1 until a chunk came back)."""
        if not self._items or self._amount <= 0:
            return 1
        return max(1, int(budget * self._items / self._amount))


def _items(request: TaskRequest) -> int | None:
    """The items of a map chunk (None for any other request)."""
    return len(request.chunk) if request.kind == MAP else None


def _ranks_text(ranks: list[int]) -> str:
    if not ranks:
        return "none now"
    if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}..{ranks[-1]}"
    return ", ".join(map(str, ranks))


def _payload_bytes(reply: Payload) -> int:
    if isinstance(reply, bytes):
        return len(reply)
    header, buffers = reply
    return len(header) + sum(memoryview(buffer).nbytes for buffer in buffers)


def _attach_partial(exc: BaseException, finished: dict[int, list[R]]) -> None:
    """Give a failed map's error the results of its finished items (see ``map``)."""
    try:
        exc.partial_results = {  # type: ignore[attr-defined]
            start + offset: value for start, values in finished.items() for offset, value in enumerate(values)
        }
        if not hasattr(exc, "failed_item"):
            exc.failed_item = None  # type: ignore[attr-defined]
    except AttributeError:  # an exception type that takes no attributes
        pass
