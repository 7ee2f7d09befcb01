"""The dashboard of a pool with ``Options(dashboard=True)`` (docs/dashboard.md): the same
page the pool daemon serves for its kept pools (``observe.dashboard``), served by the
pool's own process for this one pool, on 127.0.0.1 at a port the OS picks, bounded and
checked as the daemon's API is (``daemon.http_guard``: connections, slow requests, Host,
Origin). Its board takes every event of the pool's bus from the moment the pool is made;
the server starts once the pool is open (``start``, whose one-time link the pool prints)
and stops when it closes."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware

from skyward.daemon.http_guard import Loopback, LoopbackServer
from skyward.observe.bus import Subscribe
from skyward.observe.dashboard.app import Dashboard
from skyward.observe.dashboard.board import Board
from skyward.observe.events import Event

START_TIMEOUT = 10.0
"""Seconds the server has to start listening."""
STOP_TIMEOUT = 5.0
"""Seconds the server has to stop."""


class PoolDashboard:
    """One pool's dashboard (see the module), its board subscribed through ``subscribe``
    (``pool.on``) from now on."""

    def __init__(self, subscribe: Subscribe, name: str) -> None:
        self.board = Board(name)
        self._unsubscribe = subscribe(Event, self.board.apply)
        self._dashboard = Dashboard(lambda: [self.board])
        self._server = LoopbackServer(f"skyward-dashboard-{name}")
        self.url: str | None = None
        """Where it is served, once started."""

    def start(self) -> str:
        """Serve it; a one-time link that opens it (RuntimeError when the server does not start)."""
        port = self._server.start(self._app, START_TIMEOUT, 1.0)
        self.url = f"http://127.0.0.1:{port}"
        return self.link()

    def link(self) -> str:
        """A new one-time link (each opens the dashboard in one browser, once)."""
        if self.url is None:
            raise RuntimeError("the dashboard is not served (the pool is not open)")
        return f"{self.url}{self._dashboard.login_path()}"

    def stop(self) -> None:
        """Stop listening to the pool, end the pages' streams, stop the server."""
        self._unsubscribe()
        self._dashboard.close()
        self._server.stop(STOP_TIMEOUT)
        self.url = None

    def _app(self, port: int) -> Starlette:
        self._dashboard.serve_on(port)
        return Starlette(routes=self._dashboard.routes(), middleware=[Middleware(Loopback, port=port)])
