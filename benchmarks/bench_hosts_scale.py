"""M — remote pools on 1, 4 and 16 real SSH hosts, beside Ray with its driver on host 0.

The hosts are the test suite's throwaway hosts (tests/hosts.py: network namespaces of
this machine, each with its own sshd, private /tmp, ~/.cache and ~/.skyward, no route to
any index), all on this machine's 2 cores, so every host's processes share them: the
numbers show how each cost grows with the host count here, not what 16 machines of
their own would do. Each size runs in a fresh interpreter on a fresh set of hosts.
skyward: `sky.Compute(provider=sky.SSH(...), nodes=n)` with the default Image, opened
cold (on fresh hosts: skyward's wheels and uv uploaded, a venv, installs, `ray start` on
every host, agents) and closed, then opened again warm (same Image, no installs) and
measured: `f() @ pool` (one trivial call per node, the median of 20), `pool.map` of
10,000 trivial items, a 100 MB argument to every node (`size(data) @ pool`), and the
close. Ray: after the pool closed, `ray start` on the same hosts from the environment
the pool installed (head on host 0, the others joining at once, token auth as
skyward's own clusters run), timed until every host has joined; then a driver on host
0 (Ray Client is deprecated, so a driver lives in the cluster's network) measures a
trivial actor call on every node at once, the map as one task per item and as tasks of
1,000 items, and `ray.put` of 100 MB read by a task on every node.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.bench_r_remote import RAY_REMOTES, answering, ssh_run
from benchmarks.common import Row, failed_row, repeat, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "M"
TITLE = "M — remote pools on 1, 4 and 16 SSH hosts: skyward and Ray"
TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
SIZES = (1, 4, 16)
CALLS = 20
MAP_ITEMS = 10_000
BATCH = 1_000
BROADCAST_BYTES = 100_000_000
WARMUP = 5


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = []
    for hosts in SIZES[:2] if quick else SIZES:
        try:
            found = isolated(measure, hosts, timeout=2400)
        except SubjectFailed as exc:
            rows.append(failed_row(GROUP, f"skyward, {hosts} hosts", exc))
            continue
        if "skipped" in found:
            return [failed_row(GROUP, "hosts", f"not measured: {found['skipped']}")]
        rows += _rows(hosts, found)
    return rows


def _rows(hosts: int, found: dict[str, Any]) -> list[Row]:
    at = f"{hosts} host{'s' if hosts > 1 else ''}"
    rows = [
        row(GROUP, f"skyward, {at}: cold open", [found["cold"]], "fresh hosts: uploads, venv, installs, Ray, agents",
            metric=f"{at} cold open"),
        row(GROUP, f"skyward, {at}: warm open", [found["warm"]], "the same hosts again: no installs",
            metric=f"{at} open"),
        row(GROUP, f"skyward, {at}: f() @ pool", found["at"], "one trivial call per node, from this client",
            metric=f"{at} every node"),
        row(GROUP, f"skyward, {at}: pool.map of {MAP_ITEMS:,}", [found["map"]], metric=f"{at} map"),
        row(GROUP, f"skyward, {at}: 100 MB to every node", [found["broadcast"]], metric=f"{at} broadcast"),
        row(GROUP, f"skyward, {at}: close", [found["close"]], metric=f"{at} close"),
    ]
    ray = found.get("ray")
    if not isinstance(ray, dict) or "error" in ray:
        error = ray.get("error", "not measured") if isinstance(ray, dict) else "not measured"
        return [*rows, failed_row(GROUP, f"Ray, {at}", error, metric=f"{at} open")]
    return [
        *rows,
        row(GROUP, f"Ray, {at}: ray start on every host", [ray["start"]],
            "head on host 0, the others joining at once; Ray already installed", metric=f"{at} open"),
        row(GROUP, f"Ray, {at}: an actor call on every node", ray["at"], "driver on host 0", metric=f"{at} every node"),
        row(GROUP, f"Ray, {at}: {MAP_ITEMS:,} tasks", [ray["map"]], "one task per item", metric=f"{at} map"),
        row(GROUP, f"Ray, {at}: {MAP_ITEMS:,} items in tasks of {BATCH:,}", [ray["batched"]],
            "the batching Ray's docs advise for tiny tasks", metric=f"{at} map"),
        row(GROUP, f"Ray, {at}: ray.put of 100 MB read on every node", [ray["broadcast"]],
            metric=f"{at} broadcast"),
    ]


def _noop(x: Any = None) -> Any:
    return x


def _size(data: bytes) -> int:
    return len(data)


def _interpreter() -> str:
    return sys.executable


def measure(hosts: int) -> dict[str, Any]:
    """skyward's and Ray's measurements on ``hosts`` fresh hosts (see the module)."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available

    import skyward as sky

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    noop, size, interpreter = sky.function(_noop), sky.function(_size), sky.function(_interpreter)
    data = os.urandom(BROADCAST_BYTES)
    found: dict[str, Any] = {}
    with HostLab.start(hosts) as lab:
        provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
        options = sky.Options(console=False, logging=False)
        pool = sky.Compute(provider=provider, nodes=hosts, options=options)
        started = time.monotonic()
        pool.open()
        found["cold"] = time.monotonic() - started
        pool.close()
        pool = sky.Compute(provider=provider, nodes=hosts, options=options)
        started = time.monotonic()
        pool.open()
        found["warm"] = time.monotonic() - started
        try:
            python = str((interpreter() @ pool)[0])
            found["at"] = repeat(lambda: noop() @ pool, CALLS, WARMUP)
            found["map"] = repeat(lambda: pool.map(_noop, range(MAP_ITEMS)), 1)[0]

            def broadcast() -> None:
                assert size(data) @ pool == [BROADCAST_BYTES] * hosts

            found["broadcast"] = repeat(broadcast, 1)[0]
        finally:
            started = time.monotonic()
            pool.close()
            found["close"] = time.monotonic() - started
        try:
            found["ray"] = _ray_peer(lab, python, hosts)
        except Exception as exc:  # noqa: BLE001 - the peer's failure is a row, not the group's end
            found["ray"] = {"error": f"{type(exc).__name__}: {exc}"[-1500:]}
    return found


