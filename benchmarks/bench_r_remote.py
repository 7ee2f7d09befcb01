"""R — remote pools on 3 SSH hosts against Ray and Dask on the same hosts.

The hosts are the test suite's throwaway hosts (tests/hosts.py: network namespaces with
their own sshd, no route to any index). skyward: a `sky.SSH` pool of the 3 hosts, driven
from this client through its SSH-forwarded relay, with an Image that also installs
`dask[distributed]` (resolved on the client and shipped, like any Image.pip) so the
peers find their packages in the same environment. Ray: a cluster started with
`ray start` on the same hosts (head on host 0) from that environment, driven by a script
that runs on host 0 (Ray Client is deprecated, so a Ray driver has to live in the
cluster's network). Dask: `distributed.SSHCluster` on the same hosts (scheduler on host
0, one single-threaded worker per host), driven from this client. Each measures one
trivial round trip (round-robin over the 3 nodes), a map of 10,000 trivial items, and a
100 MB broadcast (one object sent to every node and read there). The pool's open times
are the S1 group's. A fourth subject times the hop every skyward call to a remote pool
makes and the peers' drivers on host 0 do not: an asyncssh port forward from this client
to an echo server on host 0, with no engine on either end (a 200-byte echo, and 100 MB
sent once).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
import time
from typing import Any

from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "R"
TITLE = "R — remote pools on 3 SSH hosts: skyward, Ray, Dask SSHCluster"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
MAP_ITEMS = 10_000
BROADCAST_BYTES = 100_000_000
TUNNEL = "SSH tunnel alone, no engine"
SUBJECTS = ("skyward", "Ray (driver on host 0)", "Dask SSHCluster", TUNNEL)
METRICS = ("round trip", "map 10,000", "broadcast 100 MB")
MEASURED = {TUNNEL: ("round trip", "broadcast 100 MB")}
"""The metrics of a subject that does not measure all of METRICS."""


def run(quick: bool = False) -> list[Row]:
    calls = 50 if quick else 200
    repeats = 1 if quick else 3
    try:
        result = isolated(measure_all, calls, repeats, timeout=1800)
    except SubjectFailed as exc:
        return [failed_row(GROUP, f"{s} {m}", exc, metric=m) for s in SUBJECTS for m in METRICS]
    if "skipped" in result:
        return [failed_row(GROUP, "3 hosts", f"not measured: {result['skipped']}")]
    rows = []
    for subject in SUBJECTS:
        found = result.get(subject, {})
        for metric in MEASURED.get(subject, METRICS):
            if isinstance(found.get(metric), list):
                rows.append(row(GROUP, f"{subject} {metric}", found[metric], metric=metric))
            else:
                rows.append(failed_row(GROUP, f"{subject} {metric}", found.get("error", "not measured"), metric=metric))
    return rows


def measure_all(calls: int, repeats: int) -> dict[str, Any]:
    """Every subject on one set of hosts (seconds per measurement, lists of samples)."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    import importlib.metadata

    dask = f"distributed=={importlib.metadata.version('distributed')}"
    results: dict[str, Any] = {}
    with HostLab.start(3) as lab:
        results["skyward"], python = _skyward(lab, dask, calls, repeats)
        for subject, measure in (("Ray (driver on host 0)", _ray), ("Dask SSHCluster", _dask), (TUNNEL, _tunnel)):
            try:
                results[subject] = measure(lab, python, calls, repeats)
            except Exception as exc:  # one peer failing must not lose the others
                results[subject] = {"error": f"{type(exc).__name__}: {exc}"[-1500:]}
    return results


def _noop(x: Any = None) -> Any:
    return x


def _size(data: bytes) -> int:
    return len(data)


def _skyward(lab: Any, dask: str, calls: int, repeats: int) -> tuple[dict[str, list[float]], str]:
    import skyward as sky

    provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
    options = sky.Options(console=False, logging=False)
    noop, size = sky.function(_noop), sky.function(_size)
    data = os.urandom(BROADCAST_BYTES)
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    with sky.Compute(provider=provider, nodes=3, image=sky.Image(pip=[dask]), options=options) as pool:
        python = (sky.function(lambda: sys.executable)() @ pool)[0]
        for _ in range(20):
            noop() >> pool
        for _ in range(calls):
            started = time.perf_counter()
            noop() >> pool
            out["round trip"].append(time.perf_counter() - started)
        for _ in range(repeats):
            started = time.perf_counter()
            pool.map(_noop, range(MAP_ITEMS))
            out["map 10,000"].append(time.perf_counter() - started)
            started = time.perf_counter()
            assert size(data) @ pool == [BROADCAST_BYTES] * 3
            out["broadcast 100 MB"].append(time.perf_counter() - started)
    return out, python


RAY_DRIVER = """
import json, os, sys, time, ray
ray.init(address=sys.argv[5], log_to_driver=False)
calls, repeats, items, size = (int(a) for a in sys.argv[1:5])
@ray.remote(num_cpus=0)
class A:
    def noop(self, x=None):
        return x
@ray.remote(num_cpus=0)
def noop(x=None):
    return x
@ray.remote(num_cpus=0)
def length(data):
    return len(data)
actors = [A.options(resources={f"node-{i}": 0.01}).remote() for i in range(3)]
ray.get([a.noop.remote() for a in actors])
out = {"round trip": [], "map 10,000": [], "broadcast 100 MB": []}
for i in range(20 + calls):
    started = time.perf_counter()
    ray.get(actors[i % 3].noop.remote())
    if i >= 20:
        out["round trip"].append(time.perf_counter() - started)
data = os.urandom(size)
for _ in range(repeats):
    started = time.perf_counter()
    ray.get([noop.remote(x) for x in range(items)])
    out["map 10,000"].append(time.perf_counter() - started)
    started = time.perf_counter()
    ref = ray.put(data)
    assert ray.get([length.options(resources={f"node-{i}": 0.01}).remote(ref) for i in range(3)]) == [size] * 3
    out["broadcast 100 MB"].append(time.perf_counter() - started)
    del ref
print("RESULT " + json.dumps(out), flush=True)
"""


