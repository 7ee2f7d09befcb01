"""A direct request/reply lane from the client to a local node agent, beside Ray.

A Ray actor call costs about 0.7 ms on a 2-core machine (two gRPC hops through the
core workers); a Unix socket round trip costs about a tenth of that. A local agent
listens on a socket in the pool's private Ray temp dir (mode 0700: only this user can
connect) and serves each connection on its own thread with the same ``execute`` as its
Ray method. The client sends a ``>>`` call there when it can; anything the lane cannot
carry (out-of-band buffers, no lane, a lane not accepting yet) goes through Ray, which
stays the engine for everything else (placement, restarts, the object store). Ray's own
low-latency channels (compiled graphs) were measured and rejected: their readers
busy-poll, burning a core per idle agent.

Frames are an 8-byte big-endian length and the bytes. A reply is the agent's encoded
outcome; when it holds out-of-band buffers it is pickled whole (tag ``P``), else sent
as it is (tag ``B``); if ``execute`` raised, the error's text (tag ``E``).
"""

from __future__ import annotations

import os
import pickle
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable

from skyward.engine import interruptible
from skyward.engine.wire import Payload

_LENGTH = struct.Struct("!Q")
_MAX_PATH = 100  # AF_UNIX paths are limited to 107 bytes


class LaneBroken(ConnectionError):
    """The agent's end closed after the request was sent: its process died."""


class LaneFailed(RuntimeError):
    """The agent could not handle the request at all (``execute`` raised)."""


def lane_path(directory: str | None, pool_id: str, node: int) -> str:
    """Where node ``node``'s agent listens, or "" when there is no usable place."""
    if not directory:
        return ""
    path = os.path.join(directory, f"lane-{pool_id[:12]}-{node}.sock")
    return path if len(path) <= _MAX_PATH else ""


class LaneServer:
    """Accepts connections on ``path`` and answers each frame with ``handle(frame)``."""

    def __init__(self, path: str, handle: Callable[[bytes], Payload]) -> None:
        self._handle = handle
        self._path = path
        if os.path.exists(path):
            os.unlink(path)  # left by this node's previous agent
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._socket.bind(path)
        os.chmod(path, 0o600)
        self._socket.listen(64)
        threading.Thread(target=self._accept, name="skyward-lane", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(connection,), name="skyward-lane-call", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                while True:
                    frame = _receive(connection)
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
                        _send(connection, b"P", pickle.dumps(reply, protocol=5))
            except OSError:
                return  # the client gave up on this connection (timeout, Ctrl-C)

    def close(self) -> None:
        self._socket.close()
        try:
            os.unlink(self._path)
        except OSError:
            pass


class LaneClient:
    """The client's connections to one agent's lane: one per caller at a time."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._idle: deque[socket.socket] = deque()
        self._closed = False

    def call(self, payload: bytes, timeout: float | None) -> Payload | None:
        """The agent's reply to ``payload``; None if it was not delivered (no agent is
        listening: use Ray). Raises ``LaneBroken`` if the agent died after receiving it,
        ``LaneFailed`` if it could not handle it, ``TimeoutError`` if no reply came within
        ``timeout``."""
        connection = self._connection()
        if connection is None:
            return None
        try:
            connection.settimeout(None)  # a send is not bounded by the last call's read timeout
            _send(connection, b"", payload)
        except OSError:
            connection.close()
            return None  # never reached the agent: nothing ran
        try:
            frame = _receive(connection, _patience(connection, timeout))
        except TimeoutError:
            connection.close()
            raise
        except OSError as exc:
            connection.close()
            raise LaneBroken(str(exc)) from None
        except BaseException:
            connection.close()  # interrupted: the reply would confuse the next caller
            raise
        if frame is None:
            connection.close()
            raise LaneBroken("the agent closed the connection")
        self._release(connection)
        tag, body = frame[:1], frame[1:]
        if tag == b"E":
            raise LaneFailed(body.decode(errors="replace"))
        return body if tag == b"B" else pickle.loads(body)

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _connection(self) -> socket.socket | None:
        try:
            return self._idle.pop()
        except IndexError:
            pass
        if self._closed:
            return None
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(self._path)
        except OSError:
            connection.close()
            return None
        return connection

    def _release(self, connection: socket.socket) -> None:
        if self._closed:
            connection.close()
        else:
            self._idle.append(connection)


def _send(connection: socket.socket, tag: bytes, payload: bytes) -> None:
    connection.sendall(_LENGTH.pack(len(tag) + len(payload)) + tag + payload)


def _patience(connection: socket.socket, timeout: float | None) -> float | None:
    """Set ``connection`` up to wait ``timeout`` seconds (None: forever) for a reply and
    return the deadline ``_receive`` keeps to: None where a read's own timeout does it. In
    the main thread each read waits one slice at most (see ``interruptible``)."""
    if not interruptible.sliced():
        connection.settimeout(timeout)
        return None
    connection.settimeout(interruptible.SLICE if timeout is None else min(interruptible.SLICE, timeout))
    return time.monotonic() + (float("inf") if timeout is None else timeout)


def _receive(connection: socket.socket, deadline: float | None = None) -> bytes | None:
    """One frame, or None if the peer closed before a new frame began. With a
    ``deadline`` (a ``time.monotonic()`` value) a read that times out is tried again until
    then, and TimeoutError is raised after it."""
    header = _exactly(connection, _LENGTH.size, True, deadline)
    if header is None:
        return None
    body = _exactly(connection, _LENGTH.unpack(header)[0], False, deadline)
    assert body is not None
    return body


def _exactly(connection: socket.socket, size: int, eof_ok: bool, deadline: float | None) -> bytes | None:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        try:
            count = connection.recv_into(view[got:])
        except TimeoutError:
            left = float("-inf") if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise
            connection.settimeout(min(interruptible.SLICE, left))
            continue
        if count == 0:
            if got == 0 and eof_ok:
                return None
            raise ConnectionResetError("the peer closed mid-frame")
        got += count
    return bytes(buffer)
