"""The head relay's server: one authenticated client's messages, served over any backend.

A remote pool's client reaches its nodes through one stream to the relay on node 0. The
server knows the relay protocol (``core.messages``) and nothing of Ray: a
``RelayBackend`` does the work (the head relay's is Ray actors and lanes; the unit tests'
is the in-process fake cluster). Per connection:

1. the caller proves the pool's secret (``core.handshake``) before a byte of a frame is
   read; a stranger is hung up on and changes nothing. At most ``MAX_UNPROVEN``
   connections wait in the handshake at once (each for ``handshake.TIMEOUT`` at most).
2. both ends send ``Hello``; a protocol mismatch ends the connection. Then the client
   names its session (``Resume``, see ``engine.resumable``) and the server answers with
   its own ``Resume``, or ``Closed`` when it holds no such session.
3. the first proven client's session is served; another session is refused while it
   is. When the client says ``Close``, or its stream ends and it does not resume the
   session on a new stream within ``resume_within`` seconds, the backend frees what it
   held and stops the agents, ``Closed`` is sent, and ``finished`` is set (the relay
   exits). A resumed session goes on where it was: the calls running meanwhile ran on,
   and each end sends again what the other had not received (``engine.resumable``); a
   stream that resumes the session ends the one it had, if that one is still open.
   A ``successive`` server (a kept pool's relay) serves its clients one after another
   instead: a newly proven client with a new session ends the session being served,
   whether a stream carries it or it waits to be resumed (only a holder of the secret
   gets that far: its client died, or gave the pool to another process), and is served
   once that one ended, unless a newer one came meanwhile; ``finished`` is never set.
   The session being served resumes as any does until then.

``Observed`` (what a kept pool's script saw) goes to the server's ``observed`` callback
(the pool daemon's dashboard), or nowhere.

Calls, collection operations and attaches run as tasks, answered in the order they end;
``Forget`` cancels one. Everything the client is sent goes through one ordered queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Never, Protocol

from msgspec import Struct, field

from skyward.core import handshake, messages
from skyward.core.codec import (
    EXPANDED_LIMIT,
    FRAME_HEADER,
    MalformedFrame,
    decode_message,
    encode_message,
    expand,
    frame_header,
    relay_frame,
)
from skyward.core.handshake import StreamIn, StreamOut
from skyward.engine.resumable import Resumable, acknowledge
from skyward.engine.transport import NodeLost, NoReply, Shared, Transport, TransportError
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.transports.upload_lane import Upload, Uploads

MAX_UNPROVEN = 16
"""Connections that may wait in the handshake at once; more are closed at once."""
TURN_WAIT = 25.0
"""Seconds a successive server's newest client waits for the session it ended to finish
(the backend frees what its client held): less than the 30 s a client gives its first
stream to be answered (``transports.relay.CONNECT_TIMEOUT``)."""


class Sink(Protocol):
    """Where a backend sends what its nodes say (from any thread)."""

    def events(self, node: int, batch: bytes) -> None: ...

    def report(self, message: str) -> None: ...

    def lost(self, node: int, reason: str, preempted: bool) -> None: ...


class RelayBackend(Protocol):
    """What the relay does for its one client (see the module)."""

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        """Node ``node``'s reply. Raises ``TransportError``."""

    async def share(self, payload: Payload | bytearray) -> Shared: ...

    def unshare(self, shared: Shared) -> None: ...

    async def collection(self, call_id: int, request: bytes) -> bytes:
        """The encoded answer of the head node's agent to a collection operation."""

    def forget_collection(self, call_id: int) -> None:
        """Stop waiting on collection operation ``call_id`` (the client gave up)."""

    async def attach(self, node: int, serial: int, setup: bytes) -> bytes:
        """Start the agent of node ``node`` (joined) and wait until it answers; raises why
        not. Returns ``Attached.joined``: the node as this side placed it, or empty."""

    def detach(self, node: int, reason: str) -> None:
        """Node ``node`` left: fail its calls, stop its events, kill its agent."""

    def set_metrics(self, on: bool) -> None: ...

    def release_holds(self) -> None:
        """Free every collection lock and lease the client holds (blocking); it stays connected."""

    def end(self) -> None:
        """The client is gone (blocking): free what it held, pass on the last events, stop
        the agents."""