RAY_DRIVER = RAY_REMOTES + """
ray.init(address=sys.argv[1], log_to_driver=False)
hosts, calls, items, batch, size, warmup = (int(a) for a in sys.argv[2:8])
actors = [A.options(resources={f"host-{i}": 0.01}).remote() for i in range(hosts)]
def every_node():
    ray.get([a.noop.remote() for a in actors])
def broadcast():
    ref = ray.put(data)
    got = ray.get([length.options(resources={f"host-{i}": 0.01}).remote(ref) for i in range(hosts)])
    assert got == [size] * hosts
for _ in range(warmup):
    every_node()
batches = [list(range(i, min(i + batch, items))) for i in range(0, items, batch)]
data = os.urandom(size)
print("READY", flush=True)
for _ in sys.stdin:
    at = [timed(every_node) for _ in range(calls)]
    mapped = timed(lambda: ray.get([noop.remote(x) for x in range(items)]))
    batched = timed(lambda: ray.get([noops.remote(b) for b in batches]))
    print("RESULT " + json.dumps({"at": at, "map": mapped, "batched": batched, "broadcast": timed(broadcast)}),
          flush=True)
"""
"""The Ray peer's driver on host 0: one round of its measurements per line of stdin."""


def _ray_peer(lab: Any, python: str, hosts: int) -> dict[str, Any]:
    """Ray started on ``lab``'s hosts from the pool's environment ``python``, timed until
    every host joined, and one round of its driver's measurements; Ray stopped after."""
    with _ray_cluster(lab, python) as (address, env, started):
        driver = (f"cd /tmp && {env} {python} /tmp/ray-bench-driver.py {address} {hosts} {CALLS} {MAP_ITEMS} "
                  f"{BATCH} {BROADCAST_BYTES} {WARMUP}")
        ssh_run(lab, lab.hosts[0], "cat > /tmp/ray-bench-driver.py", 30, RAY_DRIVER)
        with answering(lab, lab.hosts[0], driver) as ask:
            return {"start": started, **ask()}


@contextlib.contextmanager
def _ray_cluster(lab: Any, python: str) -> Iterator[tuple[str, str, float]]:
    """Ray on every host of ``lab`` for the block: its address, the environment its
    processes and drivers need, and the seconds it took to start (the head, then every
    other host joining at once, until all have)."""
    ray = os.path.join(os.path.dirname(python), "ray")
    head = lab.hosts[0]
    port = 26379
    env = f"RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_AUTH_TOKEN={secrets.token_hex(16)}"
    common = "--temp-dir=/tmp/ray-bench --num-cpus=1 --disable-usage-stats"

    def start(index: int, role: str) -> None:
        host = lab.hosts[index]
        ssh_run(lab, host, f"{env} {ray} start {role} --node-ip-address={host.address} "
                        f"--resources='{{\"host-{index}\": 1}}' {common}", 300)

    errors: list[BaseException] = []

    def joined(index: int) -> None:
        try:
            start(index, f"--address={head.address}:{port}")
        except BaseException as exc:  # noqa: BLE001 - raised below
            errors.append(exc)

    try:
        began = time.monotonic()
        start(0, f"--head --port={port} --include-dashboard=false")
        joining = [threading.Thread(target=joined, args=(index,)) for index in range(1, len(lab.hosts))]
        for thread in joining:
            thread.start()
        for thread in joining:
            thread.join()
        if errors:
            raise errors[0]
        yield f"{head.address}:{port}", env, time.monotonic() - began
    finally:
        for host in lab.hosts:
            with contextlib.suppress(Exception):
                ssh_run(lab, host, f"{env} {ray} stop --force", 60)
