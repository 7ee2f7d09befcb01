"""The live web dashboard's parts without a pool (docs/dashboard.md): a board folds events
into what the page draws, summarising a thousand nodes into a screen; a map's rate and
ETA, queued items, the cost so far; event and output lines numbered so a stream sends
each once; a login link works once and expires; the routes' refusals (no cookie, a
foreign Origin or Host, links only with the bearer token); a stream ends when the server
stops; a kept pool's script sends what it observes (``Observed``) and the relay hands it
to the daemon's board; a page watching a kept pool turns its nodes' metrics on; the
assets are in the wheel's package data. The browser test is tests/e2e/test_dashboard_browser.py."""

from __future__ import annotations

import asyncio
import fnmatch
import pickle
import threading
import time
import tomllib
from pathlib import Path

import httpx
import pytest

from skyward.api.dashboard import PoolDashboard
from skyward.core import handshake
from skyward.core.messages import PROTOCOL, Close, Hello, Observed, Resume
from skyward.daemon.dashboard_feed import Watched
from skyward.engine.events import EventBatch
from skyward.engine.observed import ObservedForwarder
from skyward.engine.relay_server import RelayServer, read_message, write_message
from skyward.observe import events as ev
from skyward.observe.bus import EventBus
from skyward.observe.dashboard import app as dashboard_app
from skyward.observe.dashboard.board import NODE_ROWS, Board

ROOT = Path(__file__).resolve().parents[2]


def ready_pool(board: Board, nodes: int, provider: str = "local", price: float | None = None) -> None:
    board.apply(ev.ClusterRequested("p", provider, nodes))
    for node in range(nodes):
        board.apply(ev.InstanceProvisioned(node, f"i-{node}", price_on_demand=price))
        board.apply(ev.InstanceBootstrapped(node, f"i-{node}", 1.0))
    board.apply(ev.ClusterReady("p", nodes, 1.0))


def test_a_thousand_node_pool_is_summarised_not_drawn_row_by_row() -> None:
    board = Board("p")
    ready_pool(board, 1000)
    for node in range(1000):
        board.apply(ev.Metric(node, "cpu", 10.0 + node % 50))
    board.apply(ev.TaskStarted("t1", "train", 500))
    board.apply(ev.TaskStarted("t2", "train", 900))
    board.apply(ev.TaskCompleted("t0", "train", 777, 1.0, error="ValueError: no"))
    board.apply(ev.InstancePreempted(333, "i-333", "spot"))
    snapshot = board.snapshot()
    rows = [row["node"] for row in snapshot["nodes"]]  # type: ignore[union-attr, index]
    assert len(rows) == NODE_ROWS and snapshot["nodes_hidden"] == 1000 - NODE_ROWS
    assert rows == sorted(rows) and {333, 500, 777, 900} <= set(rows)  # trouble and the busy ones are drawn
    assert snapshot["states"] == {"busy": 2, "idle": 997, "preempted": 1}
    assert snapshot["node_count"] == 1000 and snapshot["means"] == {"cpu": 34.5}  # type: ignore[comparison-overlap]
    assert len(str(snapshot)) < 20_000
    small = Board("q")
    ready_pool(small, 3)
    assert [row["node"] for row in small.snapshot()["nodes"]] == [0, 1, 2]  # type: ignore[union-attr, index]


def test_a_maps_rate_eta_and_queued_items_come_from_its_progress() -> None:
    board = Board("p")
    ready_pool(board, 2)
    start = time.time()
    board.apply(ev.Progress("b1", "map", "square", 0, 100, timestamp=start))
    board.apply(ev.TaskStarted("t1", "square", 0, items=10))
    board.apply(ev.TaskStarted("t2", "square", 1, items=10))
    board.apply(ev.Progress("b1", "map", "square", 20, 100, timestamp=start + 4))
    [batch] = board.snapshot()["maps"]  # type: ignore[misc]
    assert (batch["done"], batch["total"], batch["per_second"], batch["eta"]) == (20, 100, 5.0, 16.0)
    tasks = board.snapshot()["tasks"]
    assert tasks["running"] == 2 and tasks["queued"] == 100 - 20 - 20  # type: ignore[index]
    board.apply(ev.TaskCompleted("t1", "square", 0, 1.0, items=10))
    board.apply(ev.Progress("b1", "map", "square", 100, 100, finished=True, timestamp=start + 8))
    snapshot = board.snapshot()
    assert snapshot["maps"][0]["eta"] == 0.0 and snapshot["maps"][0]["finished"]  # type: ignore[index]
    assert snapshot["tasks"]["queued"] == 0 and snapshot["tasks"]["done"] == 1  # type: ignore[index]
    assert snapshot["tasks"]["per_second"] > 0  # type: ignore[index, operator]


