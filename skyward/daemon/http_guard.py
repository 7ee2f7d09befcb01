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
  page's name) or whose ``Origin`` header is another origin than the API's own (a
  browser's cross-site request; the dashboard's own page, ``observe.dashboard``, is of
  the API's origin) is answered 403 before anything else of it is read.
- ``RateLimited``: a log filter that lets a message through once per ``LOG_EVERY``
  seconds and counts the rest, so malformed requests cannot grow the daemon's log.

``LoopbackServer`` serves an app so bounded on 127.0.0.1, in a thread of its own: the
daemon's API, and the dashboard of a pool with ``Options(dashboard=True)``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Callable

import uvicorn
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
    ``localhost:<port>``, and for an ``Origin`` header other than ``http://`` and that
    host (see the module)."""

    def __init__(self, app: ASGIApp, port: int) -> None:
        self._app = app
        self._hosts = {f"127.0.0.1:{port}", f"localhost:{port}"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            host = headers.get("host", "")
            origin = headers.get("origin")
            if host not in self._hosts or (origin is not None and origin != f"http://{host}"):
                why = (
                    f"the Host header {host!r} is not this API's address ({' or '.join(sorted(self._hosts))})"
                    if host not in self._hosts
                    else f"requests from a web page of another origin (Origin: {str(origin)[:100]!r}) are refused"
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


class LoopbackServer:
    """An ASGI app served by uvicorn on 127.0.0.1 at a port the OS picks, in a thread
    named ``name``, with ``BoundedH11`` and uvicorn's log lines ``RateLimited``."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, app: Callable[[int], ASGIApp], timeout: float, graceful: float) -> int:
        """Listen, serve ``app(port)``; the port. RuntimeError when the server does not
        start within ``timeout`` seconds; open responses get ``graceful`` seconds when
        it stops."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        port = int(listener.getsockname()[1])
        config = uvicorn.Config(
            app(port), log_config=None, log_level="warning", access_log=False, lifespan="off", http=BoundedH11,
            ws="none", loop="asyncio", timeout_graceful_shutdown=max(1, int(graceful)),
        )
        for logger_name in ("uvicorn", "uvicorn.error"):
            logger = logging.getLogger(logger_name)
            if not any(isinstance(known, RateLimited) for known in logger.filters):
                logger.addFilter(RateLimited())
        server = uvicorn.Server(config)
        self._server = server
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[listener])), name=self._name, daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                listener.close()
                raise RuntimeError(f"the HTTP server did not start within {timeout:g}s (see the log above)")
            time.sleep(0.01)
        return port

    def stop(self, timeout: float) -> None:
        """Stop serving (waiting up to ``timeout`` seconds)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout)
