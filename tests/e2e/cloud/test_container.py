"""``sky.Container()`` against the local Docker Engine API (tests/cloud/fake_docker.py),
whose containers are real test hosts: a pool runs tasks on them and its teardown leaves
no container and no network, an elastic one grows and shrinks; ``sky.gc`` (and ``sky gc``
on the command line) finds what a lost pool left by its label; the
image is pulled when the engine lacks it, and an unreachable registry fails clearly, as
a container whose command fails does (with its output); no engine fails naming
``sky.Local()``; ``validate`` refuses what containers cannot honour."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloud.fake_docker import FakeDocker
from cloud.machines import Harness
from e2e.cloud.conftest import environment

import skyward as sky
from skyward.image.image import local_python
from skyward.providers.cloud import naming
from skyward.providers.container.api import LABEL

pytestmark = pytest.mark.slow
OPTIONS = sky.Options(console=False, logging=False, ssh_retry_interval=1)
IMAGE = f"python:{local_python()}-slim"
WAIT = 180.0


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def where() -> tuple[int, str]:
    info = sky.instance_info()
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.peers[info.node].private_ip


@sky.function
def nap(seconds: float) -> int:
    time.sleep(seconds)
    info = sky.instance_info()
    return -1 if info is None else info.node


def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def engine(lab: Any) -> Iterator[tuple[FakeDocker, Harness]]:
    fake = FakeDocker()
    fake.use_subnet(lab.cidr)
    fake.start()
    harness = Harness(lab, fake).start()
    try:
        with environment(fake.env()):
            yield fake, harness
    finally:
        harness.stop()
        fake.stop()


def leftovers(fake: FakeDocker, pool_id: str) -> list[str]:
    containers = [f"container {m.id} ({m.state})" for m in fake.live(pool_id[:12])]
    return containers + [f"network {n['Name']}" for n in fake.firewalls.values() if pool_id[:12] in n["Name"]]


def test_a_pool_runs_in_containers_and_its_teardown_leaves_nothing(engine: tuple[FakeDocker, Harness]) -> None:
    fake, harness = engine
    provisioned: list[sky.InstanceProvisioned] = []
    pool = sky.Compute(provider=sky.Container(), nodes=2, options=OPTIONS)
    pool.on(sky.InstanceProvisioned, provisioned.append)
    with pool:
        assert square(7) >> pool == 49
        nodes = where() @ pool
        assert sorted(node for node, _ in nodes) == [0, 1]
        assert pool.map(square, range(20)) == [x * x for x in range(20)]
        assert {address for _, address in nodes} <= {host.address for host in harness.hosts.values()}
        assert len(leftovers(fake, pool.id)) == 3, "two containers and their network"
    assert leftovers(fake, pool.id) == [], "the engine still holds some of the pool"
    assert IMAGE in fake.images, "the missing default image was pulled"
    assert [e.provider for e in provisioned] == ["container", "container"]
    for body in fake.bodies("POST", "/containers/create"):
        assert body["Image"] == IMAGE and body["Labels"][LABEL].startswith(f"skyward-{pool.id[:12]}")
        assert body["HostConfig"]["PortBindings"]["22/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": ""}]
        assert body["HostConfig"]["NetworkMode"] == body["Labels"][LABEL] and "sshd" in body["Cmd"][-1]


def test_gc_finds_and_removes_what_a_lost_pool_left(engine: tuple[FakeDocker, Harness]) -> None:
    fake, _ = engine
    group = naming.key_name(uuid.uuid4().hex)
    network = fake.handle("POST", "/networks/create", {}, {"Name": group, "Labels": {LABEL: group}})["Id"]
    planted = fake.plant(f"{group}-0", group=group).id
    provider = sky.Container()
    found = {(o.kind, o.id) for o in sky.gc([provider])}
    assert {("instance", planted), ("firewall", network)} <= found
    sky.gc([provider], delete=True)
    assert not {o.id for o in sky.gc([provider])} & {planted, network}
    assert fake.live(group) == [] and network not in fake.firewalls


def test_sky_gc_on_the_command_line_removes_a_lost_pool(engine: tuple[FakeDocker, Harness]) -> None:
    fake, _ = engine
    group = naming.key_name(uuid.uuid4().hex)
    planted = fake.plant(f"{group}-0", group=group).id
    sky_command = str(Path(sys.executable).with_name("sky"))

    def run(*args: str) -> str:
        command = [sky_command, "gc", "--provider", "container", *args]
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120, env=dict(os.environ))
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert planted in {row["id"] for row in json.loads(run("--json"))}
    run("--yes")
    assert fake.live(group) == []


def test_an_elastic_pool_grows_under_work_and_shrinks_when_idle(engine: tuple[FakeDocker, Harness]) -> None:
    fake, _ = engine
    options = sky.Options(
        console=False, logging=False, ssh_retry_interval=1, reconcile_tick_interval=1.0, autoscale_cooldown=1.0,
        autoscale_idle_timeout=4.0,
    )
    with sky.Compute(provider=sky.Container(), nodes=(1, 2), options=options) as pool:
        futures = [nap(0.5) > pool for _ in range(40)]
        eventually(lambda: pool.current_nodes() == 2, "growing under the queue")
        assert {future.result(WAIT) for future in futures} <= {0, 1}
        eventually(lambda: pool.current_nodes() == 1, "shrinking to the floor once idle")
        eventually(lambda: len(fake.live(pool.id[:12])) == 1, "the idle container removed")
    assert leftovers(fake, pool.id) == []


def test_an_unreachable_registry_fails_clearly_and_leaves_nothing(engine: tuple[FakeDocker, Harness]) -> None:
    fake, _ = engine
    fake.unreachable = True
    try:
        pool = sky.Compute(provider=sky.Container(container_image="example.org/missing:1"), nodes=1, options=OPTIONS)
        with pytest.raises(Exception, match="could not pull example.org/missing:1"):
            pool.__enter__()
    finally:
        fake.unreachable = False
    assert leftovers(fake, pool.id) == []


def test_a_container_whose_command_fails_fails_the_pool_with_its_output(engine: tuple[FakeDocker, Harness]) -> None:
    fake, _ = engine
    fake.crash = "E: Unable to locate package openssh-server"
    try:
        pool = sky.Compute(provider=sky.Container(), nodes=2, options=OPTIONS)
        with pytest.raises(Exception, match="exited with code 1") as failed:
            pool.__enter__()
    finally:
        fake.crash = None
    assert "Unable to locate package openssh-server" in str(failed.value)
    assert "capacity" not in str(failed.value)
    assert leftovers(fake, pool.id) == []


@pytest.mark.parametrize("where", ["missing", "silent", "none"])
def test_no_engine_fails_naming_sky_local(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CONTAINER_HOST", raising=False)
    if where == "missing":
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    elif where == "silent":  # a socket nobody answers on (an engine that died)
        silent = socket.socket(socket.AF_UNIX)
        silent.bind(str(tmp_path / "docker.sock"))
        silent.close()
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    else:
        monkeypatch.delenv("DOCKER_HOST", raising=False)
        if any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/podman/podman.sock")):
            pytest.skip("an engine's system socket exists on this machine")
    pool = sky.Compute(provider=sky.Container(), nodes=1, options=OPTIONS)
    with pytest.raises(Exception, match=r"sky\.Local\(\)") as failed:
        pool.__enter__()
    assert "Docker" in str(failed.value) or "engine" in str(failed.value)


@pytest.mark.parametrize(("fields", "name"), [
    ({"region": "us-east-1"}, "region"), ({"accelerator": sky.accelerators.L4()}, "accelerator"),
    ({"disk_gb": 50}, "disk_gb"), ({"allocation": "spot"}, "allocation"), ({"image": sky.Image(python="3.9")}, "python"),
])
def test_validate_refuses_what_containers_cannot_honour(fields: dict[str, Any], name: str) -> None:
    provider = sky.Container()
    with pytest.raises(ValueError, match=name):
        provider.validate(sky.Spec(provider=provider, **fields), OPTIONS)


def test_bad_fields_are_refused_naming_them() -> None:
    with pytest.raises(ValueError, match="container_image"):
        sky.Container(container_image=42)
    with pytest.raises(ValueError, match="socket"):
        sky.Container(socket="")
