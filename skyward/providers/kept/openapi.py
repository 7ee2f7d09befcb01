"""The OpenAPI 3 description of the pool daemon's HTTP API (``kept.http``), served as
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
        "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{"token": []}],
    "paths": {
        "/openapi.json": {
            "get": {"summary": "This description", "responses": {
                "200": {"description": "an OpenAPI 3 document", "content": {"application/json": {}}},
                "401": _UNAUTHORIZED,
            }},
        },
        "/pools": {
            "get": {"summary": "The kept pools", "responses": {
                "200": _json({"type": "array", "items": _ref("Pool")}, "every kept pool"),
                "401": _UNAUTHORIZED,
            }},
            "post": {
                "summary": "Open a pool and keep it; returns once it is ready, idle for scripts to adopt",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("NewPool")}}},
                "responses": {
                    "201": _json(_ref("Pool"), "the pool, kept"),
                    "400": _error("the body is not JSON"),
                    "401": _UNAUTHORIZED,
                    "409": _error("a pool of that name is kept already"),
                    "413": _error("the body is too large"),
                    "422": _error("a field is not valid (`field` names it)"),
                    "500": _error("the pool did not open"),
                },
            },
        },
        "/pools/{name}": {
            "parameters": [_NAME],
            "get": {"summary": "One kept pool", "responses": {
                "200": _json(_ref("Pool"), "the pool"),
                "401": _UNAUTHORIZED,
                "404": _error("no pool of that name is kept"),
            }},
            "delete": {"summary": "End a kept pool now (even while a script uses it); returns once it is torn down",
                       "responses": {
                           "200": _json({"type": "object", "properties": {
                               "ended": {"type": "array", "items": {"type": "string"}}}}, "the pool ended"),
                           "401": _UNAUTHORIZED,
                           "404": _error("no pool of that name is kept"),
                       }},
        },
        "/pools/{name}/runs": {
            "parameters": [_NAME],
            "post": {
                "summary": "Run a script on the kept pool: `python script args` with $SKYWARD_POOL=name",
                "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("NewRun")}}},
                "responses": {
                    "201": _json(_ref("Run"), "the run, started"),
                    "400": _error("the body is not JSON"),
                    "401": _UNAUTHORIZED,
                    "404": _error("no pool of that name is kept"),
                    "413": _error("the body is too large"),
                    "422": _error("a field is not valid (`field` names it)"),
                },
            },
        },
        "/runs/{id}": {
            "parameters": [_RUN],
            "get": {"summary": "A run's state and exit code", "responses": {
                "200": _json(_ref("Run"), "the run"),
                "401": _UNAUTHORIZED,
                "404": _error("no run of that id"),
            }},
        },
        "/runs/{id}/output": {
            "parameters": [_RUN],
            "get": {
                "summary": "The run's output as server-sent events, from its first line",
                "description": "Each line of stdout or stderr is one `data:` event; when the script has exited, "
                               "an `exit` event whose data is the exit code ends the stream. Comment lines "
                               "keep the connection alive while the script is quiet.",
                "responses": {
                    "200": {"description": "the event stream", "content": {"text/event-stream": {}}},
                    "401": _UNAUTHORIZED,
                    "404": _error("no run of that id"),
                },
            },
        },
    },
}
"""The document (``GET /openapi.json``)."""
