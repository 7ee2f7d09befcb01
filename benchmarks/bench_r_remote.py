"""R — remote pools on 3 SSH hosts against Ray and Dask on the same hosts.

The hosts are the test suite's throwaway hosts (tests/hosts.py: network namespaces with
their own sshd, no route to any index). skyward: a `sky.SSH` pool of the 3 hosts, driven
from this client through its SSH-forwarded relay, with an Image that also installs
`dask[distributed]` (resolved on the client and shipped, like any Image.pip) so the
peers find their packages in the same environment (the pool is opened once first to
install it, untimed). Ray: a cluster started with `ray start` on the same hosts (head on
host 0) from that environment, driven by a script that runs on host 0 (Ray Client is
deprecated, so a Ray driver has to live in the cluster's network). Dask:
`distributed.SSHCluster` on the same hosts (scheduler on host 0, one single-threaded
worker per host), driven from this client. Each measures trivial round trips
(round-robin over the 3 nodes), a map of 10,000 trivial items, and a 100 MB broadcast
(one object sent to every node and read there; 3 of them a round); Ray and Dask map the items both as one
task per item and as tasks of 1,000 items each (the batching both projects' docs advise
for tiny tasks), and the fastest peer row is the one to beat. A fourth subject times the
hop every skyward call to a remote pool makes and the peers' drivers on host 0 do not:
an asyncssh port forward (the pool's ciphers) from this client to an echo server on
host 0, with no engine on either end (a 200-byte echo, and 100 MB sent; skyward's
broadcast sends its 100 MB over the relay's TLS upload lane instead, docs/architecture.md,
so that row is the SSH channel it no longer takes). All four are started once and
stay up together; they are measured in turns (skyward, Ray, Dask, the tunnel, skyward,
...), each turn a round of every measurement, so that a burst of other load on the
machine does not fall on one subject's runs only. The pool's open times are the S1
group's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from benchmarks.common import Row, failed_row, repeat, row, timed
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "R"
TITLE = "R — remote pools on 3 SSH hosts: skyward, Ray, Dask SSHCluster"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
MAP_ITEMS = 10_000
BATCH = 1_000
"""Items per task in the peers' batched maps."""
BROADCAST_BYTES = 100_000_000
BROADCASTS = 3
"""Broadcasts each subject times in a round: one a round left a row's median of 100 MB
to chance (a Ray broadcast measured 308 ms and 945 ms in one run)."""
WARMUP = 20
"""Untimed round trips of each subject before its first round."""
RAY = "Ray (driver on host 0)"
DASK = "Dask SSHCluster"
TUNNEL = "SSH tunnel alone, no engine"
TRIP, MAP, BROADCAST = "round trip", "map 10,000", "broadcast 100 MB"
BATCHED = f"map 10,000 in tasks of {BATCH:,} items"
PEER_LABELS = (TRIP, MAP, BATCHED, BROADCAST)
MEASURED = {"skyward": (TRIP, MAP, BROADCAST), RAY: PEER_LABELS, DASK: PEER_LABELS, TUNNEL: (TRIP, BROADCAST)}
"""What each subject measures, in the order of its rows."""
METRIC_OF = {BATCHED: MAP}
"""The metric a row is compared under, where it is not the row's own label."""

Samples = dict[str, list[float]]
"""A subject's seconds by what they measure (a label of ``MEASURED``)."""
Round = Callable[[], Samples]
"""One turn of a subject: each of its measurements once, the round trip ``calls`` times."""


def run(quick: bool = False) -> list[Row]:
    """A row per subject and measurement, over ``rounds`` turns of every subject."""
    calls, rounds = (50, 1) if quick else (70, 3)
    try:
        result = isolated(measure_all, calls, rounds, timeout=1800)
    except SubjectFailed as exc:
        return [failed_row(GROUP, f"{s} {m}", exc, metric=METRIC_OF.get(m, m)) for s in MEASURED for m in MEASURED[s]]
    if "skipped" in result:
        return [failed_row(GROUP, "3 hosts", f"not measured: {result['skipped']}")]
    rows = []
    for subject, labels in MEASURED.items():
        found = result.get(subject, {})
        for label in labels:
            metric = METRIC_OF.get(label, label)
            if found.get(label):
                rows.append(row(GROUP, f"{subject} {label}", found[label], metric=metric))
            else:
                rows.append(failed_row(GROUP, f"{subject} {label}", found.get("error", "not measured"), metric=metric))
    return rows


