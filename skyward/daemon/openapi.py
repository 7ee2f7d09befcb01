"""The OpenAPI 3 description of the pool daemon's HTTP API (``daemon.http_api``), served as
``GET /openapi.json``; docs/kept-pools.md ("The HTTP API") says the same in prose."""

from __future__ import annotations


def _json(schema: dict[str, object], description: str) -> dict[str, object]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ref(name: str) -> dict[str, object]:
    return {"$ref": f"#/components/schemas/{name}"}


def _error(description: str) -> dict[str, object]:
    return _json(_ref("Error"), description)


_NAME = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}, "description": "the kept pool's name"}
_RUN = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}, "description": "the run's id"}
_UNAUTHORIZED = _error("no `Authorization: Bearer <token>` header, or the wrong token")


def _bodiless(
    summary: str, ok: dict[str, object], missing: str | None = None, description: str | None = None
) -> dict[str, object]:
    """An operation without a request body, answering 200 with ``ok``, 401 without the
    token and, where ``missing`` says why (an ``Error``'s description), 404."""
    responses = {"200": ok, "401": _UNAUTHORIZED}
    if missing is not None:
        responses["404"] = _error(missing)
    return {"summary": summary, **({"description": description} if description else {}), "responses": responses}


def _post(summary: str, body: str, created: dict[str, object], errors: dict[str, object]) -> dict[str, object]:
    """A POST taking a JSON body of schema ``body`` and answering 201 with ``created``;
    its error responses are ``errors`` and those of every JSON body (400: not JSON, 401,
    413: too large, 422: a field not valid), in the order of their codes."""
    responses = {
        "201": created,
        "400": _error("the body is not JSON"),
        "401": _UNAUTHORIZED,
        "413": _error("the body is too large"),
        "422": _error("a field is not valid (`field` names it)"),
        **errors,
    }
    return {
        "summary": summary,
        "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(body)}}},
        "responses": dict(sorted(responses.items())),
    }

_EITHER: list[dict[str, list[str]]] = [{"token": []}, {"dashboard": []}]
"""The dashboard's routes take the bearer token or the dashboard's session cookie."""
_NO_SESSION = _error("neither the session cookie of a dashboard link nor the bearer token")


def _query(name: str, description: str, required: bool = False, kind: str = "string") -> dict[str, object]:
    return {"name": name, "in": "query", "required": required, "schema": {"type": kind}, "description": description}


def _dashboard(summary: str, ok: dict[str, object], description: str = "", **more: object) -> dict[str, object]:
    """A dashboard route's GET: 200 with ``ok``, 401 without the cookie or the token."""
    operation: dict[str, object] = {"summary": summary, "security": _EITHER, "responses": {"200": ok, "401": _NO_SESSION}}
    if description:
        operation["description"] = description
    return {**operation, **more}


_DASHBOARD_PATHS: dict[str, object] = {
    "/dashboard/login": {
        "get": {
            "summary": "Open the dashboard with a one-time link (`POST /dashboard/links`, `sky dashboard`)",
            "description": "The link's token, good once and for two minutes, is exchanged for a session cookie "
                           "(HttpOnly, SameSite=Strict, Path=/dashboard) and the browser is sent to the page.",
            "security": [],
            "parameters": [_query("token", "the link's one-time token", required=True),
                           _query("pool", "the pool the page opens on")],
            "responses": {
                "303": {"description": "to `/dashboard/`, with the session cookie set"},
                "403": {"description": "the token was used already, or expired (an HTML page)",
                        "content": {"text/html": {}}},
            },
        },
    },
    "/dashboard/": {
        "get": _dashboard("The dashboard's page", {"description": "the page", "content": {"text/html": {}}},
                          parameters=[_query("pool", "the pool shown first")]),
    },
    "/dashboard/static/{name}": {
        "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"},
                        "description": "app.js or style.css"}],
        "get": _dashboard(
            "The page's script and style sheet", {"description": "the asset"},
            responses={"200": {"description": "the asset"}, "401": _NO_SESSION, "404": _error("no such asset")},
        ),
    },
    "/dashboard/api/state": {
        "get": _dashboard("Every kept pool as the dashboard shows it",
                          _json(_ref("DashboardState"), "the pools, summarised")),
    },
    "/dashboard/api/stream": {
        "get": _dashboard(
            "The dashboard's updates as server-sent events",
            {"description": "the event stream", "content": {"text/event-stream": {}}},
            "A `state` event (data: a DashboardState) when a pool changed, at most twice a second and at least "
            "every two seconds; `events` events (data: {pool, events: [{seq, time, level, text}]}) with each "
            "pool's new event lines; with `pool` and `node`, `log` events (data: {pool, node, lines: [{seq, "
            "time, level, text}]}) with that node's output, from the lines kept. Comment lines keep a quiet "
            "stream alive.",
            parameters=[_query("pool", "the pool whose node's output to follow"),
                        _query("node", "the node whose output to follow", kind="integer")],
        ),
    },
    "/dashboard/links": {
        "post": {
            "summary": "A new one-time link to the dashboard (what `sky dashboard` opens)",
            "parameters": [_query("pool", "the pool the page opens on")],
            "responses": {
                "201": _json({"type": "object", "properties": {
                    "url": {"type": "string", "description": "`/dashboard/login?token=...` on this API"},
                    "expires_in": {"type": "number", "description": "seconds it is good for (once)"},
                }}, "the link"),
                "401": _UNAUTHORIZED,
            },
        },
    },
}

