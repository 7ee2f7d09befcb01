"""The pool daemon's HTTP API (docs/kept-pools.md, "The HTTP API"), over real HTTP:
``sky api`` names it and its token file (mode 0600); a request without the token, or
with another, is refused 401 before its body is read; a pool opened with ``POST
/pools`` is listed, runs a script submitted with ``POST /pools/{name}/runs`` (which
adopts it, without Ray), whose output streams as server-sent events up to its exit
code, and ends with ``DELETE``; a bad field is refused 422 naming it; every route is in
``/openapi.json``."""

from __future__ import annotations

import ast
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from sandbox import wait_for_no_processes

from skyward.api.compute import ADOPT_ENV
from skyward.daemon import http_guard
from skyward.daemon import runs as kept_runs
from skyward.daemon.http_api import KeptApi
from skyward.daemon.kept_pools import KeptPools
from skyward.providers.daemon_client import API_FILE, API_TOKEN_FILE

SKY = os.path.join(os.path.dirname(sys.executable), "sky")
SCRIPT = """
import os, sys
import skyward as sky

@sky.function
def pid():
    return os.getpid()

with sky.Compute(nodes=5) as pool:  # the kept pool of $SKYWARD_POOL, whatever it defines
    print("NODES", repr((sorted(pid() @ pool), "ray" in sys.modules, sys.argv[1:])), flush=True)
print("on stderr", file=sys.stderr, flush=True)
"""




def sky_cli(sandbox: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKY, *args], env=sandbox["env"], capture_output=True, text=True, timeout=180)


def events(response: httpx.Response) -> list[tuple[str, str]]:
    """The (event, data) pairs of a server-sent event stream, up to its ``exit`` event."""
    found: list[tuple[str, str]] = []
    event, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[len("event: "):]
        elif line.startswith("data: "):
            data = line[len("data: "):]
        elif line == "" and data:
            found.append((event, data))
            if event == "exit":
                return found
            event, data = "message", ""
    raise AssertionError(f"the stream ended without an exit event: {found}")


def test_the_http_api_opens_a_pool_runs_a_script_on_it_streams_its_output_and_ends_it(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    shown = sky_cli(sandbox, "api", "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    endpoint = json.loads(shown.stdout)
    token_file = Path(endpoint["token_file"])
    assert os.stat(token_file).st_mode & 0o777 == 0o600
    token = token_file.read_text()
    assert len(bytes.fromhex(token)) == 32
    url = endpoint["url"]
    assert url.startswith("http://127.0.0.1:")
    try:
        with httpx.Client(base_url=url, timeout=180) as anonymous:
            for headers in ({}, {"Authorization": "Bearer " + "0" * 64}):
                assert anonymous.get("/pools", headers=headers).status_code == 401

        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=180) as api:
            workdir = tmp_path / "work"
            workdir.mkdir()
            good = {"name": "web", "provider": "local", "nodes": 2, "keep_alive": 120, "cwd": str(workdir)}
            bad = api.post("/pools", json={**good, "nodes": 0})
            assert bad.status_code == 422 and bad.json()["field"] == "nodes", bad.text

            opened = api.post("/pools", json=good)
            assert opened.status_code == 201, opened.text
            pool = opened.json()
            assert (pool["name"], pool["provider"], pool["nodes"], pool["keep_alive"], pool["holder"]) == (
                "web", "local", 2, 120, None)
            assert [p["name"] for p in api.get("/pools").json()] == ["web"]
            assert api.get("/pools/web").json()["pool_id"] == pool["pool_id"]
            missing = api.get("/pools/nothing")
            assert missing.status_code == 404 and "'nothing'" in missing.json()["error"]
            assert api.post("/pools", json=good).status_code == 409

            script = workdir / "script.py"
            script.write_text(SCRIPT)
            bad_run = api.post("/pools/web/runs", json={"script": "script.py"})
            assert bad_run.status_code == 422 and bad_run.json()["field"] == "script"
            assert api.post("/pools/nothing/runs", json={"script": str(script)}).status_code == 404
            started = api.post("/pools/web/runs", json={"script": str(script), "args": ["a", "b"]})
            assert started.status_code == 201, started.text
            run = started.json()
            with api.stream("GET", f"/runs/{run['id']}/output") as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                streamed = events(response)
            assert streamed[-1] == ("exit", "0"), streamed
            lines = [data for event, data in streamed if event == "message"]
            [nodes] = [line for line in lines if line.startswith("NODES ")]
            pids, ray, args = ast.literal_eval(nodes[len("NODES "):])
            assert len(pids) == 2 and ray is False and args == ["a", "b"], nodes  # the kept pool's 2 nodes
            assert "on stderr" in lines
            ended = api.get(f"/runs/{run['id']}").json()
            assert (ended["state"], ended["exit_code"], ended["pool"]) == ("exited", 0, "web")
            assert api.get("/pools/web").json()["holder"] is None  # the script left it kept

            deleted = api.delete("/pools/web")
            assert deleted.status_code == 200 and deleted.json() == {"ended": ["web"]}
            assert api.get("/pools").json() == []
            assert api.delete("/pools/web").status_code == 404
            deadline = time.monotonic() + 30
            while any(psutil.pid_exists(pid) for pid in pids) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not [pid for pid in pids if psutil.pid_exists(pid)], "DELETE left the pool's agents"
    finally:
        down = sky_cli(sandbox, "down", "--all")
        assert down.returncode == 0, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert not token_file.exists()


def test_the_runs_adopt_env_is_the_one_compute_reads() -> None:
    assert kept_runs.ADOPT_ENV == ADOPT_ENV


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[KeptApi, httpx.Client]]:
    """A daemon's API in this process, with no pool kept (no Ray), and a client with its token."""
    kept = KeptPools(tmp_path)
    api = KeptApi(tmp_path, kept)
    url = api.start()
    try:
        token = (tmp_path / API_TOKEN_FILE).read_text()
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            yield api, client
    finally:
        api.stop()
        kept.close()