def measure_all(calls: int, rounds: int) -> dict[str, Any]:
    """Every subject up at once on one set of hosts, measured in turns for ``rounds``
    rounds: each subject's samples by label, or its ``error``."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    import importlib.metadata

    dask = f"distributed=={importlib.metadata.version('distributed')}"
    failed: dict[str, Any] = {}
    # the pool closes first: the Ray peer's `ray stop --force` ends every Ray process on a host
    with HostLab.start(3) as lab, contextlib.ExitStack() as peers, contextlib.ExitStack() as ours:
        python = _environment(lab, dask)
        turns: dict[str, Round] = {}
        for subject, start in ((RAY, _ray), (DASK, _dask), (TUNNEL, _tunnel)):
            try:
                turns[subject] = peers.enter_context(start(lab, python, calls))
            except Exception as exc:  # one peer failing must not lose the others
                failed[subject] = _error(exc)
        turns = {"skyward": ours.enter_context(_skyward(lab, dask, calls)), **turns}
        return {**failed, **in_turns(turns, rounds)}


def in_turns(turns: dict[str, Round], rounds: int) -> dict[str, Any]:
    """``rounds`` rounds in which every subject takes its turn, in the order of ``turns``:
    each subject's samples by label over its rounds, or the ``error`` of the round that
    failed (after which it takes no more turns)."""
    results: dict[str, Any] = {subject: {} for subject in turns}
    for _ in range(rounds):
        for subject, measure in turns.items():
            if "error" in results[subject]:
                continue
            try:
                for label, samples in measure().items():
                    results[subject].setdefault(label, []).extend(samples)
            except Exception as exc:  # one subject failing must not lose the others
                results[subject] = _error(exc)
    return results


def _error(exc: BaseException) -> dict[str, str]:
    return {"error": f"{type(exc).__name__}: {exc}"[-1500:]}


def _noop(x: Any = None) -> Any:
    return x


def _size(data: bytes) -> int:
    return len(data)


def _pool(lab: Any, dask: str) -> Any:
    """The skyward pool of the 3 hosts, unopened, with an Image that also installs ``dask``."""
    import skyward as sky

    provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
    return sky.Compute(provider=provider, nodes=3, image=sky.Image(pip=[dask]),
                       options=sky.Options(console=False, logging=False))


def _environment(lab: Any, dask: str) -> str:
    """Open the pool once and close it, which installs its environment on the hosts
    (S1 times such an open): that environment's Python, which the peers run too."""
    import skyward as sky

    with _pool(lab, dask) as pool:
        return str((sky.function(lambda: sys.executable)() @ pool)[0])


@contextlib.contextmanager
def _skyward(lab: Any, dask: str, calls: int) -> Iterator[Round]:
    """The pool open for the block (a warm open: ``_environment`` built the hosts')."""
    import skyward as sky

    noop, size = sky.function(_noop), sky.function(_size)
    data = os.urandom(BROADCAST_BYTES)
    with _pool(lab, dask) as pool:

        def broadcast() -> None:
            assert size(data) @ pool == [BROADCAST_BYTES] * 3

        repeat(lambda: noop() >> pool, 0, WARMUP)
        yield lambda: {
            TRIP: repeat(lambda: noop() >> pool, calls),
            MAP: repeat(lambda: pool.map(_noop, range(MAP_ITEMS)), 1),
            BROADCAST: repeat(broadcast, BROADCASTS),
        }


RAY_REMOTES = """
import json, os, sys, time, ray
@ray.remote(num_cpus=0)
class A:
    def noop(self, x=None):
        return x
@ray.remote(num_cpus=0)
def noop(x=None):
    return x
def identity(x):
    return x
@ray.remote(num_cpus=0)
def noops(xs):
    return [identity(x) for x in xs]
@ray.remote(num_cpus=0)
def length(data):
    return len(data)
def timed(fn):
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started
"""
"""What a Ray peer's driver on a host defines: an actor and tasks that return what they
are given (``noops`` a batch of items), one that reads a broadcast's size, and a timer."""

RAY_DRIVER = RAY_REMOTES + """
ray.init(address=sys.argv[5], log_to_driver=False)
calls, items, batch, size = (int(a) for a in sys.argv[1:5])
broadcasts = int(sys.argv[7])
def broadcast():
    ref = ray.put(data)
    assert ray.get([length.options(resources={f"node-{i}": 0.01}).remote(ref) for i in range(3)]) == [size] * 3
actors = [A.options(resources={f"node-{i}": 0.01}).remote() for i in range(3)]
for i in range(int(sys.argv[6])):
    ray.get(actors[i % 3].noop.remote())
batches = [list(range(i, min(i + batch, items))) for i in range(0, items, batch)]
data = os.urandom(size)
print("READY", flush=True)
for _ in sys.stdin:  # a round per line; stdin's end ends the driver
    trips = [timed(lambda: ray.get(actors[i % 3].noop.remote())) for i in range(calls)]
    mapped = timed(lambda: ray.get([noop.remote(x) for x in range(items)]))
    batched = timed(lambda: ray.get([noops.remote(b) for b in batches]))
    print("RESULT " + json.dumps([trips, [mapped], [batched], [timed(broadcast) for _ in range(broadcasts)]]), flush=True)
"""
"""The Ray peer's driver: its measurements in the order of ``PEER_LABELS``."""


