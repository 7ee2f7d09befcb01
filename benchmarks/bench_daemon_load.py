"""D — the pool daemon under load, and killed in the middle.

A fresh skyward home; the pool daemon keeps ``pools`` 1-node local pools (`sky up`).
Then, all at once: ``scripts`` scripts (fresh interpreters) each adopt one of the pools
by name, waiting their turn while another script holds it (one client at a time), and
run a task on it; ``http`` threads ask the HTTP API for its pools as fast as they can
and ``followers`` of them submit a script to a pool (`POST /pools/{name}/runs`) and
follow its output to its exit (server-sent events); one client holds ``half_open``
connections to the API, each with half a request sent. Half way through, the daemon is
killed (SIGKILL): the next command starts another, which takes the kept pools over
(their agents outlive the daemon), and the HTTP clients find its new address and token
in its files. Afterwards every pool must be listed and adopted again, every script and
run must have ended in a result or a clear error (nothing hangs, nothing is lost), and
after `sky down --all` no process of the home and no runtime directory may be left.

Rows: a script's adoption under load (from `sky.Compute` to its task's result, import
not counted: p50 and p99 over the scripts that got their pool), the API's requests per
second and the p99 of one request, and the counts of what was lost (0 is the target).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "D"
TITLE = "D — the pool daemon under load: scripts, HTTP clients, half-open connections, a SIGKILL"
FULL = {"pools": 5, "scripts": 20, "http": 200, "followers": 10, "half_open": 1000, "seconds": 40.0}
QUICK = {"pools": 2, "scripts": 6, "http": 20, "followers": 2, "half_open": 100, "seconds": 20.0}
SKY = os.path.join(os.path.dirname(sys.executable), "sky")
ADOPT = """
import json, sys, time
import skyward as sky
name = sys.argv[1]
deadline = time.monotonic() + float(sys.argv[2])
while True:
    started = time.perf_counter()
    try:
        with sky.Compute(name=name, console=False, logging=False) as pool:
            assert sky.function(lambda: 1)() >> pool == 1
            print(json.dumps({"adopted": time.perf_counter() - started}), flush=True)
            break
    except Exception as exc:  # held by another script, or the daemon was just killed: try again
        if time.monotonic() > deadline:
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
            break
        time.sleep(0.2)