def test_the_api_refuses_a_request_without_its_token_before_reading_it(
    served: tuple[KeptApi, httpx.Client], tmp_path: Path
) -> None:
    _, client = served
    token = (tmp_path / API_TOKEN_FILE).read_text()
    assert os.stat(tmp_path / API_TOKEN_FILE).st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / API_FILE).read_text()) == {"url": str(client.base_url).rstrip("/"), "pid": os.getpid()}
    for authorization in (None, "Bearer " + "0" * 64, token, f"Basic {token}", "Bearer", "Bearer \u00e9".encode("latin-1")):
        headers = {} if authorization is None else {"Authorization": authorization}
        for method, path in (("GET", "/pools"), ("POST", "/pools"), ("DELETE", "/pools/x"), ("GET", "/openapi.json"),
                             ("GET", "/nowhere")):
            refused = httpx.request(method, f"{client.base_url}{path}", headers=headers, content=b"{not json")
            assert refused.status_code == 401, (authorization, method, path, refused.text)
            assert "Authorization: Bearer" in refused.json()["error"]
            assert refused.headers["www-authenticate"] == "Bearer"
    assert client.get("/pools").json() == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("nodes", 0), ("nodes", "two"), ("nodes", True), ("keep_alive", -1), ("keep_alive", "10"),
     ("provider", "nowhere"), ("provider", "ray"), ("provider", 3), ("cwd", "work"), ("cwd", "/no/such/dir"),
     ("name", "a b"), ("name", ""), ("name", None), ("gpus", 1)],
)
def test_a_pool_with_a_bad_field_is_refused_422_naming_the_field_value_and_fix(
    served: tuple[KeptApi, httpx.Client], tmp_path: Path, field: str, value: object
) -> None:
    _, client = served
    good = {"name": "web", "provider": "local", "nodes": 2, "keep_alive": 120, "cwd": str(tmp_path)}
    bad = client.post("/pools", json={**good, field: value})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == field and f"{field}={value!r} is not valid: " in bad.json()["error"], bad.text
    assert client.get("/pools").json() == []


def test_bad_bodies_unknown_pools_and_runs_are_refused_naming_them(served: tuple[KeptApi, httpx.Client]) -> None:
    _, client = served
    assert client.post("/pools", content=b"{not json").status_code == 400
    assert client.post("/pools", json=[1]).json()["field"] == "body"
    assert client.post("/pools", content=b" " * (70 * 1024)).status_code == 413
    for answer in (client.get("/pools/gone"), client.delete("/pools/gone"),
                   client.post("/pools/gone/runs", json={"script": "/x.py"})):
        assert answer.status_code == 404 and "'gone'" in answer.json()["error"], answer.text
    for answer in (client.get("/runs/r1"), client.get("/runs/r1/output")):
        assert answer.status_code == 404 and "'r1'" in answer.json()["error"], answer.text
    assert client.get("/nowhere").status_code == 404
    assert client.put("/pools").status_code == 405


