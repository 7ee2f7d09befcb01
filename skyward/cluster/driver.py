"""The client's side of a running cluster: sends requests to node agents and turns
their outcomes (or Ray's failures) into results and clear exceptions.

Every coroutine here runs on the pool's event loop thread.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from skyward.cluster.lane import LaneBroken, LaneClient, LaneFailed
from skyward.cluster.scheduler import ALL, SlotScheduler
from skyward.cluster.wire import (
    CALL,
    MAP,
    Payload,
    TaskFailure,
    TaskRequest,
    decode,
    describe_unpicklable,
    encode,
)
from skyward.errors import NodeCrashedError, PoolClosedError
from skyward.function import PendingFunction
from skyward.observe.events import InstanceReplaced, TaskCompleted, TaskStarted
from skyward.spec import Worker

BACKSTOP_GRACE = 60.0
CALL_GRACE = 1.0
NO_SLOT = object()
CHUNKS_PER_SLOT = 2
REPLACEMENT_WAIT = 60.0
Emit = Callable[[Any], None]


class ClusterDriver:
    """Dispatches work to one agent per node through a ``SlotScheduler``."""

    def __init__(
        self,
        agents: Sequence[Any],
        worker: Worker,
        default_timeout: float,
        emit: Emit,
        wants: Callable[[type], bool],
        output_delivered: Callable[[int, int], None],
        loop: asyncio.AbstractEventLoop,
        lanes: Sequence[str] = (),
    ) -> None:
        self.agents = list(agents)
        self._lanes = [LaneClient(path) if path else None for path in lanes]
        # lane calls block, so the loop hands them to these threads (one per slot in use)
        self._lane_threads = ThreadPoolExecutor(len(self.agents) * worker.slots, "skyward-lane")
        self._slots = worker.slots
        self._queues_on_node = worker.buffer > 0
        self._default_timeout = default_timeout
        self._emit = emit
        self._wants = wants
        self._output_delivered = output_delivered
        self._scheduler = SlotScheduler(len(self.agents), worker.slots, loop)
        self._ids = itertools.count()
        self.closing = False

    @property
    def nodes(self) -> int:
        return len(self.agents)

    def close(self) -> None:
        """Refuse new work; work in flight ends with PoolClosedError if its node goes away."""
        self.closing = True
        for lane in self._lanes:
            if lane is not None:
                lane.close()
        self._lane_threads.shutdown(wait=False)

    def busy(self) -> int:
        """Task slots in use right now."""
        return self._scheduler.busy()

    def target_node(self, target: Any) -> int | None:
        """Validate ``pool.run(target=...)``: None, "head" or a rank; ValueError otherwise."""
        if target is None:
            return None
        if target == "head":
            return 0
        if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < self.nodes:
            return target
        raise ValueError(
            f"target={target!r} is not valid: use None (any node), \"head\" or a node rank "
            f"0..{self.nodes - 1}"
        )

    def _request(self, pending: PendingFunction[Any], kind: str = CALL, chunk: list[Any] | None = None) -> TaskRequest:
        timeout = pending.timeout if pending.timeout is not None else self._default_timeout
        args = (chunk,) if kind == MAP else pending.args
        kwargs = {} if kind == MAP else pending.kwargs
        return TaskRequest(f"t{next(self._ids)}", pending.name, pending.callable, args, kwargs, timeout, kind)

    def run_now(self, pending: PendingFunction[Any], target: Any = None) -> Any:
        """Run on one node from the calling thread, without the event loop, if a slot is
        free right now; returns ``NO_SLOT`` otherwise (then use ``run``)."""
        self._check_open()
        node = self._scheduler.try_acquire(self.target_node(target))
        if node is None:
            return NO_SLOT
        try:
            request = self._request(pending)
            started = self._started(node, request)
            error: BaseException | None = None
            try:
                payload = self._encode(request)
                reply = self._via_lane(node, payload, request)
                if reply is None:
                    ref = self._send(node, payload, request)
                    try:
                        reply = ray.get(ref, timeout=self._wait_limit(request))
                    except Exception as exc:
                        raise self._ray_failure(exc, node, request) from None
                ok, value, events = decode(reply)
                if events:
                    self._output_delivered(node, events)
                if ok:
                    return value
                error = self._failure(value, request, 0)
                raise error
            except BaseException as exc:
                error = exc
                raise
            finally:
                self._completed(node, request, started, error)
        finally:
            self._scheduler.release(node)

    async def run(self, pending: PendingFunction[Any], target: Any = None) -> Any:
        """Run on one node (round-robin over free slots, or the pinned target)."""
        self._check_open()
        node = await self._scheduler.acquire(self.target_node(target))
        try:
            request = self._request(pending)
            return await self._execute(node, self._encode(request), request)
        finally:
            self._scheduler.release(node)

    async def broadcast(self, pending: PendingFunction[Any]) -> list[Any]:
        """Run on every node at once; the request is serialized once for all of them."""
        self._check_open()
        nodes = await self._scheduler.acquire(ALL)
        released: set[int] = set()

        async def one(node: int, shared: Any, request: TaskRequest) -> Any:
            try:
                return await self._execute(node, shared, request)
            finally:
                released.add(node)
                self._scheduler.release(node)

        try:
            request = self._request(pending)
            shared = self._put(self._encode(request))
            outcomes = await asyncio.gather(
                *(one(node, shared, request) for node in nodes), return_exceptions=True
            )
        finally:
            left = [node for node in nodes if node not in released]
            if left:
                self._scheduler.release(left)
        failures = [(node, out) for node, out in zip(nodes, outcomes) if isinstance(out, BaseException)]
        if failures:
            node, first = failures[0]
            if len(failures) > 1 and not isinstance(first, asyncio.CancelledError):
                first.add_note(f"{len(failures)} of {len(nodes)} nodes failed; this is node {node}'s error")
            raise first
        return list(outcomes)

    async def map(
        self, fn: PendingFunction[Any], items: list[Any], on_chunk: Callable[[int, list[Any]], None] | None = None
    ) -> list[Any]:
        """Apply ``fn`` to every item, in chunks sized from what is left (guided
        scheduling: big chunks first, single items at the end); results in input order.
        ``on_chunk(start, values)`` is called as each chunk's results arrive."""
        self._check_open()
        results: list[Any] = [None] * len(items)
        position = 0
        lanes = self.nodes * self._slots

        async def lane() -> None:
            nonlocal position
            while position < len(items):
                node = await self._scheduler.acquire(None)
                try:
                    if position >= len(items):
                        return
                    size = max(1, math.ceil((len(items) - position) / (CHUNKS_PER_SLOT * lanes)))
                    start, position = position, position + size
                    request = self._request(fn, MAP, items[start:position])
                    values = await self._execute(node, self._encode(request), request, offset=start)
                    results[start : start + len(values)] = values
                    if on_chunk is not None:
                        on_chunk(start, values)
                finally:
                    self._scheduler.release(node)

        workers = [asyncio.ensure_future(lane()) for _ in range(min(lanes, len(items)))]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
        return results

    async def _execute(self, node: int, payload: Any, request: TaskRequest, offset: int = 0) -> Any:
        started = self._started(node, request)
        error: BaseException | None = None
        try:
            reply = None
            if self._has_lane(node, payload):
                reply = await asyncio.get_running_loop().run_in_executor(
                    self._lane_threads, self._via_lane, node, payload, request
                )
            if reply is None:
                ref = self._send(node, payload, request)
                try:
                    reply = await asyncio.wait_for(asyncio.wrap_future(ref.future()), self._wait_limit(request))
                except Exception as exc:
                    raise self._ray_failure(exc, node, request) from None
            ok, value, events = decode(reply)
            if events:
                await asyncio.get_running_loop().run_in_executor(None, self._output_delivered, node, events)
            if ok:
                return value
            error = self._failure(value, request, offset)
            raise error
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._completed(node, request, started, error)

    def _has_lane(self, node: int, payload: Any) -> bool:
        return isinstance(payload, bytes) and bool(self._lanes) and self._lanes[node] is not None

    def _via_lane(self, node: int, payload: Payload, request: TaskRequest) -> Payload | None:
        """The agent's reply through its lane (see ``lane``; blocks), or None: send through Ray."""
        lane = self._lanes[node] if self._has_lane(node, payload) else None
        if lane is None:
            return None
        try:
            return lane.call(payload, self._wait_limit(request))
        except LaneBroken as exc:
            self._await_replacement(node)
            raise self._ray_failure(exc, node, request) from None
        except (TimeoutError, LaneFailed) as exc:
            raise self._ray_failure(exc, node, request) from None

    def _await_replacement(self, node: int) -> None:
        """After a lane broke, wait (bounded) until Ray has restarted the node's agent: the
        lane sees a death before Ray does, and a call sent through Ray in between would
        reach the dead agent and fail too."""
        deadline = time.monotonic() + REPLACEMENT_WAIT
        while not self.closing and time.monotonic() < deadline:
            try:
                ray.get(self.agents[node].ready.remote(), timeout=max(0.1, deadline - time.monotonic()))
                return
            except Exception:  # still the dead agent, or restarting
                time.sleep(0.05)

    def _started(self, node: int, request: TaskRequest) -> float:
        if self._wants(TaskStarted):
            self._emit(TaskStarted(request.task_id, request.name, node))
        return time.monotonic()

    def _completed(self, node: int, request: TaskRequest, started: float, error: BaseException | None) -> None:
        if self._wants(TaskCompleted):
            failed = None if error is None else f"{type(error).__name__}: {error}"
            self._emit(TaskCompleted(request.task_id, request.name, node, time.monotonic() - started, failed))

    def _send(self, node: int, payload: Any, request: TaskRequest) -> Any:
        try:
            return self.agents[node].execute.remote(payload)
        except Exception as exc:
            raise _unpicklable(request, exc) from None

    def _wait_limit(self, request: TaskRequest) -> float:
        """How long to wait for an agent's answer. A call starts running as soon as it
        arrives (unless the node buffers), so its own timeout plus a grace applies;
        otherwise the agent enforces deadlines and this only guards against a hung agent."""
        if request.kind == CALL and not self._queues_on_node and request.timeout:
            return request.timeout + CALL_GRACE
        items = len(request.args[0]) if request.kind == MAP else 1
        return (request.timeout or 0) * items * (1 + self._slots) + BACKSTOP_GRACE

    def _ray_failure(self, exc: BaseException, node: int, request: TaskRequest) -> BaseException:
        """The error to raise for a failure of the engine rather than of the task."""
        if isinstance(exc, (asyncio.TimeoutError, GetTimeoutError)):
            if request.kind == CALL and not self._queues_on_node:
                return TimeoutError(
                    f"{request.name} did not finish within its timeout of {request.timeout:g}s on node {node}"
                )
            return TimeoutError(
                f"node {node} gave no answer for {request.name} within {self._wait_limit(request):g}s "
                "(its agent is unresponsive)"
            )
        if isinstance(exc, (RayActorError, LaneBroken)):
            if self.closing:
                return PoolClosedError(f"the pool closed while {request.name} was running")
            if self._wants(InstanceReplaced):
                self._emit(InstanceReplaced(node, f"agent died while running {request.name}"))
            return NodeCrashedError(
                f"node {node}'s worker process died while running {request.name} "
                f"({_first_line(exc)}). The node's agent is replaced and the pool keeps working; "
                "the task was not retried.",
                node,
            )
        if isinstance(exc, LaneFailed):
            return RuntimeError(f"node {node} could not run {request.name}: {exc}")
        if isinstance(exc, RayTaskError):
            return TypeError(
                f"the result of {request.name} on node {node} could not be sent back: "
                f"{_first_line(exc.cause if exc.cause is not None else exc)}. Return something picklable."
            )
        return exc

    def _failure(self, failure: TaskFailure, request: TaskRequest, offset: int) -> BaseException:
        if failure.item is not None:
            failure = _shift_item(failure, offset)
        if failure.crashed:
            return NodeCrashedError(failure.message, failure.node)
        return failure.to_exception(request.name)

    def _encode(self, request: TaskRequest) -> Payload:
        try:
            return encode(request)
        except Exception as exc:
            raise _unpicklable(request, exc) from None

    def _put(self, payload: Payload) -> Any:
        return ray.put(payload)

    def _check_open(self) -> None:
        if self.closing:
            raise PoolClosedError("the pool is closed: open a new one to run more work")


def _unpicklable(request: TaskRequest, exc: Exception) -> Exception:
    found = describe_unpicklable(request.fn, request.args, request.kwargs, request.name)
    return found if found is not None else exc


def _shift_item(failure: TaskFailure, offset: int) -> TaskFailure:
    return replace(failure, item=(failure.item or 0) + offset)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
