"""A custom plugin on an SSH pool of the test hosts (the remote path AWS and the machine
clouds share): the client-side hooks fire once, the bootstrap op runs in each host's
bootstrap, the agents start through the launcher and hold ``around_app``, executor
children hold ``around_process``, every task is decorated and sees the Image's env the
transform added. The hosts share this machine's filesystem but not its /tmp, so the hooks'
log is one file under /var/tmp."""

from __future__ import annotations

import collections
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import QUIET, ssh_provider
from e2e.plugins.recording import recording_plugin
from hosts import HostLab

import skyward as sky

pytestmark = pytest.mark.slow


@sky.function
def facts() -> tuple[str | None, str | None, int]:
    info = sky.instance_info()
    return os.environ.get("RECORDED"), os.environ.get("LAUNCHED"), -1 if info is None else info.node


def _lines(log: Path) -> list[str]:
    return [line.rsplit(" pid=", 1)[0] for line in log.read_text().splitlines()]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the client and every test host see."""
    path = tempfile.mkdtemp(prefix="skyward-plugins-", dir="/var/tmp")
    try:
        yield Path(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_plugins_on_remote_hosts(lab: HostLab, shared_dir: Path) -> None:
    log = shared_dir / "hooks.log"
    hosts = len(lab.hosts)
    options = QUIET.with_(worker=sky.Worker(executor="process"))
    with sky.Compute(provider=ssh_provider(lab), nodes=hosts, plugins=[recording_plugin(str(log))], options=options) as pool:
        results = facts() @ pool
    counts = collections.Counter(_lines(log))
    assert counts[f"transform nodes={hosts} provider=ssh"] == 1 and counts["bootstrap-hook"] == 1
    assert counts["bootstrap-op"] == hosts  # once in each host's bootstrap
    assert counts[f"client-enter nodes={hosts} open=True"] == 1 and counts["client-exit"] == 1
    for node in range(hosts):
        assert counts[f"launcher role=agent node={node}"] == 1, counts
        assert counts[f"app-enter node={node} worker=0"] == 1 and counts[f"app-exit node={node}"] == 1, counts
        assert counts[f"process-enter node={node} worker=0"] == 1, counts
    assert counts["decorate env=1"] == hosts
    assert sorted(results) == [("1", "process", node) for node in range(hosts)]
