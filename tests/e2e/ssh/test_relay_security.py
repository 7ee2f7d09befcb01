"""What another unprivileged user can do to a remote pool's relay: nothing.

The client reaches the head relay on node 0 over a channel of its SSH connection, so
nothing listens on the client's machine; the relay listens on node 0's loopback and reads
no frame before the peer proved the pool's secret. As the ``skyward-probe`` account
(``tests/stranger.py``), on node 0 (inside its namespace, where the relay's port is
reachable), a pickle that would run ``touch MARKER``, in every framing, and a bare
connect-and-close, sent to every loopback port there, run nothing and leave the pool
working."""

from __future__ import annotations

import time
from pathlib import Path

import psutil
import pytest
from hosts import HostLab
from stranger import FRAMINGS, Probe, touching

import skyward as sky

pytestmark = pytest.mark.slow
SETTLE = 2.0


@sky.function
def echo(value: int) -> int:
    return value


def _assert_working(pool: sky.Pool) -> None:
    assert (echo(7) >> pool) == 7
    assert (echo(8) @ pool) == [8, 8, 8]


def _loopback_listeners(lab: HostLab) -> list[int]:
    """The TCP ports listening on node 0's loopback (the relay's among them)."""
    ports = []
    for row in lab.hosts[0].exec("cat", "/proc/net/tcp").stdout.splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        address, port = local.split(":")
        if state == "0A" and address == "0100007F":
            ports.append(int(port, 16))
    return ports


def test_the_client_listens_on_nothing_for_the_relay(ssh_pool: sky.Pool) -> None:
    """The client reaches the relay over a channel of its SSH connection: no TCP port and
    no Unix socket of the client's process accepts connections (the pool is open)."""
    _assert_working(ssh_pool)
    client = psutil.Process()
    tcp = [c.laddr for c in client.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    unix = [c.laddr for c in client.net_connections(kind="unix") if c.status == psutil.CONN_LISTEN and c.laddr]
    assert (tcp, unix) == ([], [])


def test_a_pickle_sent_to_the_relay_on_node_0_runs_nothing(
    ssh_pool: sky.Pool, lab: HostLab, probe: Probe, marks: Path
) -> None:
    _assert_working(ssh_pool)
    ports = _loopback_listeners(lab)
    assert ports, "the relay listens on node 0's loopback"
    sends = [
        ("127.0.0.1", port, framing(touching(marks / f"{port}-{name}")).hex())
        for port in ports for name, framing in FRAMINGS.items()
    ]
    answer = probe.run({"op": "tcp", "sends": sends, "wait": 1.0}, netns=lab.hosts[0].netns)
    assert [s[:2] for s, result in zip(sends, answer) if not result["connected"]] == []
    time.sleep(SETTLE)
    assert sorted(path.name for path in marks.iterdir()) == []
    _assert_working(ssh_pool)
    assert set(ports) <= set(_loopback_listeners(lab))


def test_a_bare_connect_and_close_to_the_relay_changes_nothing(
    ssh_pool: sky.Pool, lab: HostLab, probe: Probe
) -> None:
    ports = _loopback_listeners(lab)
    answer = probe.run({"op": "tcp", "sends": [("127.0.0.1", p, "") for p in ports], "wait": 0.0}, netns=lab.hosts[0].netns)
    assert all(result["connected"] for result in answer), answer
    time.sleep(SETTLE)
    _assert_working(ssh_pool)
    assert set(ports) <= set(_loopback_listeners(lab))
