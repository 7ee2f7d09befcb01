"""The live web dashboard (docs/dashboard.md) in a real headless browser: Debian's
Chromium (scripts/system_deps.sh), driven by Playwright. The pool daemon keeps a local
pool; ``sky dashboard NAME`` gives a one-time link, which opens the page (nodes shown)
and works once only; a script that adopts the pool runs a slow ``pool.map`` whose
progress moves on the page, a node's output follows live, and once the pool is ended
(``sky down NAME``) it disappears from the page. A request with a foreign Origin or Host
is refused, the page's own origin is not. Options(dashboard=True) serves the same page
from a pool's own process: its printed link works once, and the server ends with the pool.

With ``SKYWARD_DASHBOARD_SCREENSHOTS=DIR`` the browser test writes the screenshots
docs/dashboard.md shows (``dashboard-*.png``) into DIR."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sandbox import wait_for_no_processes

SKY = os.path.join(os.path.dirname(sys.executable), "sky")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = os.environ.get("SKYWARD_DASHBOARD_SCREENSHOTS", "")
WAIT_MS = 60_000
"""Milliseconds the page has for each change; the predicates are arrow functions, which the
page's content security policy lets Playwright poll (a bare expression is an eval it refuses)."""
MAP = """
import time
import skyward as sky

@sky.function
def square(x):
    print(f"item {x}: squaring", flush=True)
    time.sleep(0.5)
    return x * x

with sky.Compute(nodes=2, console="log") as pool:  # the kept pool of $SKYWARD_POOL
    print("SUM", sum(pool.map(square, range(24))), flush=True)
"""
OWN_POOL = """
import sys
import skyward as sky

with sky.Compute(nodes=1, options=sky.Options(dashboard=True, console=False, logging=False)) as pool:
    print("RAN", sky.function(lambda: 6 * 7)() >> pool, flush=True)
    sys.stdin.readline()
"""


def sky_cli(sandbox: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKY, *args], env=sandbox["env"], capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture
def browser() -> Iterator[object]:
    """Headless Chromium (Debian's), driven by Playwright."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (scripts/system_deps.sh installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    with sync_api.sync_playwright() as playwright:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        try:
            yield launched
        finally:
            launched.close()


def shot(page: object, name: str) -> None:
    if SHOTS:
        os.makedirs(SHOTS, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, f"dashboard-{name}.png"), full_page=True)  # type: ignore[attr-defined]


def map_figures(page: object) -> tuple[int, int]:
    """The done and total items of the page's map of ``square``."""
    text = page.inner_text(".map[data-batch] .figures")  # type: ignore[attr-defined]
    done, total = re.match(r"(\d+)/(\d+)", text).groups()  # type: ignore[union-attr]
    return int(done), int(total)