@contextlib.contextmanager
def _ray(lab: Any, python: str, calls: int) -> Iterator[Round]:
    """A Ray cluster started with `ray start` on the hosts (head on host 0) and its driver
    on host 0 (``RAY_DRIVER``) for the block; a round asks the driver for one."""
    ray = os.path.join(os.path.dirname(python), "ray")
    head = lab.hosts[0]
    port = 26379
    # token auth, as skyward's own clusters run (and set explicitly: a host's Ray must not
    # pick up another mode from its environment)
    env = f"RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_AUTH_TOKEN={secrets.token_hex(16)}"
    temp = "/tmp/ray-bench"
    try:
        for index, host in enumerate(lab.hosts):
            role = f"--head --port={port} --include-dashboard=false" if index == 0 else f"--address={head.address}:{port}"
            ssh_run(lab, host, f"{env} {ray} start {role} --node-ip-address={host.address} --temp-dir={temp} "
                            f"--resources='{{\"node-{index}\": 1}}' --num-cpus=1 --disable-usage-stats", 180)
        script = f"{temp}-driver.py"
        ssh_run(lab, head, f"cat > {script}", 30, RAY_DRIVER)
        driver = (f"cd /tmp && {env} {python} {script} {calls} {MAP_ITEMS} {BATCH} {BROADCAST_BYTES} "
                  f"{head.address}:{port} {WARMUP} {BROADCASTS}")
        with answering(lab, head, driver) as ask:
            yield lambda: dict(zip(PEER_LABELS, ask(), strict=True))
    finally:
        for host in lab.hosts:
            try:
                ssh_run(lab, host, f"{env} {ray} stop --force", 60)
            except Exception:
                pass


