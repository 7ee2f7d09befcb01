"""The dashboard's routes (docs/dashboard.md): the page and its assets, a JSON snapshot
and a server-sent event stream of the pools a ``boards`` function lists, behind a
one-time login link.

- ``GET /dashboard/login?token=T``: a link's token, good once and for ``LINK_TTL``
  seconds, is exchanged for a session cookie (HttpOnly, SameSite=Strict, Path=/dashboard,
  named after the port: two dashboards on one machine keep their own) and the browser is
  sent on to the page; a token used or expired is answered 403.
- ``GET /dashboard/``, ``/dashboard/static/{name}``: the page (``static/``: one HTML, one
  JS, one CSS file, hand-written, shipped in the wheel; no CDN).
- ``GET /dashboard/api/state``: every pool's ``Board.snapshot``.
- ``GET /dashboard/api/stream?pool=P&node=N``: ``text/event-stream``: a ``state`` event
  (every pool's snapshot) when a board changed, at most every ``TICK`` and at least
  every ``REFRESH`` seconds; ``events`` events with each pool's new event lines; ``log``
  events with node N of pool P's new output lines (from the lines kept, on connecting).
- ``POST /dashboard/links``: a new one-time link (``{"url": ...}``); only with the bearer
  token of the server that holds the dashboard (the pool daemon's).

Every route but ``login`` needs the session cookie or that bearer token: 401 without.
Host and Origin are the server's to check (``daemon.http_guard.Loopback``: loopback
names only, same origin only).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from skyward.observe.dashboard.board import Board

LINK_TTL = 120.0
"""Seconds a login link is good for (once)."""
MAX_LINKS = 16
"""Login links waiting to be used at once; a new one drops the oldest."""
MAX_SESSIONS = 64
"""Browser sessions at once; a new one ends the oldest."""
TICK = 0.5
"""Seconds between looks at the boards for a stream."""
REFRESH = 2.0
"""Seconds after which a stream sends the state again, changed or not (elapsed times)."""
HEARTBEAT = 10.0
"""Seconds between comment lines on a quiet stream."""
STATIC = Path(__file__).parent / "static"
ASSETS = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
PREFIX = "/dashboard"
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
PAGE_HEADERS = {
    **HEADERS,
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
}
REFUSED_PAGE = """<!doctype html><meta charset="utf-8"><title>skyward dashboard</title>
<body style="font-family:sans-serif;margin:3em"><h1>skyward dashboard</h1><p>{why}</p>
<p>Run <code>sky dashboard</code> for a new link (each link opens the dashboard once).</p></body>"""


class Sessions:
    """One-time login links and the browser sessions they opened, of the server on
    ``port`` (see the module)."""

    def __init__(self, port: int = 0) -> None:
        self.cookie = f"skyward-dashboard-{port}"
        self._lock = threading.Lock()
        self._links: dict[str, float] = {}
        self._sessions: dict[str, float] = {}

    def link(self) -> str:
        """A new link's token, good once for ``LINK_TTL`` seconds."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._links = {key: until for key, until in self._links.items() if until > now}
            while len(self._links) >= MAX_LINKS:
                del self._links[next(iter(self._links))]
            self._links[token] = now + LINK_TTL
        return token

    def redeem(self, token: str) -> str | None:
        """A new session's cookie value for ``token``, which is used up; None when it is
        not a link's token, or was used, or expired."""
        with self._lock:
            found = next((key for key in self._links if hmac.compare_digest(key.encode(), token.encode())), None)
            if found is None or self._links.pop(found) < time.monotonic():
                return None
            session = secrets.token_urlsafe(32)
            while len(self._sessions) >= MAX_SESSIONS:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[session] = time.time()
            return session

    def valid(self, value: str) -> bool:
        """Whether ``value`` is a session's cookie."""
        if not value:
            return False
        with self._lock:
            return any(hmac.compare_digest(key.encode(), value.encode()) for key in self._sessions)


