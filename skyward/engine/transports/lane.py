"""A direct request/reply lane from the client to a local node agent, beside Ray.

A Ray actor call costs about 0.7 ms on a 2-core machine (two gRPC hops through the
core workers); a Unix socket round trip costs about a tenth of that. A local agent
listens on a socket in a directory of the pool that only its user can enter (and the
client checks, by ``SO_PEERCRED``, that what answers runs as its own user before it sends
a task) and serves each connection on its own thread with the same ``execute`` as its
Ray method. The client sends a ``>>`` call there when it can; anything the lane cannot
carry (out-of-band buffers, no lane, a lane not accepting yet) goes through Ray, which
stays the engine for everything else (placement, restarts, the object store). Ray's own
low-latency channels (compiled graphs) were measured and rejected: their readers
busy-poll, burning a core per idle agent.

An agent on another host than its caller (the head relay of a remote pool calling the
agents of the other hosts) listens on TCP instead, on its host's Ray address (``tcp://``
in its setup: the port is its previous agent's, so a restarted agent is found where it
was, or any free one). A TCP connection proves both ends know the pool's lane secret
before any frame is read (``core.handshake``), so the secret never crosses the network, a
stranger gets nothing read or run, and a caller never sends a task to a process that took
a dead agent's port. At most ``MAX_UNPROVEN`` connections wait in the handshake at once.

Frames are an 8-byte big-endian length and the bytes; a caller sends one and waits for
the reply (an agent that reads more than a frame closes the connection), so a small frame
is read whole by one ``recv``. A request with out-of-band buffers
(a broadcast the head relay holds: ``RayTransport.share``) is a frame of parts instead:
its first 8 bytes are ``PARTS`` plus the count of parts, then each part's length, then
the pickle and its buffers, each read into a ``bytes`` of its own (a large one in huge
pages). A reply is the agent's encoded
outcome; when it holds out-of-band buffers it is a msgpack pair of the header and the
buffers (tag ``P``), else sent as it is (tag ``B``); if ``execute`` raised, the error's
text (tag ``E``). A frame of ``huge_pages.HUGE_FROM`` bytes or more is sent apart from
its header, read straight into the ``bytes`` it is handed on as (in huge pages), and a
reply's body apart from its tag: each would otherwise be a copy of it.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn, TypeVar

import msgspec

from skyward.core import handshake, huge_pages
from skyward.core.accepting import accepted
from skyward.core.codec import MalformedFrame
from skyward.core.peers import ForeignPeer, require_same_user
from skyward.core.unix_listener import listening_at, socket_path
from skyward.engine import interruptible
from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = logging.getLogger("skyward.lane")

_LENGTH = struct.Struct("!Q")
_SMALL = 1 << 16
"""A frame up to this size is read with ``recv``, each read making the bytes it returns."""
_FIRST = 1 << 14
"""The most a frame's first read takes: a frame this small arrives in one ``recv``."""
_T = TypeVar("_T")
_R = TypeVar("_R")
TCP = "tcp://"
"""A lane address ``tcp://HOST:PORT``; a setup's ``tcp://`` alone: the agent picks them."""
MAX_UNPROVEN = 16
"""TCP connections that may wait in the handshake at once; more are closed at once."""
PARTS = 1 << 63
"""Set in a request's length: the frame is a count of parts (a pickle and its buffers)."""
MAX_PARTS = 1 << 16
"""The most parts a request may claim: a frame claiming more is refused before any part is read."""


class LaneBroken(ConnectionError):
    """The agent's end closed after the request was sent: its process died."""


class LaneFailed(RuntimeError):
    """The agent could not handle the request at all (``execute`` raised)."""


def lane_path(directory: str | None, pool_id: str, node: int) -> str:
    """Where node ``node``'s agent listens, or "" when there is no usable place."""
    return socket_path(directory, f"lane-{pool_id[:12]}-{node}.sock")


