"""``RelayTransport``: the nodes of a remote pool, reached through the head relay at the
other end of one stream (for SSH and cloud pools, a channel of the pool's SSH connection
to node 0's loopback: nothing listens on the client's machine).

The relay is not a second engine: it forwards each request's bytes to a node agent and
the agent's reply bytes back, and each node's event batches as the agent encoded them;
it never unpickles a user object. Scheduling, timeouts and error mapping stay in the
client's driver. Before anything else the client proves the pool's secret and the relay
proves it back (``core.handshake``), then both say ``Hello`` and ``Resume``; every message
after that is one of ``core.messages``, decoded by ``core.codec`` (never by an
unpickler).

The session outlives its stream (``engine.resumable``): when the stream breaks and the
endpoint allows it (``resume_within``), the client opens another, with backoff, and both
ends go on where they were, each sending again what the other had not received, so calls
in flight are answered once and nothing runs twice. Only when no new stream resumes the
session within ``resume_within`` seconds (or the relay no longer holds it) does every call
in flight fail with ``Disconnected``.

A large argument that does not compress goes to the relay over its upload lane where
the endpoint has one connected (``upload_lane``), and the stream carries only
``ShareUploaded`` with the ticket it is held under (then a ``CallShared``, for a call).

The stream is driven on ``io_loop`` (the SSH connection's own loop, so no bytes cross a
local socket between loops); a ``>>`` (``call_now``) hands its frame to that loop and the
reply straight back to the calling thread, and the driver's async calls hop to it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import cloudpickle
from msgspec import Struct

from skyward.core import handshake, messages
from skyward.core.codec import MalformedFrame
from skyward.core.errors import CollectionClosedError, PoolClosedError
from skyward.core.handshake import StreamIn, StreamOut
from skyward.engine import interruptible
from skyward.engine.events import EventBatch
from skyward.engine.membership import Loss
from skyward.engine.relay_server import payload_of, read_message, wire_body, write_message
from skyward.engine.resumable import Resumable, acknowledge
from skyward.engine.transport import Disconnected, NodeLost, NoReply, Refused, Shared, TransportError
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventSink
    from skyward.engine.transports.upload_lane import UploadLane

CONNECT_TIMEOUT = 30.0
CLOSE_TIMEOUT = 30.0
LISTENER_TICK = 1.0
"""Seconds between looks at whether anyone listens for metrics (sent to the head on change)."""
FAILURES: dict[str, type[TransportError]] = {"lost": NodeLost, "no_reply": NoReply, "refused": Refused}
FIRST_RETRY = 0.25
LAST_RETRY = 4.0
"""Seconds between tries to resume a session: doubling from the first to the last."""


T = TypeVar("T")
Connector = Callable[[], Awaitable[tuple[StreamIn, StreamOut]]]
"""Opens the stream to the relay: a (reader, writer) pair with asyncio's stream methods
(``readexactly``; ``write``, ``drain``, ``close``), such as an SSH channel's."""
Outcome: TypeAlias = "Payload | TransportError"
"""A call's reply, or why there is none."""
Waiter = asyncio.Future[Outcome] | concurrent.futures.Future[Outcome]
"""What a call in flight waits on: a loop's future (``call``) or a thread's (``call_now``)."""


class RemoteAgent(Struct, frozen=True):
    """A node agent for the relay to start: on the host whose Ray resource is ``serial``,
    with ``setup`` (its ``AgentSetup``), answering within ``timeout`` seconds."""

    serial: int
    setup: object
    timeout: float


class RelayRefused(ConnectionError):
    """What listens at the relay's address did not prove the pool's secret, or speaks
    another protocol version."""


class SessionOver(ConnectionError):
    """The relay no longer holds the session this client tried to resume."""


