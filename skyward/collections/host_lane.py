"""A collection host's Unix socket, for the processes of its own machine.

A strong operation is one call to the collection's host actor. Through Ray that call
costs two gRPC hops through the core workers (about 0.6 ms on a 2-core machine); on a
local pool, where the client, the node agents and the hosts share one machine, a Unix
socket round trip costs a fraction of it. So when the pool gives its collections a
private directory (``CollectionsConfig.lanes_dir``: a local pool's Ray directory, mode
0700), each host also listens there (``lane_path``) and serves the operations that never
wait (the host's ``call``) to whoever connects, one connection per caller at a time,
each on its own thread. Both ends check by ``SO_PEERCRED`` that the other runs as their
own user before a frame is read, so only this user's processes reach the host and
nobody else's socket is ever sent a request.

The lane is only a shortcut: a request carries the same ticket as through Ray, and the
host applies a ticket once (``replies``). So whatever goes wrong on the lane (nothing
listens, the connection breaks, the host refuses a malformed request by closing it) the
caller sends the same request through Ray, which answers it or reports the host's death
as before. Operations that may wait, and every other host method, stay on Ray.

Frames are an 8-byte big-endian length and the bytes: the request, then the host's packed
outcome.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable

from skyward.collections.steps import WAIT_SLICE
from skyward.core.accepting import accepted
from skyward.core.codec import recv_exactly
from skyward.core.peers import ForeignPeer, require_same_user
from skyward.core.unix_listener import listening_at, socket_path

log = logging.getLogger("skyward.collections")

_LENGTH = struct.Struct("!Q")
COPY_BELOW = 64 << 10
"""A frame smaller than this is copied behind its header and sent in one write."""
CONNECT_TIMEOUT = 5.0
"""The longest a caller waits to connect before it sends through Ray."""


def lane_path(directory: str, pool_id: str, index: int) -> str:
    """Where host ``index`` of pool ``pool_id`` listens, or "" when there is no usable place."""
    return socket_path(directory, f"host-{pool_id[:12]}-{index}.sock")


class HostLaneServer:
    """Listens at ``path`` (mode 0600) and answers each request with ``serve(request)``.
    OSError when the socket cannot be made."""

    def __init__(self, path: str, serve: Callable[[bytes], bytes]) -> None:
        self._serve_request = serve
        self._path = path
        self._socket = listening_at(path, backlog=64)
        threading.Thread(target=self._accept, name="skyward-host-lane", daemon=True).start()

    def _accept(self) -> None:
        for connection in accepted(self._socket, log.warning):
            try:
                threading.Thread(target=self._serve, args=(connection,), name="skyward-host-lane-call", daemon=True).start()
            except RuntimeError as exc:  # no thread to serve it: the caller sees the end and uses Ray
                log.warning("a collection host's lane refused a caller: %s", exc)
                connection.close()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                require_same_user(connection, "a caller of this collection host")
            except ForeignPeer as refused:
                log.warning("%s", refused)
                return  # nothing is read from it
            try:
                while (request := _receive(connection)) is not None:
                    _send(connection, self._serve_request(request))
            except Exception:  # noqa: BLE001 - a broken connection or a malformed request: the caller uses Ray
                return

    def close(self) -> None:
        """Stop accepting and remove the socket's path."""
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self._socket.close()
        with contextlib.suppress(OSError):
            os.unlink(self._path)


