"""Hosts that are not plain: a home directory shared by every host (NFS homes), where
concurrent bootstraps must not corrupt the one install, and a host whose sshd has no
SFTP subsystem, where files go through the exec channel."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import asyncssh
import pytest
from conftest import QUIET, env_locks, host_processes, make_image, ssh_provider, wait_for
from hosts import HostLab, available

import skyward as sky

pytestmark = pytest.mark.slow


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def seen() -> dict[str, object]:
    import os

    import skyship  # from Image.includes
    import skyward_demo  # from Image.pip

    return {
        "node": sky.instance_info().node, "host": os.environ.get("SKY_NODE_HOST", ""),
        "greeting": os.environ.get("SKY_GREETING", ""), "demo": skyward_demo.VERSION, "double": skyship.double(21),
    }


def quickstart(pool: sky.Pool, lab: HostLab) -> None:
    """The README's operations, and each node's Image (pip, env, includes, shell_vars)."""
    count = len(lab.hosts)
    assert (square(7) >> pool) == 49
    assert (square(7) @ pool) == [49] * count
    assert ((square(3) & square(4)) >> pool) == (9, 16)
    assert (square(12) > pool).result() == 144
    assert pool.map(square, range(200)) == [x * x for x in range(200)]
    views = sorted(seen() @ pool, key=lambda v: v["node"])
    assert [v["host"] for v in views] == [h.address for h in lab.hosts], "shell_vars of one host reached another"
    assert all((v["greeting"], v["demo"], v["double"]) == ("hello", "1.0", 42) for v in views), views


def assert_nothing_left(lab: HostLab, pool: sky.Pool) -> None:
    # a process may still be exiting when close returns (seen once under load: alive
    # when listed, gone before its command line was read): a few seconds' grace
    wait_for(lambda: not host_processes(lab), timeout=10)
    left = host_processes(lab)
    assert left == {}, f"processes of the pool still run on the hosts: {left}"
    marker = f"skyward-{pool.id[:12]}"
    assert [n for h in lab.hosts for n in os.listdir(h.private("/tmp")) if marker in n] == []
    assert env_locks(lab) == []


def _lab(**variant: object) -> Iterator[HostLab]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(**variant) as lab:  # type: ignore[arg-type]
        yield lab


@pytest.fixture
def shared_home_lab() -> Iterator[HostLab]:
    yield from _lab(count=3, shared_home=True)


@pytest.fixture
def no_sftp_lab() -> Iterator[HostLab]:
    yield from _lab(count=2, no_sftp_hosts=(0,))


def test_shared_home_concurrent_bootstrap_then_warm(shared_home_lab: HostLab, index: str) -> None:
    """Three hosts sharing one home bootstrap the same Image at once: the env lock lets one
    install while the others wait, the pool works, and a second pool opens warm (no
    reinstall) on the same shared install."""
    lab = shared_home_lab
    home = lab.hosts[0].private("/root/.cache")
    assert all(h.private("/root/.cache") == home for h in lab.hosts)
    phases: list[sky.BootstrapPhase] = []
    pool = sky.Compute(provider=ssh_provider(lab), nodes=3, image=make_image(index), options=QUIET)
    pool.on(sky.BootstrapPhase, phases.append)
    with pool:
        quickstart(pool, lab)
    assert_nothing_left(lab, pool)
    envs = os.listdir(os.path.join(home, "skyward", "envs"))
    assert len(envs) == 1 and os.path.exists(os.path.join(home, "skyward", "envs", envs[0], ".ready")), envs
    installed = sorted(p.node for p in phases if p.phase == "skyward" and p.duration > 1.0)
    waited = sorted(p.node for p in phases if p.phase == "wait-for-shared-home")
    assert len(installed) <= 1, f"several hosts installed the shared env: {installed} (waited: {waited})"

    warm: list[sky.BootstrapPhase] = []
    second = sky.Compute(provider=ssh_provider(lab), nodes=3, image=make_image(index), options=QUIET)
    second.on(sky.BootstrapPhase, warm.append)
    with second:
        quickstart(second, lab)
    installs = {(p.phase, p.node): round(p.duration, 2) for p in warm if p.phase in ("venv", "skyward", "pip")}
    assert installs and max(installs.values()) < 1.0, f"the warm pool reinstalled: {installs}"
    assert_nothing_left(lab, second)


async def _sftp_refused(host: str, key: str) -> str:
    async with asyncssh.connect(host, username="root", client_keys=[key], known_hosts=None) as conn:
        try:
            (await conn.start_sftp_client()).exit()
        except (asyncssh.ChannelOpenError, asyncssh.SFTPError) as exc:
            return str(exc)
    return ""


def test_host_without_sftp_gets_files_over_exec(no_sftp_lab: HostLab, index: str) -> None:
    """A pool whose head host has no SFTP subsystem opens (wheels, includes, the bootstrap
    script and shell_vars travel through the exec channel) and runs the quickstart."""
    lab = no_sftp_lab
    assert asyncio.run(_sftp_refused(lab.hosts[0].address, lab.client_key)), "host 0 still serves SFTP"
    assert asyncio.run(_sftp_refused(lab.hosts[1].address, lab.client_key)) == ""
    with sky.Compute(provider=ssh_provider(lab), nodes=2, image=make_image(index), options=QUIET) as pool:
        quickstart(pool, lab)
    assert_nothing_left(lab, pool)
    cache = os.path.join(lab.hosts[0].private("/root/.cache"), "skyward")
    assert any(name.startswith("includes-") for name in os.listdir(cache)), "no includes archive on host 0"
    assert not [n for n in os.listdir(os.path.join(cache, "wheels")) if n.endswith(".part")], "partial uploads left"