def test_the_cost_so_far_follows_the_node_prices_and_a_local_pool_has_none() -> None:
    local = Board("p")
    ready_pool(local, 2)
    assert local.snapshot()["cost"] is None
    priced = Board("c")
    priced.apply(ev.ClusterRequested("c", "aws", 2))
    began = time.time() - 3600
    priced.apply(ev.InstanceProvisioned(0, "i-0", price_on_demand=1.0, timestamp=began))
    priced.apply(ev.InstanceProvisioned(1, "i-1", spot=True, price_on_demand=3.0, price_spot=0.5, timestamp=began))
    cost = priced.snapshot()["cost"]
    assert cost is not None and cost["hourly"] == 1.5 and 1.49 < cost["so_far"] < 1.52  # type: ignore[index, operator]
    priced.apply(ev.CostFinal(2.0, 7200, 1.5))
    assert priced.snapshot()["cost"] == {"so_far": 2.0, "hourly": 1.5, "final": True}


def test_event_and_output_lines_are_numbered_so_a_stream_sends_each_once() -> None:
    board = Board("p")
    ready_pool(board, 1)
    board.apply(ev.Log(0, "hello"))
    board.apply(ev.Log(0, "x" * 5000, stream="stderr"))
    board.apply(ev.Metric(0, "cpu", 5.0))
    board.apply(ev.TaskCompleted("t", "f", 0, 0.1))  # a success is not an event line
    board.apply(ev.TaskCompleted("u", "f", 0, 0.1, error="boom"))
    board.note("pool p: adopted by pid 1")
    lines = board.log_after(0, 0)
    assert [(line["level"], len(str(line["text"]))) for line in lines] == [("stdout", 5), ("stderr", 2000)]
    assert board.log_after(0, int(str(lines[-1]["seq"]))) == []
    texts = [(line["level"], line["text"]) for line in board.events_after(0)]
    assert texts[-2:] == [("warning", "node 0: f failed after 0.10s: boom"), ("info", "pool p: adopted by pid 1")]
    assert not any("cpu" in str(text) or "hello" in str(text) for _, text in texts)
    seen = int(str(board.events_after(0)[-1]["seq"]))
    board.apply(ev.Error("lost it"))
    assert [line["text"] for line in board.events_after(seen)] == ["error: lost it"]
    assert board.snapshot()["logs"] == [0]


def test_observed_batches_are_applied_and_one_that_cannot_be_read_is_noted() -> None:
    board = Board("p")
    ready_pool(board, 1)
    board.observed(EventBatch([ev.TaskStarted("t", "f", 0), ev.Progress("b", "map", "f", 1, 4)], 0, 2).encode())
    assert board.snapshot()["tasks"]["running"] == 1 and board.snapshot()["maps"][0]["done"] == 1  # type: ignore[index]
    board.observed(b"not a pickle")
    assert board.events_after(0)[-1]["level"] == "error"


def test_a_link_opens_once_and_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    sessions = dashboard_app.Sessions(1234)
    assert sessions.cookie == "skyward-dashboard-1234"
    token = sessions.link()
    session = sessions.redeem(token)
    assert session is not None and sessions.valid(session)
    assert sessions.redeem(token) is None and not sessions.valid("") and not sessions.valid("x")
    monkeypatch.setattr(dashboard_app, "LINK_TTL", -1.0)
    assert sessions.redeem(sessions.link()) is None
    monkeypatch.setattr(dashboard_app, "LINK_TTL", 60.0)
    tokens = [sessions.link() for _ in range(dashboard_app.MAX_LINKS + 5)]
    assert sessions.redeem(tokens[0]) is None and sessions.redeem(tokens[-1]) is not None


