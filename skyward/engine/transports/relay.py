"""``RelayTransport``: the nodes of a remote pool, reached through the head relay at the
other end of one TCP stream (an SSH port forward to node 0).

The relay is not a second engine: it forwards each request's bytes to a node agent and
the agent's reply bytes back, and each node's event batches as the agent encoded them;
it never unpickles a user object. Scheduling, timeouts and error mapping stay in the
client's driver.

Messages are length-framed pickles of tuples of plain values (str, int, float, bytes,
lists of bytes), so either end can read them without any user code:

client -> relay                                relay -> client
("call", id, node, payload, timeout)           ("reply", id, payload)
("share", key, payload)                        ("failed", id, kind, node, detail)
("unshare", key)                               ("events", node, batch)
("forget", id)                                 ("report", message)
("collection", id, request)                    ("collection", id, answer)
("attach", id, node, serial, setup)            ("attached", id, error)
("detach", node, reason)
("metrics", on)
("close",)                                     ("closed",)

A payload is bytes, or a pair (bytes, [bytes, ...]) with its out-of-band buffers, or
``("shared", key)`` for one stored by "share". ``kind`` of a failure is "lost",
"crashed" (its task ended the agent's process), "no_reply" or "refused"
(``transport.NodeLost``, ``NoReply``, ``Refused``); a broken stream fails every call in
flight with ``Disconnected``. "attach" starts the agent of a node that joined (``setup``
is its pickled ``AgentSetup``, ``serial`` names the host's Ray resource that pins it);
``error`` is None once it answers, else why it did not. "detach" forgets a node that
left and kills its agent. "metrics" says whether the client listens for metrics now
(sent at open and on each change; the agents pause sampling while it is False).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import pickle
import struct
from typing import TYPE_CHECKING, Any

from skyward.api.errors import PoolClosedError
from skyward.engine.events import EventBatch
from skyward.engine.transport import (
    Disconnected,
    NodeLost,
    NoReply,
    Refused,
    Shared,
    TransportError,
)
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventFeed

HEADER = struct.Struct("!Q")
CONNECT_TIMEOUT = 30.0
CLOSE_TIMEOUT = 30.0
LISTENER_TICK = 1.0
"""Seconds between looks at whether anyone listens for metrics (sent to the head on change)."""
FAILURES: dict[str, type[TransportError]] = {"lost": NodeLost, "no_reply": NoReply, "refused": Refused}


async def send_message(writer: asyncio.StreamWriter, message: tuple[Any, ...]) -> None:
    """Write one framed message."""
    data = pickle.dumps(message, protocol=5)
    writer.write(HEADER.pack(len(data)))
    writer.write(data)
    await writer.drain()


async def receive_message(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the stream."""
    try:
        header = await reader.readexactly(HEADER.size)
        return pickle.loads(await reader.readexactly(HEADER.unpack(header)[0]))  # type: ignore[no-any-return]
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def plain(payload: Payload) -> bytes | tuple[bytes, list[bytes]]:
    """``payload`` with its out-of-band buffers as plain bytes, ready for the stream."""
    if isinstance(payload, bytes):
        return payload
    header, buffers = payload
    return header, [bytes(memoryview(b)) for b in buffers]


