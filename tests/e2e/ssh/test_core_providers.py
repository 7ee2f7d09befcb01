"""Core dispatch on both providers: the same tests on a local pool and an SSH pool."""

from __future__ import annotations

import hashlib
import os

import psutil
import pytest
from hosts import HostLab

import skyward as sky

pytestmark = pytest.mark.slow  # the SSH pool bootstraps three hosts


class Boom(Exception):
    pass


@sky.function
def square(x: int) -> int:
    return x * x


@sky.function
def whoami() -> tuple[int, int]:
    info = sky.instance_info()
    return info.node, info.total_nodes


@sky.function
def fails() -> None:
    raise Boom("remote failure")


@sky.function
def shout(text: str) -> str:
    print(text)
    return text.upper()


@sky.function
def count_up(name: str) -> int:
    return sky.counter(name, consistency="strong").increment()


def test_run_returns_value(any_pool: sky.Pool) -> None:
    assert (square(7) >> any_pool) == 49


def test_broadcast_reaches_every_node(any_pool: sky.Pool) -> None:
    assert sorted(whoami() @ any_pool) == [(0, 3), (1, 3), (2, 3)]


@sky.function
def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_large_argument_reaches_every_node_intact(any_pool: sky.Pool) -> None:
    # 3 MiB: stored once for all nodes, out of band (RayTransport.share), read in place
    data = os.urandom(3 << 20)
    assert (digest(data) @ any_pool) == [hashlib.sha256(data).hexdigest()] * 3


def test_group_and_map(any_pool: sky.Pool) -> None:
    assert ((square(2) & square(3)) >> any_pool) == (4, 9)
    assert any_pool.map(lambda x: x + 1, range(50)) == list(range(1, 51))
    assert list(any_pool.map(lambda x: x * 3, range(40), stream=True)) == [x * 3 for x in range(40)]


def test_target_head(any_pool: sky.Pool) -> None:
    assert any_pool.run(whoami(), target="head") == (0, 3)


def test_remote_exception_keeps_its_type(any_pool: sky.Pool) -> None:
    with pytest.raises(Boom, match="remote failure"):
        fails() >> any_pool


def test_output_reaches_client_before_result(any_pool: sky.Pool) -> None:
    lines: list[str] = []
    off = any_pool.on(sky.Log, lambda e: lines.append(e.line))
    try:
        assert (shout("printed remotely") >> any_pool) == "PRINTED REMOTELY"
        assert any("printed remotely" in line for line in lines)
    finally:
        off()


def test_async_future(any_pool: sky.Pool) -> None:
    assert (square(5) > any_pool).result(timeout=60) == 25


def test_collections_inside_tasks(any_pool: sky.Pool) -> None:
    name = f"hits-{id(any_pool)}"
    values = count_up(name) @ any_pool
    assert sorted(values) == [1, 2, 3]


@sky.function
def lane_sockets() -> list[str]:
    """The relay's Unix-socket lanes in this host's pool directory (``SKYWARD_POOL_DIR``)."""
    import glob
    import os

    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(os.environ["SKYWARD_POOL_DIR"], "lanes-*", "*.sock")))


@sky.function
def tcp_lanes() -> list[tuple[bool, bool]]:
    """For each TCP lane an agent of this host opened (its port is kept beside the
    pool's notes): is it listening, and is a caller connected to it."""
    import glob

    import psutil

    connections = psutil.net_connections("tcp")
    found = []
    for path in glob.glob("/tmp/skyward-*-n*/notes/lane-*.port"):
        with open(path) as file:
            port = int(file.read())
        states = {c.status for c in connections if c.laddr and c.laddr.port == port}
        found.append((psutil.CONN_LISTEN in states, psutil.CONN_ESTABLISHED in states))
    return found


def test_the_relay_reaches_every_agent_over_a_lane(ssh_pool: sky.Pool) -> None:
    """Node 0's agent (on the relay's host) listens on a Unix-socket lane, the other
    hosts' agents on TCP lanes, and the relay's calls go through them."""
    assert ssh_pool.run(lane_sockets(), target="head") == ["lane-relay-0.sock"]
    assert sorted(lane_sockets() @ ssh_pool) == [[], [], ["lane-relay-0.sock"]]
    assert [square(n) >> ssh_pool for n in range(6)] == [n * n for n in range(6)]
    assert sorted(tcp_lanes() @ ssh_pool) == [[], [(True, True)], [(True, True)]]


@sky.function
def marked_here() -> list[int]:
    """The processes on this host that carry a mark of a pool (the watchdog's sweep finds
    them whoever their parent is), this task's own included: the sweep runs in a process
    of its own, as in the watchdog. Other pools on the lab's hosts count as marked by
    their own directories."""
    import json
    import os
    import re
    import subprocess
    import sys

    sweep = (
        "import json, sys\n"
        "from skyward.providers.ssh.watchdog import marked_processes\n"
        "print(json.dumps([p.pid for d in sys.argv[1:] for p in marked_processes(d)]))"
    )
    dirs = [f"/tmp/{name}" for name in os.listdir("/tmp") if re.fullmatch(r"skyward-[0-9a-f]{12}-n\d+", name)]
    done = subprocess.run([sys.executable, "-c", sweep, *dirs], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def _title(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.NoSuchProcess:
        return ""


def test_every_process_of_the_pool_carries_its_mark(ssh_pool: sky.Pool, lab: HostLab) -> None:
    """Each process the pool runs on a host, Ray's workers and agents included (they
    retitle themselves, "ray::IDLE", and may outlive their raylet), carries a mark of the
    pool, so the watchdog stops it even when its parent died first; the watchdog itself
    is the one left."""
    assert square(2) @ ssh_pool == [4, 4, 4]
    before = lab.leftovers()
    marked = {pid for pids in marked_here() @ ssh_pool for pid in pids}
    after = lab.leftovers()
    for host in lab.hosts:
        steady = set(before.get(host.name, [])) & set(after.get(host.name, []))
        unmarked = {pid: _title(pid) for pid in steady - marked if "skyward.providers.ssh.watchdog" not in _title(pid)}
        assert unmarked == {}, f"processes of the pool on {host.name} that only their parent ties to it: {unmarked}"
    assert any(_title(pid).startswith("ray::") for pid in marked), "no retitled Ray process to check"
