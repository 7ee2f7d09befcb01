"""What keeps the pool daemon's HTTP API (``daemon.http_api``) up under strangers on loopback:
every user of the machine can connect to it, before the token is checked.

- ``BoundedH11``: at most ``MAX_CONNECTIONS`` connections at once, and a connection that
  has not sent a whole request's headers within ``REQUEST_TIMEOUT`` seconds of opening
  (or of its last answer) is closed: half-sent requests no longer pile up without limit.
  When the connections are all taken, a new one takes the place of the one that has
  waited longest for its request (a client that sends its request at once, as every
  real one does, is served while someone holds half-sent ones); only when every
  connection is being answered is the new one closed.
- ``Loopback``: a request whose ``Host`` is not the API's own address (a DNS-rebinding
  page's name) or that carries an ``Origin`` header (a browser's cross-site request) is
  answered 403 before anything else of it is read.
- ``RateLimited``: a log filter that lets a message through once per ``LOG_EVERY``
  seconds and counts the rest, so malformed requests cannot grow the daemon's log.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_CONNECTIONS = 64
"""Connections the API holds at once."""
REQUEST_TIMEOUT = 10.0
"""Seconds a connection has to send a whole request's headers."""
LOG_EVERY = 60.0
"""Seconds between two log lines of the same message."""


class BoundedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, bounded (see the module)."""

    _waiting_since: float | None = None
    _check: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        full = len(self.connections) >= MAX_CONNECTIONS
        super().connection_made(transport)
        if full and not self._make_room():
            transport.abort()
            return
        self._wait_for_a_request()

    def _make_room(self) -> bool:
        """Close the connection that has waited longest for a request; False when every
        other connection is being answered."""
        waiting = [
            other for other in self.connections
            if other is not self and isinstance(other, BoundedH11) and other._waiting_since is not None
        ]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda other: other._waiting_since or 0.0)
        oldest._waiting_since = None
        oldest.transport.abort()
        return True

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and not self.cycle.response_complete:
            self._waiting_since = None  # a whole request came: it is being answered

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._wait_for_a_request()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._check is not None:
            self._check.cancel()
        super().connection_lost(exc)

    def _wait_for_a_request(self) -> None:
        self._waiting_since = time.monotonic()
        if self._check is not None:
            self._check.cancel()
        self._check = self.loop.call_later(REQUEST_TIMEOUT, self._too_slow)

    def _too_slow(self) -> None:
        """Close the connection when it still has not sent a whole request."""
        waiting = self._waiting_since
        if waiting is not None and time.monotonic() - waiting >= REQUEST_TIMEOUT and not self.transport.is_closing():
            self.transport.abort()


class Loopback:
    """ASGI middleware: 403 for a ``Host`` other than ``127.0.0.1:<port>`` or
    ``localhost:<port>``, and for any request with an ``Origin`` header (see the module)."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self._app = app
        self._hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host = headers.get("host", "")
            if host not in self._hosts or "origin" in headers:
                why = (
                    f"the Host header {host!r} is not this API's address ({' or '.join(sorted(self._hosts))})"
                    if host not in self._hosts else "requests from a web page (with an Origin header) are refused"
                )
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": json.dumps({"error": why}).encode()})
                return
        await self._app(scope, receive, send)


class RateLimited(logging.Filter):
    """Lets each message (by its format) through once per ``LOG_EVERY`` seconds; the next
    one that passes says how many were left out."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        key = str(record.msg)
        last, dropped = self._last.get(key, (-LOG_EVERY, 0))
        if now - last < LOG_EVERY:
            self._last[key] = (last, dropped + 1)
            return False
        self._last[key] = (now, 0)
        if dropped:
            record.msg = f"{record.msg} ({dropped} more like it in the last {LOG_EVERY:g}s left out)"
        return True
