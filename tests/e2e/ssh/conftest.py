"""Fixtures for pools on real SSH hosts: three network-namespace hosts (tests/hosts.py)
with their own sshd, and one 3-node SSH pool shared by the tests that only dispatch."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from hosts import HostLab, available
from local_index import PACKAGE, local_index

import skyward as sky

HERE = os.path.dirname(__file__)
SHIPPED = os.path.join(HERE, "skyship")
QUIET = sky.Options(console=False, logging=False)
T = TypeVar("T")


def make_image(index: str) -> sky.Image:
    """pip (from the on-disk ``index``), env and includes, all checked inside tasks."""
    return sky.Image(
        pip=[PACKAGE],
        pip_indexes=[sky.PipIndex(index, packages=[PACKAGE])],
        env={"SKY_GREETING": "hello"},
        shell_vars={"SKY_NODE_HOST": "hostname -I | cut -d' ' -f1"},
        includes=[SHIPPED],
    )


@pytest.fixture(scope="session")
def index() -> Iterator[str]:
    """The hosts have no route out: pip packages come from an index on disk."""
    with local_index() as url:
        yield url


@pytest.fixture(scope="session")
def lab() -> Iterator[HostLab]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with HostLab.start(3) as hosts:
        yield hosts


def ssh_provider(lab: HostLab, **changes: object) -> sky.SSH:
    fields: dict[str, object] = {"hosts": lab.strings(), "key_path": lab.client_key, "known_hosts": lab.known_hosts}
    fields.update(changes)
    return sky.SSH(**fields)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def ssh_pool(lab: HostLab, index: str) -> Iterator[sky.Pool]:
    """A 3-node pool on the lab's hosts with the test image."""
    with sky.Compute(provider=ssh_provider(lab), nodes=3, image=make_image(index), options=QUIET) as pool:
        yield pool


@pytest.fixture(scope="session", params=["local", "ssh"])
def any_pool(request: pytest.FixtureRequest) -> Iterator[sky.Pool]:
    """The same tests on a 3-node local pool and on the 3-host SSH pool."""
    if request.param == "ssh":
        yield request.getfixturevalue("ssh_pool")
        return
    with sky.Compute(nodes=3, options=QUIET) as pool:
        yield pool


def wait_for(condition: Callable[[], T], timeout: float, interval: float = 0.2) -> T:
    """Poll ``condition`` until it returns something truthy or ``timeout`` seconds pass;
    returns its last value either way (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


def pool_traces(lab: HostLab, pool_id: str) -> dict[str, list[object]]:
    """What pool ``pool_id`` has on the lab's hosts: its processes (see ``host_processes``)
    and its directories (empty lists once it is gone)."""
    marker = f"skyward-{pool_id[:12]}"
    dirs = [f"{host.name}:{name}" for host in lab.hosts for name in os.listdir(host.private("/tmp")) if marker in name]
    return {"processes": [pid for pid, seen in host_processes(lab).items() if marker in seen], "dirs": dirs}


def env_locks(lab: HostLab) -> list[str]:
    """Bootstrap locks (``~/.cache/skyward/envs/*.lock``) left on the lab's hosts."""
    found = []
    for host in lab.hosts:
        envs = os.path.join(host.private("/root/.cache"), "skyward", "envs")
        if os.path.isdir(envs):
            found += [f"{host.name}:{name}" for name in os.listdir(envs) if name.endswith(".lock")]
    return found


def _seen(pid: int) -> str:
    """A process's command line, working directory and open files, as one string: Ray's
    workers retitle themselves ("ray::IDLE") but keep their logs open in the pool's
    directory."""
    parts = []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            parts.append(f.read().replace(b"\0", b" ").decode(errors="replace").strip())
        parts.append(os.readlink(f"/proc/{pid}/cwd"))
        parts += [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        pass
    return " ".join(parts)


def host_processes(lab: HostLab) -> dict[int, str]:
    """The processes (other than sshd) running on the lab's hosts: what each shows of
    itself (command line, working directory, open files)."""
    return {pid: _seen(pid) for pids in lab.leftovers().values() for pid in pids}


def strays(lab: HostLab, before: dict[int, str], pool_id: str) -> dict[int, str]:
    """Processes started on the hosts since ``before`` that still run and belong to pool
    ``pool_id`` or to no pool at all (other pools' Ray workers may come and go)."""
    mine = f"skyward-{pool_id[:12]}"
    return {
        pid: seen for pid, seen in host_processes(lab).items()
        if pid not in before and seen and (mine in seen or "/tmp/skyward-" not in seen)
    }