class TransportBackend:
    """The part of a ``RelayBackend`` that its transport serves as is: ``call``, ``share``
    and ``unshare`` are ``_transport``'s (set by the subclass's ``__init__``), and so are
    their errors (``TransportError``)."""

    _transport: Transport[Never]

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        return await self._transport.call(node, payload, timeout)

    async def share(self, payload: Payload | bytearray) -> Shared:
        return await self._transport.share(payload)

    def unshare(self, shared: Shared) -> None:
        self._transport.unshare(shared)


def failure_kind(error: TransportError) -> messages.FailureKind:
    if isinstance(error, NodeLost):
        return "crashed" if error.by_task else "lost"
    return "no_reply" if isinstance(error, NoReply) else "refused"


def put_message(writer: StreamOut, message: messages.Message) -> None:
    """Queue one framed, uncompressed message on ``writer`` (on its loop; frames never
    interleave, as nothing awaits between the writes): the handshake's, which go before
    a session's ``Resumable`` frames the rest."""
    for part in relay_frame(encode_message(message), False):
        writer.write(part)


async def write_message(writer: StreamOut, message: messages.Message) -> None:
    """Write one framed message (waiting while the stream's buffer is full)."""
    put_message(writer, message)
    await writer.drain()


async def read_message(reader: StreamIn, limit: int = EXPANDED_LIMIT) -> messages.Message | None:
    """The next message, or None at the end of the stream. ``MalformedFrame`` when the
    bytes are not a message, or a compressed one that would expand beyond ``limit``
    bytes. Called only once the peer proved the secret: a compressed frame is expanded
    (bounded) only then."""
    try:
        flags, size = frame_header(await reader.readexactly(FRAME_HEADER.size))
        body = await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    return decode_message(expand(body, limit) if flags else body)


def wire_body(payload: Payload) -> messages.Body:
    """``payload`` with its out-of-band buffers as bytes, ready for a message."""
    if isinstance(payload, bytes):
        return payload
    header, buffers = payload
    return header, tuple(bytes(memoryview(b)) for b in buffers)


def payload_of(body: messages.Body) -> Payload:
    return body if isinstance(body, bytes) else (body[0], list(body[1]))


class Outgoing:
    """The single ordered stream of messages to the client, over whichever stream the
    session has (``Resumable``); a ``Sink`` for the backend. Messages are written as they
    come (on the loop), without a queue between."""

    def __init__(self, out: Resumable) -> None:
        self._out = out
        self._loop = asyncio.get_running_loop()
        self._open = True

    def put(self, message: messages.Message) -> None:
        """Send ``message`` (on the loop): kept for the client until it has it; nothing
        once the session ended."""
        if self._open:
            self._out.put(message)

    def events(self, node: int, batch: bytes) -> None:
        self._loop.call_soon_threadsafe(self.put, messages.Events(node, batch))

    def report(self, message: str) -> None:
        self._loop.call_soon_threadsafe(self.put, messages.Report(message))

    def lost(self, node: int, reason: str, preempted: bool) -> None:
        self._loop.call_soon_threadsafe(self.put, messages.Lost(node, reason, preempted))

    async def close(self) -> None:
        """Send what is buffered (bounded), then stop."""
        try:
            await asyncio.wait_for(self._out.drain(), 10)
        except Exception:  # noqa: BLE001, S110 - a timeout, or the stream's errors: the client is gone
            pass
        self._open = False


