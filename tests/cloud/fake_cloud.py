"""The common half of the local fakes of the machine clouds' HTTP APIs (``fake_*.py``):
an HTTP server on 127.0.0.1 that checks the Bearer token, keeps the cloud's machines,
keys and firewalls (for a cloud that has them), records every request, and can refuse
machines as a cloud without capacity does. Each fake speaks its cloud's documented
request and response shapes in ``handle``; this class only routes and stores.

Each fake declares the ``operations`` of its cloud's API it serves (``Operation``: the
method, the path, the query parameters and the body's fields, as the cloud documents
them) and refuses any other request before ``handle`` sees it, in the cloud's own error
shape (``error``): a path no operation has (404), a method the path does not take (405),
a query parameter or a body field the operation does not declare (the cloud's status
for a bad request), each named with the operation. A client that sends what the real
API would refuse fails against the fake too.

A fake whose cloud's own description of its API is pinned (``pinned``: its folder
under ``tests/cloud/descriptions``) checks every exchange against it as it happens
(``tests/cloud/described.py``) and keeps what the description would not have in
``violations``, answering the same either way; the cloud e2e tests fail on any
(``unreported``).

A fake is also a ``MachineSource`` (``tests/cloud/machines.py``): a machine it creates
is "booting" until the harness has made it a real test host at the address the fake
gave it (from the lab's subnet) and calls ``started``; a host that shuts itself down is
``halt``ed (the cloud ends the machine). Machines ``plant``ed by a test have no host.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import urllib.parse
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from cloud.described import Description, load

TOKEN = "test-token"
_MADE: weakref.WeakSet[FakeCloud] = weakref.WeakSet()
"""Every fake made in this process (``unreported`` looks into each)."""


@dataclass(frozen=True)
class Shape:
    """The fields a JSON object of a request may hold: each name with the Shape of its
    value where the check looks inside it (an object, or each object of a list), else
    None. The name ``"*"`` stands for any name (a map whose keys are free, such as GPU
    names or ports; its values are then of ``"*"``'s Shape)."""

    fields: Mapping[str, Shape | None]

    def unknown(self, value: Any, where: str = "") -> str | None:
        """The first field of ``value`` this Shape does not declare, as a path below
        ``where`` (``rules[0].port``); None when every field is declared or ``value`` is
        not an object nor a list (a string, a number: nothing to look into)."""
        if isinstance(value, list):
            found = (self.unknown(item, f"{where}[{n}]") for n, item in enumerate(value))
            return next((path for path in found if path is not None), None)
        if not isinstance(value, dict):
            return None
        for name, inner in value.items():
            path = f"{where}.{name}" if where else str(name)
            if name not in self.fields and "*" not in self.fields:
                return path
            nested = self.fields[name] if name in self.fields else self.fields["*"]
            found = None if nested is None else nested.unknown(inner, path)
            if found is not None:
                return found
        return None


def shape(*names: str, **nested: Shape) -> Shape:
    """A Shape of the fields ``names`` (not looked into) and ``nested`` (each of its Shape)."""
    return Shape({**dict.fromkeys(names), **nested})


def keyed(values: Shape) -> Shape:
    """The Shape of a map whose keys are free and whose values are each of ``values``."""
    return Shape({"*": values})


@dataclass(frozen=True)
class Operation:
    """One operation of a cloud's API as its documentation states it: ``method``, ``path``
    below the fake's prefix (``{name}`` stands for one path segment, ``{name+}`` for one
    or more), the query parameters it takes that the fake honours (a documented filter
    the fake does not implement is left out: refused, never ignored) and the Shape of its
    body (None: it takes none)."""

    method: str
    path: str
    query: tuple[str, ...] = ()
    body: Shape | None = None

    def matches(self, path: str) -> bool:
        segments = (".+" if part.endswith("+}") else "[^/]+" if part.startswith("{") else re.escape(part)
                    for part in self.path.split("/"))
        return re.fullmatch("/".join(segments), path) is not None

    def refusal(self, query: Mapping[str, str], body: Any) -> str | None:
        """Why the operation refuses a request with ``query`` and ``body`` (the first
        parameter or field it does not declare), None when it takes them."""
        extra = [name for name in query if name not in self.query]
        if extra:
            return f"{self.method} {self.path}: unknown query parameter {extra[0]!r}"
        if self.body is None:
            return None if body in (None, "", {}) else f"{self.method} {self.path}: takes no body"
        field = self.body.unknown(body)
        return None if field is None else f"{self.method} {self.path}: unknown field {field!r}"


@dataclass
class FakeMachine:
    """One machine of a fake cloud."""

    id: str
    name: str
    kind: str
    spot: bool
    image: str
    public_key: str
    price: float
    region: str | None = None
    address: str | None = None
    state: str = "booting"
    """pending (not ready to boot: its key is not attached yet), booting (no host yet),
    running, exited (it shut itself down), deleted."""
    created: float = field(default_factory=time.time)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Any


class Answer(Exception):
    """Raised by a handler to answer with ``status`` and ``body`` (errors, mostly)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


class FakeCloud:
    """Subclasses set ``name`` (the SKYWARD_<NAME>_API_URL key), ``credentials`` (env vars
    the provider reads) and ``operations``, and implement ``handle`` and ``error``."""

    name = ""
    credentials: dict[str, str] = {}
    prefix = ""
    """Path prefix of the real API (e.g. "/v2"), kept so the paths match its documentation."""
    operations: tuple[Operation, ...] = ()
    """The operations of the cloud's API the fake serves; it refuses any other request."""
    invalid_status = 400
    """The cloud's status for a request with a parameter or field it does not take."""
    pinned = ""
    """The folder of the cloud's pinned API description under tests/cloud/descriptions ("": none)."""
    public: frozenset[tuple[str, str]] = frozenset()
    """The (method, path) the cloud answers without its key (documented as needing none)."""

    def __init__(self) -> None:
        self.description: Description | None = load(self.pinned) if self.pinned else None
        """What every exchange is checked against (None: nothing)."""
        self.violations: list[str] = []
        """What in the exchanges so far the description does not define or would not produce."""
        self._reported = 0
        _MADE.add(self)
        self.machines: dict[str, FakeMachine] = {}
        self.keys: dict[str, dict[str, str]] = {}
        self.firewalls: dict[str, dict[str, Any]] = {}
        """By id, each as the cloud's API shows it (its ``name`` among the rest)."""
        self.requests: list[Request] = []
        self.refused: set[str] = set()
        self.lock = threading.RLock()
        self._ids = itertools.count(1001)
        self._addresses: Any = None
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeCloud:
        fake = self

        class Handler(_Handler):
            owner = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name=f"fake-{self.name}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def env(self) -> dict[str, str]:
        """What points the provider here: its API URL and its credentials."""
        return {f"SKYWARD_{self.name.upper()}_API_URL": self.url, **self.credentials}

    def serve_here(self, monkeypatch: Any, home: Path, subnet: str | None = "192.0.2.0/24") -> Self:
        """Start this fake (its machines' addresses from ``subnet``; None: as set already)
        and point this process's clients at it, with ``home`` as SKYWARD_HOME, through
        ``monkeypatch`` (undone after the test); the caller stops it."""
        if subnet is not None:
            self.use_subnet(subnet)
        self.start()
        for key, value in {**self.env(), "SKYWARD_HOME": str(home)}.items():
            monkeypatch.setenv(key, value)
        return self

    def use_subnet(self, cidr: str, first: int = 100) -> None:
        """Hand out addresses of ``cidr`` (a /24) from ``.first`` on."""
        base = cidr.rsplit(".", 1)[0]
        self._addresses = (f"{base}.{n}" for n in range(first, 250))

    # ------------------------------------------------------------------ store

    def new_id(self) -> str:
        return str(next(self._ids))

    def add(self, name: str, kind: str, spot: bool, image: str, public_key: str, price: float, **extra: Any) -> FakeMachine:
        """A new machine, booting (or Answer 5xx when no address is left)."""
        if kind in self.refused or "*" in self.refused:
            raise self.no_capacity(kind)
        assert self._addresses is not None, "use_subnet() first"
        with self.lock:
            machine = FakeMachine(
                self.new_id(), name, kind, spot, image, public_key, price, address=next(self._addresses), extra=extra,
                region=extra.pop("region", None),
            )
            self.machines[machine.id] = machine
        return machine

    def plant(self, name: str, kind: str, price: float = 0.5, tags: tuple[str, ...] = ()) -> FakeMachine:
        """A running machine without a host (what a lost pool left), with ``tags`` (for a
        cloud whose listings filter by tag: a machine without a tag is never listed under it)."""
        with self.lock:
            machine = FakeMachine(self.new_id(), name, kind, False, "planted", "", price, address="192.0.2.1", state="running")
            if tags:
                machine.extra["tags"] = list(tags)
            self.machines[machine.id] = machine
        return machine

    def live(self, text: str = "") -> list[FakeMachine]:
        """Machines not deleted whose name contains ``text``."""
        with self.lock:
            return [m for m in self.machines.values() if m.state != "deleted" and text in m.name]

    def delete(self, machine_id: str) -> bool:
        with self.lock:
            machine = self.machines.get(machine_id)
            if machine is None or machine.state == "deleted":
                return False
            machine.state = "deleted"
            return True

    def reclaim(self, machine_id: str) -> None:
        """The cloud takes an interruptible machine back: it is deleted (the harness takes
        its host away at its next poll)."""
        with self.lock:
            self.machines[machine_id].state = "deleted"

    def refuse(self, kind: str = "*") -> None:
        """Machines of ``kind`` ("*": all) are refused as the cloud refuses them without capacity."""
        self.refused.add(kind)

    def no_capacity(self, kind: str) -> Answer:
        """The cloud's own "no capacity" answer."""
        raise NotImplementedError

    def bodies(self, method: str, path: str) -> list[Any]:
        """The bodies of the requests made to ``method path`` (path as sent, prefix removed)."""
        return [r.body for r in self.requests if r.method == method and r.path.startswith(path)]

    # ------------------------------------------------------------------ MachineSource

    def booting(self) -> list[tuple[str, str, str]]:
        with self.lock:
            return [(m.id, m.address or "", m.public_key) for m in self.machines.values() if m.state == "booting"]

    def ended(self) -> set[str]:
        with self.lock:
            return {m.id for m in self.machines.values() if m.state in ("deleted", "exited")}

    def started(self, machine_id: str) -> None:
        with self.lock:
            if self.machines[machine_id].state == "booting":
                self.machines[machine_id].state = "running"

    def halt(self, machine_id: str) -> None:
        with self.lock:
            if self.machines[machine_id].state == "running":
                self.machines[machine_id].state = "exited"

    # ------------------------------------------------------------------ HTTP

    def handle(self, method: str, path: str, query: dict[str, str], body: Any) -> Any:
        """The answer's JSON body (200; bytes are sent as they are), or raise Answer. Only
        requests an operation declares reach it."""
        raise NotImplementedError

    def error(self, status: int, text: str) -> Answer:
        """The cloud's own error answer of ``status`` saying ``text``."""
        raise NotImplementedError

    def success(self, method: str, path: str) -> int:
        """The status of a request ``handle`` answers without an Answer (200; 204 when it
        returns None)."""
        return 200

    def no_route(self, method: str, path: str) -> Answer:
        """The cloud's answer to a path none of its operations has (404)."""
        return self.error(404, f"no route {method} {path}")

    def undeclared(self, method: str, path: str, query: Mapping[str, str], body: Any) -> Answer | None:
        """The cloud's refusal of a request no operation declares (see the module's
        docstring), None for one that an operation takes."""
        on_path = [op for op in self.operations if op.matches(path)]
        operation = next((op for op in on_path if op.method == method), None)
        if operation is None:
            allowed = sorted({op.method for op in on_path})
            if not allowed:
                return self.no_route(method, path)
            return self.error(405, f"{method} {path}: method not allowed (only {', '.join(allowed)})")
        refusal = operation.refusal(query, body)
        return None if refusal is None else self.error(self.invalid_status, refusal)

    def authorized(self, headers: Any) -> bool:
        return headers.get("Authorization") == f"Bearer {TOKEN}"

    def unauthorized(self) -> Answer:
        """The cloud's answer to a request without its key, or with a wrong one (401)."""
        return Answer(401, {"message": "Unauthorized"})

    def check(self, method: str, path: str, query: Mapping[str, str], body: Any, status: int, answer: Any,
              headers: Mapping[str, str] | None = None) -> None:
        """Keep in ``violations`` what the description says against this exchange (a
        check that fails is one too); the answer is not changed."""
        if self.description is None:
            return
        try:
            found = self.description.violations(method, path, query, body, status, answer, headers)
        except Exception as exc:  # noqa: BLE001 - the check must never change the fake's answer
            found = [f"{self.name}: {method} {path}: the check itself failed: {exc!r}"]
        if found:
            with self.lock:
                self.violations.extend(found)

    def unreported(self) -> list[str]:
        """The violations kept since the last call."""
        with self.lock:
            found, self._reported = self.violations[self._reported:], len(self.violations)
        return found


def misspell(fake: FakeCloud, monkeypatch: Any, method: str, field: str, wrong: str) -> None:
    """Have ``fake``'s ``method`` (one that shows a machine as its cloud's API does) give
    ``field`` under the name ``wrong``: a slip planted for the description check to name."""
    shown = getattr(fake, method)

    def misspelt(machine: Any) -> dict[str, Any]:
        view = shown(machine)
        view[wrong] = view.pop(field)
        return view

    monkeypatch.setattr(fake, method, misspelt)


def unreported() -> list[str]:
    """The violations every fake of this process kept since the last call, each once."""
    return [text for fake in list(_MADE) for text in fake.unreported()]


def summary(violations: list[str]) -> str:
    """``violations`` one a line, each once with how often it happened."""
    counts: dict[str, int] = {}
    for text in violations:
        counts[text] = counts.get(text, 0) + 1
    return "\n".join(f"  {text}" + (f" (x{n})" if n > 1 else "") for text, n in counts.items())


class _Handler(BaseHTTPRequestHandler):
    owner: FakeCloud
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parsed = urllib.parse.urlsplit(self.path)
        path = parsed.path.removeprefix(urllib.parse.urlsplit(self.owner.url).path)
        query = dict(urllib.parse.parse_qsl(parsed.query))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            plain = (self.headers.get("Content-Type") or "").startswith("text/plain")
            body = raw.decode() if plain else dict(urllib.parse.parse_qsl(raw.decode()))
        self.owner.requests.append(Request(self.command, path, body))
        try:
            needs_key = (self.command, path) not in self.owner.public and not path.endswith("/oauth2/token")
            if needs_key and not self.owner.authorized(self.headers):
                raise self.owner.unauthorized()
            refused = self.owner.undeclared(self.command, path, query, body)
            if refused is not None:
                raise refused
            status, answer = self.owner.success(self.command, path), self.owner.handle(self.command, path, query, body)
        except Answer as exc:
            status, answer = exc.status, exc.body
        data = b"" if answer is None else answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        status = 204 if answer is None and status == 200 else status
        self.owner.check(self.command, path, query, body, status, json.loads(data) if data and not isinstance(
            answer, bytes) else answer, dict(self.headers.items()))
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
