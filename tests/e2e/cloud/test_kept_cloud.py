"""A kept pool on a machine cloud (DigitalOcean's fake, whose Droplets are test hosts):
the same script run again adopts the same machines and node processes through the pool
daemon, without Ray in the script; idle past ``keep_alive`` the daemon tears it down as
a closing pool does, and the cloud is left with no Droplet, key or firewall of it."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.machines import Harness
from e2e.cloud import rotation
from e2e.cloud.conftest import environment
from sandbox import daemon_logs, wait_for_no_processes

from skyward.providers import daemon_client

pytestmark = pytest.mark.slow
SCRIPT = """
import os, socket, sys
import skyward as sky

@sky.function
def where():
    return socket.gethostname(), os.getpid()

keep_alive = float(os.environ.get("SCRIPT_KEEP_ALIVE", "6"))
options = sky.Options(console=False, logging=False, ssh_retry_interval=1, keep_alive=keep_alive)
with sky.Compute(provider=sky.DigitalOcean(), vcpus=2, nodes=2, options=options) as pool:
    print("NODES", sorted(where() @ pool), flush=True)
    print("RAY", "ray" in sys.modules, flush=True)
"""


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[FakeDigitalOcean]:
    fake = FakeDigitalOcean()
    fake.use_subnet(lab.cidr)
    fake.start()
    harness = Harness(lab, fake).start()
    try:
        with environment(fake.env()):
            yield fake
    finally:
        harness.stop()
        fake.stop()


def run(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return {
        key: ast.literal_eval(value)
        for key, _, value in (line.partition(" ") for line in done.stdout.splitlines())
        if key in ("NODES", "RAY")
    }


def test_a_script_run_again_adopts_the_kept_cloud_pool_which_ends_after_keep_alive(
    cloud: FakeDigitalOcean, sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path(sandbox["home"]) / ".skyward")
    monkeypatch.setenv("SKYWARD_HOME", home)
    env = {**os.environ, "HOME": sandbox["home"], "TMPDIR": sandbox["tmp"], "SKYWARD_HOME": home}
    first = run(env)
    assert first["RAY"] is False
    [kept] = daemon_client.kept_pools()
    machines = [m.id for m in cloud.live(kept.pool_id[:12])]
    assert len(machines) == 2

    second = run(env)
    assert second["NODES"] == first["NODES"] and second["RAY"] is False
    assert [m.id for m in cloud.live(kept.pool_id[:12])] == machines, "the second run made new machines"

    def left() -> list[object]:
        return [*cloud.live(kept.pool_id[:12]), *cloud.keys, *cloud.firewalls]

    deadline = time.monotonic() + 120  # keep_alive=6 s, then a confirmed teardown
    while left() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left() == [], "the kept pool outlived keep_alive in the cloud"
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert daemon_client.kept_pools() == []


def kill_daemon(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)  # its SSH connections close: the machines count Spec.ttl down, and bill
    deadline = time.monotonic() + 10
    while psutil.pid_exists(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


@rotation.in_turn(0)
def test_a_killed_daemons_kept_cloud_pool_is_taken_over_and_removed_once_it_cannot_be(
    cloud: FakeDigitalOcean, sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path(sandbox["home"]) / ".skyward")
    monkeypatch.setenv("SKYWARD_HOME", home)
    env = {**os.environ, "HOME": sandbox["home"], "TMPDIR": sandbox["tmp"], "SKYWARD_HOME": home}
    env["SCRIPT_KEEP_ALIVE"] = "600"
    first = run(env)
    [kept] = daemon_client.kept_pools()
    machines = [m.id for m in cloud.live(kept.pool_id[:12])]
    assert len(machines) == 2
    kill_daemon(kept.daemon_pid)

    again = run(env)  # the next kept script starts a new daemon, which takes the pool over
    assert again["NODES"] == first["NODES"] and again["RAY"] is False, "not the same node processes"
    assert [m.id for m in cloud.live(kept.pool_id[:12])] == machines, "the new daemon made new machines"
    [taken] = daemon_client.kept_pools()
    assert taken.pool_id == kept.pool_id and taken.daemon_pid != kept.daemon_pid

    # its head relay dies with the daemon: the next daemon cannot take the pool over and
    # removes it, confirmed, from the cloud and from the hosts
    kill_daemon(taken.daemon_pid)
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or ())
        if "head_relay" in line and kept.pool_id[:12] in line:
            process.kill()
    listed = daemon_client.kept_pools()  # starts the successor
    logs = daemon_logs(Path(home))
    assert [pool.pool_id for pool in listed] == [], listed
    assert f"kept pool {kept.name} of a dead daemon could not be adopted and was ended" in logs, logs
    deadline = time.monotonic() + 120
    while cloud.live(kept.pool_id[:12]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cloud.live(kept.pool_id[:12]) == [], "a kept pool that could not be taken over was left in the cloud"

    # a daemon dead for longer than the nodes' Spec.ttl: its successor does not try
    run(env)
    [late] = daemon_client.kept_pools()
    kill_daemon(late.daemon_pid)
    [alive] = Path(home).glob("daemon/*/alive")
    then = time.time() - 700  # Spec.ttl is 600 s
    os.utime(alive, (then, then))
    assert daemon_client.kept_pools() == []
    logs = daemon_logs(Path(home))
    assert f"kept pool {late.name} of a dead daemon could not be adopted" in logs and "Spec.ttl" in logs, logs
    deadline = time.monotonic() + 120
    while cloud.live(late.pool_id[:12]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cloud.live(late.pool_id[:12]) == [], "a kept pool past its Spec.ttl was left in the cloud"
    daemon_client.stop_all()
    assert not cloud.keys and not cloud.firewalls
    assert wait_for_no_processes(sandbox["base"], within=60) == []


LOSS_SCRIPT = """
import os, sys, time
import skyward as sky

