"""Every ``sky`` command, run as the installed console script in a subprocess, with its
output checked; ``--json`` output parses. Pools here are local (``sky ls``, ``logs``,
``down``, ``run``) or on the local RunPod fake (``providers check``, ``offers``, ``gc``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_runpod import FakeRunPod

SKY = os.path.join(os.path.dirname(sys.executable), "sky")
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private SKYWARD_HOME, no cloud credentials."""
    values = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RUNPOD", "VAST", "VERDA", "DIGITALOCEAN", "NOVITA"))}
    values.update(SKYWARD_HOME=str(tmp_path / "home"), HOME=str(tmp_path), PYTHONPATH=str(ROOT / "tests"))
    return values


@pytest.fixture
def runpod(env: dict[str, str]) -> Iterator[FakeRunPod]:
    fake = FakeRunPod()
    fake.use_subnet("192.0.2.0/24")
    fake.start()
    env.update(fake.env())
    yield fake
    fake.stop()


def sky(env: dict[str, str], *args: str, code: int = 0, cwd: Path | None = None, timeout: float = 120) -> Any:
    result = subprocess.run([SKY, *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert result.returncode == code, f"sky {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
    return json.loads(result.stdout) if "--json" in args and code == 0 else result.stdout + result.stderr


def test_version(env: dict[str, str]) -> None:
    shown = sky(env, "version", "--json")
    assert shown["skyward"] and shown["ray"]  # one thing: an object, not a list
    assert "skyward" in sky(env, "version")


def test_providers_list_and_check(env: dict[str, str], runpod: FakeRunPod) -> None:
    listed = {row["provider"]: row for row in sky(env, "providers", "list", "--json")}
    assert listed["runpod"]["credentials"] == "found" and listed["vastai"]["credentials"] == "missing"
    assert listed["local"]["cloud"] is False
    checked = sky(env, "providers", "check", "runpod", "--json")
    assert checked[0]["api"] == "ok"
    failed = sky(env, "providers", "check", "vastai", code=1)
    assert "missing" in failed and "VAST_API_KEY" in failed
    assert "RUNPOD_API_KEY" not in json.dumps(checked) or "test-token" not in json.dumps(checked)


def test_offers_from_a_cloud(env: dict[str, str], runpod: FakeRunPod) -> None:
    offers = sky(env, "offers", "--provider", "runpod", "-a", "L4", "--allocation", "on-demand", "--json")
    assert offers and all(o["provider"] == "runpod" and o["accelerator"] == "L4" for o in offers)
    assert [o["hourly_price"] for o in offers] == sorted(o["hourly_price"] for o in offers)
    assert "runpod" in sky(env, "offers", "--provider", "runpod", "-a", "L4")
    assert "unknown provider" in sky(env, "offers", "--provider", "moon", code=2)


def test_offers_with_no_credentials_list_the_shipped_snapshot_marked_as_such(env: dict[str, str]) -> None:
    from skyward.providers import names

    bare = {k: v for k, v in env.items() if not any(k in source.env for known in names.KNOWN.values()
                                                      for source in known.credentials)}
    done = subprocess.run([SKY, "offers", "-a", "A100"], capture_output=True, text=True, timeout=120,
                          env={**bare, "COLUMNS": "200"}, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "p4de.24xlarge" in done.stdout and "*" in done.stdout, done.stdout
    assert "* not live: from skyward's price snapshot 20" in done.stdout, done.stdout
    assert "no cloud credentials were found" in done.stderr and "sky providers list" in done.stderr, done.stderr
    listed = sky(bare, "offers", "--allocation", "on-demand", "--limit", "100", "--json")
    assert listed and {o["provider"] for o in listed} == {"aws"}
    assert all(o["price_source"].startswith("snapshot ") and not o["spot"] for o in listed)
    assert [o["hourly_price"] for o in listed] == sorted(o["hourly_price"] for o in listed)


def test_gc_on_a_cloud(env: dict[str, str], runpod: FakeRunPod) -> None:
    from e2e.cloud.clouds import orphan_name

    planted = runpod.plant(orphan_name(), "NVIDIA L4")
    listed = sky(env, "gc", "--provider", "runpod", "--json")
    assert [row["id"] for row in listed] == [planted.id] and listed[0]["kind"] == "instance"
    assert "nothing to clean up" not in sky(env, "gc", "--provider", "runpod", "--dry-run")
    sky(env, "gc", "--provider", "runpod", "--yes")
    assert sky(env, "gc", "--provider", "runpod", "--json") == []
    assert "no cloud credentials" in sky({k: v for k, v in env.items() if not k.startswith("RUNPOD")}, "gc", code=1)


CONFIG = """\
[defaults]
nodes = 1

[pools.good]
provider = "local"
options = { console = false }

[pools.cloud]
provider = { type = "runpod", container_image = "nvidia/cuda:12.8.0-base-ubuntu24.04" }
accelerator = "L4:2"

[pools.bad]
provider = "local"
vcpus = -1
"""


def test_config_path_show_validate(env: dict[str, str], tmp_path: Path) -> None:
    assert "no skyward.toml" in sky(env, "config", "path", code=1, cwd=tmp_path)
    path = tmp_path / "skyward.toml"
    path.write_text(CONFIG)
    assert sky(env, "config", "path", cwd=tmp_path).strip() == str(path)
    assert sky(env, "config", "path", "--json", cwd=tmp_path) == {"path": str(path), "exists": True}
    shown = {row["pool"]: row for row in sky(env, "config", "show", "--json", cwd=tmp_path)}
    assert "RunPod" in shown["cloud"]["provider"] and "L4" in str(shown["cloud"]["spec"]["accelerator"])
    assert "vcpus" in shown["bad"]["error"]
    problems = sky(env, "config", "validate", cwd=tmp_path, code=1)
    assert f"{path}:14: [pools.bad] " in problems and "Spec.vcpus=-1" in problems
    path.write_text(CONFIG.replace("vcpus = -1", "vcpus = 1").replace('accelerator = "L4:2"', 'accelerator = "L4:2"\nnodez = 3'))
    assert "nodez" in sky(env, "config", "validate", cwd=tmp_path, code=1)
    path.write_text("[pools.x\nprovider = 1\n")
    assert ":1:" in sky(env, "config", "validate", cwd=tmp_path, code=1)
    path.write_text(CONFIG.replace("vcpus = -1", "vcpus = 1"))
    assert "every pool loads" in sky(env, "config", "validate", cwd=tmp_path)
    assert sky(env, "config", "validate", "--json", cwd=tmp_path) == []


SCRIPT = """\
import sys, time
import skyward as sky

@sky.function
def shout(x):
    print("hello from", x, flush=True)
    return x * 2

with sky.Compute(nodes=1, options=sky.Options(console=True)) as pool:
    print("READY", pool.id, flush=True)
    assert shout(21) >> pool == 42
    while "--hold" in sys.argv:
        time.sleep(0.2)
    shout(1) >> pool
"""


def rest_of(process: subprocess.Popen[str], timeout: float) -> str:
    """What ``process`` prints after the lines already read from its stdout, once it exits
    (within ``timeout``). Not ``communicate(timeout=...)``: that reads the pipe itself and
    loses what ``readline()`` had already buffered."""
    assert process.stdout is not None
    process.wait(timeout)
    return process.stdout.read()


def start_pool(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [SKY, "run", str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 120
    for line in process.stdout:
        if line.startswith("READY"):
            return process, line.split()[1]
        assert time.monotonic() < deadline
    raise AssertionError(f"no pool: {process.wait(10)}")


WRITER = """
import sys, time
from skyward.providers import registry

log = sys.argv[1]
with open(log, "w", buffering=1) as out:
    registry.register("pool-halfline", "local", None, log_file=log)
    out.write("first line\\nhello fr")  # the second line is still being written
    out.flush()
    print("WRITTEN", flush=True)
    sys.stdin.readline()
    out.write("om 21\\n")
    out.flush()
    time.sleep(0.5)
registry.unregister("pool-halfline")
"""


def test_logs_follow_prints_a_line_written_in_two_pieces_once(env: dict[str, str], tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path / "pool.log")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    assert writer.stdin is not None and writer.stdout is not None
    try:
        assert writer.stdout.readline().strip() == "WRITTEN"
        follower = subprocess.Popen([SKY, "logs", "-f", "pool-half"], stdout=subprocess.PIPE, text=True, env=env)
        assert follower.stdout is not None
        assert follower.stdout.readline() == "first line\n"
        time.sleep(0.5)  # the follower polls the unfinished line meanwhile
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert rest_of(follower, 30) == "hello from 21\n"
        assert writer.wait(30) == 0
    finally:
        writer.kill()


def test_run_prints_a_summary(env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    output = sky(env, "run", str(script), timeout=180)
    assert "[node 0] hello from 21" in output and "sky run" in output and "2 task(s) (0 failed)" in output
    summary = sky(env, "run", "--json", str(script), timeout=180)
    assert summary["exit_code"] == 0 and summary["pools"] == 1 and summary["tasks"] == 2
    (tmp_path / "fails.py").write_text("raise SystemExit(3)\n")
    assert "failed (exit 3)" in sky(env, "run", str(tmp_path / "fails.py"), code=3)


def test_ls_logs_and_down_of_a_live_pool(env: dict[str, str], tmp_path: Path) -> None:
    process, pool_id = start_pool(env, tmp_path, "--hold")
    try:
        pools = sky(env, "ls", "--json")
        assert [p["pool_id"] for p in pools] == [pool_id]
        assert pools[0]["provider"] == "local" and len(pools[0]["nodes"]) == 1 and pools[0]["cost_so_far"] == 0
        assert pools[0]["name"] in sky(env, "ls")
        lines = sky(env, "logs", pool_id[:8], "--json")
        assert any("[node 0] hello from 21" in line for line in lines)
        events = sky(env, "events", pool_id[:8], "--json")
        assert any(e["message"].startswith("pool ") and "starting 1 node" in e["message"] for e in events), events
        assert all(e["level"] in ("INFO", "WARNING", "ERROR", "DEBUG") and e["time"][:4].isdigit() for e in events)
        assert not any("hello from 21" in e["message"] for e in events), "task output is not an event"
        assert "hello from 21" not in sky(env, "events", pool_id[:8]) and "starting 1 node" in sky(env, "events", pool_id[:8])
        follower = subprocess.Popen([SKY, "logs", "-f", pool_id[:8]], stdout=subprocess.PIPE, text=True, env=env)
        assert follower.stdout is not None
        first = follower.stdout.readline()  # it follows the file now
        closed = sky(env, "down", pool_id[:8], "--json")
        assert closed["how"] == "closed by its process"
        followed = first + rest_of(follower, 60)
        assert "hello from 21" in followed and "stopped after" in followed
        assert "stopped after" in sky(env, "logs", pool_id[:8]), "a closed pool's log is still found by its id"
        name = pools[0]["name"]
        assert "stopped after" in sky(env, "logs", name), "and by the name the console printed"
        assert sky(env, "events", pool_id[:8], "-n", "1").strip().endswith("stopped after " + followed.split("stopped after ")[-1].split()[0])
        process.wait(60)
        assert sky(env, "ls", "--json") == []
        assert "no pool" in sky(env, "down", pool_id[:8], code=1)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