class RelayTransport:
    """The client's end of the stream to a head relay listening on 127.0.0.1:``port``."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._left: dict[int, str] = {}
        self._attaching: dict[int, asyncio.Future[str | None]] = {}
        self._ids = itertools.count()
        self._keys = itertools.count()
        self._pending: dict[int, tuple[int, asyncio.Future[Any]]] = {}
        self._collections: dict[int, concurrent.futures.Future[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._feed: EventFeed | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._send_lock: asyncio.Lock | None = None
        self._closed: asyncio.Future[None] | None = None
        self._lost: BaseException | None = None
        self._closing = False

    @property
    def can_call_now(self) -> bool:
        return False

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventFeed) -> None:
        """Connect (from any thread but ``loop``'s)."""
        self._loop, self._feed = loop, feed
        asyncio.run_coroutine_threadsafe(self._connect(), loop).result(CONNECT_TIMEOUT + 1)

    async def _connect(self) -> None:
        reader, self._writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", self._port), CONNECT_TIMEOUT
        )
        assert self._loop is not None
        self._closed = self._loop.create_future()
        self._send_lock = asyncio.Lock()
        asyncio.ensure_future(self._read(reader))
        asyncio.ensure_future(self._follow_listeners())

    async def _follow_listeners(self) -> None:
        """Send ("metrics", on) at once and whenever whether anyone listens for metrics changes."""
        told: bool | None = None
        while self._closed is not None and not self._closed.done() and not self._closing:
            assert self._feed is not None
            wanted = bool(self._feed.wants_metrics())
            if wanted != told:
                told = wanted
                await self._send_quietly(("metrics", wanted))
            await asyncio.sleep(LISTENER_TICK)

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        raise NotImplementedError("a relay answers on the event loop only (can_call_now is False)")

    def attach(self, node: int, serial: int, setup: Any, timeout: float) -> None:
        """Have the relay start node ``node``'s agent (on the host whose resource is
        ``serial``) and wait until it answers (from a thread other than the loop's).
        RuntimeError naming the node with the relay's reason when it does not."""
        if self._loop is None:
            raise PoolClosedError("the pool is closed: no node joins it")
        error = asyncio.run_coroutine_threadsafe(self._attach(node, serial, pickle.dumps(setup)), self._loop).result(
            timeout + CONNECT_TIMEOUT
        )
        if error is not None:
            raise RuntimeError(f"the agent of node {node} did not start: {error}")

    async def _attach(self, node: int, serial: int, setup: bytes) -> str | None:
        call_id = next(self._ids)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._attaching[call_id] = answer
        try:
            await self._send(("attach", call_id, node, serial, setup))
            error = await answer
        finally:
            self._attaching.pop(call_id, None)
        if error is None:
            self._left.pop(node, None)
        return error

    def detach(self, node: int, reason: str) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._detach, node, reason)

    def _detach(self, node: int, reason: str) -> None:
        self._left[node] = reason
        for target, future in list(self._pending.values()):
            if target == node:
                _resolve((target, future), NodeLost(node, reason))
        if self._writer is not None and not self._lost and not self._closing:
            asyncio.ensure_future(self._send_quietly(("detach", node, reason)))

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if node in self._left:
            raise NodeLost(node, self._left[node])
        body = ("shared", payload.key) if isinstance(payload, Shared) else plain(payload)
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (node, future)
        try:
            await self._send(("call", call_id, node, body, timeout))
            reply = await asyncio.wait_for(asyncio.shield(future), timeout)
        except ConnectionError as exc:
            raise Disconnected(node, str(exc)) from None
        except asyncio.TimeoutError:
            await self._forget(call_id)
            raise NoReply(node, "no answer in time") from None
        except asyncio.CancelledError:
            await self._forget(call_id)
            raise
        finally:
            self._pending.pop(call_id, None)
        if isinstance(reply, TransportError):
            raise reply
        return reply  # type: ignore[no-any-return]

    async def share(self, payload: Payload) -> Shared:
        key = next(self._keys)
        await self._send(("share", key, plain(payload)))
        return Shared(key, None)

    def unshare(self, shared: Shared) -> None:
        if self._writer is not None and not self._lost:
            asyncio.ensure_future(self._send_quietly(("unshare", shared.key)))

    def collection_call(self, request: bytes) -> concurrent.futures.Future[bytes]:
        """Send an encoded collection operation for the head node's agent (from any thread
        but the loop's); a Future of its encoded answer."""
        if self._closing or self._writer is None or self._loop is None or self._loop.is_closed():
            raise PoolClosedError("the pool is closed: its collections are gone")
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        call_id = next(self._ids)
        future: concurrent.futures.Future[bytes] = concurrent.futures.Future()
        self._collections[call_id] = future
        sent = asyncio.run_coroutine_threadsafe(self._send(("collection", call_id, request)), self._loop)

        def unsent(done: concurrent.futures.Future[None]) -> None:
            if done.exception() is not None and not future.done():
                self._collections.pop(call_id, None)
                future.set_exception(done.exception())  # type: ignore[arg-type]

        sent.add_done_callback(unsent)
        future.add_done_callback(lambda _: self._collections.pop(call_id, None))
        return future

    async def _forget(self, call_id: int) -> None:
        if not self._closing:
            await self._send_quietly(("forget", call_id))

    async def _send_quietly(self, message: tuple[Any, ...]) -> None:
        try:
            await self._send(message)
        except ConnectionError:
            pass

    async def _send(self, message: tuple[Any, ...]) -> None:
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        if self._writer is None or self._send_lock is None:
            raise PoolClosedError("the pool is closed: open a new one to run more work")
        try:
            async with self._send_lock:
                await send_message(self._writer, message)
        except (ConnectionError, OSError) as exc:
            raise ConnectionError(f"lost the connection to the cluster's head relay: {exc}") from None

    async def _read(self, reader: asyncio.StreamReader) -> None:
        error: BaseException = ConnectionError(
            "lost the connection to the cluster's head relay (node 0): the SSH tunnel or the head node is gone"
        )
        try:
            while (message := await receive_message(reader)) is not None:
                kind = message[0]
                if kind == "closed":
                    break
                if kind == "events":
                    assert self._feed is not None
                    self._feed.submit(message[1], EventBatch.decode(message[2]))
                elif kind == "report":
                    assert self._feed is not None
                    self._feed.report(message[1])
                elif kind == "reply":
                    _resolve(self._pending.get(message[1]), message[2])
                elif kind == "failed":
                    _, call_id, failure, node, detail = message
                    error = NodeLost(node, detail, by_task=True) if failure == "crashed" else FAILURES[failure](node, detail)
                    _resolve(self._pending.get(call_id), error)
                elif kind == "attached":
                    answer = self._attaching.get(message[1])
                    if answer is not None and not answer.done():
                        answer.set_result(message[2])
                elif kind == "collection":
                    future = self._collections.pop(message[1], None)
                    if future is not None and not future.done():
                        future.set_result(message[2])
        except Exception as exc:  # a malformed message: nothing more can be trusted
            error = exc
        finally:
            self._lost = PoolClosedError("the pool closed while the task was running") if self._closing else error
            for node, future in list(self._pending.values()):
                _resolve((node, future), Disconnected(node, str(self._lost)))
            for future in list(self._collections.values()):
                if not future.done():
                    future.set_exception(self._lost)
            for answer in list(self._attaching.values()):
                if not answer.done():
                    answer.set_result(str(self._lost))
            if self._closed is not None and not self._closed.done():
                self._closed.set_result(None)

    def close(self) -> None:
        """Tell the relay to stop the agents, and wait for it (bounded)."""
        self._closing = True
        if self._writer is None or self._loop is None or self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(CLOSE_TIMEOUT + 1)
        except Exception:
            pass

    async def _close(self) -> None:
        try:
            await self._send(("close",))
            assert self._closed is not None
            await asyncio.wait_for(asyncio.shield(self._closed), CLOSE_TIMEOUT)
        finally:
            if self._writer is not None:
                self._writer.close()


def _resolve(pending: tuple[int, asyncio.Future[Any]] | None, outcome: Any) -> None:
    if pending is not None and not pending[1].done():
        pending[1].set_result(outcome)
