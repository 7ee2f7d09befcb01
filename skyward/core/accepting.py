"""Accepting on a listening socket without being knocked over: a failure that passes (no
file descriptor left, no buffer or memory, a peer that hung up before its accept) waits
and tries again, and the loop ends only when the socket is closed (shut it down first: a
thread blocked in ``accept`` wakes when its socket is shut down, not when it is closed)."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Callable, Iterator

CLOSED = frozenset({errno.EBADF, errno.EINVAL, errno.ENOTSOCK})
"""What ``accept`` raises on a socket closed (or shut down) under it."""
FIRST_WAIT = 0.01
LONGEST_WAIT = 1.0
"""Seconds between tries after a failure: doubling from the first to the longest."""
WARN_EVERY = 60.0
"""Seconds between two warnings about failed accepts (the rest are counted)."""


def accepted(server: socket.socket, warn: Callable[[str], None]) -> Iterator[socket.socket]:
    """Each connection accepted on ``server``, until it is closed. Any other failure
    (``EMFILE``, ``ENFILE``, ``ENOBUFS``, ``ENOMEM``, ``ECONNABORTED``, ...) is told to
    ``warn`` (once per ``WARN_EVERY`` seconds, with how many since) and tried again after
    a wait that doubles up to ``LONGEST_WAIT``, starting over after a success."""
    wait = FIRST_WAIT
    failures = 0
    warned = -WARN_EVERY
    while True:
        try:
            connection, _ = server.accept()
        except OSError as error:
            if server.fileno() == -1 or error.errno in CLOSED:
                return
            failures += 1
            now = time.monotonic()
            if now - warned >= WARN_EVERY:
                warn(f"accepting on {_name(server)} failed {failures} time(s) ({error}); trying again")
                warned, failures = now, 0
            time.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)
            continue
        wait = FIRST_WAIT
        yield connection


def _name(server: socket.socket) -> str:
    try:
        return str(server.getsockname()) or "a socket"
    except OSError:
        return "a socket"