def test_openapi_describes_every_route(served: tuple[KeptApi, httpx.Client]) -> None:
    api, client = served
    described = client.get("/openapi.json").json()
    assert described["openapi"].startswith("3.")
    served_routes = {(method.lower(), route.path) for route in api.routes() for method in route.methods or () if method != "HEAD"}
    documented = {(method, path) for path, item in described["paths"].items() for method in item if method != "parameters"}
    assert served_routes == documented


def test_a_run_streams_its_lines_and_exit_code_with_the_pool_in_its_environment(tmp_path: Path) -> None:
    script = tmp_path / "echo.py"
    script.write_text("import os, sys\nprint(os.environ['SKYWARD_POOL'], os.getcwd(), *sys.argv[1:])\n"
                      "print('oops', file=sys.stderr, flush=True)\nsys.exit(3)\n")
    runs = kept_runs.Runs()
    run = runs.start("p1", script, ("x", "y"), dict(os.environ))
    lines: list[str] = []
    code = None
    deadline = time.monotonic() + 60
    while code is None and time.monotonic() < deadline:
        more, code = run.output(len(lines), 1.0)
        lines += more
    assert code == 3 and lines == [f"p1 {tmp_path} x y", "oops"], lines
    assert run.describe()["state"] == "exited" and not runs.running()


def test_a_foreign_host_or_a_web_page_is_refused_403(served: tuple[KeptApi, httpx.Client]) -> None:
    """DNS rebinding (a page of evil.example resolved to 127.0.0.1) and a browser's
    cross-site request are refused, token or not; a page of the API's own origin (the
    dashboard's) is not."""
    _, client = served
    port = client.base_url.port
    assert client.get("/pools", headers={"Host": f"localhost:{port}"}).status_code == 200
    assert client.get("/pools", headers={"Origin": f"http://127.0.0.1:{port}"}).status_code == 200
    assert client.get("/pools", headers={"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}).status_code == 200
    for headers in ({"Host": f"evil.example:{port}"}, {"Host": "127.0.0.1"}, {"Origin": "http://evil.example"},
                    {"Origin": f"http://localhost:{port}"}, {"Origin": f"https://127.0.0.1:{port}"},
                    {"Origin": "null"}, {"Origin": f"http://127.0.0.1:{port + 1}"}):
        refused = client.get("/pools", headers=headers)
        assert refused.status_code == 403, (headers, refused.text)
        assert ("Host header" if "Host" in headers else "Origin") in refused.json()["error"]


def _held(port: int, count: int, partial: bytes) -> list[socket.socket]:
    held = []
    for _ in range(count):
        peer = socket.create_connection(("127.0.0.1", port), timeout=5)
        peer.sendall(partial)
        held.append(peer)
    return held


def _closed(peer: socket.socket, within: float) -> bool:
    peer.settimeout(within)
    try:
        return peer.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_half_sent_requests_are_capped_and_timed_out_and_the_api_serves_on(
    served: tuple[KeptApi, httpx.Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_guard, "REQUEST_TIMEOUT", 2.0)
    _, client = served
    port = client.base_url.port
    assert port is not None
    held = _held(port, http_guard.MAX_CONNECTIONS + 20, b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    try:
        assert client.get("/pools").json() == []  # a real client is served while they are held
        cut = [peer for peer in held if _closed(peer, 0.2)]
        assert len(cut) >= 20, f"{len(cut)} of {len(held)} closed at once: the API holds more than its cap"
        time.sleep(http_guard.REQUEST_TIMEOUT + 1.0)
        assert all(_closed(peer, 1.0) for peer in held), "a half-sent request was kept past REQUEST_TIMEOUT"
    finally:
        for peer in held:
            peer.close()
    assert client.get("/pools").json() == []  # and the API serves on


def test_malformed_requests_are_logged_once_a_minute_not_once_each(
    served: tuple[KeptApi, httpx.Client], caplog: pytest.LogCaptureFixture
) -> None:
    _, client = served
    port = client.base_url.port
    assert port is not None
    with caplog.at_level(logging.WARNING, logger="uvicorn.error"):
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as peer:
                peer.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
                _closed(peer, 5.0)
    lines = [record for record in caplog.records if record.name.startswith("uvicorn")]
    assert 1 <= len(lines) <= 2, [record.getMessage() for record in lines]
    assert client.get("/pools").json() == []