def test_the_dashboard_shows_a_kept_pool_its_map_and_a_nodes_output_live_and_drops_it_once_ended(
    sandbox: dict, home: Path, tmp_path: Path, browser: object
) -> None:
    shown = sky_cli(sandbox, "api", "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    endpoint = json.loads(shown.stdout)
    url, token = endpoint["url"], Path(endpoint["token_file"]).read_text()
    port = int(url.rsplit(":", 1)[1])
    bearer = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=url, headers=bearer, timeout=120) as api:
            work = tmp_path / "work"
            work.mkdir()
            opened = api.post("/pools", json={"name": "dash", "provider": "local", "nodes": 2, "keep_alive": 300,
                                              "cwd": str(work)})
            assert opened.status_code == 201, opened.text

            # the browser's origin is the API's own; any other Origin or Host is refused
            assert api.get("/dashboard/api/state", headers={"Origin": url}).status_code == 200
            for headers in ({"Origin": "http://evil.example"}, {"Origin": f"http://localhost:{port}"},
                            {"Origin": "null"}, {"Host": f"evil.example:{port}"}):
                refused = api.get("/dashboard/api/state", headers=headers)
                assert refused.status_code == 403, (headers, refused.text)
            assert httpx.get(f"{url}/dashboard/api/state").status_code == 401  # no cookie, no token

            # the browser is started with a private page that leads on to the link, never the link
            # itself: another user reads every command line in /proc
            started = tmp_path / "browser-argv"
            recorder = tmp_path / "browser"
            recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {started}\n')
            recorder.chmod(0o755)
            opened_by = subprocess.run([SKY, "dashboard", "dash"], env={**sandbox["env"], "BROWSER": str(recorder)},
                                       capture_output=True, text=True, timeout=180, check=False)
            assert opened_by.returncode == 0, opened_by.stdout + opened_by.stderr
            [page_file] = started.read_text().split()
            assert "token" not in page_file and page_file.startswith("file://"), page_file
            redirect = Path(page_file.removeprefix("file://"))
            assert redirect.stat().st_mode & 0o777 == 0o600
            assert f"url={url}/dashboard/login?token=" in redirect.read_text()

            linked = sky_cli(sandbox, "dashboard", "dash", "--json")
            assert linked.returncode == 0, linked.stdout + linked.stderr
            link = json.loads(linked.stdout)["url"]
            assert link.startswith(f"{url}/dashboard/login?token=")

            context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(link)
            assert page.url.startswith(f"{url}/dashboard/?pool=dash")  # the token is out of the address bar
            page.wait_for_selector("#connection[data-state=live]")
            page.wait_for_selector('.pool-tab[data-pool="dash"]')
            page.wait_for_function("() => document.querySelectorAll('#node-rows tr').length === 2")
            assert page.inner_text("#pool-provider") == "local" and page.inner_text("#pool-cost") == "—"
            cookies = context.cookies()
            assert [(c["name"], c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
                (f"skyward-dashboard-{port}", True, "Strict", "/dashboard")]

            again = browser.new_page()  # type: ignore[attr-defined]
            answer = again.goto(link)
            assert answer is not None and answer.status == 403 and "used already" in again.inner_text("body")
            again.close()

            script = work / "square.py"
            script.write_text(MAP)
            run = api.post("/pools/dash/runs", json={"script": str(script)})
            assert run.status_code == 201, run.text
            page.wait_for_selector(".map[data-batch]")
            page.wait_for_function(
                "(() => { const m = document.querySelector('.map[data-batch] .figures');"
                " const f = m && m.textContent.match(/^(\\d+)\\/(\\d+)/); return f && +f[1] > 0 && +f[1] < +f[2]; })"
            )
            first, total = map_figures(page)
            assert total == 24 and 0 < first < total
            page.wait_for_function("() => document.querySelector('#log-lines').textContent.includes('squaring')")
            page.wait_for_function("() => +document.querySelector('#tasks-running').textContent > 0 || "
                                   "+document.querySelector('#tasks-done').textContent > 0")
            shot(page, "map")
            page.wait_for_function(
                "(() => { const m = document.querySelector('.map[data-batch]');"
                " return m && m.dataset.finished === 'true'; })"
            )
            assert map_figures(page) == (24, 24)
            lines = page.inner_text("#log-lines")
            assert re.search(r"item \d+: squaring", lines), lines
            page.click('#node-rows tr[data-node="1"]')  # follow node 1's output instead
            page.wait_for_function("() => document.querySelector('#log-node').textContent === '1' && "
                                   "document.querySelector('#log-lines').textContent.includes('squaring')")
            page.wait_for_function("() => document.querySelector('#pool-held').textContent.startsWith('idle')")
            [kept] = api.get("/dashboard/api/state").json()["pools"]
            assert all(node["cpu"] is not None for node in kept["nodes"]), kept  # sampled while the page watched
            shot(page, "done")
            # the pool turns idle when the map ends, a moment before the script exits: wait for its exit
            with api.stream("GET", f"/runs/{run.json()['id']}/output") as output:
                exits = [line for line in output.iter_lines() if line.startswith("event: exit")]
            assert exits, "the run's output ended without its exit"
            ended = api.get(f"/runs/{run.json()['id']}").json()
            assert ended["exit_code"] == 0, ended

            down = sky_cli(sandbox, "down", "dash")
            assert down.returncode == 0, down.stdout + down.stderr
            page.wait_for_selector('.pool-tab[data-pool="dash"]', state="detached")
            page.wait_for_selector("#empty", state="visible")
            context.close()
    finally:
        down = sky_cli(sandbox, "down", "--all")
        assert down.returncode == 0, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_options_dashboard_prints_a_link_that_serves_the_page_once_until_the_pool_closes(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    (tmp_path / "own.py").write_text(OWN_POOL)
    process = subprocess.Popen(
        [sys.executable, "own.py"], cwd=tmp_path, env=sandbox["env"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None and process.stderr is not None and process.stdin is not None
        link = ""
        deadline = time.monotonic() + 120
        while not link and time.monotonic() < deadline:
            line = process.stderr.readline()
            assert line, "the pool ended without printing its dashboard's link"
            found = re.search(r"dashboard \(the link opens it once\): (http://127\.0\.0\.1:\d+/dashboard/login\S+)", line)
            link = found.group(1) if found else ""
        assert link, "no dashboard link within 120s"
        assert process.stdout.readline().strip() == "RAN 42"
        base = link.split("/dashboard/", 1)[0]
        with httpx.Client(timeout=30) as browser_like:
            page = browser_like.get(link, follow_redirects=True)
            assert page.status_code == 200 and "<title>skyward dashboard</title>" in page.text, page.text
            assert "default-src 'none'" in page.headers["content-security-policy"]
            state = browser_like.get(f"{base}/dashboard/api/state").json()
            [pool] = state["pools"]
            assert pool["node_count"] == 1 and pool["status"] == "ready" and pool["tasks"]["done"] == 1, pool
            assert browser_like.get(f"{base}/dashboard/static/app.js").status_code == 200
        assert httpx.get(link).status_code == 403  # the link worked once
        assert httpx.get(f"{base}/dashboard/api/state").status_code == 401  # not without the cookie
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.wait(timeout=120) == 0, process.stderr.read()
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base}/dashboard/api/state", timeout=5)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_thousand_node_pool_is_summarised_in_the_page_not_drawn_row_by_row(browser: object) -> None:
    """A pool's own dashboard (no Ray: its events emitted here) of 1,000 nodes, a map under
    way, a failed task and a preempted node: the page counts the nodes by state and draws
    25 rows, those in trouble among them."""
    from skyward.api.dashboard import PoolDashboard
    from skyward.observe import events as ev
    from skyward.observe.bus import EventBus
    from skyward.observe.dashboard.board import NODE_ROWS

    bus = EventBus()
    dashboard = PoolDashboard(bus.on, "large")
    opened = time.time() - 600
    bus.emit(ev.ClusterRequested("large", "aws", 1000, timestamp=opened))
    for node in range(1000):
        bus.emit(ev.InstanceProvisioned(node, f"i-{node:05x}", spot=True, price_on_demand=0.4, price_spot=0.12,
                                        timestamp=opened + 60))
        bus.emit(ev.InstanceBootstrapped(node, f"i-{node:05x}", 40.0))
        bus.emit(ev.Metric(node, "cpu", 20.0 + node % 7 * 10))
        bus.emit(ev.Metric(node, "memory", 30.0 + node % 5 * 5))
    bus.emit(ev.ClusterReady("large", 1000, 95.0))
    began = time.time() - 30
    bus.emit(ev.Progress("b1", "map", "embed", 0, 200_000, timestamp=began))
    for task in range(900):
        bus.emit(ev.TaskStarted(f"t{task}", "embed", task, items=50))
    for task in range(900, 1500):
        bus.emit(ev.TaskCompleted(f"t{task}", "embed", task % 1000, 2.0, items=50,
                                  error="CUDA error: out of memory" if task == 1234 else None,
                                  timestamp=time.time() - (1500 - task) * 0.04))
    bus.emit(ev.InstancePreempted(417, "i-001a1", "spot reclaimed"))
    bus.emit(ev.Progress("b1", "map", "embed", 30_000, 200_000, failed=50))
    for step in range(12):
        bus.emit(ev.Log(0, f"shard {step}: 2500 documents embedded"))
    link = dashboard.start()
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
        page.set_default_timeout(WAIT_MS)
        page.goto(link)
        page.wait_for_selector(".map[data-batch]")
        assert page.eval_on_selector_all("#node-rows tr", "rows => rows.length") == NODE_ROWS
        drawn = page.eval_on_selector_all("#node-rows tr", "rows => rows.map(row => +row.dataset.node)")
        assert {234, 417} <= set(drawn), drawn  # the failed task's node and the preempted one
        assert page.inner_text("#nodes-hidden").startswith(f"{1000 - NODE_ROWS} more nodes not drawn")
        states = page.inner_text("#node-states")
        assert "busy 899" in states and "idle 100" in states and "preempted 1" in states, states  # 417 ran one
        assert page.inner_text("#tasks-failed") == "1" and page.inner_text("#pool-cost").startswith("$")
        page.wait_for_function("() => document.querySelector('#log-lines').textContent.includes('shard 11')")
        shot(page, "large")
        page.close()
    finally:
        dashboard.stop()