class _Stream(Struct, eq=False):
    """One stream of a session: its ends, how many of the server's messages its client
    has (from its ``Resume``), and ``done``, set once the session stops using it (the
    connection is closed then)."""

    reader: StreamIn
    writer: asyncio.StreamWriter
    received: int
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class _Session(Struct, eq=False):
    """What outlives a session's streams: its id, what the server sent and received, and
    the stream that resumes it next."""

    token: bytes
    out: Resumable
    stream: _Stream | None = None
    waiting: _Stream | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    over: bool = False
    ending: bool = False
    """Ended for another client's session (``end``): it is not resumed any more."""

    def offer(self, stream: _Stream) -> bool:
        """``stream`` resumes the session: the stream it has is ended (a client that opened
        a new one has given it up), and so is an older offer not taken yet. False, and
        nothing changes, once the session is over or ending."""
        if self.over or self.ending:
            return False
        if self.waiting is not None and not self.waiting.done.done():
            self.waiting.done.set_result(None)
        self.waiting = stream
        if self.stream is not None:
            self.stream.writer.transport.abort()
        self.arrived.set()
        return True

    def end(self) -> None:
        """End the session now, for the next client's: its stream is dropped (written or
        not), and it waits for none to resume it."""
        self.ending = True
        if self.stream is not None:
            self.stream.writer.transport.abort()
        self.arrived.set()

    async def next_stream(self, within: float) -> _Stream | None:
        """The stream that resumes the session, waited for ``within`` seconds at most;
        None at once once it is ending."""
        if self.waiting is None and not self.ending:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), within)
            except asyncio.TimeoutError:
                return None
        if self.ending:
            return None
        stream, self.waiting = self.waiting, None
        return stream


