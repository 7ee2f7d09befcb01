"""What Image puts on SSH nodes is visible inside tasks; teardown leaves nothing."""

from __future__ import annotations

import os

import pytest
from conftest import QUIET, make_image, ssh_provider
from hosts import HostLab

import skyward as sky

pytestmark = pytest.mark.slow


@sky.function
def environment() -> dict[str, str]:
    import os

    import skyship  # from Image.includes
    import skyward_demo  # from Image.pip

    return {
        "demo": skyward_demo.VERSION,
        "greeting": os.environ.get("SKY_GREETING", ""),
        "host": os.environ.get("SKY_NODE_HOST", ""),
        "shipped": skyship.SHIPPED,
        "double": str(skyship.double(21)),
    }


def test_image_pip_env_includes_visible(ssh_pool: sky.Pool, lab: HostLab) -> None:
    seen = environment() @ ssh_pool
    assert [s["greeting"] for s in seen] == ["hello"] * 3
    assert [s["host"] for s in seen] == [h.address for h in lab.hosts]
    assert all(s["demo"] == "1.0" and s["shipped"] == "shipped with includes" and s["double"] == "42" for s in seen)


def _reports(lab: HostLab) -> dict[str, int]:
    """Each host's kept environment reports (the bootstrap's ``.report``) and their mtimes."""
    found = {}
    for host in lab.hosts:
        envs = os.path.join(host.private("/root/.cache"), "skyward", "envs")
        for name in os.listdir(envs):
            path = os.path.join(envs, name, ".report")
            if os.path.exists(path):
                found[path] = os.stat(path).st_mtime_ns
    return found


def test_bootstrap_phases_are_events_and_warm_start_skips(lab: HostLab, ssh_pool: sky.Pool, index: str) -> None:
    """A warm open installs nothing and reuses what each environment reported (no Python
    start for it); nothing of the pool is left after it."""
    phases: list[sky.BootstrapPhase] = []
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, image=make_image(index), options=QUIET)
    pool.on(sky.BootstrapPhase, phases.append)
    before = {pid for host in lab.hosts for pid in host.pids()}
    reported = _reports(lab)
    assert reported, "no environment kept its report"
    with pool:
        assert len(environment() @ pool) == 3
    assert _reports(lab) == reported, "a warm open ran the environment's report again"
    names = {p.phase for p in phases}
    assert {"ssh", "uv", "python", "venv", "skyward", "pip", "includes", "ray", "agents"} <= names
    installs = [p.duration for p in phases if p.phase in ("skyward", "pip", "venv")]
    assert max(installs) < 1.0, "a warm node reinstalled what it had"
    marker = f"skyward-{pool.id[:12]}"
    assert lab.processes_naming(marker) == []
    started = {pid for pids in lab.leftovers().values() for pid in pids} - before
    assert started == set(), "processes the pool started are still running"
    for host in lab.hosts:
        assert [n for n in os.listdir(host.private("/tmp")) if marker in n] == []


@sky.function
def skyward_file() -> str:
    import skyward

    return skyward.__file__


def test_a_node_whose_skyward_differs_is_refused_naming_it_and_leaves_nothing(
    lab: HostLab, ssh_pool: sky.Pool, index: str
) -> None:
    """A host whose installed skyward differs from the client's (here one line added to
    it) fails the open, naming that node and what differs; the other hosts, whose
    watchdogs may be up by then, keep nothing of the pool."""
    installed = (skyward_file() @ ssh_pool)[1]
    changed = installed.replace("/root/.cache", lab.hosts[1].private("/root/.cache"), 1)
    with open(changed, "rb") as f:
        original = f.read()
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, image=make_image(index), options=QUIET)
    try:
        with open(changed, "ab") as f:
            f.write(b"# not the client's copy\n")
        with pytest.raises(Exception, match="node 1 .* does not match this client: skyward_digest") as raised:
            pool.open()
        assert str(lab.hosts[1].address) in str(raised.value)
    finally:
        with open(changed, "wb") as f:
            f.write(original)
    marker = f"skyward-{pool.id[:12]}"
    assert lab.processes_naming(marker) == []
    for host in lab.hosts:
        assert [n for n in os.listdir(host.private("/tmp")) if marker in n] == []
