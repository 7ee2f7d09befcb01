"""The private socket pair between the pool daemon and the host process of one of its
remote kept pools (``daemon.pool_host``): framed typed messages (``core.codec``), a
``ServeSession`` carrying the connection it names as a file descriptor (``SCM_RIGHTS``).
Either end sends from any thread, one message at a time; one thread receives.

The pair is made by the daemon and its other end inherited by the host it starts, so
each end's peer is the process it expects: the user payloads inside (a pool's
definition, its nodes, event batches) are loaded from it as from a worker's pipe."""

from __future__ import annotations

import contextlib
import socket
import threading

from skyward.core.codec import FRAME_HEADER, MalformedFrame, decode_message, frame, recv_exactly
from skyward.core.messages import Message

MESSAGE_LIMIT = 1 << 30
"""The most bytes one message may have (an event batch of a busy pool is the largest)."""


class HostChannel:
    """One end of the pair (see the module)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._sending = threading.Lock()

    def send(self, message: Message, connection: socket.socket | None = None) -> None:
        """Send ``message``, with ``connection``'s descriptor when given (the receiver
        gets its own; the caller closes this one). ``OSError`` when the other end is gone."""
        data = frame(message)
        with self._sending:
            sent = socket.send_fds(self._sock, [data], [connection.fileno()]) if connection is not None else 0
            self._sock.sendall(data[sent:])

    def receive(self) -> tuple[Message, socket.socket | None] | None:
        """The next message and the connection sent with it, or None once the other end
        closed its end. ``MalformedFrame`` when the bytes are not a message."""
        first, fds, _, _ = socket.recv_fds(self._sock, FRAME_HEADER.size, 1)
        if not first:
            return None
        connection = socket.socket(fileno=fds[0]) if fds else None
        try:
            rest = recv_exactly(self._sock, FRAME_HEADER.size - len(first)) if len(first) < FRAME_HEADER.size else b""
            if rest is None:
                raise MalformedFrame("the channel ended inside a frame's header")
            size = FRAME_HEADER.unpack(first + rest)[0]
            if size > MESSAGE_LIMIT:
                raise MalformedFrame(f"a frame of {size} bytes, over the limit of {MESSAGE_LIMIT}")
            body = recv_exactly(self._sock, size)
            if body is None:
                raise MalformedFrame("the channel ended inside a frame")
            return decode_message(body), connection
        except BaseException:
            if connection is not None:
                connection.close()
            raise

    def close(self) -> None:
        """Close this end (the other end's ``receive`` returns None, and so does a
        ``receive`` waiting here)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()