class HostLaneClient:
    """This process's connections to one host's lane at ``path``: one per caller at a
    time. Once nothing listens there (or what listens is not this user's), the lane is
    given up (``usable`` False). A forked child of this process does not use it: the
    connections and tickets it inherited are its parent's."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.usable = True
        self._pid = os.getpid()
        self._idle: deque[socket.socket] = deque()
        self._lock = threading.Lock()

    def call(self, request: bytes, timeout: float | None) -> bytes | None:
        """The host's answer to ``request``, or None when the lane could not carry it
        (send it through Ray: the host applies its ticket once). TimeoutError when no
        answer came within ``timeout`` seconds (None: no limit). Blocks at most
        ``WAIT_SLICE`` at a time, so an interrupt of the caller's thread lands; the
        connection of a call that did not end with its answer is closed, never reused."""
        connection = self._connection()
        if connection is None:
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            _send_by(connection, request, deadline)
            answer = _receive_by(connection, deadline)
        except TimeoutError:
            connection.close()
            raise TimeoutError(f"no answer within {timeout:g}s") from None
        except OSError:
            connection.close()
            return None
        except BaseException:  # an interrupt mid-call: a late answer would confuse the next caller
            connection.close()
            raise
        if answer is None:
            connection.close()
            return None
        with self._lock:
            kept = self.usable
            if kept:
                self._idle.append(connection)
        if not kept:
            connection.close()
        return answer

    def close(self) -> None:
        """Give the lane up and close its idle connections; a call still running closes
        its own when it ends."""
        with self._lock:
            self.usable = False
            idle, self._idle = list(self._idle), deque()
        for connection in idle:
            connection.close()

    def _connection(self) -> socket.socket | None:
        """An idle or new connection, or None: use Ray."""
        if os.getpid() != self._pid:
            return None
        with self._lock:
            if not self.usable:
                return None
            if self._idle:
                return self._idle.pop()
        try:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            return None  # no descriptor left just now
        try:
            connection.settimeout(CONNECT_TIMEOUT)
            connection.connect(self.path)
            require_same_user(connection, "the collection host at this path")
        except (FileNotFoundError, ConnectionRefusedError, ForeignPeer):
            connection.close()
            self.usable = False  # nothing of this user's listens there
            return None
        except OSError:
            connection.close()  # its backlog full, say: this call goes through Ray
            return None
        return connection


def _send(connection: socket.socket, data: bytes) -> None:
    """One frame from the host, blocking: a small one in one write, a large one without
    copying it."""
    for part in _framed(data):
        connection.sendall(part)


def _framed(data: bytes) -> tuple[bytes, ...]:
    header = _LENGTH.pack(len(data))
    return (header + data,) if len(data) < COPY_BELOW else (header, data)


def _receive(connection: socket.socket) -> bytes | None:
    """One frame to the host, blocking, or None if the peer closed before one began."""
    header = recv_exactly(connection, _LENGTH.size)
    if header is None:
        return None
    body = recv_exactly(connection, _LENGTH.unpack(header)[0])
    if body is None:
        raise ConnectionResetError("the peer closed mid-frame")
    return body


def _slice(deadline: float | None) -> float:
    """How long the next blocking step may take: at most ``WAIT_SLICE``, and no later
    than ``deadline`` (monotonic; None: none); TimeoutError once it has passed."""
    if deadline is None:
        return WAIT_SLICE
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return min(WAIT_SLICE, left)


def _send_by(connection: socket.socket, data: bytes, deadline: float | None) -> None:
    """One frame, sent in steps of at most a slice each, by ``deadline``."""
    for part in _framed(data):
        view = memoryview(part)
        while view:
            connection.settimeout(_slice(deadline))
            try:
                view = view[connection.send(view):]
            except TimeoutError:
                continue


def _receive_by(connection: socket.socket, deadline: float | None) -> bytes | None:
    """One frame, read in steps of at most a slice each, by ``deadline``; None if the
    peer closed before it began."""
    header = _read_by(connection, _LENGTH.size, deadline)
    if header is None:
        return None
    body = _read_by(connection, _LENGTH.unpack(header)[0], deadline)
    if body is None:
        raise ConnectionResetError("the host closed mid-frame")
    return body


def _read_by(connection: socket.socket, size: int, deadline: float | None) -> bytes | None:
    """``size`` bytes by ``deadline``, or None if the peer closed before the first."""
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        connection.settimeout(_slice(deadline))
        try:
            count = connection.recv_into(view[got:])
        except TimeoutError:
            continue
        if count == 0:
            if got == 0:
                return None
            raise ConnectionResetError("the host closed mid-frame")
        got += count
    return bytes(data)