class Dashboard:
    """The routes of a dashboard of the pools ``boards`` lists (see the module), once
    ``serve_on`` named the server's port; ``touch`` is called for every authorised
    request. ``close`` ends the streams."""

    def __init__(self, boards: Callable[[], list[Board]], touch: Callable[[], None] = lambda: None) -> None:
        self._boards = boards
        self.sessions = Sessions()
        self._bearer: bytes | None = None
        self._touch = touch
        self._closing = threading.Event()

    def serve_on(self, port: int, bearer: str | None = None) -> None:
        """The server listens on ``port`` (its sessions are its own: a fresh set, and a
        cookie named after the port); ``bearer``: a token that also authorises every
        route, and alone mints links."""
        self.sessions = Sessions(port)
        self._bearer = bearer.encode() if bearer else None

    def close(self) -> None:
        """End every stream at its next tick (the server stops)."""
        self._closing.set()

    def routes(self) -> list[Route]:
        """Every route (``daemon.openapi`` describes each)."""
        return [
            Route(f"{PREFIX}/login", self._login, methods=["GET"]),
            Route(f"{PREFIX}/", self._page, methods=["GET"]),
            Route(f"{PREFIX}/static/{{name}}", self._asset, methods=["GET"]),
            Route(f"{PREFIX}/api/state", self._state, methods=["GET"]),
            Route(f"{PREFIX}/api/stream", self._stream, methods=["GET"]),
            Route(f"{PREFIX}/links", self._links, methods=["POST"]),
        ]

    def login_path(self, pool: str = "") -> str:
        """The path of a new one-time link (``pool``: the page opens on that pool)."""
        path = f"{PREFIX}/login?token={self.sessions.link()}"
        return f"{path}&pool={quote(pool, safe='')}" if pool else path

    # --- authorisation ----------------------------------------------------------------

    def _by_bearer(self, request: Request) -> bool:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return (
            self._bearer is not None and scheme.lower() == "bearer"
            and hmac.compare_digest(given.strip().encode("latin-1", "replace"), self._bearer)
        )

    def _authorised(self, request: Request) -> bool:
        ok = self._by_bearer(request) or self.sessions.valid(request.cookies.get(self.sessions.cookie, ""))
        if ok:
            self._touch()
        return ok

    # --- routes -----------------------------------------------------------------------

    async def _login(self, request: Request) -> Response:
        session = self.sessions.redeem(request.query_params.get("token", ""))
        if session is None:
            return HTMLResponse(REFUSED_PAGE.format(why="This link was used already, or it expired."), 403,
                                headers=HEADERS)
        pool = request.query_params.get("pool", "")
        target = f"{PREFIX}/" + (f"?pool={quote(pool, safe='')}" if pool else "")
        answer = RedirectResponse(target, 303, headers=HEADERS)
        answer.set_cookie(self.sessions.cookie, session, httponly=True, samesite="strict", path=PREFIX)
        return answer

    async def _page(self, request: Request) -> Response:
        if not self._authorised(request):
            return HTMLResponse(REFUSED_PAGE.format(why="This browser has not opened the dashboard yet."), 401,
                                headers=HEADERS)
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"), headers=PAGE_HEADERS)

    async def _asset(self, request: Request) -> Response:
        if not self._authorised(request):
            return _refused()
        name = request.path_params["name"]
        if name not in ASSETS:
            return JSONResponse({"error": f"no asset {name!r}"}, 404, headers=HEADERS)
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name], headers=HEADERS)

    async def _state(self, request: Request) -> Response:
        if not self._authorised(request):
            return _refused()
        return JSONResponse(self._everything(), headers=HEADERS)

    async def _links(self, request: Request) -> Response:
        if not self._by_bearer(request):
            return _refused("send `Authorization: Bearer <token>`: only the holder of the API's token makes links")
        self._touch()
        pool = request.query_params.get("pool", "")
        return JSONResponse(
            {"url": f"{str(request.base_url).rstrip('/')}{self.login_path(pool)}", "expires_in": LINK_TTL},
            201, headers=HEADERS,
        )

    def _everything(self) -> dict[str, object]:
        return {"pools": [board.snapshot() for board in self._boards()], "time": time.time()}

    async def _stream(self, request: Request) -> Response:
        if not self._authorised(request):
            return _refused()
        pool = request.query_params.get("pool", "")
        node_text = request.query_params.get("node", "")
        node = int(node_text) if node_text.isascii() and node_text.isdigit() else None
        return StreamingResponse(
            self._follow(pool, node), media_type="text/event-stream",
            headers={**HEADERS, "X-Accel-Buffering": "no"},
        )

    async def _follow(self, pool: str, node: int | None) -> AsyncIterator[str]:
        """The stream's events (see the module), until the dashboard closes or the page goes."""
        versions: dict[str, int] = {}
        cursors: dict[str, int] = {}
        log_cursor = 0
        followed: Board | None = None
        watched: dict[int, Board] = {}
        last_state = last_sent = -float("inf")
        try:
            while not self._closing.is_set():
                boards = self._boards()
                for board in boards:
                    if id(board) not in watched:
                        watched[id(board)] = board
                        board.watch(True)
                for key in [key for key, board in watched.items() if board not in boards]:
                    watched.pop(key).watch(False)
                now = time.monotonic()
                chunks = []
                current = {board.name: board.version for board in boards}
                if current != versions or now - last_state >= REFRESH:
                    versions = current
                    last_state = now
                    chunks.append(_event("state", {"pools": [board.snapshot() for board in boards], "time": time.time()}))
                for board in boards:
                    new = board.events_after(cursors.get(board.name, 0))
                    if new:
                        cursors[board.name] = int(str(new[-1]["seq"]))
                        chunks.append(_event("events", {"pool": board.name, "events": new}))
                target = next((board for board in boards if board.name == pool), None)
                if target is not followed:
                    followed, log_cursor = target, 0
                if followed is not None and node is not None:
                    lines = followed.log_after(node, log_cursor)
                    if lines:
                        log_cursor = int(str(lines[-1]["seq"]))
                        chunks.append(_event("log", {"pool": pool, "node": node, "lines": lines}))
                if chunks:
                    last_sent = now
                    yield "".join(chunks)
                elif now - last_sent >= HEARTBEAT:
                    last_sent = now
                    yield ": alive\n\n"
                await asyncio.sleep(TICK)
        finally:
            for board in watched.values():
                board.watch(False)


def _event(kind: str, data: object) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _refused(why: str = "open the dashboard with the link `sky dashboard` prints (a cookie), or send "
                        "`Authorization: Bearer <token>`") -> JSONResponse:
    return JSONResponse({"error": why}, 401, headers=HEADERS)