class RelayServer:
    """Serves the one client that proves ``secret``, with the backend ``open_backend``
    makes for it; ``finished`` is set once that client is gone and the backend ended.
    ``compress``: large messages to the client travel compressed where that pays (a
    remote pool's relay, whose client is across an SSH channel). ``successive``: serves
    one client after another instead (see the module). ``observed`` takes the client's
    ``Observed`` batches. ``resume_within``: the seconds a session whose stream broke
    waits for its client to resume it on another (0: it ends at once; a ``successive``
    server's is ended sooner by the next client's new session). ``uploads``: what the
    client sent over the relay's upload lane, which its ``ShareUploaded`` takes (what a
    session left there is dropped when it ends)."""

    def __init__(
        self, secret: bytes, open_backend: Callable[[Sink], RelayBackend], compress: bool = False,
        successive: bool = False, observed: Callable[[bytes], None] | None = None, resume_within: float = 0.0,
        uploads: Uploads | None = None,
    ) -> None:
        self._secret = secret
        self._uploads = uploads
        self._observed = observed
        self._open_backend = open_backend
        self._compress = compress
        self._successive = successive
        self._resume_within = resume_within
        self._session: _Session | None = None
        self._served_tokens: set[bytes] = set()
        """Every session served (a successive server's clients are few: the processes that
        held the pool in turn); one that is over is never served again."""
        self._unproven = 0
        self._served: asyncio.StreamWriter | None = None
        self._newest: asyncio.StreamWriter | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        self.finished = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection (an ``asyncio.start_server`` callback)."""
        try:
            if not await self._proven(reader, writer):
                return
            named = await self._named_session(reader)
            if named is None:
                return
            session = self._session
            if session is not None and named.session == session.token:
                stream = _Stream(reader, writer, named.received)
                if not session.offer(stream):
                    await write_message(writer, messages.Closed())  # over, or ended for the next client
                    return
                await stream.done
                return
            over = named.received or named.session in self._served_tokens
            if over or (session is not None and not self._successive):
                await write_message(writer, messages.Closed())  # a session that is over, or another's
                return
            if self._successive and not await self._turn(writer):
                return
            if self._served is not None:
                return
            self._served = writer
            self._idle.clear()
            try:
                await self._serve(_Stream(reader, writer, 0), named.session)
            finally:
                if self._successive:
                    self._served = None
                self._idle.set()
        finally:
            writer.close()

    @staticmethod
    async def _named_session(reader: StreamIn) -> messages.Resume | None:
        """The client's ``Resume`` (the first message after ``Hello``), or None."""
        try:
            named = await asyncio.wait_for(read_message(reader), handshake.TIMEOUT)
        except (asyncio.TimeoutError, MalformedFrame):
            return None
        return named if isinstance(named, messages.Resume) else None

    async def _turn(self, writer: asyncio.StreamWriter) -> bool:
        """Whether ``writer``, the newest proven client, gets served: the session being
        served is ended (``_Session.end``: its stream dropped at once, written or not, a
        wait for it to resume cut short) and, once it ended (within ``TURN_WAIT``), the
        newest client waiting is served; an older one is not."""
        self._newest = writer
        while self._served is not None and self._newest is writer:
            if self._session is not None:
                self._session.end()
            try:
                await asyncio.wait_for(self._idle.wait(), TURN_WAIT)
            except asyncio.TimeoutError:
                return False
        return self._newest is writer

    async def _proven(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Whether the peer proved the secret and speaks our protocol."""
        if self._unproven >= MAX_UNPROVEN or self.finished.is_set():
            return False
        self._unproven += 1
        try:
            if not await handshake.answer_caller_async(reader, writer, self._secret):
                return False
            hello = await asyncio.wait_for(read_message(reader), handshake.TIMEOUT)
            await write_message(writer, messages.Hello(messages.PROTOCOL))
            return isinstance(hello, messages.Hello) and hello.protocol == messages.PROTOCOL
        except (asyncio.TimeoutError, MalformedFrame, ConnectionError, OSError):
            return False
        finally:
            self._unproven -= 1

    async def _serve(self, first: _Stream, token: bytes) -> None:
        """Serve session ``token`` over ``first`` and the streams that resume it, until
        it ends."""
        loop = asyncio.get_running_loop()
        session = self._session = _Session(token, Resumable(self._compress))
        self._served_tokens.add(token)
        out = Outgoing(session.out)
        shared: dict[int, Shared | str] = {}  # a key's payload, or why it could not be stored
        tasks: dict[int, asyncio.Task[None]] = {}

        def start(call_id: int, work: Awaitable[None]) -> None:
            task = asyncio.ensure_future(work)
            tasks[call_id] = task
            task.add_done_callback(lambda _: tasks.pop(call_id, None))

        try:
            backend = self._open_backend(out)
        except Exception:
            session.over = True
            self.finished.set()  # nothing can be served
            raise
        stream = first
        try:
            while (
                not await self._stream(session, stream, backend, out, shared, start, tasks)
                and self._resume_within and not session.ending
            ):
                resumed = await session.next_stream(self._resume_within)
                if not stream.done.done():
                    stream.done.set_result(None)  # a resumed stream's connection closes (the first's with _serve)
                if resumed is None:
                    break
                stream = resumed
        finally:
            session.over = True
            if self._uploads is not None:
                self._uploads.clear()
            for task in list(tasks.values()):
                task.cancel()
            try:
                await loop.run_in_executor(None, backend.end)
            finally:
                out.put(messages.Closed())  # on the last stream, if it is still there
                await out.close()
                for left in (stream, session.waiting):
                    if left is not None and not left.done.done():
                        left.done.set_result(None)
                if not self._successive:
                    self.finished.set()

    async def _stream(
        self, session: _Session, stream: _Stream, backend: RelayBackend, out: Outgoing,
        shared: dict[int, Shared | str], start: Callable[[int, Awaitable[None]], None],
        tasks: dict[int, asyncio.Task[None]],
    ) -> bool:
        """Serve ``session`` over ``stream`` until it ends; True when the session ends
        with it (the client said ``Close``, or sent what no client of this session would)."""
        put_message(stream.writer, messages.Resume(session.token, session.out.received))
        try:
            session.out.attach(stream.writer, stream.received)
        except ValueError:
            return True
        session.stream = stream
        acks = asyncio.ensure_future(acknowledge(session.out, stream.writer))
        try:
            while (message := await read_message(stream.reader)) is not None:
                if isinstance(message, messages.Ack):  # the client's heartbeat: answered, so it hears the relay
                    session.out.acknowledged(message.received)
                    session.out.put_control(messages.Ack(session.out.received))
                    continue
                session.out.count_received()
                try:
                    if not await self._take(message, backend, out, shared, start, tasks):
                        return True  # the session's last words (``Closed``) go on this stream
                except MalformedFrame:
                    raise
                except Exception as exc:  # the backend failed this one message: say so, serve the next
                    why = f"{type(exc).__name__}: {exc}"
                    out.put(messages.Report(f"the head relay could not handle {type(message).__name__}: {why}"))
        except MalformedFrame:
            return True  # a proven client sent garbage: end as if it closed
        finally:
            acks.cancel()
            session.stream = None
        if session.out.writer is stream.writer:
            session.out.detach()
        return False

    async def _take(
        self, message: messages.Message, backend: RelayBackend, out: Outgoing, shared: dict[int, Shared | str],
        start: Callable[[int, Awaitable[None]], None], tasks: dict[int, asyncio.Task[None]],
    ) -> bool:
        """Act on one message of the client; False once it said ``Close`` (or something
        only the relay sends)."""
        match message:
            case messages.Close():
                return False
            case messages.Call(call_id, node, body, timeout):
                start(call_id, self._call(backend, out, call_id, node, payload_of(body), timeout))
            case messages.CallShared(call_id, node, key, timeout) if isinstance(shared.get(key), Shared):
                start(call_id, self._call(backend, out, call_id, node, shared[key], timeout))  # type: ignore[arg-type]
            case messages.CallShared(call_id, node, key, _):
                why = str(shared.get(key, f"no payload is shared as {key}"))
                out.put(messages.Failed(call_id, "refused", node, why))
            case messages.Share(key, body):
                shared[key] = await self._share(backend, payload_of(body))
            case messages.ShareUploaded(key, ticket):
                upload = None if self._uploads is None else self._uploads.take(ticket)
                shared[key] = (
                    "the payload uploaded for this broadcast is not on the head node" if upload is None
                    else await self._share(backend, upload)
                )
            case messages.Unshare(key):
                dropped = shared.pop(key, None)
                if isinstance(dropped, Shared):
                    backend.unshare(dropped)
            case messages.Forget(call_id):
                task = tasks.pop(call_id, None)
                if task is not None:
                    task.cancel()
                backend.forget_collection(call_id)
            case messages.CollectionOp(call_id, request):
                start(call_id, self._collection(backend, out, call_id, request))
            case messages.Attach(call_id, node, serial, setup):
                start(call_id, self._attach(backend, out, call_id, node, serial, setup))
            case messages.Detach(node, reason):
                backend.detach(node, reason)
            case messages.Metrics(on):
                backend.set_metrics(on)
            case messages.Observed(batch):
                if self._observed is not None:
                    self._observed(batch)
            case messages.ReleaseHolds():
                await asyncio.get_running_loop().run_in_executor(None, backend.release_holds)
            case _:
                return False  # a message only the relay sends: the client is confused
        return True

    @staticmethod
    async def _share(backend: RelayBackend, payload: Payload | Upload) -> Shared | str:
        """``payload`` stored by ``backend``, or why it could not be."""
        try:
            return await backend.share(payload)
        except Exception as exc:
            return f"the payload could not be stored on the head node: {type(exc).__name__}: {exc}"

    @staticmethod
    async def _call(
        backend: RelayBackend, out: Outgoing, call_id: int, node: int, payload: Payload | Shared, timeout: float | None
    ) -> None:
        try:
            out.put(messages.Reply(call_id, wire_body(await backend.call(node, payload, timeout))))
        except TransportError as exc:
            out.put(messages.Failed(call_id, failure_kind(exc), node, exc.detail))
        except Exception as exc:  # never leave the client waiting
            out.put(messages.Failed(call_id, "refused", node, f"{type(exc).__name__}: {exc}"))

    @staticmethod
    async def _collection(backend: RelayBackend, out: Outgoing, call_id: int, request: bytes) -> None:
        try:
            out.put(messages.CollectionAnswer(call_id, await backend.collection(call_id, request)))
        except Exception as exc:  # never leave the client waiting
            out.put(messages.Failed(call_id, "refused", 0, f"{type(exc).__name__}: {exc}"))

    @staticmethod
    async def _attach(backend: RelayBackend, out: Outgoing, call_id: int, node: int, serial: int, setup: bytes) -> None:
        try:
            joined = await backend.attach(node, serial, setup)
        except Exception as exc:
            out.put(messages.Attached(call_id, f"{type(exc).__name__}: {exc}"))
            return
        out.put(messages.Attached(call_id, None, joined))
