"""The client's side of a remote cluster: the same interface the pool uses for a local
``ClusterDriver`` (``run``, ``broadcast``, ``map``, ``run_now``, ``nodes``, ``closing``),
speaking to the head agent over one TCP stream through the SSH tunnel.

Scheduling happens on the head; here each call is one request, answered by one result.
Collection operations of ``pool.dict(...)`` & co. are requests too (``collection_call``).
Events that arrive on the stream (task output, metrics, task events) are handed, in
arrival order, to an ``EventRelay`` thread, so a slow handler never stalls the stream; a
result is released once the events that came before it were delivered (waiting at most
``DELIVERY_WAIT`` s), so a task's output is printed before its result returns.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
from collections.abc import Callable
from typing import Any

from skyward.cluster import remote_protocol as protocol
from skyward.cluster.driver import NO_SLOT
from skyward.cluster.event_relay import EventRelay
from skyward.cluster.wire import RaisedError, describe_unpicklable
from skyward.errors import PoolClosedError
from skyward.function import PendingFunction
from skyward.observe.events import InstanceReplaced, TaskCompleted, TaskStarted

CONNECT_TIMEOUT = 30.0
CLOSE_TIMEOUT = 30.0
DELIVERY_WAIT = 2.0
_FORWARDED_EVENTS = (TaskStarted, TaskCompleted, InstanceReplaced)


class RemoteDriver:
    """Sends requests to the head agent and resolves them with its answers."""

    def __init__(
        self, nodes: int, port: int, emit: Callable[[Any], None], wants: Callable[[type], bool],
        loop: asyncio.AbstractEventLoop, shipped_roots: tuple[str, ...] = (),
    ) -> None:
        self._nodes = nodes
        self._port = port
        self._relay = EventRelay(emit)
        self._wants = wants
        self._loop = loop
        self._pickler = protocol.ClientPickler(shipped_roots)
        self._ids = itertools.count()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] | None = None
        self._send_lock: asyncio.Lock | None = None
        self._lost: BaseException | None = None
        self.closing = False

    @property
    def nodes(self) -> int:
        return self._nodes

    def connect(self) -> None:
        """Open the stream (called from any thread but the loop's)."""
        asyncio.run_coroutine_threadsafe(self._connect(), self._loop).result(CONNECT_TIMEOUT + 1)

    async def _connect(self) -> None:
        reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self._port), CONNECT_TIMEOUT
        )
        self._closed = self._loop.create_future()
        self._send_lock = asyncio.Lock()
        self._reader_task = asyncio.ensure_future(self._read(reader))

    def run_now(self, pending: PendingFunction[Any], target: Any = None) -> Any:
        """Remote calls always go through the loop."""
        return NO_SLOT

    async def run(self, pending: PendingFunction[Any], target: Any = None) -> Any:
        _check_target(target, self._nodes)
        return await self._request("run", pending, target)

    async def broadcast(self, pending: PendingFunction[Any]) -> list[Any]:
        return await self._request("broadcast", pending)

    async def map(
        self, fn: PendingFunction[Any], items: list[Any], on_chunk: Callable[[int, list[Any]], None] | None = None
    ) -> list[Any]:
        """The head agent runs the whole map; ``on_chunk`` (``pool.map(stream=True)``)
        then receives every result at once: remote maps do not stream chunk by chunk yet."""
        values = await self._request("map", fn, items)
        if on_chunk is not None:
            on_chunk(0, values)
        return values

    def collection_call(self, op: str, args: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        """Ask the head agent to run collection operation ``op(*args)`` (from any thread
        but the loop's); a Future of its result (see ``remote_collections``)."""
        if self.closing or self._writer is None or self._loop.is_closed():
            raise PoolClosedError("the pool is closed: its collections are gone")
        return asyncio.run_coroutine_threadsafe(self._request("collection", op, args), self._loop)

    async def _request(self, kind: str, *body: Any) -> Any:
        if self.closing or self._writer is None:
            raise PoolClosedError("the pool is closed: open a new one to run more work")
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        request_id = next(self._ids)
        wants = frozenset(t for t in _FORWARDED_EVENTS if self._wants(t))
        try:
            data = self._pickler.dumps((kind, request_id, *body, wants))
        except Exception as exc:
            raise _unpicklable(body, exc) from None
        future: asyncio.Future[Any] = self._loop.create_future()
        self._pending[request_id] = future
        try:
            await self._send(data)
            return await future
        except asyncio.CancelledError:
            if not self.closing and self._writer is not None:
                await self._send(protocol.dumps(("cancel", request_id)))
            raise
        finally:
            self._pending.pop(request_id, None)

    async def _send(self, data: bytes) -> None:
        assert self._writer is not None and self._send_lock is not None
        try:
            async with self._send_lock:
                await protocol.send(self._writer, data)
        except (ConnectionError, OSError) as exc:
            raise ConnectionError(f"lost the connection to the cluster's head agent: {exc}") from None

    async def _read(self, reader: asyncio.StreamReader) -> None:
        error: BaseException = ConnectionError(
            "lost the connection to the cluster's head agent (node 0): the SSH tunnel or the head node is gone"
        )
        try:
            while True:
                message = await protocol.receive(reader)
                if message is None or message[0] == "closed":
                    break
                if message[0] == "events":
                    self._relay.submit(message[1])
                    continue
                _, request_id, ok, value = message
                future = self._pending.pop(request_id, None)
                if future is None or future.done():
                    continue
                if not ok and isinstance(value, RaisedError):
                    value = value.to_exception()
                before = self._relay.submitted  # the events that arrived ahead of this result
                if self._relay.is_delivered(before):
                    _resolve(future, ok, value)
                else:
                    asyncio.ensure_future(self._resolve_after_events(future, ok, value, before))
        except Exception as exc:
            error = exc
        finally:
            if self.closing:
                error = PoolClosedError("the pool closed while the task was running")
            self._lost = error  # later requests fail at once: nobody would answer them
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(error)
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(None)

    async def _resolve_after_events(self, future: asyncio.Future[Any], ok: bool, outcome: Any, count: int) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._relay.wait_delivered, count, DELIVERY_WAIT)
        if not future.done():
            _resolve(future, ok, outcome)

    def close(self) -> None:
        """Tell the head agent to stop its agents, and wait for it (bounded); then
        deliver the events that arrived."""
        self.closing = True
        try:
            if self._writer is not None:
                asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(CLOSE_TIMEOUT + 1)
        except Exception:
            pass
        finally:
            self._relay.stop()

    async def _close(self) -> None:
        try:
            await self._send(protocol.dumps(("close",)))
            assert self._closed is not None
            await asyncio.wait_for(asyncio.shield(self._closed), CLOSE_TIMEOUT)
        finally:
            if self._writer is not None:
                self._writer.close()


def _resolve(future: asyncio.Future[Any], ok: bool, outcome: Any) -> None:
    if ok:
        future.set_result(outcome)
    else:
        future.set_exception(outcome)


def _check_target(target: Any, nodes: int) -> None:
    if target is None or target == "head":
        return
    if isinstance(target, int) and not isinstance(target, bool) and 0 <= target < nodes:
        return
    raise ValueError(
        f"target={target!r} is not valid: use None (any node), \"head\" or a node rank 0..{nodes - 1}"
    )


def _unpicklable(body: tuple[Any, ...], exc: Exception) -> Exception:
    """Name the part of a request that cannot be pickled, as a local pool does."""
    pending = body[0] if body else None
    if isinstance(pending, PendingFunction):
        found = describe_unpicklable(pending.fn, pending.args, pending.kwargs, pending.name)
        if found is not None:
            return found
    return exc