"""
RUN = "print('run output', flush=True)\n"


def run(quick: bool = False) -> list[Row]:
    scale = QUICK if quick else FULL
    try:
        found = isolated(measure, scale, timeout=1200)
    except SubjectFailed as exc:
        return [failed_row(GROUP, "the daemon under load", exc, metric="adopt")]
    if "skipped" in found:
        return [failed_row(GROUP, "the daemon under load", f"not measured: {found['skipped']}", metric="adopt")]
    return rows(found, scale)


def rows(found: dict[str, Any], scale: dict[str, Any]) -> list[Row]:
    """The group's rows from ``measure``'s result."""
    load = (f"{scale['pools']} kept pools, {scale['scripts']} scripts, {scale['http']} HTTP clients "
            f"({scale['followers']} following runs), {scale['half_open']} half-open connections, SIGKILL at half time")
    adopted = found["adopted"] or [float("nan")]
    ordered = sorted(adopted)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    lost = found["lost"]
    lost_runs = {index: state for index, state in found["left"]["runs"].items() if state != "ended"}
    return [
        row(GROUP, "a script's adoption under load, p50", [statistics.median(adopted)], load, metric="adopt"),
        row(GROUP, "a script's adoption under load, p99", [p99], load, metric="adopt p99"),
        row(GROUP, "HTTP API requests per second", [found["requests_per_s"]], "GET /pools from every client thread",
            unit="req/s", metric="rps"),
        row(GROUP, "one HTTP request, p99", [found["request_p99"]], "answered requests; every client thread on the same 2 cores as the daemon",
            metric="request p99"),
        row(GROUP, "lost: scripts, runs, pools, leftovers", [float(sum(lost.values()))],
            json.dumps(lost) + (f"; the lost runs' last states: {json.dumps(lost_runs)}" if lost_runs else ""),
            unit="count", metric="lost", facts=lost),
    ]


def measure(scale: dict[str, Any]) -> dict[str, Any]:
    """Run the load (see the module) in a fresh home; what was measured and lost."""
    import resource

    import httpx
    import psutil

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, scale["half_open"] + 1024)), hard))
    with tempfile.TemporaryDirectory(prefix="skybench-daemon-") as home:
        os.environ["SKYWARD_HOME"] = home
        env = {**os.environ, "SKYWARD_HOME": home}
        from skyward.core.paths import runtime_path
        from skyward.providers import daemon_client

        names = [f"p{index}" for index in range(scale["pools"])]
        for name in names:
            done = subprocess.run([SKY, "up", name, "--nodes", "1", "--keep-alive", "600", "--json"], env=env,
                                  capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                raise RuntimeError(f"sky up {name} failed: {done.stdout[-800:]} {done.stderr[-800:]}")
        script = Path(home) / "adopt.py"
        script.write_text(ADOPT)
        run_script = Path(home) / "run.py"
        run_script.write_text(RUN)
        stop = threading.Event()
        latencies: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()

        def api() -> tuple[str, str]:
            directory = daemon_client.daemon_dir()
            url = json.loads((directory / daemon_client.API_FILE).read_text())["url"]
            return url, (directory / daemon_client.API_TOKEN_FILE).read_text()

        def client() -> None:
            while not stop.is_set():
                try:
                    url, token = api()
                    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as http:
                        while not stop.is_set():
                            started = time.perf_counter()
                            http.get("/pools").raise_for_status()
                            with lock:
                                latencies.append(time.perf_counter() - started)
                except Exception as exc:  # noqa: BLE001 - the daemon was killed: find the new one
                    with lock:
                        failures.append(type(exc).__name__)
                    time.sleep(0.2)

        runs: dict[str, str] = {}

        def follower(index: int) -> None:
            name = names[index % len(names)]
            began = time.monotonic()
            deadline = began + scale["seconds"] * 3
            while time.monotonic() < deadline:
                try:
                    url, token = api()
                    headers = {"Authorization": f"Bearer {token}"}
                    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
                        submitted = http.post(f"/pools/{name}/runs", json={"script": str(run_script), "args": []})
                        submitted.raise_for_status()
                        with http.stream("GET", f"/runs/{submitted.json()['id']}/output") as stream:
                            status = stream.status_code
                            text = "".join(stream.iter_text())
                    runs[f"{index}"] = ("ended" if "event: exit" in text
                                        else f"no exit event: HTTP {status}, the stream's end {text[-200:]!r}")
                    return
                except Exception as exc:  # noqa: BLE001 - the daemon was killed mid-run: submit again
                    runs[f"{index}"] = f"{type(exc).__name__} at {time.monotonic() - began:.1f} s: {exc}"
                    time.sleep(0.5)

        half_open: list[socket.socket] = []

        def hold_half_open() -> None:
            url, _ = api()
            port = int(url.rsplit(":", 1)[1])
            for _ in range(scale["half_open"]):
                with contextlib.suppress(OSError):
                    peer = socket.create_connection(("127.0.0.1", port), timeout=2)
                    peer.sendall(b"GET /pools HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                    half_open.append(peer)

        threads = [threading.Thread(target=client, daemon=True) for _ in range(scale["http"] - scale["followers"])]
        threads += [threading.Thread(target=follower, args=(index,), daemon=True) for index in range(scale["followers"])]
        threads.append(threading.Thread(target=hold_half_open, daemon=True))
        began = time.perf_counter()
        scripts = [
            subprocess.Popen([sys.executable, str(script), names[index % len(names)], str(scale["seconds"] * 4)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for index in range(scale["scripts"])
        ]
        for thread in threads:
            thread.start()
        time.sleep(scale["seconds"] / 2)
        [daemon] = daemon_client.status()
        os.kill(daemon.pid, signal.SIGKILL)
        time.sleep(scale["seconds"] / 2)
        stop.set()
        answered = len(latencies)
        elapsed = time.perf_counter() - began
        adopted, script_errors = [], []
        for process in scripts:
            try:
                out, err = process.communicate(timeout=scale["seconds"] * 5)
            except subprocess.TimeoutExpired:
                process.kill()
                script_errors.append("hung")
                continue
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            if lines and "adopted" in lines[-1]:
                adopted.append(lines[-1]["adopted"])
            else:
                script_errors.append(lines[-1]["error"] if lines else f"exit {process.returncode}: {err[-300:]}")
        for thread in threads:
            thread.join(scale["seconds"] * 3)
        for peer in half_open:
            peer.close()
        log = daemon_client.daemon_dir() / daemon_client.LOG_FILE
        log_tail = log.read_text(errors="replace")[-2000:] if script_errors and log.exists() else ""
        listed = subprocess.run([SKY, "ls", "--json"], env=env, capture_output=True, text=True, timeout=300)
        kept = {pool["name"] for pool in json.loads(listed.stdout or "[]")} if listed.returncode == 0 else set()
        again = [subprocess.run([sys.executable, str(script), name, "120"], env=env, capture_output=True, text=True,
                                timeout=300) for name in names]
        not_adopted = [name for name, done in zip(names, again) if '"adopted"' not in done.stdout]
        subprocess.run([SKY, "down", "--all"], env=env, capture_output=True, text=True, timeout=300)
        time.sleep(2)
        left = [p.pid for p in psutil.process_iter(["cmdline", "environ"]) if _of_home(p, home)]
        runtime = runtime_path(daemon_client.daemon_dir())
        sockets_left = sorted(os.listdir(runtime)) if runtime.exists() else []
        ordered = sorted(latencies[:answered])
        return {
            "adopted": adopted,
            "requests_per_s": answered / elapsed,
            "request_p99": ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("nan"),
            "lost": {
                "scripts without a result or a clear error": sum(1 for e in script_errors if e == "hung"),
                "scripts that never got their pool": len(script_errors),
                "runs without their exit": sum(1 for state in runs.values() if state != "ended")
                + scale["followers"] - len(runs),
                "pools not listed after the kill": len(set(names) - kept),
                "pools not adopted after the kill": len(not_adopted),
                "processes left after sky down --all": len(left),
                "sockets left after sky down --all": len(sockets_left),
            },
            "http_failures": len(failures),
            "left": {"processes": left, "sockets": sockets_left, "scripts": script_errors, "runs": runs,
                     "daemon log": log_tail},
        }


def _of_home(process: Any, home: str) -> bool:
    """Whether ``process`` belongs to the benchmark's home (its command line or the
    environment it started with names it)."""
    try:
        info = process.info
        return any(home in part for part in info["cmdline"] or []) or (info["environ"] or {}).get("SKYWARD_HOME") == home
    except Exception:  # noqa: BLE001 - gone, or not ours to read
        return False