class RelayEndpoint(Struct, frozen=True):
    """A pool's head relay as its client reaches it: ``connect`` opens the stream,
    ``where`` names the relay in errors, ``secret`` is the pool's relay secret (each side
    proves it), ``compress``: large messages travel compressed where that pays
    (``codec.relay_frame``: an SSH channel to a remote relay, not a local socket).
    ``silent``: what a lost stream may mean besides a dead head node, added to its error
    (a remote pool: how long a link that answers nothing is waited for).
    ``resume_within``: the seconds the client tries to resume the session on a new
    stream once one broke (0: it does not; the relay must wait as long). ``upload``: the
    relay's upload lane, which large shared payloads take where it is connected. ``revive``:
    called when the relay has said nothing for ``probe_after`` seconds (it answers the
    client's heartbeat every second, so a working stream never is that quiet): it makes
    new connections where they work and closes the silent ones, whose streams then break
    and are resumed (a client whose address changed: its old connections will never
    answer again)."""

    connect: Connector
    where: str
    secret: bytes
    compress: bool = False
    silent: str = ""
    resume_within: float = 0.0
    revive: Callable[[], Awaitable[None]] | None = None
    probe_after: float = 0.0
    upload: UploadLane | None = None

    @classmethod
    def on_unix_socket(cls, path: str, secret: bytes, where: str = "", compress: bool = False) -> RelayEndpoint:
        """A relay listening on the Unix socket ``path`` (``where`` defaults to the path)."""
        return cls(lambda: asyncio.open_unix_connection(path), where or path, secret, compress)


