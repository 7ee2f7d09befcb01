"""The pool daemon's HTTP API, for tools that are not Python (editors, dashboards,
agents): list, open and end kept pools, run scripts on them and follow their output
(docs/kept-pools.md, "The HTTP API"; ``daemon.openapi`` describes every route).

Served by the daemon (``daemon.process``) from its start, in a thread of its own (Starlette
on uvicorn), on 127.0.0.1 at a port the OS picks. The daemon writes ``api.json`` (URL
and pid) and ``api.token`` (a fresh 32-byte token in hex, mode 0600) into its private
directory; a request without ``Authorization: Bearer <token>`` is answered 401 before
anything else of it is read, and what strangers on loopback can do to the server is
bounded (``daemon.http_guard``: connections, slow requests, Host and Origin, log lines). The daemon stays up ``API_IDLE`` seconds after the last
request it served and while a script it ran is running.

Under ``/dashboard/`` it serves the live dashboard of its kept pools (``observe.dashboard``,
docs/dashboard.md): a browser opens it with a one-time link (``POST /dashboard/links``,
which ``sky dashboard`` calls) that sets a session cookie; those routes take the cookie
or the bearer token.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import os
import re
import secrets
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from skyward.core.codec import load_payload
from skyward.core.messages import KeptPoolRow
from skyward.core.private_dir import replace_private
from skyward.daemon.http_guard import Loopback, LoopbackServer
from skyward.daemon.kept_pools import KeptPools
from skyward.daemon.openapi import OPENAPI
from skyward.daemon.runs import Runs
from skyward.model.spec import Options, Spec
from skyward.observe.dashboard.app import PREFIX as DASHBOARD
from skyward.observe.dashboard.app import Dashboard
from skyward.providers import names
from skyward.providers.daemon_client import API_FILE, API_TOKEN_FILE
from skyward.providers.kept.client import fingerprint
from skyward.providers.kept.request import ClientContext, KeptRequest

API_IDLE = 600.0
"""Seconds the daemon stays up after the last request its API served."""
START_TIMEOUT = 10.0
"""Seconds the server has to start listening."""
STOP_TIMEOUT = 10.0
"""Seconds the server has to stop (open event streams are cut after half of it)."""
HEARTBEAT = 10.0
"""Seconds between comment lines on a quiet event stream."""
MAX_BODY = 64 * 1024
"""Bytes a request body may have."""
DEFAULT_KEEP_ALIVE = 600.0
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
POOL_FIELDS = ("name", "provider", "nodes", "keep_alive", "cwd")
RUN_FIELDS = ("script", "args")


class Invalid(Exception):
    """A request field that is not valid: answered 422 naming the field, value and fix."""

    def __init__(self, name: str, value: object, fix: str) -> None:
        super().__init__(f"{name}={value!r} is not valid: {fix}")
        self.field = name


class KeptApi:
    """The API of one daemon (see the module): ``start`` it, ask ``busy``, ``stop`` it."""

    def __init__(self, directory: Path, kept: KeptPools) -> None:
        self._directory = directory
        self._kept = kept
        self.runs = Runs()
        self._environ = dict(os.environ)
        """The daemon's environment as it started (a remote pool's launch swaps the process's)."""
        self._last_request = -math.inf
        self._server = LoopbackServer("kept-http")
        self.dashboard = Dashboard(kept.boards, self._touch)
        """The dashboard of the kept pools (``observe.dashboard``), served under /dashboard/."""

    def start(self) -> str:
        """Listen, write the token and ``api.json``; the URL. RuntimeError when the
        server does not start within ``START_TIMEOUT`` seconds."""
        token = secrets.token_hex(32)
        token_file = self._directory / API_TOKEN_FILE
        with contextlib.suppress(FileNotFoundError):
            token_file.unlink()
        descriptor = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as output:
            output.write(token)
        port = self._server.start(lambda port: self._app(token, port), START_TIMEOUT, STOP_TIMEOUT / 2)
        url = f"http://127.0.0.1:{port}"
        replace_private(str(self._directory / API_FILE), json.dumps({"url": url, "pid": os.getpid()}))
        return url

    def busy(self) -> bool:
        """Whether the daemon should stay for the API: a request in the last ``API_IDLE``
        seconds, or a script it ran still running."""
        return time.monotonic() - self._last_request < API_IDLE or self.runs.running()

    def stop(self) -> None:
        """Terminate the scripts still running, stop serving, remove the files."""
        self.runs.stop()
        self.dashboard.close()
        self._server.stop(STOP_TIMEOUT)
        for name in (API_FILE, API_TOKEN_FILE):
            with contextlib.suppress(FileNotFoundError):
                (self._directory / name).unlink()

    def _touch(self) -> None:
        self._last_request = time.monotonic()

    def routes(self) -> list[Route]:
        """Every route the API serves (``daemon.openapi`` describes each)."""
        return [
            Route("/openapi.json", self._openapi, methods=["GET"]),
            Route("/pools", self._list, methods=["GET"]),
            Route("/pools", self._create, methods=["POST"]),
            Route("/pools/{name}", self._get, methods=["GET"]),
            Route("/pools/{name}", self._delete, methods=["DELETE"]),
            Route("/pools/{name}/runs", self._submit, methods=["POST"]),
            Route("/runs/{id}", self._run, methods=["GET"]),
            Route("/runs/{id}/output", self._output, methods=["GET"]),
            *self.dashboard.routes(),
        ]

    def _app(self, token: str, port: int) -> Starlette:
        self.dashboard.serve_on(port, token)
        return Starlette(
            routes=self.routes(),
            middleware=[Middleware(Loopback, port=port), Middleware(Bearer, token=token, touch=self._touch)],
            exception_handlers={HTTPException: _http_error, Invalid: _invalid},
        )

    async def _openapi(self, request: Request) -> Response:
        return JSONResponse(OPENAPI)

    async def _list(self, request: Request) -> Response:
        return JSONResponse([_pool(state) for state in self._kept.states()])

    async def _get(self, request: Request) -> Response:
        return self._described(request.path_params["name"], 200)

    def _described(self, name: str, status: int) -> Response:
        """The kept pool ``name`` as the API shows it (404 when it is not kept)."""
        for state in self._kept.states():
            if state.name == name:
                return JSONResponse(_pool(state), status)
        return _not_kept(name)

    async def _delete(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            ended = await run_in_threadpool(self._kept.end, name)
        except LookupError:
            return _not_kept(name)
        return JSONResponse({"ended": list(ended)})

    async def _create(self, request: Request) -> Response:
        body = await _body(request, POOL_FIELDS)
        name = body.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise Invalid("name", name, "give 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        spec, options = _definition(body)
        cwd = body.get("cwd")
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise Invalid("cwd", cwd, "give the absolute path of an existing directory, which the nodes work in")
        if name in {state.name for state in self._kept.states()}:
            return _error(409, f"a pool named {name!r} is kept already; give this one another name, or end that "
                               f"one first (DELETE /pools/{name})")
        context = ClientContext(cwd, (cwd, *sys.path), dict(self._environ))
        kept = KeptRequest(spec, options, uuid.uuid4().hex, context)
        assert options.keep_alive is not None
        try:
            await run_in_threadpool(self._keep, name, fingerprint(spec, options, context), options.keep_alive, kept)
        except Exception as exc:  # noqa: BLE001 - the caller gets the reason
            return _error(500, f"the pool {name!r} did not open: {type(exc).__name__}: {exc}")
        return self._described(name, 201)

    def _keep(self, name: str, mark: str, keep_alive: float, kept: KeptRequest) -> None:
        """Open the pool, held for this process, and let it go: idle, for a script to adopt."""
        pid = os.getpid()
        self._kept.keep(name, mark, keep_alive, kept, pid)
        self._kept.release(name, pid)

    async def _submit(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in {state.name for state in self._kept.states()}:
            return _not_kept(name)
        body = await _body(request, RUN_FIELDS)
        script = body.get("script")
        if not isinstance(script, str) or not os.path.isabs(script) or not os.path.isfile(script):
            raise Invalid("script", script, "give the absolute path of an existing Python script")
        args = body.get("args", [])
        if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
            raise Invalid("args", args, "give a list of strings (the script's arguments)")
        run = await run_in_threadpool(self.runs.start, name, Path(script), tuple(args), self._environ)
        return JSONResponse(run.describe(), 201, headers={"Location": f"/runs/{run.id}"})

    async def _run(self, request: Request) -> Response:
        try:
            run = self.runs.get(request.path_params["id"])
        except LookupError as exc:
            return _error(404, str(exc.args[0]))
        return JSONResponse(run.describe())

    async def _output(self, request: Request) -> Response:
        try:
            run = self.runs.get(request.path_params["id"])
        except LookupError as exc:
            return _error(404, str(exc.args[0]))

        async def events() -> AsyncIterator[str]:
            index = 0
            while True:
                lines, code = await run_in_threadpool(run.output, index, HEARTBEAT)
                index += len(lines)
                chunk = "".join(f"data: {line.replace(chr(13), '')}\n\n" for line in lines)
                if code is not None:
                    yield f"{chunk}event: exit\ndata: {code}\n\n"
                    return
                yield chunk or ": running\n\n"

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


class Bearer:
    """ASGI middleware: 401 unless the request carries ``Authorization: Bearer <token>``
    (compared in constant time), before anything else of it is read; the dashboard's
    routes (under ``/dashboard/``) take that token or the dashboard's session cookie, and
    check either themselves (``observe.dashboard.app``)."""

    def __init__(self, app: ASGIApp, token: str, touch: Callable[[], None]) -> None:
        self._app = app
        self._token = token.encode()
        self._touch = touch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not str(scope.get("path", "")).startswith(f"{DASHBOARD}/"):
            scheme, _, given = Headers(scope=scope).get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("latin-1"), self._token):
                answer = _error(401, "send `Authorization: Bearer <token>`, the token being the contents of the "
                                     "file `sky api` names")
                answer.headers["WWW-Authenticate"] = "Bearer"
                await answer(scope, receive, send)
                return
            self._touch()
        await self._app(scope, receive, send)


async def _body(request: Request, fields: tuple[str, ...]) -> dict[str, object]:
    """The request's JSON object; HTTPException 413/400, Invalid for a field not taken."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > MAX_BODY:
        raise HTTPException(413, f"the body has {length} bytes; at most {MAX_BODY} are read")
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise HTTPException(413, f"the body has {len(raw)} bytes; at most {MAX_BODY} are read")
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise HTTPException(400, f"the body is not JSON ({exc}); send a JSON object") from None
    if not isinstance(body, dict):
        raise Invalid("body", body, f"send a JSON object with the fields {', '.join(fields)}")
    for key in body:
        if key not in fields:
            raise Invalid(key, body[key], f"drop it; the fields are {', '.join(fields)}")
    return body


def _definition(body: dict[str, object]) -> tuple[Spec, Options]:
    """The Spec and Options of ``POST /pools``'s ``provider``, ``nodes`` and ``keep_alive``."""
    provider = body.get("provider", "local")
    if not isinstance(provider, str):
        raise Invalid("provider", provider, f"give a provider name: one of {', '.join(names.KNOWN)}")
    try:
        known = names.known(provider)
    except ValueError as exc:
        raise Invalid("provider", provider, str(exc)) from None
    if known.name == "ray":
        raise Invalid("provider", provider, "a Ray cluster outlives scripts already; use another provider")
    nodes = body.get("nodes", 1)
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise Invalid("nodes", nodes, "give a whole number of nodes, 1 or more")
    keep_alive = body.get("keep_alive", DEFAULT_KEEP_ALIVE)
    if not isinstance(keep_alive, int | float) or isinstance(keep_alive, bool):
        raise Invalid("keep_alive", keep_alive, "give a number of seconds above 0")
    try:
        options = Options(keep_alive=float(keep_alive), console=False, logging=False)
    except ValueError as exc:
        raise Invalid("keep_alive", keep_alive, str(exc)) from None
    try:
        made = names.make(known.name)
    except ValueError as exc:
        raise Invalid("provider", provider, f"{exc}; configure it in skyward.toml and use `sky up` instead") from None
    try:
        spec = Spec(provider=made, nodes=nodes)
    except ValueError as exc:
        raise Invalid("nodes", nodes, str(exc)) from None
    return spec, options


def _pool(state: KeptPoolRow) -> dict[str, object]:
    """A kept pool as the API shows it."""
    spec, _ = load_payload(state.definition)  # pickled by this daemon
    return {
        "name": state.name, "pool_id": state.pool_id, "provider": spec.provider.name, "nodes": state.nodes,
        "keep_alive": state.keep_alive, "holder": state.holder or None, "idle": round(state.idle, 3),
        "opened": state.opened,
    }


def _error(status: int, message: str, field: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message} if field is None else {"error": message, "field": field}, status)


def _not_kept(name: str) -> JSONResponse:
    return _error(404, f"no pool named {name!r} is kept (GET /pools lists them)")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, str(exc.detail))


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Invalid)
    return _error(422, str(exc), exc.field)