@pytest.fixture
def served() -> tuple[EventBus, PoolDashboard, str]:
    bus = EventBus()
    dashboard = PoolDashboard(bus.on, "p")
    bus.emit(ev.ClusterRequested("p", "local", 2))
    link = dashboard.start()
    try:
        yield bus, dashboard, link
    finally:
        dashboard.stop()


def test_a_pools_own_dashboard_opens_with_its_link_once_and_refuses_strangers(
    served: tuple[EventBus, PoolDashboard, str],
) -> None:
    bus, dashboard, link = served
    base = str(dashboard.url)
    with httpx.Client(timeout=10) as browser:
        opened = browser.get(link)
        assert opened.status_code == 303 and opened.headers["location"] == "/dashboard/"
        cookie = opened.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/dashboard" in cookie
        assert browser.get(link).status_code == 403
        page = browser.get(f"{base}/dashboard/")
        assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
        for asset in ("app.js", "style.css"):
            assert browser.get(f"{base}/dashboard/static/{asset}").status_code == 200
        assert browser.get(f"{base}/dashboard/static/index.html").status_code == 404
        assert browser.get(f"{base}/dashboard/static/..%2fapp.py").status_code == 404
        assert browser.get(f"{base}/dashboard/api/state", headers={"Origin": base}).status_code == 200
        for headers in ({"Origin": "http://evil.example"}, {"Host": "evil.example"}, {"Origin": "null"}):
            assert browser.get(f"{base}/dashboard/api/state", headers=headers).status_code == 403, headers
        assert browser.post(f"{base}/dashboard/links").status_code == 401  # a cookie makes no links
        bus.emit(ev.Log(1, "a line"))
        assert browser.get(f"{base}/dashboard/api/state").json()["pools"][0]["logs"] == [1]
    for path in ("/dashboard/", "/dashboard/api/state", "/dashboard/api/stream", "/dashboard/static/app.js"):
        assert httpx.get(f"{base}{path}").status_code == 401, path
    other = dashboard.link()
    assert other != link and httpx.get(other).status_code == 303


def test_a_stream_sends_state_events_and_the_followed_nodes_output_and_ends_when_the_server_stops(
    served: tuple[EventBus, PoolDashboard, str],
) -> None:
    bus, dashboard, link = served
    base = str(dashboard.url)
    bus.emit(ev.Log(1, "first line"))
    client = httpx.Client(timeout=10)
    client.get(link)
    seen: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        try:
            with client.stream("GET", f"{base}/dashboard/api/stream?pool=p&node=1") as stream:
                assert stream.headers["content-type"].startswith("text/event-stream")
                seen.extend(stream.iter_lines())  # line by line, as they come
        except httpx.HTTPError:
            pass
        ended.set()

    threading.Thread(target=follow, daemon=True).start()
    deadline = time.monotonic() + 10
    while not any("second line" in line for line in seen) and time.monotonic() < deadline:
        if any("first line" in line for line in seen):
            bus.emit(ev.Log(1, "second line"))
        time.sleep(0.1)
    assert "event: state" in seen and "event: events" in seen and "event: log" in seen, seen
    assert sum("first line" in line for line in seen) == 1
    assert dashboard.board.watched
    started = time.monotonic()
    dashboard.stop()
    assert ended.wait(10) and time.monotonic() - started < 5
    client.close()