class RelayTransport:
    """The client's end of the stream to the head relay at ``endpoint``, driven on
    ``io_loop`` (None: the driver's loop)."""

    def __init__(self, endpoint: RelayEndpoint, io_loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._endpoint = endpoint
        self._io_loop = io_loop
        self._left: dict[int, str] = {}
        self._attaching: dict[int, asyncio.Future[tuple[str | None, bytes]]] = {}
        self._on_lost: Callable[[Loss], None] = lambda loss: None
        self._ids = itertools.count()
        self._keys = itertools.count()
        self._pending: dict[int, tuple[int, Waiter]] = {}
        self._collections: dict[int, concurrent.futures.Future[bytes]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._feed: EventSink | None = None
        self._session = secrets.token_bytes(16)
        self._out = Resumable(endpoint.compress)
        self._writer: StreamOut | None = None
        """The stream of the session now; None before it opened and once it ended."""
        self._heard = time.monotonic()
        """When bytes from the relay last arrived."""
        self._closed: asyncio.Future[None] | None = None
        self._lost: BaseException | None = None
        self._closing = False
        self._listeners: asyncio.Future[None] | None = None

    @property
    def can_call_now(self) -> bool:
        return True

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventSink) -> None:
        """Connect (from any thread but ``loop``'s and the I/O loop's)."""
        self._loop, self._feed = self._io_loop or loop, feed
        asyncio.run_coroutine_threadsafe(self._connect(), self._loop).result(CONNECT_TIMEOUT + 1)

    async def _on_io(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on the I/O loop and wait for it from the caller's loop."""
        if self._loop is None or asyncio.get_running_loop() is self._loop:
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    async def _connect(self) -> None:
        """Open the session's first stream (``_open_stream``) and start reading it."""
        reader, writer = await asyncio.wait_for(self._open_stream(CONNECT_TIMEOUT), CONNECT_TIMEOUT)
        assert self._loop is not None
        self._closed = self._loop.create_future()
        asyncio.ensure_future(self._read(reader, writer))
        self._listeners = asyncio.ensure_future(self._follow_listeners())
        if self._endpoint.revive is not None and self._endpoint.probe_after > 0:
            asyncio.ensure_future(self._revive_when_silent(self._endpoint.revive))

    async def _open_stream(self, answer_within: float = handshake.TIMEOUT) -> tuple[StreamIn, StreamOut]:
        """Connect, prove the secret both ways, exchange ``Hello`` and ``Resume`` (the
        relay's answered within ``answer_within`` seconds: a kept pool's relay answers a
        new session once it ended its previous client's), and go on with the session over
        the new stream. ``RelayRefused`` when the other end is not the pool's relay,
        ``SessionOver`` when it no longer holds the session."""
        endpoint = self._endpoint
        reader, writer = await endpoint.connect()
        try:
            if not await handshake.prove_to_server_async(reader, writer, endpoint.secret):
                raise RelayRefused(f"what answers at {endpoint.where} did not prove the pool's secret: not its head relay")
            await write_message(writer, messages.Hello(messages.PROTOCOL))
            try:
                hello = await asyncio.wait_for(read_message(reader), handshake.TIMEOUT)
            except (asyncio.TimeoutError, MalformedFrame):
                hello = None
            if not isinstance(hello, messages.Hello) or hello.protocol != messages.PROTOCOL:
                theirs = hello.protocol if isinstance(hello, messages.Hello) else "none"
                raise RelayRefused(
                    f"the head relay speaks protocol {theirs}, this client {messages.PROTOCOL}: "
                    "the head node runs another skyward version than the client"
                )
            await write_message(writer, messages.Resume(self._session, self._out.received))
            try:
                resumed = await asyncio.wait_for(read_message(reader), answer_within)
            except (asyncio.TimeoutError, MalformedFrame):
                resumed = None
            if not isinstance(resumed, messages.Resume) or resumed.session != self._session:
                raise SessionOver(f"the head relay at {endpoint.where} no longer holds this client's session")
            self._out.attach(writer, resumed.received)
        except BaseException:
            writer.close()
            raise
        self._writer, self._heard = writer, time.monotonic()
        return reader, writer

    async def _follow_listeners(self) -> None:
        """Send ("metrics", on) at once and whenever whether anyone listens for metrics changes."""
        told: bool | None = None
        while self._closed is not None and not self._closed.done() and not self._closing:
            assert self._feed is not None
            wanted = bool(self._feed.wants_metrics())
            if wanted != told:
                told = wanted
                await self._send_quietly(messages.Metrics(wanted))
            await asyncio.sleep(LISTENER_TICK)

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        """The reply, waited for on the calling thread (any but the loop's): the frame is
        written on the loop and the reader hands the reply straight to this thread, so a
        ``>>`` costs one hand-off each way instead of a round of the driver's loop. A large
        argument the upload lane takes goes over it first, from this thread, and is stored
        by the relay for this call alone."""
        if node in self._left:
            raise NodeLost(node, self._left[node])
        loop = self._loop
        if loop is None or loop.is_closed() or self._closed is None:
            raise PoolClosedError("the pool is closed: open a new one to run more work")
        lane = self._endpoint.upload
        ticket = lane.send(payload) if lane is not None and lane.takes(payload) else None
        key = None if ticket is None else next(self._keys)
        call_id = next(self._ids)
        waiter: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
        self._pending[call_id] = (node, waiter)
        try:
            try:
                if key is None:
                    loop.call_soon_threadsafe(self._put, call_id, messages.Call(call_id, node, wire_body(payload), timeout))
                else:  # sent over the upload lane: stored by the relay for this call alone
                    assert ticket is not None
                    loop.call_soon_threadsafe(self._put, call_id, messages.ShareUploaded(key, ticket))
                    loop.call_soon_threadsafe(self._put, call_id, messages.CallShared(call_id, node, key, timeout))
            except RuntimeError:  # the loop closed: the pool is closing
                raise Disconnected(node, "the connection to the head relay is closed") from None
            try:
                reply = interruptible.result(waiter, timeout)
            except TimeoutError:
                loop.call_soon_threadsafe(self._put, None, messages.Forget(call_id))
                raise NoReply(node, "no answer in time") from None
            except BaseException:
                loop.call_soon_threadsafe(self._put, None, messages.Forget(call_id))
                raise
        finally:
            self._pending.pop(call_id, None)
            if key is not None:
                self.unshare(Shared(key, None))
        return _outcome(reply)

    def _put(self, call_id: int | None, message: messages.Message) -> None:
        """Send ``message`` now (on the loop; between streams it waits for the next); if
        the session is over, call ``call_id`` fails with ``Disconnected``."""
        if self._lost is not None or self._closed is None:
            if call_id is not None:
                pending = self._pending.get(call_id)
                _resolve(pending, Disconnected(pending[0] if pending else -1, str(self._lost or "the pool is closed")))
            return
        self._out.put(message)

    def watch_losses(self, lost: Callable[[Loss], None]) -> None:
        """Call ``lost`` (on the I/O loop) for each node the relay's side reports lost
        (``Lost``: a kept remote pool's daemon watches its hosts)."""
        self._on_lost = lost

    def attach(self, node: int, agent: RemoteAgent) -> None:
        """Have the relay start node ``node``'s agent and wait until it answers (from a
        thread other than the loop's). RuntimeError naming the node with the relay's
        reason when it does not."""
        self.join(node, agent)

    def join(self, node: int, agent: RemoteAgent) -> bytes:
        """``attach``, returning ``Attached.joined``: the node as the relay's side placed
        it (a kept remote pool's daemon), or empty."""
        if self._loop is None:
            raise PoolClosedError("the pool is closed: no node joins it")
        attaching = self._attach(node, agent.serial, cloudpickle.dumps(agent.setup))
        error, joined = asyncio.run_coroutine_threadsafe(attaching, self._loop).result(agent.timeout + CONNECT_TIMEOUT)
        if error is not None:
            raise RuntimeError(f"the agent of node {node} did not start: {error}")
        return joined

    async def _attach(self, node: int, serial: int, setup: bytes) -> tuple[str | None, bytes]:
        call_id = next(self._ids)
        answer: asyncio.Future[tuple[str | None, bytes]] = asyncio.get_running_loop().create_future()
        self._attaching[call_id] = answer
        try:
            await self._send(messages.Attach(call_id, node, serial, setup))
            error, joined = await answer
        finally:
            self._attaching.pop(call_id, None)
        if error is None:
            self._left.pop(node, None)
        return error, joined

    def detach(self, node: int, reason: str) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._detach, node, reason)

    def _detach(self, node: int, reason: str) -> None:
        self._left[node] = reason
        for target, future in list(self._pending.values()):
            if target == node:
                _resolve((target, future), NodeLost(node, reason))
        if self._closed is not None and not self._lost and not self._closing:
            asyncio.ensure_future(self._send_quietly(messages.Detach(node, reason)))

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        return await self._on_io(self._call(node, payload, timeout))

    async def _call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        if node in self._left:
            raise NodeLost(node, self._left[node])
        lane = self._endpoint.upload
        if not isinstance(payload, Shared) and lane is not None and lane.takes(payload):
            try:
                uploaded = await self.share(payload)  # the lane, or the stream if the lane broke meanwhile
            except ConnectionError as exc:
                raise Disconnected(node, str(exc)) from None
            try:
                return await self._call(node, uploaded, timeout)
            finally:
                self.unshare(uploaded)
        call_id = next(self._ids)
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (node, future)
        try:
            await self._send(
                messages.CallShared(call_id, node, payload.key, timeout)
                if isinstance(payload, Shared)
                else messages.Call(call_id, node, wire_body(payload), timeout)
            )
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
        return _outcome(reply)

    async def share(self, payload: Payload | bytearray) -> Shared:
        """``payload`` stored by the relay: over the endpoint's upload lane when it takes
        it (a large payload, the lane connected), else in a ``Share`` on the stream."""
        key = next(self._keys)
        if isinstance(payload, bytearray):
            payload = bytes(payload)
        lane = self._endpoint.upload
        ticket = None if lane is None else await lane.upload(payload)
        message = messages.Share(key, wire_body(payload)) if ticket is None else messages.ShareUploaded(key, ticket)
        await self._on_io(self._send(message))
        return Shared(key, None)

    def unshare(self, shared: Shared) -> None:
        if self._closed is not None and not self._lost and self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the session is over
                self._loop.call_soon_threadsafe(self._put, None, messages.Unshare(shared.key))

    def release_holds(self) -> None:
        """Have the head relay free every collection lock and lease this client holds
        (from any thread but the loop's; nothing when the session is over)."""
        if self._closed is not None and not self._lost and self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._put, None, messages.ReleaseHolds())

    def observe(self, batch: bytes) -> None:
        """Send what this client observed (an encoded ``EventBatch``) to a kept pool's
        relay, the pool daemon's, for its dashboard (from any thread; nothing when the
        session is over)."""
        if self._closed is not None and not self._lost and self._loop is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._put, None, messages.Observed(batch))
            except RuntimeError:  # the loop closed meanwhile
                pass

    def collection_call(self, request: bytes) -> concurrent.futures.Future[bytes]:
        """Send an encoded collection operation for the head node's agent (from any thread
        but the loop's); a Future of its encoded answer."""
        if self._closing or self._closed is None or self._loop is None or self._loop.is_closed():
            raise CollectionClosedError("the pool is closed: its collections are gone")
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        call_id = next(self._ids)
        future: concurrent.futures.Future[bytes] = concurrent.futures.Future()
        self._collections[call_id] = future
        sent = asyncio.run_coroutine_threadsafe(self._send(messages.CollectionOp(call_id, request)), self._loop)

        def unsent(done: concurrent.futures.Future[None]) -> None:
            if done.exception() is not None and not future.done():
                self._collections.pop(call_id, None)
                future.set_exception(done.exception())

        sent.add_done_callback(unsent)
        future.add_done_callback(lambda _: self._collections.pop(call_id, None))
        return future

    async def _forget(self, call_id: int) -> None:
        if not self._closing:
            await self._send_quietly(messages.Forget(call_id))

    async def _send_quietly(self, message: messages.Message) -> None:
        try:
            await self._send(message)
        except ConnectionError:
            pass

    async def _send(self, message: messages.Message) -> None:
        """Send ``message`` (between streams it waits for the next) and wait while the
        stream's buffer is full. ConnectionError once the session is over."""
        if self._lost is not None:
            raise ConnectionError(str(self._lost))
        if self._closed is None:
            raise PoolClosedError("the pool is closed: open a new one to run more work")
        self._out.put(message)
        try:
            await self._out.drain()
        except Exception:  # noqa: BLE001, S110 - an OSError, or the SSH library's errors: the reader resumes
            pass

    async def _read(self, reader: StreamIn, writer: StreamOut) -> None:
        """Read the session's stream; when it breaks, resume the session on a new one
        (``_resume``) or, failing that, end every call in flight."""
        silent = f"; or {self._endpoint.silent}" if self._endpoint.silent else ""
        error: BaseException = ConnectionError(
            f"lost the connection to the cluster's head relay (node 0): the SSH tunnel or the head node is gone{silent}"
        )
        acks = asyncio.ensure_future(acknowledge(self._out, writer, always=True))
        broken = True
        hearing = _Hearing(reader, self._hear)
        try:
            while (message := await read_message(hearing)) is not None:
                if isinstance(message, messages.Ack):
                    self._out.acknowledged(message.received)
                    continue
                self._out.count_received()
                if not self._take(message):
                    broken = False
                    break
        except MalformedFrame as exc:  # nothing more can be trusted
            broken = False
            error = ConnectionError(f"the head relay sent something that is not a message: {exc}")
        except Exception as exc:  # the SSH library's errors of a lost channel
            error = ConnectionError(f"lost the connection to the cluster's head relay: {exc}{silent}")
        finally:
            acks.cancel()
            writer.close()
            self._out.detach()
        if broken and not self._closing and self._endpoint.resume_within > 0:
            if await self._resume(error):
                return
            error = self._lost or error
        self._end(error)

    async def _resume(self, error: BaseException) -> bool:
        """Open new streams, backing off, until one resumes the session (True; it is read
        from then on) or ``resume_within`` seconds passed, the relay said the session is
        over, or the pool closes (False, with why in ``_lost``)."""
        assert self._feed is not None
        within = self._endpoint.resume_within
        began = time.monotonic()
        self._feed.report(
            f"the connection to the head relay at {self._endpoint.where} broke; resuming the session "
            f"(trying for up to {within:g} s)"
        )
        wait, last = FIRST_RETRY, str(error)
        while not self._closing and (left := within - (time.monotonic() - began)) > 0:
            try:
                reader, writer = await asyncio.wait_for(self._open_stream(), min(left, CONNECT_TIMEOUT))
            except SessionOver as exc:
                self._lost = ConnectionError(f"{error}; and the session could not be resumed: {exc}")
                return False
            except Exception as exc:  # noqa: BLE001 - the way to node 0 is not back yet
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                await asyncio.sleep(min(wait, max(0.0, within - (time.monotonic() - began))))
                wait = min(2 * wait, LAST_RETRY)
                continue
            self._feed.report(f"resumed the session with the head relay after {time.monotonic() - began:.1f} s")
            asyncio.ensure_future(self._read(reader, writer))
            return True
        self._lost = ConnectionError(f"{error}; and no new connection resumed the session within {within:g} s "
                                     f"(the last try: {last})")
        return False

    def _hear(self) -> None:
        self._heard = time.monotonic()

    async def _revive_when_silent(self, revive: Callable[[], Awaitable[None]]) -> None:
        """While the session lasts: once the relay has said nothing for ``probe_after``
        seconds, ``revive`` (see ``RelayEndpoint``); again after as long, while the
        silence lasts."""
        every = self._endpoint.probe_after
        while self._closed is not None and not self._closed.done() and not self._closing:
            await asyncio.sleep(min(1.0, every / 4))
            silent = time.monotonic() - self._heard
            if silent < every or self._writer is None:
                continue
            assert self._feed is not None
            self._feed.report(f"the head relay at {self._endpoint.where} said nothing for {silent:.0f} s; "
                              "trying new connections")
            try:
                await revive()
            except Exception as exc:  # noqa: BLE001 - the old connections may still come back
                self._feed.report(f"no new connection either ({type(exc).__name__}: {exc}); waiting")
            self._heard = time.monotonic()

    def _end(self, error: BaseException) -> None:
        """The session is over: every call in flight fails."""
        self._writer = None
        self._lost = PoolClosedError("the pool closed while the task was running") if self._closing else error
        for node, future in list(self._pending.values()):
            _resolve((node, future), Disconnected(node, str(self._lost)))
        for collection in list(self._collections.values()):
            if not collection.done():
                collection.set_exception(self._lost)
        for answer in list(self._attaching.values()):
            if not answer.done():
                answer.set_result((str(self._lost), b""))
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)

    def _take(self, message: messages.Message) -> bool:
        """Act on one message from the relay; False once nothing more will come."""
        assert self._feed is not None
        match message:
            case messages.Events(node, batch):
                try:
                    self._feed.submit(node, EventBatch.decode(batch))
                except Exception as exc:  # an event of a class this client cannot load
                    self._feed.report(f"events of node {node} could not be read here: {type(exc).__name__}: {exc}")
            case messages.Report(text):
                self._feed.report(text)
            case messages.Lost(node, reason, preempted):
                self._on_lost(Loss(node, reason, preempted))
            case messages.Reply(call_id, body):
                _resolve(self._pending.get(call_id), payload_of(body))
            case messages.Failed(call_id, kind, node, detail) if call_id in self._collections:
                future = self._collections.pop(call_id)
                if not future.done():
                    future.set_exception(ConnectionError(f"the head relay could not run the operation: {detail}"))
            case messages.Failed(call_id, kind, node, detail):
                error = NodeLost(node, detail, by_task=True) if kind == "crashed" else FAILURES[kind](node, detail)
                _resolve(self._pending.get(call_id), error)
            case messages.Attached(call_id, problem, joined):
                answer = self._attaching.get(call_id)
                if answer is not None and not answer.done():
                    answer.set_result((problem, joined))
            case messages.CollectionAnswer(call_id, answer_bytes):
                collection = self._collections.pop(call_id, None)
                if collection is not None and not collection.done():
                    collection.set_result(answer_bytes)
            case messages.Closed():
                return False
            case _:
                raise MalformedFrame(f"the head relay sent {type(message).__name__}, which only a client sends")
        return True

    def close(self) -> None:
        """Tell the relay to stop the agents, and wait for it (bounded)."""
        self._closing = True
        if self._endpoint.upload is not None:
            self._endpoint.upload.close()
        if self._writer is None or self._loop is None or self._loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(CLOSE_TIMEOUT + 1)
        except Exception:
            pass
        for node, waiter in list(self._pending.values()):  # a >> that the reader did not end
            if isinstance(waiter, concurrent.futures.Future) and not waiter.done():
                waiter.set_result(Disconnected(node, "the pool closed while the task was running"))

    async def _close(self) -> None:
        try:
            await self._send(messages.Close())
            assert self._closed is not None
            await asyncio.wait_for(asyncio.shield(self._closed), CLOSE_TIMEOUT)
        finally:
            if self._listeners is not None:
                self._listeners.cancel()
            if self._writer is not None:
                self._writer.close()


class _Hearing:
    """``reader`` that calls ``heard()`` whenever bytes arrive, so that a message that
    takes long to arrive (a large one on a slow link) counts as the relay talking."""

    def __init__(self, reader: StreamIn, heard: Callable[[], None]) -> None:
        self._reader = reader
        self._heard = heard

    async def readexactly(self, n: int) -> bytes:
        if n == 0:
            return b""
        parts: list[bytes] = []
        got = 0
        while got < n:
            part = await self._reader.read(n - got)
            if not part:
                raise asyncio.IncompleteReadError(b"".join(parts), n)
            self._heard()
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def read(self, n: int = -1) -> bytes:
        return await self._reader.read(n)


def _outcome(reply: Outcome) -> Payload:
    """A call's reply, or its failure raised."""
    if isinstance(reply, TransportError):
        raise reply
    return reply


def _resolve(pending: tuple[int, Waiter] | None, outcome: Outcome) -> None:
    if pending is not None and not pending[1].done():
        pending[1].set_result(outcome)