@sky.function
def where():
    return sky.instance_info().node, os.getpid()

options = sky.Options(console=False, logging=False, ssh_retry_interval=1, keep_alive=600)
with sky.Compute(provider=sky.DigitalOcean(), vcpus=2, nodes=2, options=options) as pool:
    first = sorted(where() @ pool)
    print("FIRST", first, flush=True)
    open(sys.argv[1], "w").close()  # the test reclaims node 1's Droplet now
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            now = sorted(where() @ pool)
        except Exception:
            now = None
        if now is not None and len(now) == 2 and now != first:
            break
        time.sleep(1)
    print("THEN", now, flush=True)
"""


@rotation.in_turn(1)
def test_a_kept_cloud_pool_replaces_a_lost_machine_for_the_script_holding_it(
    cloud: FakeDigitalOcean, sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon watches a kept pool's hosts: a Droplet the cloud takes back leaves the
    pool, the script is told (``Lost``) and its autoscaler brings a new one to rank 1."""
    home = str(Path(sandbox["home"]) / ".skyward")
    monkeypatch.setenv("SKYWARD_HOME", home)
    env = {**os.environ, "HOME": sandbox["home"], "TMPDIR": sandbox["tmp"], "SKYWARD_HOME": home}
    ready = tmp_path / "ready"
    script = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(LOSS_SCRIPT), str(ready)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not ready.exists() and script.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        [kept] = daemon_client.kept_pools()
        first, second = cloud.live(kept.pool_id[:12])
        cloud.reclaim(second.id)
        output, _ = script.communicate(timeout=300)
    finally:
        if script.poll() is None:
            script.kill()
    found = {key: ast.literal_eval(value) for key, _, value in (line.partition(" ") for line in output.splitlines())
             if key in ("FIRST", "THEN")}
    assert script.returncode == 0 and "FIRST" in found and found.get("THEN"), output[-3000:]
    (_, pid0), (_, pid1) = found["FIRST"]
    assert found["THEN"][0] == (0, pid0) and found["THEN"][1][0] == 1 and found["THEN"][1][1] != pid1, found
    assert [m.id for m in cloud.live(kept.pool_id[:12])][0] == first.id and len(cloud.live(kept.pool_id[:12])) == 2
    assert daemon_client.end_pools("") == [kept.name]
    daemon_client.stop_all()
    assert cloud.live(kept.pool_id[:12]) == [] and not cloud.keys and not cloud.firewalls
    assert wait_for_no_processes(sandbox["base"], within=60) == []