@contextlib.contextmanager
def answering(lab: Any, host: Any, command: str, timeout: float = 600.0) -> Iterator[Callable[[], Any]]:
    """``command`` running on ``host`` over SSH for the block. It prints a line READY once
    set up, then answers each line of its stdin with a line ``RESULT <json>``; the
    function yielded asks once and returns that JSON (RuntimeError with the command's
    last output if it ends, or is killed after ``timeout`` seconds without an answer)."""
    import subprocess
    import threading

    process = subprocess.Popen(ssh_args(lab, host, command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    stdin, stdout = process.stdin, process.stdout
    assert stdin is not None and stdout is not None
    said: deque[str] = deque(maxlen=50)

    def answer(marker: str) -> str:
        timer = threading.Timer(timeout, process.kill)
        timer.start()
        try:
            for line in stdout:
                if line.startswith(marker):
                    return line.removeprefix(marker)
                said.append(line)
        finally:
            timer.cancel()
        raise RuntimeError(f"`{command}` on {host.address} ended: {''.join(said)[-1500:]}")

    def ask() -> Any:
        stdin.write("round\n")
        stdin.flush()
        return json.loads(answer("RESULT "))

    try:
        answer("READY")
        yield ask
    finally:
        with contextlib.suppress(OSError):
            stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def _dask(lab: Any, python: str, calls: int) -> Iterator[Round]:
    """A `distributed.SSHCluster` on the hosts and its client for the block."""
    from distributed import Client, SSHCluster

    # local functions: the hosts cannot import this module, so dask ships them by value
    def noop(x: Any = None) -> Any:
        return x

    def noops(xs: list[Any]) -> list[Any]:
        return [noop(x) for x in xs]

    def size(data: bytes) -> int:
        return len(data)

    hosts = [host.address for host in lab.hosts]
    connect = {"client_keys": [lab.client_key], "known_hosts": None, "username": "root"}
    batches = [list(range(i, min(i + BATCH, MAP_ITEMS))) for i in range(0, MAP_ITEMS, BATCH)]
    data = os.urandom(BROADCAST_BYTES)
    with SSHCluster(
        [hosts[0], *hosts], connect_options=connect, remote_python=python,
        worker_options={"nthreads": 1},
        scheduler_options={"port": 0, "dashboard_address": None, "host": hosts[0]},
    ) as cluster, Client(cluster) as client:
        client.wait_for_workers(3, timeout=120)
        workers = sorted(client.scheduler_info()["workers"])
        turn = iter(range(sys.maxsize))

        def trip() -> None:
            client.submit(noop, None, workers=[workers[next(turn) % 3]], pure=False).result()

        def broadcast() -> Any:
            shared = client.scatter(data, broadcast=True)
            sizes = client.gather([client.submit(size, shared, workers=[w], pure=False) for w in workers])
            assert sizes == [BROADCAST_BYTES] * 3
            return shared

        def one_round() -> Samples:
            out = {
                TRIP: repeat(trip, calls),
                MAP: repeat(lambda: client.gather(client.map(noop, range(MAP_ITEMS), pure=False)), 1),
                BATCHED: repeat(lambda: client.gather(client.map(noops, batches, pure=False)), 1),
            }
            broadcasts = []
            for _ in range(BROADCASTS):
                seconds, shared = timed(broadcast)
                client.cancel(shared)  # not timed
                broadcasts.append(seconds)
            return {**out, BROADCAST: broadcasts}

        repeat(trip, 0, WARMUP)
        yield one_round


ECHO_SERVER = """
import socket, struct, sys
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
print(server.getsockname()[1], flush=True)
peer, _ = server.accept()
peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def exactly(n):
    got = bytearray()
    while len(got) < n:
        chunk = peer.recv(min(n - len(got), 1 << 20))
        if not chunk:
            sys.exit(0)
        got += chunk
    return bytes(got)
while True:
    (n,) = struct.unpack("!Q", exactly(8))
    body = exactly(n)
    peer.sendall(struct.pack("!Q", n) + (body if n < 65536 else b""))
"""
ECHOED = 65_536
"""The echo server sends back bodies under this size whole, larger ones only their size."""
CALL_BYTES = 200
"""About the size of a pickled `noop() >> pool` request."""


@contextlib.contextmanager
def _tunnel(lab: Any, python: str, calls: int) -> Iterator[Round]:
    """The client-to-host-0 hop of a skyward SSH pool without the engine, for the block
    (``_echo``), on an event loop of its own. A round trip echoes CALL_BYTES; a
    broadcast sends 100 MB and reads its size."""
    import asyncio

    loop = asyncio.new_event_loop()
    echo = _echo(lab, python)
    try:
        send = loop.run_until_complete(echo.__aenter__())
        try:
            call, data = os.urandom(CALL_BYTES), os.urandom(BROADCAST_BYTES)
            loop.run_until_complete(_sends(send, call, WARMUP))

            async def one_round() -> Samples:
                return {TRIP: await _sends(send, call, calls), BROADCAST: await _sends(send, data, BROADCASTS)}

            yield lambda: loop.run_until_complete(one_round())
        finally:
            loop.run_until_complete(echo.__aexit__(None, None, None))
    finally:
        loop.close()


Send = Callable[[bytes], Awaitable[None]]
"""Sends a body through the tunnel and reads the echo server's answer."""


async def _sends(send: Send, body: bytes, times: int) -> list[float]:
    """Seconds of each of ``times`` sends of ``body``."""
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        await send(body)
        samples.append(time.perf_counter() - started)
    return samples


@contextlib.asynccontextmanager
async def _echo(lab: Any, python: str) -> AsyncIterator[Send]:
    """An asyncssh local port forward (as the pool's relay connection uses, with its
    ciphers) to an echo server on host 0 (``ECHO_SERVER``) for the block. A body under
    64 KiB comes back whole and is checked; a larger one only its size."""
    import asyncio
    import struct

    import asyncssh

    from skyward.providers.ssh.connection import CIPHERS

    async with asyncssh.connect(
        lab.hosts[0].address, username="root", client_keys=[lab.client_key], known_hosts=None,
        encryption_algs=CIPHERS,
    ) as conn:
        server = await conn.create_process(f"{python} -c {shlex.quote(ECHO_SERVER)}")
        port = int(await asyncio.wait_for(server.stdout.readline(), 60))
        forward = await conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", forward.get_port())

        async def send(body: bytes) -> None:
            writer.write(struct.pack("!Q", len(body)))
            writer.write(body)
            await writer.drain()
            (size,) = struct.unpack("!Q", await reader.readexactly(8))
            if size != len(body) or (size < ECHOED and await reader.readexactly(size) != body):
                raise RuntimeError(f"the echo server answered {size} bytes for {len(body)}")

        try:
            yield send
        finally:
            writer.close()
            forward.close()
            server.terminate()


def ssh_args(lab: Any, host: Any, command: str) -> list[str]:
    """The ``ssh`` command line that runs ``command`` on ``host`` as root."""
    return [
        "ssh", "-i", lab.client_key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "LogLevel=ERROR", f"root@{host.address}", command,
    ]


def ssh_run(lab: Any, host: Any, command: str, timeout: float, stdin: str | None = None) -> str:
    """Run ``command`` on ``host`` over SSH; its output (RuntimeError with it on failure)."""
    import subprocess

    result = subprocess.run(ssh_args(lab, host, command), input=stdin, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"`{command}` on {host.address} failed: {result.stdout[-800:]}{result.stderr[-800:]}")
    return result.stdout
