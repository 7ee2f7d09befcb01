"""What another unprivileged user can do to a remote pool's relay: nothing.

The client reaches the head relay on node 0 through an SSH forward whose local end is a
Unix socket in a 0700 directory; the relay listens on node 0's loopback and reads no
frame before the peer proved the pool's secret. As the ``skyward-probe`` account
(``tests/stranger.py``): on the client machine it cannot enter that directory or connect
to the socket; on node 0 (inside its namespace, where the relay's port is reachable) a
pickle that would run ``touch MARKER``, in every framing, and a bare connect-and-close,
sent to every loopback port there, run nothing and leave the pool working. Every TCP
port the client process listens on gets the same treatment."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from hosts import HostLab
from stranger import FRAMINGS, Probe, marks_dir, stranger, touching

import skyward as sky

pytestmark = pytest.mark.slow
SETTLE = 2.0


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    with stranger() as account:
        yield account


@pytest.fixture
def marks() -> Iterator[Path]:
    """Markers go to /var/tmp: the same directory for this machine and the test hosts
    (their /tmp is their own)."""
    with marks_dir("/var/tmp") as directory:
        os.chmod(directory, 0o777)
        yield directory


@sky.function
def echo(value: int) -> int:
    return value


def _assert_working(pool: sky.Pool) -> None:
    assert (echo(7) >> pool) == 7
    assert (echo(8) @ pool) == [8, 8, 8]


def _relay_socket(pool: sky.Pool) -> str:
    address = pool._cluster.transport._address  # type: ignore[union-attr]
    assert address.startswith("/"), address
    return str(address)


def _loopback_listeners(lab: HostLab) -> list[int]:
    """The TCP ports listening on node 0's loopback (the relay's among them)."""
    ports = []
    for row in lab.hosts[0].exec("cat", "/proc/net/tcp").stdout.splitlines()[1:]:
        local, state = row.split()[1], row.split()[3]
        address, port = local.split(":")
        if state == "0A" and address == "0100007F":
            ports.append(int(port, 16))
    return ports


def test_the_clients_end_of_the_relay_is_private(ssh_pool: sky.Pool, probe: Probe) -> None:
    path = _relay_socket(ssh_pool)
    directory = os.path.dirname(path)
    assert oct(os.stat(directory).st_mode & 0o777) == "0o700"
    assert probe.run({"op": "directories", "paths": [directory]})[directory]["enter"] == "EACCES"
    assert probe.run({"op": "unix", "paths": [path]}) == {path: "EACCES"}
    _assert_working(ssh_pool)


def test_the_client_listens_on_no_tcp_port_for_the_relay(ssh_pool: sky.Pool) -> None:
    _assert_working(ssh_pool)
    listening = [c for c in psutil.Process().net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN]
    assert [c.laddr for c in listening if c.laddr.ip.startswith("127.")] == []


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