SCHEMAS: dict[str, object] = {
    "Error": {
        "type": "object", "required": ["error"],
        "properties": {
            "error": {"type": "string", "description": "what went wrong and what to do"},
            "field": {"type": "string", "description": "the request field at fault (422)"},
        },
    },
    "Pool": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "pool_id": {"type": "string"},
            "provider": {"type": "string", "description": 'the provider\'s name ("local", "aws", ...)'},
            "nodes": {"type": "integer"},
            "keep_alive": {"type": "number", "description": "seconds kept after the last script left"},
            "holder": {"type": ["integer", "null"], "description": "pid of the script using it (null: idle)"},
            "idle": {"type": "number", "description": "seconds since the last script left (0 while held)"},
            "opened": {"type": "number", "description": "when it opened (Unix time)"},
        },
    },
    "NewPool": {
        "type": "object", "required": ["name", "cwd"], "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
            "provider": {"type": "string", "default": "local", "description": "a provider name, as `sky up --provider`"},
            "nodes": {"type": "integer", "minimum": 1, "default": 1},
            "keep_alive": {"type": "number", "exclusiveMinimum": 0, "default": 600},
            "cwd": {"type": "string", "description": "absolute path of the directory the nodes work in"},
        },
    },
    "NewRun": {
        "type": "object", "required": ["script"], "additionalProperties": False,
        "properties": {
            "script": {"type": "string", "description": "absolute path of a Python script; it runs in its directory"},
            "args": {"type": "array", "items": {"type": "string"}, "default": []},
        },
    },
    "DashboardState": {
        "type": "object",
        "properties": {
            "time": {"type": "number", "description": "when (Unix time)"},
            "pools": {"type": "array", "items": {
                "type": "object",
                "description": "one pool, summarised: name, provider, status, elapsed, node_count, states (nodes "
                               "counted by state), means (mean cpu, memory, gpu, gpu_memory in %), nodes (at "
                               "most 40 rows: node, status, cpu, memory, gpu, gpu_memory, running, done, failed; "
                               "past 40, the nodes in trouble and the busiest), nodes_hidden, tasks (running, "
                               "queued, done, failed, cancelled, per_second), maps (id, kind, name, done, total, "
                               "failed, finished, per_second, eta in seconds), cost (so_far, hourly, final; null "
                               "without prices), logs (the nodes with output), holder, idle, keep_alive, opened",
            }},
        },
    },
    "Run": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "pool": {"type": "string"},
            "script": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}},
            "pid": {"type": "integer"},
            "state": {"type": "string", "enum": ["running", "exited"]},
            "exit_code": {"type": ["integer", "null"]},
            "started": {"type": "number"},
            "ended": {"type": ["number", "null"]},
            "lines": {"type": "integer", "description": "lines of output so far"},
        },
    },
}

OPENAPI: dict[str, object] = {
    "openapi": "3.1.0",
    "info": {
        "title": "skyward pool daemon",
        "version": "1",
        "description": "Kept pools of this user's pool daemon, and scripts run on them (docs/kept-pools.md). "
                       "Served on 127.0.0.1 only; every request needs `Authorization: Bearer <token>`, the "
                       "token being the contents of the file `sky api` names.",
    },
    "components": {
        "schemas": SCHEMAS,
        "securitySchemes": {
            "token": {"type": "http", "scheme": "bearer"},
            "dashboard": {"type": "apiKey", "in": "cookie", "name": "skyward-dashboard-<port>",
                          "description": "the session cookie a dashboard link sets (`GET /dashboard/login`)"},
        },
    },
    "security": [{"token": []}],
    "paths": {
        "/openapi.json": {
            "get": _bodiless(
                "This description", {"description": "an OpenAPI 3 document", "content": {"application/json": {}}}
            ),
        },
        "/pools": {
            "get": _bodiless("The kept pools", _json({"type": "array", "items": _ref("Pool")}, "every kept pool")),
            "post": _post(
                "Open a pool and keep it; returns once it is ready, idle for scripts to adopt",
                "NewPool", _json(_ref("Pool"), "the pool, kept"),
                {"409": _error("a pool of that name is kept already"), "500": _error("the pool did not open")},
            ),
        },
        "/pools/{name}": {
            "parameters": [_NAME],
            "get": _bodiless("One kept pool", _json(_ref("Pool"), "the pool"), "no pool of that name is kept"),
            "delete": _bodiless(
                "End a kept pool now (even while a script uses it); returns once it is torn down",
                _json({"type": "object", "properties": {"ended": {"type": "array", "items": {"type": "string"}}}},
                      "the pool ended"),
                "no pool of that name is kept",
            ),
        },
        "/pools/{name}/runs": {
            "parameters": [_NAME],
            "post": _post(
                "Run a script on the kept pool: `python script args` with $SKYWARD_POOL=name",
                "NewRun", _json(_ref("Run"), "the run, started"), {"404": _error("no pool of that name is kept")},
            ),
        },
        "/runs/{id}": {
            "parameters": [_RUN],
            "get": _bodiless("A run's state and exit code", _json(_ref("Run"), "the run"), "no run of that id"),
        },
        "/runs/{id}/output": {
            "parameters": [_RUN],
            "get": _bodiless(
                "The run's output as server-sent events, from its first line",
                {"description": "the event stream", "content": {"text/event-stream": {}}},
                "no run of that id",
                "Each line of stdout or stderr is one `data:` event; when the script has exited, an `exit` "
                "event whose data is the exit code ends the stream. Comment lines keep the connection alive "
                "while the script is quiet.",
            ),
        },
        **_DASHBOARD_PATHS,
    },
}
"""The document (``GET /openapi.json``)."""