class LaneServer:
    """Accepts connections on ``address`` and answers each frame with ``handle(frame)``."""

    def __init__(self, address: str, handle: Callable[[Payload], Payload], secret: bytes = b"") -> None:
        """Listen on ``address``: a Unix socket path (mode 0600), or ``tcp://HOST:PORT``
        (PORT 0: any free one), where each connection must prove it knows ``secret``.
        OSError when the address cannot be bound."""
        self._handle = handle
        self._secret = b""
        self._path = ""
        self._unproven = threading.BoundedSemaphore(MAX_UNPROVEN)
        if address.startswith(TCP):
            if not secret:
                raise ValueError("a TCP lane needs a secret")
            self._secret = secret
            host, port = _host_port(address)
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self._socket = socket.create_server((host, port), family=family, backlog=64)
            self.address = f"{TCP}{host}:{self._socket.getsockname()[1]}"
        else:
            self._path = self.address = address
            self._socket = listening_at(address, backlog=64)  # over what this node's previous agent left
        threading.Thread(target=self._accept, name="skyward-lane", daemon=True).start()

    def _accept(self) -> None:
        for connection in accepted(self._socket, log.warning):
            if self._secret and not self._unproven.acquire(blocking=False):
                connection.close()  # too many strangers at once: they get nothing
                continue
            threading.Thread(target=self._serve, args=(connection,), name="skyward-lane-call", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                if self._secret:
                    _keep_alive(connection)
                    try:
                        proven = handshake.answer_caller(connection, self._secret)
                    finally:
                        self._unproven.release()
                    if not proven:
                        return  # a stranger: nothing is read from it
                while True:
                    frame = _receive_request(connection)
                    if frame is None:
                        return
                    try:
                        reply = self._handle(frame)
                    except Exception as exc:  # noqa: BLE001 - reported to the client
                        _send(connection, b"E", f"{type(exc).__name__}: {exc}".encode())
                        continue
                    if isinstance(reply, bytes):
                        _send(connection, b"B", reply)
                    else:
                        header, buffers = reply
                        _send(connection, b"P", msgspec.msgpack.encode((header, [memoryview(b) for b in buffers])))
            except OSError:
                return  # the client gave up on this connection (timeout, Ctrl-C)
            except MalformedFrame as exc:
                log.warning("lane request refused: %s", exc)

    def close(self) -> None:
        try:
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread: the port is free
        except OSError:
            pass
        self._socket.close()
        if self._path:
            try:
                os.unlink(self._path)
            except OSError:
                pass


class LaneClient:
    """The client's connections to one agent's lane (a Unix socket path, or
    ``tcp://HOST:PORT`` proven with ``secret``): one per caller at a time."""

    def __init__(self, address: str, secret: bytes = b"") -> None:
        self.address = address
        self._secret = secret
        self._idle: deque[socket.socket] = deque()
        self._busy: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        # the connections of ``call_async``, on the one loop that makes them
        self._idle_streams: deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = deque()
        self._busy_streams: set[asyncio.StreamWriter] = set()
        self._stream_loop: asyncio.AbstractEventLoop | None = None

    def call(self, payload: Payload | bytearray, timeout: float | None) -> Payload | None:
        """The agent's reply to ``payload``; None if it was not delivered (no agent is
        listening: use Ray). Raises ``LaneBroken`` if the agent died (or the lane was
        closed) after receiving it, ``LaneFailed`` if it could not handle it,
        ``TimeoutError`` if no reply came within ``timeout``."""
        connection = self._connection()
        if connection is None:
            return None
        try:
            if isinstance(payload, tuple) or len(payload) >= _SMALL:
                _set_timeout(connection, None)  # not bounded by the last call's read timeout
            # a small one goes out at once, whatever the timeout
            if not isinstance(payload, tuple):
                _send(connection, b"", payload)
            else:
                _send_parts(connection, *payload)
        except OSError:
            self._drop(connection)
            return None  # never reached the agent: nothing ran
        try:
            reply = _receive_reply(connection, _patience(connection, timeout))
            if reply is None:
                raise LaneBroken("the agent closed the connection")
        except BaseException as exc:
            self._drop(connection)  # a late reply would confuse its next caller
            _raise_reply_failure(exc, timeout)
        self._release(connection)
        return _reply(*reply)

    async def call_async(self, payload: bytes, timeout: float | None) -> Payload | None:
        """``call`` on the running loop (always the same one), without a thread between:
        the same answers and errors."""
        stream = await self._stream()
        if stream is None:
            return None
        reader, writer = stream
        try:
            writer.write(_LENGTH.pack(len(payload)))
            writer.write(payload)
            await writer.drain()
        except OSError:
            self._drop_stream(writer)
            return None  # never reached the agent: nothing ran
        try:
            reply = await asyncio.wait_for(_receive_reply_async(reader), timeout)
            if reply is None:
                raise LaneBroken("the agent closed the connection")
        except BaseException as exc:
            self._drop_stream(writer)  # a late reply would confuse its next caller
            _raise_reply_failure(exc, timeout)
        self._busy_streams.discard(writer)
        if self._closed:
            writer.close()
        else:
            self._idle_streams.append(stream)
        return _reply(*reply)

    async def _stream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """An idle or new connection of ``call_async``, or None: use Ray."""
        if self._closed:
            return None
        self._stream_loop = asyncio.get_running_loop()
        if self._idle_streams:
            stream = self._idle_streams.pop()
        else:
            dialled = await self._dial_async()
            if dialled is None:
                return None
            stream = dialled
        if self._closed:
            stream[1].close()
            return None
        self._busy_streams.add(stream[1])
        return stream

    async def _dial_async(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """``_dial`` on the running loop."""
        tcp = self.address.startswith(TCP)
        try:
            if tcp:
                opening = asyncio.open_connection(*_host_port(self.address))
            else:
                opening = asyncio.open_unix_connection(self.address)
            reader, writer = await asyncio.wait_for(opening, handshake.TIMEOUT)
        except (OSError, asyncio.TimeoutError):
            return None
        try:
            if tcp:
                _keep_alive(writer.get_extra_info("socket"))
                reached = await handshake.prove_to_server_async(reader, writer, self._secret)
            else:
                require_same_user(writer.get_extra_info("socket"), "the agent of this lane")
                reached = True
        except (OSError, ForeignPeer):
            reached = False
        if not reached:
            writer.close()
            return None
        return reader, writer

    def _drop_stream(self, writer: asyncio.StreamWriter) -> None:
        self._busy_streams.discard(writer)
        writer.close()

    def close(self) -> None:
        """Close the idle connections and end the calls waiting on the others (they
        raise ``LaneBroken``): the node left, and a TCP peer that vanished with its host
        would never answer them. From any thread."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            busy = list(self._busy)
        for connection in idle:
            connection.close()
        for connection in busy:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        loop = self._stream_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._close_streams)

    def _close_streams(self) -> None:
        writers = [writer for _, writer in self._idle_streams] + list(self._busy_streams)
        self._idle_streams.clear()
        for writer in writers:
            writer.transport.abort()  # a waiting reader sees the end at once

    def _connection(self) -> socket.socket | None:
        with self._lock:
            if self._closed:
                return None
            if self._idle:
                idle = self._idle.pop()
                self._busy.add(idle)
                return idle
        connection = self._dial()
        if connection is None:
            return None
        with self._lock:
            if self._closed:
                connection.close()
                return None
            self._busy.add(connection)
        return connection

    def _dial(self) -> socket.socket | None:
        """A new connection to the agent, or None (closed again) when nothing listens
        there or what listens is not the agent (a process took its port): use Ray."""
        tcp = self.address.startswith(TCP)
        try:
            if tcp:
                connection = socket.create_connection(_host_port(self.address), timeout=handshake.TIMEOUT)
            else:
                connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            return None
        try:
            if tcp:
                _keep_alive(connection)
                reached = handshake.prove_to_server(connection, self._secret)
            else:
                connection.connect(self.address)
                require_same_user(connection, "the agent of this lane")
                reached = True
        except (OSError, ForeignPeer):
            reached = False
        if not reached:
            connection.close()
            return None
        return connection

    def _release(self, connection: socket.socket) -> None:
        with self._lock:
            self._busy.discard(connection)
            if not self._closed:
                self._idle.append(connection)
                return
        connection.close()

    def _drop(self, connection: socket.socket) -> None:
        with self._lock:
            self._busy.discard(connection)
        connection.close()


def _raise_reply_failure(exc: BaseException, timeout: float | None) -> NoReturn:
    """Raise what a wait for a reply that raised ``exc`` raises: a timeout as
    ``TimeoutError("no reply within ...")``, a broken or closed connection (``OSError``,
    ``asyncio.IncompleteReadError``) as ``LaneBroken``, anything else (``LaneBroken``
    itself, an interrupt, a cancellation) as it is. A connection the kernel gave up on
    (``ETIMEDOUT``: its keepalives went unanswered, the agent's host is unreachable) is
    broken, not slow, though Python raises it as a ``TimeoutError`` too."""
    if isinstance(exc, TimeoutError) and exc.errno == errno.ETIMEDOUT:
        raise LaneBroken(f"the connection timed out: {exc.strerror} (the agent's host is unreachable)") from None
    if isinstance(exc, TimeoutError):
        raise TimeoutError(f"no reply within {timeout}s") from None
    if isinstance(exc, (OSError, asyncio.IncompleteReadError)) and not isinstance(exc, LaneBroken):
        raise LaneBroken(str(exc) or "the agent closed the connection") from None
    raise exc


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address[len(TCP):].rpartition(":")
    return host.strip("[]"), int(port)


def _keep_alive(connection: socket.socket) -> None:
    """No delay for small frames, and TCP keepalives: a call to an agent whose host
    vanished (no reset ever comes) fails within ~25 s instead of waiting forever."""
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    connection.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):
            connection.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _reply(tag: bytes, body: bytes) -> Payload:
    """What a reply frame carries; ``LaneFailed`` for the agent's error."""
    if tag == b"E":
        raise LaneFailed(body.decode(errors="replace"))
    return body if tag == b"B" else _split(body)


async def _receive_reply_async(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """``_receive_reply`` on a stream: a reply's tag and body, or None if the peer closed
    before one began."""
    try:
        header = await reader.readexactly(_LENGTH.size)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise
        return None
    size = _LENGTH.unpack(header)[0]
    if size < huge_pages.HUGE_FROM:
        frame = await reader.readexactly(size)
        return frame[:1], frame[1:]
    return await reader.readexactly(1), await reader.readexactly(size - 1)


_PAYLOAD = msgspec.msgpack.Decoder(tuple[bytes, list[bytes]])
"""Decodes a ``P`` reply into exactly a header and a list of buffers."""


def _split(body: bytes) -> Payload:
    """A ``P`` reply's header and out-of-band buffers."""
    try:
        return _PAYLOAD.decode(body)
    except msgspec.DecodeError as exc:
        raise MalformedFrame(f"a lane reply that is not a header and buffers: {exc}") from None


def _send(connection: socket.socket, tag: bytes, payload: bytes | bytearray) -> None:
    _write(connection, _LENGTH.pack(len(tag) + len(payload)) + tag, payload)


def _write(connection: socket.socket, head: bytes, body: bytes | bytearray) -> None:
    """``head``, then ``body``: one write, or two when ``body`` is large, rather than
    copying it to join them."""
    if len(body) < huge_pages.HUGE_FROM:
        connection.sendall(head + body)
    else:
        connection.sendall(head)
        connection.sendall(body)


def _send_parts(connection: socket.socket, header: bytes, buffers: Sequence[ReadableBuffer]) -> None:
    """A request of ``header`` and its out-of-band ``buffers`` as one frame of parts, each
    buffer written from where it lies."""
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    lengths = b"".join(_LENGTH.pack(part) for part in (len(header), *(view.nbytes for view in views)))
    _write(connection, _LENGTH.pack(PARTS | (1 + len(views))) + lengths, header)
    for view in views:
        connection.sendall(view)


def _receive_request(connection: socket.socket) -> Payload | None:
    """A request: one frame's bytes, or a frame of parts' pickle and buffers; None if the
    peer closed before a new one began."""
    frame = _Incoming(connection, None)
    if not frame.begin():
        return None
    size = _LENGTH.unpack(frame.take(_LENGTH.size))[0]
    if not size & PARTS:
        return frame.last(size)
    count = size & ~PARTS
    if not 0 < count <= MAX_PARTS:
        raise MalformedFrame(f"a lane request of {count} parts")
    lengths = [part for (part,) in _LENGTH.iter_unpack(frame.take(_LENGTH.size * count))]
    parts = [frame.take(part) for part in lengths[:-1]]
    parts.append(frame.last(lengths[-1]))
    return parts[0], parts[1:]


def _patience(connection: socket.socket, timeout: float | None) -> float | None:
    """Set ``connection`` up to wait ``timeout`` seconds (None: forever) for a reply and
    return the deadline ``_receive_reply`` keeps to: None where a read's own timeout does it. In
    the main thread each read waits one slice at most (see ``interruptible``)."""
    if not interruptible.sliced():
        _set_timeout(connection, timeout)
        return None
    _set_timeout(connection, interruptible.SLICE if timeout is None else min(interruptible.SLICE, timeout))
    return time.monotonic() + (float("inf") if timeout is None else timeout)


def _set_timeout(connection: socket.socket, timeout: float | None) -> None:
    """``connection.settimeout(timeout)`` unless it has that timeout already (each change
    is a system call or two)."""
    if connection.gettimeout() != timeout:
        connection.settimeout(timeout)


def _receive_reply(connection: socket.socket, deadline: float | None) -> tuple[bytes, bytes] | None:
    """A reply frame's tag and its body, a large body read apart from its tag
    (splitting the frame would copy it)."""
    frame = _Incoming(connection, deadline)
    if not frame.begin():
        return None
    size = _LENGTH.unpack(frame.take(_LENGTH.size))[0]
    if size < huge_pages.HUGE_FROM:
        body = frame.last(size)
        return body[:1], body[1:]
    return frame.take(1), frame.last(size - 1)


class _Incoming:
    """One frame as it arrives on ``connection``. The first read takes whatever is there,
    up to ``_FIRST`` bytes, so a small frame costs one ``recv``; later reads take exactly
    what is still missing. A peer sends one frame and waits for the answer, so bytes
    beyond the frame are a ``MalformedFrame``."""

    __slots__ = ("_connection", "_deadline", "_held", "_at")

    def __init__(self, connection: socket.socket, deadline: float | None) -> None:
        self._connection = connection
        self._deadline = deadline
        self._held = b""
        self._at = 0

    def begin(self) -> bool:
        """Wait for the frame's first bytes; False if the peer closed before it began."""
        self._held = _read(self._connection, self._connection.recv, _FIRST, self._deadline)
        return bool(self._held)

    def take(self, size: int) -> bytes:
        """The frame's next ``size`` bytes."""
        held, at = self._held, self._at
        if len(held) - at >= size:
            self._at = at + size
            return held if at == 0 and size == len(held) else held[at:at + size]
        self._held, self._at = b"", 0
        return _exactly(self._connection, size, self._deadline, held[at:])

    def last(self, size: int) -> bytes:
        """The frame's last ``size`` bytes; ``MalformedFrame`` if more came after them."""
        body = self.take(size)
        if self._at < len(self._held):
            raise MalformedFrame("a lane peer sent more than one frame at a time")
        return body


def _exactly(connection: socket.socket, size: int, deadline: float | None, start: bytes = b"") -> bytes:
    """``size`` bytes that begin with ``start`` (what a first read brought): a small frame
    as ``recv`` returns it, a large one straight into the ``bytes`` returned, in huge
    pages (``huge_pages.to_fill``), one in between read into a buffer and copied out.
    ``ConnectionResetError`` if the peer closes before they all came."""
    got = len(start)
    if size <= _SMALL:
        parts = [start] if start else []
        while got < size:
            part = _read(connection, connection.recv, size - got, deadline)
            if not part:
                raise ConnectionResetError("the peer closed mid-frame")
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)
    filled = huge_pages.to_fill(size)
    made, view = filled if filled is not None else (None, memoryview(bytearray(size)))
    view[:got] = start
    while got < size:
        count = _read(connection, connection.recv_into, view[got:], deadline)
        if count == 0:
            raise ConnectionResetError("the peer closed mid-frame")
        got += count
    return bytes(view) if made is None else made


def _read(connection: socket.socket, read: Callable[[_T], _R], into: _T, deadline: float | None) -> _R:
    """``read(into)``, a read of ``connection``: one that times out is tried again until
    ``deadline`` (see ``_patience``)."""
    while True:
        try:
            return read(into)
        except TimeoutError as exc:
            if exc.errno is not None:  # ETIMEDOUT: the peer stopped answering keepalives
                raise ConnectionResetError(f"the peer is gone: {exc}") from None
            left = float("-inf") if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise
            connection.settimeout(min(interruptible.SLICE, left))