def _ray(lab: Any, python: str, calls: int, repeats: int) -> dict[str, list[float]]:
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
            _ssh(lab, host, f"{env} {ray} start {role} --node-ip-address={host.address} --temp-dir={temp} "
                            f"--resources='{{\"node-{index}\": 1}}' --num-cpus=1 --disable-usage-stats", 180)
        script = f"{temp}-driver.py"
        _ssh(lab, head, f"cat > {script}", 30, RAY_DRIVER)
        output = _ssh(lab, head, f"cd /tmp && {env} {python} {script} {calls} {repeats} {MAP_ITEMS} {BROADCAST_BYTES} {head.address}:{port}", 900)
        line = next(text for text in output.splitlines() if text.startswith("RESULT "))
        return json.loads(line.removeprefix("RESULT "))  # type: ignore[no-any-return]
    finally:
        for host in lab.hosts:
            try:
                _ssh(lab, host, f"{env} {ray} stop --force", 60)
            except Exception:
                pass


def _dask(lab: Any, python: str, calls: int, repeats: int) -> dict[str, list[float]]:
    from distributed import Client, SSHCluster

    # local functions: the hosts cannot import this module, so dask ships them by value
    def noop(x: Any = None) -> Any:
        return x

    def size(data: bytes) -> int:
        return len(data)

    hosts = [host.address for host in lab.hosts]
    connect = {"client_keys": [lab.client_key], "known_hosts": None, "username": "root"}
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    with SSHCluster(
        [hosts[0], *hosts], connect_options=connect, remote_python=python,
        worker_options={"nthreads": 1},
        scheduler_options={"port": 0, "dashboard_address": None, "host": hosts[0]},
    ) as cluster, Client(cluster) as client:
        client.wait_for_workers(3, timeout=120)
        workers = sorted(client.scheduler_info()["workers"])
        for i in range(20 + calls):
            started = time.perf_counter()
            client.submit(noop, i, workers=[workers[i % 3]], pure=False).result()
            if i >= 20:
                out["round trip"].append(time.perf_counter() - started)
        data = os.urandom(BROADCAST_BYTES)
        for _ in range(repeats):
            started = time.perf_counter()
            client.gather(client.map(noop, range(MAP_ITEMS), pure=False))
            out["map 10,000"].append(time.perf_counter() - started)
            started = time.perf_counter()
            shared = client.scatter(data, broadcast=True)
            sizes = client.gather([client.submit(size, shared, workers=[w], pure=False) for w in workers])
            assert sizes == [BROADCAST_BYTES] * 3
            out["broadcast 100 MB"].append(time.perf_counter() - started)
            client.cancel(shared)
    return out


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
CALL_BYTES = 200
"""About the size of a pickled `noop() >> pool` request."""


def _tunnel(lab: Any, python: str, calls: int, repeats: int) -> dict[str, list[float]]:
    """The client-to-host-0 hop of a skyward SSH pool without the engine: an asyncssh
    local port forward (as the pool's relay connection uses) to an echo server on host 0.
    A round trip echoes CALL_BYTES; the broadcast sends 100 MB once and reads its size."""
    import asyncio
    import struct

    import asyncssh

    async def measure() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"round trip": [], "broadcast 100 MB": []}
        async with asyncssh.connect(
            lab.hosts[0].address, username="root", client_keys=[lab.client_key], known_hosts=None
        ) as conn:
            server = await conn.create_process(f"{python} -c {shlex.quote(ECHO_SERVER)}")
            port = int(await asyncio.wait_for(server.stdout.readline(), 60))
            forward = await conn.forward_local_port("127.0.0.1", 0, "127.0.0.1", port)
            reader, writer = await asyncio.open_connection("127.0.0.1", forward.get_port())

            async def send(body: bytes, echoed: bool) -> None:
                writer.write(struct.pack("!Q", len(body)))
                writer.write(body)
                await writer.drain()
                (size,) = struct.unpack("!Q", await reader.readexactly(8))
                if size != len(body) or (echoed and await reader.readexactly(size) != body):
                    raise RuntimeError(f"the echo server answered {size} bytes for {len(body)}")

            call = os.urandom(CALL_BYTES)
            for i in range(20 + calls):
                started = time.perf_counter()
                await send(call, echoed=True)
                if i >= 20:
                    out["round trip"].append(time.perf_counter() - started)
            data = os.urandom(BROADCAST_BYTES)
            for _ in range(repeats):
                started = time.perf_counter()
                await send(data, echoed=False)
                out["broadcast 100 MB"].append(time.perf_counter() - started)
            writer.close()
            forward.close()
            server.terminate()
        return out

    return asyncio.run(measure())


def _ssh(lab: Any, host: Any, command: str, timeout: float, stdin: str | None = None) -> str:
    """Run ``command`` on ``host`` over SSH; its output (RuntimeError with it on failure)."""
    import subprocess

    ssh = [
        "ssh", "-i", lab.client_key, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
        "-o", "LogLevel=ERROR", f"root@{host.address}", command,
    ]
    result = subprocess.run(ssh, input=stdin, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"`{shlex.join(ssh[-1:])}` on {host.address} failed: {result.stdout[-800:]}{result.stderr[-800:]}")
    return result.stdout