def test_links_are_made_only_with_the_daemons_token(tmp_path: Path) -> None:
    from skyward.daemon.http_api import KeptApi
    from skyward.daemon.kept_pools import KeptPools
    from skyward.providers.daemon_client import API_TOKEN_FILE

    kept = KeptPools(tmp_path)
    api = KeptApi(tmp_path, kept)
    url = api.start()
    try:
        token = (tmp_path / API_TOKEN_FILE).read_text()
        assert httpx.post(f"{url}/dashboard/links").status_code == 401
        made = httpx.post(f"{url}/dashboard/links", params={"pool": "a b"}, headers={"Authorization": f"Bearer {token}"})
        assert made.status_code == 201, made.text
        link = made.json()["url"]
        assert link.startswith(f"{url}/dashboard/login?token=") and link.endswith("&pool=a%20b")
        opened = httpx.get(link)
        assert opened.status_code == 303 and opened.headers["location"] == "/dashboard/?pool=a%20b"
        state = httpx.get(f"{url}/dashboard/api/state", headers={"Authorization": f"Bearer {token}"})
        assert state.status_code == 200 and state.json()["pools"] == []
        assert httpx.get(f"{url}/pools", cookies=opened.cookies).status_code == 401  # the cookie opens the dashboard only
    finally:
        api.stop()
        kept.close()


def test_a_kept_pools_script_sends_what_it_observes_and_the_relay_hands_it_on(tmp_path: Path) -> None:
    bus = EventBus()
    sent: list[bytes] = []
    forwarder = ObservedForwarder(sent.append, bus.on)
    assert bus.wants(ev.Progress) and not bus.wants(ev.Metric)
    bus.emit(ev.TaskStarted("t", "f", 0))
    bus.emit(ev.Log(0, "not forwarded: the relay sees the nodes' own events"))
    bus.emit(ev.Progress("b", "map", "f", 1, 2))
    forwarder.close()
    assert not bus.wants(ev.Progress)
    events = [event for batch in sent for event in pickle.loads(batch).events]
    assert [type(event).__name__ for event in events] == ["TaskStarted", "Progress"]

    secret = handshake.new_secret()
    got: list[bytes] = []
    path = str(tmp_path / "relay.sock")

    class Quiet:
        def end(self) -> None:
            pass

    async def scenario() -> object:
        server = RelayServer(secret, lambda sink: Quiet(), observed=got.append)  # type: ignore[arg-type, return-value]
        listener = await asyncio.start_unix_server(server.handle, path)
        async with listener:
            reader, writer = await asyncio.open_unix_connection(path)
            assert await handshake.prove_to_server_async(reader, writer, secret)
            await write_message(writer, Hello(PROTOCOL))
            assert await read_message(reader) == Hello(PROTOCOL)
            await write_message(writer, Resume(b"s", 0))
            assert await read_message(reader) == Resume(b"s", 0)
            await write_message(writer, Observed(sent[0]))
            await write_message(writer, Close())
            closed = await asyncio.wait_for(read_message(reader), 5)
            writer.close()
            return closed

    assert type(asyncio.run(scenario())).__name__ == "Closed"
    assert got == sent[:1]


def test_a_page_watching_a_kept_pool_turns_its_nodes_metrics_on() -> None:
    told: list[bool] = []
    ended: list[bool] = []

    class Backend:
        def set_metrics(self, on: bool) -> None:
            told.append(on)

        def end(self) -> None:
            ended.append(True)

    board = Board("p")
    watched = Watched(Backend(), board)  # type: ignore[arg-type]
    watched.set_metrics(False)  # the script does not listen
    board.watch(True)  # a page does
    board.watch(True)
    board.watch(False)
    assert told == [True, False, True] and board.watched
    board.watch(False)
    watched.set_metrics(True)
    watched.end()
    board.watch(True)  # after its end the backend is told nothing
    assert told == [True, False, True, False, True] and ended == [True]


def test_options_dashboard_takes_true_or_false_only() -> None:
    import skyward as sky

    assert sky.Options(dashboard=True).dashboard and not sky.Options().dashboard
    with pytest.raises(ValueError, match="Options.dashboard"):
        sky.Options(dashboard="yes")  # type: ignore[arg-type]


def test_the_assets_are_in_the_wheels_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["skyward.observe.dashboard"]
    static = ROOT / "skyward" / "observe" / "dashboard" / "static"
    files = sorted(path.relative_to(static.parent).as_posix() for path in static.iterdir())
    assert files == ["static/app.js", "static/index.html", "static/style.css"]
    for name in files:
        assert any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
    page = (static / "index.html").read_text()
    assert "http" not in page.replace("http-equiv", "")  # no CDN: every asset is served here
