"""A client killed with SIGKILL on a machine cloud (DigitalOcean's fake): each node's
watchdog halts its machine after ``Spec.ttl`` (the dead-man switch through the shared
remote path), and ``sky down POOL`` (the installed command), finding the pool's process
gone, removes what it left: the stopped Droplets, the SSH key and the pool's firewall,
and on this machine the pool's record and files (its private key, its known_hosts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_digitalocean import FakeDigitalOcean
from cloud.machines import Harness
from e2e.cloud.conftest import environment

pytestmark = pytest.mark.slow
SKY = os.path.join(os.path.dirname(sys.executable), "sky")
SCRIPT = """
import time
import skyward as sky

@sky.function
def nap():
    time.sleep(300)

options = sky.Options(console=False, logging=False, ssh_retry_interval=1)
with sky.Compute(provider=sky.DigitalOcean(), vcpus=2, nodes=2, ttl=2, options=options) as pool:
    print("READY", pool.id, flush=True)
    nap() >> pool
"""


@pytest.fixture(scope="module")
def cloud(lab: Any) -> Iterator[tuple[FakeDigitalOcean, Harness]]:
    fake = FakeDigitalOcean()
    fake.use_subnet(lab.cidr)
    fake.start()
    harness = Harness(lab, fake).start()
    try:
        with environment(fake.env()):
            yield fake, harness
    finally:
        harness.stop()
        fake.stop()


def test_a_killed_client_s_machines_halt_and_sky_down_removes_them(
    cloud: tuple[FakeDigitalOcean, Harness], tmp_path: Path
) -> None:
    fake, harness = cloud
    process = subprocess.Popen(  # its temporary files in the test's directory
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("READY"):
            break
    else:
        raise AssertionError("the client never got its pool:\n" + "".join(lines[-40:]))
    pool_id = line.split()[1]
    ids = [m.id for m in fake.live(pool_id[:12])]
    assert len(ids) == 2 and fake.keys and fake.firewalls
    files = Path(os.environ["SKYWARD_HOME"]) / "pools" / pool_id
    assert {path.suffix or path.name for path in files.iterdir()} == {".pem", "known_hosts"}
    process.kill()
    process.wait(10)
    harness.wait_for(lambda: set(ids) <= set(harness.halted), 90, "the dead-man switch")
    assert {m.state for m in fake.live(pool_id[:12])} == {"exited"}, "halted, still there (and billed)"
    result = subprocess.run([SKY, "down", pool_id[:12], "--json"], capture_output=True, text=True, timeout=300,
                            env=os.environ.copy())
    assert result.returncode == 0, result.stdout + result.stderr
    done = json.loads(result.stdout)
    assert done["how"].startswith("its process was gone")
    assert sorted(o["kind"] for o in done["removed"]) == ["firewall", "instance", "instance", "ssh-key"]
    assert fake.live(pool_id[:12]) == [] and not fake.keys and not fake.firewalls and not fake.tags - {"skyward"}
    assert not files.exists() and not files.with_suffix(".json").exists(), "the pool's files outlived sky down"
