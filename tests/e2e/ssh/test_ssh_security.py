"""The cluster's ports refuse unauthenticated peers: Ray's GCS asks for the pool's token,
and the head agent listens on node 0's loopback only (reachable through SSH alone).
This test runs from the client machine, which is another host on the lab's network."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

import skyward as sky
from hosts import HostLab

pytestmark = pytest.mark.slow


def _listeners(lab: HostLab, loopback: bool) -> list[int]:
    table = lab.hosts[0].exec("cat", "/proc/net/tcp").stdout.splitlines()[1:]
    ports = []
    for row in table:
        local, state = row.split()[1], row.split()[3]
        address, port = local.split(":")
        if state == "0A" and (address == "0100007F") == loopback:
            ports.append(int(port, 16))
    return ports


def test_gcs_refuses_a_peer_without_the_token(ssh_pool: sky.Pool) -> None:
    info = ssh_pool._cluster.infos[0]  # type: ignore[union-attr]
    intruder = f"import ray; ray.init(address='{info.head_addr}:{info.head_port}', log_to_driver=False)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    result = subprocess.run(
        [sys.executable, "-c", intruder], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "Unauthenticated" in result.stderr or "InvalidAuthToken" in result.stderr, result.stderr[-2000:]


def test_head_agent_is_not_reachable_from_another_host(ssh_pool: sky.Pool, lab: HostLab) -> None:
    loopback_only = _listeners(lab, loopback=True)
    assert loopback_only, "the head agent should listen on node 0's loopback"
    for port in loopback_only:
        with pytest.raises(OSError):
            socket.create_connection((lab.hosts[0].address, port), timeout=3).close()
    assert (sky.function(lambda: 1)() >> ssh_pool) == 1  # while the client, through SSH, gets in
