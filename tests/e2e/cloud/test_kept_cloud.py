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

import pytest
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.machines import Harness
from e2e.cloud.conftest import environment
from sandbox import wait_for_no_processes

from skyward.providers import daemon_client

pytestmark = pytest.mark.slow
SCRIPT = """
import os, socket, sys
import skyward as sky

@sky.function
def where():
    return socket.gethostname(), os.getpid()

options = sky.Options(console=False, logging=False, ssh_retry_interval=1, keep_alive=6)
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


def test_a_new_daemon_removes_what_a_killed_daemons_kept_pool_left_in_the_cloud(
    cloud: FakeDigitalOcean, sandbox: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(Path(sandbox["home"]) / ".skyward")
    monkeypatch.setenv("SKYWARD_HOME", home)
    env = {**os.environ, "HOME": sandbox["home"], "TMPDIR": sandbox["tmp"], "SKYWARD_HOME": home}
    run(env)
    [kept] = daemon_client.kept_pools()
    assert len(cloud.live(kept.pool_id[:12])) == 2
    os.kill(kept.daemon_pid, signal.SIGKILL)  # the daemon dies; its kept pool's Droplets stay (and bill)

    again = run(env)  # the next kept script starts a new daemon, which cleans up after the dead one
    assert again["RAY"] is False
    deadline = time.monotonic() + 120
    while cloud.live(kept.pool_id[:12]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert cloud.live(kept.pool_id[:12]) == [], "a dead daemon's kept pool was left in the cloud"
    assert [pool.pool_id for pool in daemon_client.kept_pools()] != [kept.pool_id]
    assert daemon_client.end_pools("") and daemon_client.kept_pools() == []
    daemon_client.stop_all()
    assert not cloud.keys and not cloud.firewalls
    assert wait_for_no_processes(sandbox["base"], within=60) == []
