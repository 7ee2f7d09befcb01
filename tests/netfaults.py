"""Faults of the network between the host lab's hosts (tests/hosts.py) and this machine,
made with the kernel's own tools. This kernel has no ``netem``, so each fault is the
nearest thing it can do:

- ``link_dropped``: a cable pulled for a while, as blackhole routes on both ends (this
  machine's route to the host, the host's route to this machine): every packet either
  way is dropped, nothing is refused, TCP retransmits until the route is gone again.
- ``partitioned``: a host cut off from the other hosts (this machine still reaches it),
  as blackhole routes on both ends of each pair.
- ``slowed``: every path to and from the hosts through a token bucket (``tc ... tbf``)
  of ``rate`` with a deep queue: the bandwidth of a slow link, and the delay of a full
  queue; no loss beyond the queue's.
- ``address_moved``: this machine's new connections come from another address, and
  the hosts can no longer answer the old one (their route to it blackholed): its old
  connections go silent, as a laptop's do when it moves to another network.
- ``connections_reset``: every TCP connection between this machine and a host's sshd
  ended at once, as a NAT or firewall that dropped them answers the next packet with a
  reset (``ss -K``, the kernel's socket destroy: this machine's end is closed and the
  host's gets the reset).
- ``process_connections_reset``: the same between two hosts, for the connections one
  host's processes opened to the ports a process of the other listens on (a collection's
  host actor, found by its title): what Ray reports as an actor "temporarily
  unavailable".

Each is a context manager that removes what it added, whatever happens inside.
``mapped_through`` runs the map the fault tests run under one: ``ITEMS`` items, each
counting itself on a strong counter (one in 500 under a lock).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
from hosts import HostLab, TestHost

import skyward as sky

ITEMS = 10_000


@sky.function
def counted(item: int) -> int:
    """The item doubled, after counting it (under the lock for one item in 500)."""
    time.sleep(0.003)
    if item % 500 == 0:
        with sky.lock("netfaults"):
            sky.counter("items", consistency="strong").increment()
            time.sleep(0.05)
    else:
        sky.counter("items", consistency="strong").increment()
    return item * 2


@sky.function
def touch(name: str) -> int:
    return sky.counter(name, consistency="strong").increment()


def settled(pool: sky.Pool, timeout: float = 60.0) -> int:
    """Once every node's collection operation succeeds: after a partition heals, a node's
    first one can fail (Ray reset its connection to the collection's host during the cut:
    ``CollectionUnavailableError``, saying the operation may or may not have taken
    effect). How many ``@`` rounds failed first."""
    failures, deadline = 0, time.monotonic() + timeout
    while True:
        try:
            touch("netfaults-settle") @ pool
            return failures
        except sky.CollectionUnavailableError:
            failures += 1
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def mapped_through(pool: sky.Pool, fault: Callable[[], None], after: float = 2.0) -> tuple[list[int], int, float]:
    """``pool.map`` of the items with ``fault()`` run in a thread ``after`` seconds into
    it: the results, the counter's count, the map's seconds."""
    counter = pool.counter("items", consistency="strong")
    start = counter.value
    worker = threading.Thread(target=lambda: (time.sleep(after), fault()), daemon=True)
    began = time.monotonic()
    worker.start()
    results = pool.map(counted, range(ITEMS))
    took = time.monotonic() - began
    worker.join(timeout=120)
    assert not worker.is_alive(), "the fault did not end"
    return results, counter.value - start, took


def stopped_mid_map(script: Path, env: dict[str, str], seconds: float = 60) -> list[str]:
    """Run the client ``script``, which prints a line starting with "mapping" as its
    ``pool.map`` of the items begins and, last, a JSON line of whether the results were
    in order and what the counter counted; stop it (SIGSTOP) 2 s into the map for
    ``seconds``, as a laptop asleep, then let it go on. The words of its first line;
    AssertionError unless it exits 0 having found every item once, in order."""
    client = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        assert client.stdout is not None
        first = client.stdout.readline().split()
        if first[:1] != ["mapping"]:
            raise AssertionError(f"the client did not start its map: {client.communicate(timeout=60)[1][-3000:]}")
        time.sleep(2)
        client.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        client.send_signal(signal.SIGCONT)
        out, err = client.communicate(timeout=300)
    finally:
        client.kill()
    assert client.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"in_order": True, "counted": ITEMS}, out + err[-3000:]
    return first


def _ip(*args: str, netns: str | None = None, check: bool = True) -> None:
    prefix = ("ip", "netns", "exec", netns) if netns else ()
    subprocess.run([*prefix, *args], check=check, capture_output=True, text=True, timeout=30)


@contextmanager
def _blackhole(address: str, netns: str | None = None) -> Iterator[None]:
    """Packets to ``address`` (from this machine, or from inside ``netns``) dropped."""
    _ip("ip", "route", "add", "blackhole", f"{address}/32", netns=netns)
    try:
        yield
    finally:
        _ip("ip", "route", "del", "blackhole", f"{address}/32", netns=netns, check=False)


@contextmanager
def link_dropped(lab: HostLab, host: TestHost) -> Iterator[None]:
    """No packet between this machine and ``host``, either way, for the block."""
    with _blackhole(host.address), _blackhole(lab.gateway, host.netns):
        yield


@contextmanager
def partitioned(lab: HostLab, host: TestHost) -> Iterator[None]:
    """No packet between ``host`` and any other host of ``lab``, for the block."""
    with ExitStack() as stack:
        for other in lab.hosts:
            if other is not host:
                stack.enter_context(_blackhole(other.address, host.netns))
                stack.enter_context(_blackhole(host.address, other.netns))
        yield


@contextmanager
def address_moved(lab: HostLab) -> Iterator[str]:
    """See the module; yields the new address (.250 of the lab's subnet). On the way out
    the old address is this machine's again and the new one goes, so connections made
    from the new one go silent in their turn."""
    new = lab.gateway.rsplit(".", 1)[0] + ".250"
    _ip("ip", "addr", "add", f"{new}/24", "dev", lab.bridge)
    try:
        _ip("ip", "route", "replace", lab.cidr, "dev", lab.bridge, "scope", "link", "src", new)
        with ExitStack() as stack:
            for host in lab.hosts:
                stack.enter_context(_blackhole(lab.gateway, host.netns))
            yield new
    finally:
        _ip("ip", "route", "replace", lab.cidr, "dev", lab.bridge, "scope", "link", "src", lab.gateway, check=False)
        _ip("ip", "addr", "del", f"{new}/24", "dev", lab.bridge, check=False)


def connections_to(host: TestHost) -> int:
    """How many TCP connections this machine has open to ``host``'s sshd."""
    listed = subprocess.run(["ss", "-Htn", "dst", host.address, "dport", "=", "22"], capture_output=True, text=True,
                            timeout=30, check=True)
    return len([line for line in listed.stdout.splitlines() if line.strip()])


def connections_reset(host: TestHost) -> int:
    """End every connection between this machine and ``host``'s sshd (see the module);
    how many there were."""
    found = connections_to(host)
    subprocess.run(["ss", "-HKtn", "dst", host.address, "dport", "=", "22"], capture_output=True, text=True,
                   timeout=30, check=False)
    return found


def listening_ports(host: TestHost, title: str) -> set[int]:
    """The TCP ports that the processes in ``host``'s namespace whose command line
    starts with ``title`` (``ray::CollectionHosts``, as Ray retitles an actor's worker)
    listen on."""
    shown = subprocess.run(["ip", "netns", "exec", host.netns, "ss", "-Htlnp"], capture_output=True, text=True,
                           timeout=30, check=True).stdout
    ports = set()
    for line in shown.splitlines():
        for pid in re.findall(r"pid=(\d+),", line):
            try:
                titled = " ".join(psutil.Process(int(pid)).cmdline()).startswith(title)
            except psutil.Error:
                continue
            if titled:
                ports.add(int(line.split()[3].rsplit(":", 1)[1]))
    return ports


def process_connections_reset(source: TestHost, destination: TestHost, ports: set[int]) -> int:
    """End every TCP connection from ``source`` to ``ports`` on ``destination`` (``ss -K``
    in ``source``'s namespace: its end closed, the other end reset); how many."""
    if not ports:
        return 0
    chosen = " or ".join(f"dport = :{port}" for port in sorted(ports))
    killed = subprocess.run(
        ["ip", "netns", "exec", source.netns, "ss", "-HKtn", "dst", destination.address, "(", *chosen.split(), ")"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    return len(killed.stdout.splitlines())


def _link_of(host: TestHost) -> str:
    """The name of ``host``'s end of its veth pair (its one link but loopback)."""
    shown = subprocess.run(["ip", "netns", "exec", host.netns, "ip", "-o", "link", "show"], check=True,
                           capture_output=True, text=True, timeout=30).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in shown.splitlines()]
    [link] = [name for name in names if name != "lo"]
    return link


@contextmanager
def _token_bucket(device: str, rate: str, netns: str | None = None) -> Iterator[None]:
    # burst: one full-size frame and a little more; latency: how long a packet may
    # wait in the queue (a deep one: seconds at 1 Mbit/s)
    _ip("tc", "qdisc", "add", "dev", device, "root", "tbf", "rate", rate, "burst", "16kb", "latency", "2s",
        netns=netns)
    try:
        yield
    finally:
        _ip("tc", "qdisc", "del", "dev", device, "root", netns=netns, check=False)


@contextmanager
def slowed(lab: HostLab, rate: str, hosts: Sequence[TestHost] | None = None) -> Iterator[None]:
    """Every path to and from ``hosts`` (default: all of the lab's) through a token
    bucket of ``rate`` ("10mbit"): the lab's bridge on this machine's side, each host's
    link on its own."""
    with ExitStack() as stack:
        stack.enter_context(_token_bucket(lab.bridge, rate))
        for host in hosts if hosts is not None else lab.hosts:
            stack.enter_context(_token_bucket(_link_of(host), rate, host.netns))
        yield
