"""C1 — distributed collections: operation latency and throughput.

One 4-node skyward pool serves every skyward subject; each op is measured from the client
and from inside a task (a node agent, where collections are used). A raw Ray actor call
(a plain and an async actor holding an int, the call `incr`, awaited one at a time) is
measured twice: in the pool's own Ray instance, interleaved with skyward's strong ops
so both see the same load (the comparison the target uses), and alone in a fresh
interpreter. Redis runs on 127.0.0.1 (`redis-server` with persistence off; `INCR` and
`GET` one at a time, and `INCR` throughput) in its own interpreter. Eventual
convergence is the time from a write on node 0 to the moment node 1's cache serves it;
queue wake-up is the time from the client's `put` to a waiting `get` returning on a node.
First, right after the pool opened and before anything else touches its collections, a
task times the first `increment` of a counter (default consistency) on each shard of the
pool's hosts (one actor, started with the pool), then the first `increment` of new
counters on shards used before, then the same counters' next `increment` (warm).

    .venv/bin/python -m benchmarks.bench_collections          # this group alone, with verdicts
    .venv/bin/python -m benchmarks.run --only C1              # through the suite
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.common import Row, failed_row, markdown_table, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "C1"
TITLE = "C1 — distributed collections"
WARMUP = 50
TARGETS = (
    ("strong op median <= 1.2x a raw Ray actor call", "strong op", "Ray actor call, same instance (sync", 1.2),
    ("eventual read hit <= 20 us", "eventual read hit", None, 20e-6),
    ("eventual counter increments >= 50,000/s from one node", "eventual increments", None, 50_000),
)


def run(quick: bool = False) -> list[Row]:
    """Every subject: skyward's rows from one pool, then each peer in its own interpreter."""
    ops = 300 if quick else 2000
    rows: list[Row] = []
    try:
        found = isolated(skyward_subjects, ops)
    except SubjectFailed as exc:
        rows.append(failed_row(GROUP, "skyward (whole pool)", exc))
        found = {}
    for subject, metric, unit, samples in found.get("rows", ()):
        rows.append(row(GROUP, subject, samples, unit=unit, metric=metric))
    for subject, metric, unit, fn in (
        ("Ray actor call (sync actor, incr)", "strong op", "s", ray_sync_actor),
        ("Ray actor call (async actor, incr)", "strong op", "s", ray_async_actor),
        ("Redis INCR (127.0.0.1, one at a time)", "strong op", "s", redis_incr),
        ("Redis GET (127.0.0.1, one at a time)", "eventual read hit", "s", redis_get),
        ("Redis INCR throughput (one at a time)", "eventual increments", "ops/s", redis_incr_rate),
    ):
        try:
            rows.append(row(GROUP, subject, isolated(fn, ops)["samples"], unit=unit, metric=metric))
        except SubjectFailed as exc:
            rows.append(failed_row(GROUP, subject, exc, metric=metric))
    return rows


# ----------------------------------------------------------------- skyward


def skyward_subjects(ops: int) -> dict:
    """Every skyward measurement on one pool: ``{"rows": [(subject, metric, unit, samples)]}``."""
    import skyward as sky
    from benchmarks import engines

    from skyward.collections.config import host_count

    rows: list[tuple[str, str, str, list[float]]] = []
    with engines.skyward_pool() as pool:
        first = sky.function(_first_ops)(host_count(engines.WORKERS), 10 if ops < 1000 else 40) >> pool
        rows.append((FIRST, "first op", "s", first["host started"]))
        rows.append((FIRST_RUNNING, "first op", "s", first["host running"]))
        rows.append((WARM_OP, "first op", "s", first["warm"]))
        strong = pool.counter("bench-strong", consistency="strong")
        strong_dict = pool.dict("bench-strong", consistency="strong")
        strong_dict["k"] = 1
        sync_actor, async_actor = _raw_actors()
        import ray

        found = _interleaved({
            "skyward strong counter.increment (client)": strong.increment,
            "skyward strong dict[k] (client)": lambda: strong_dict["k"],
            "Ray actor call, same instance (sync actor, incr)": lambda: ray.get(sync_actor.incr.remote()),
            "Ray actor call, same instance (async actor, incr)": lambda: ray.get(async_actor.incr.remote()),
        }, ops)
        rows.extend((subject, "strong op", "s", samples) for subject, samples in found.items())
        node = sky.function(_in_task)
        inside = node(ops) >> pool
        rows.append(("skyward strong counter.increment (in a task)", "strong op", "s", inside["strong"]))
        rows.append(("skyward eventual dict[k] cache hit (in a task)", "eventual read hit", "s", inside["hit"]))
        rows.append(("skyward eventual counter.increment rate (in a task)", "eventual increments", "ops/s", inside["rate"]))
        eventual = pool.dict("bench-eventual")
        eventual["k"] = 1
        rows.append(("skyward eventual dict[k] cache hit (client)", "eventual read hit", "s", _latencies(lambda: eventual["k"], ops)))
        counter = pool.counter("bench-eventual")
        rows.append(("skyward eventual counter.increment rate (client)", "eventual increments", "ops/s", _rates(counter.increment, ops)))
        rows.append(("skyward eventual convergence, node 0 write -> node 1 read", "convergence", "s", _convergence(pool, sky, 20 if ops < 1000 else 60)))
        rows.append(("skyward queue: put -> waiting get returns", "queue wake", "s", _queue_wake(pool, sky, 20 if ops < 1000 else 60)))
    return {"rows": rows}


FIRST = "skyward first counter.increment in a task right after the open, one per shard"
FIRST_RUNNING = "skyward first counter.increment of a new counter in a task, its shard used before"
WARM_OP = "skyward counter.increment in a task, warm"


def _first_ops(hosts: int, fresh: int) -> dict:
    """Seconds of each first ``increment`` of a default counter in this task: one per shard
    of the pool (``hosts``; each counter's name hashes to another shard), then ``fresh``
    more on shards used before, then a warm one of each of those."""
    import skyward as sky
    from skyward.collections.placement import home_of

    named: dict[int, str] = {}
    tried = 0
    while len(named) < hosts:
        named.setdefault(home_of("counter", f"bench-first-{tried}", hosts), f"bench-first-{tried}")
        tried += 1

    def timed(counter: Any) -> float:
        started = time.perf_counter()
        counter.increment()
        return time.perf_counter() - started

    started_hosts = [timed(sky.counter(name)) for name in named.values()]
    counters = [sky.counter(f"bench-first-running-{i}") for i in range(fresh)]
    running = [timed(counter) for counter in counters]
    return {"host started": started_hosts, "host running": running, "warm": [timed(counter) for counter in counters]}


def _in_task(ops: int) -> dict:
    import skyward as sky

    strong = sky.counter("bench-task-strong", consistency="strong")
    cache = sky.dict("bench-task-eventual")
    cache["k"] = 1
    counter = sky.counter("bench-task-eventual")
    return {
        "strong": _latencies(strong.increment, ops),
        "hit": _latencies(lambda: cache["k"], ops),
        "rate": _rates(counter.increment, ops),
    }


def _raw_actors() -> tuple[Any, Any]:
    """A plain and an async Ray actor holding an int, in the pool's own Ray instance."""
    import ray

    class Counter:
        def __init__(self) -> None:
            self.value = 0

        def incr(self) -> int:
            self.value += 1
            return self.value

    class AsyncCounter(Counter):
        async def incr(self) -> int:  # type: ignore[override]
            self.value += 1
            return self.value

    return ray.remote(num_cpus=0)(Counter).remote(), ray.remote(num_cpus=0)(AsyncCounter).remote()


def _interleaved(subjects: dict[str, Any], ops: int, rounds: int = 10) -> dict[str, list[float]]:
    """Latencies of each subject, measured in ``rounds`` alternating slices so that every
    subject sees the same machine load."""
    samples: dict[str, list[float]] = {name: [] for name in subjects}
    for fn in subjects.values():
        _latencies(fn, 0)
    for _ in range(rounds):
        for name, fn in subjects.items():
            samples[name].extend(_latencies(fn, max(1, ops // rounds)))
    return samples


def _latencies(fn: Any, ops: int) -> list[float]:
    for _ in range(WARMUP):
        fn()
    samples = []
    for _ in range(ops):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def _rates(fn: Any, ops: int, batches: int = 7) -> list[float]:
    """Operations per second over ``batches`` runs of ``25 * ops`` back-to-back calls."""
    per_batch = 25 * ops
    rates = []
    for _ in range(batches):
        started = time.perf_counter()
        for _ in range(per_batch):
            fn()
        rates.append(per_batch / (time.perf_counter() - started))
    return rates


def _convergence(pool: Any, sky: Any, rounds: int) -> list[float]:
    """Seconds from node 0's write (time.monotonic, one clock on this machine) to node 1's
    cache serving it, after both nodes have used the dict once (the first use in a process
    looks the pool's collections actor up)."""

    def watch(rounds: int) -> list[float]:
        cache = sky.dict("bench-convergence")
        ready = sky.dict("bench-convergence-ready", consistency="strong")
        while cache.get("v") != 0:
            time.sleep(0.001)
        ready["ready"] = True
        seen = []
        for value in range(1, rounds + 1):
            while cache.get("v") < value:
                time.sleep(0.0002)
            seen.append(time.monotonic())
        return seen

    def write(rounds: int) -> list[float]:
        cache = sky.dict("bench-convergence")
        ready = sky.dict("bench-convergence-ready", consistency="strong")
        cache["v"] = 0
        while not ready.get("ready"):
            time.sleep(0.01)
        written = []
        for value in range(1, rounds + 1):
            time.sleep(0.05)
            written.append(time.monotonic())
            cache["v"] = value
        return written

    watcher = pool.run_async(sky.function(watch)(rounds), target=1)
    written = pool.run_async(sky.function(write)(rounds), target=0).result(timeout=120)
    return [seen - wrote for seen, wrote in zip(watcher.result(timeout=120), written)]


def _queue_wake(pool: Any, sky: Any, rounds: int) -> list[float]:
    """Seconds from the client's put to a node's waiting get returning (one clock)."""

    def consume(rounds: int) -> list[float]:
        q = sky.queue("bench-wake")
        ready = sky.counter("bench-wake-ready", consistency="strong")
        woke = []
        for _ in range(rounds):
            ready.increment()
            q.get(timeout=60)
            woke.append(time.monotonic())
        return woke

    consumer = pool.run_async(sky.function(consume)(rounds), target=2)
    q, ready = pool.queue("bench-wake"), pool.counter("bench-wake-ready", consistency="strong")
    put = []
    for round_ in range(1, rounds + 1):
        while ready.value < round_:
            time.sleep(0.002)
        time.sleep(0.02)
        put.append(time.monotonic())
        q.put(round_)
    return [woke - sent for woke, sent in zip(consumer.result(timeout=120), put)]


# ----------------------------------------------------------------- peers


def ray_sync_actor(ops: int) -> dict:
    import ray

    from benchmarks import engines

    class Counter:
        def __init__(self) -> None:
            self.value = 0

        def incr(self) -> int:
            self.value += 1
            return self.value

    with engines.ray_instance():
        actor = ray.remote(num_cpus=0)(Counter).remote()
        return {"samples": _latencies(lambda: ray.get(actor.incr.remote()), ops)}


def ray_async_actor(ops: int) -> dict:
    import ray

    from benchmarks import engines

    class AsyncCounter:
        def __init__(self) -> None:
            self.value = 0

        async def incr(self) -> int:
            self.value += 1
            return self.value

    with engines.ray_instance():
        actor = ray.remote(num_cpus=0)(AsyncCounter).remote()
        return {"samples": _latencies(lambda: ray.get(actor.incr.remote()), ops)}


def redis_incr(ops: int) -> dict:
    with _redis() as client:
        return {"samples": _latencies(lambda: client.incr("bench"), ops)}


def redis_get(ops: int) -> dict:
    with _redis() as client:
        client.set("bench", 1)
        return {"samples": _latencies(lambda: client.get("bench"), ops)}


def redis_incr_rate(ops: int) -> dict:
    with _redis() as client:
        return {"samples": _rates(lambda: client.incr("bench"), ops // 5)}


class _redis:
    """A private redis-server on 127.0.0.1 (free port, no persistence) and a client."""

    def __enter__(self) -> Any:
        import redis

        server = shutil.which("redis-server")
        if server is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self._dir = tempfile.mkdtemp(prefix="skybench-redis-")
        self._process = subprocess.Popen(
            [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", self._dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(host="127.0.0.1", port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return client
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def __exit__(self, *exc: Any) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)
        shutil.rmtree(self._dir, ignore_errors=True)


# ----------------------------------------------------------------- standalone


def verdicts(rows: list[Row]) -> list[tuple[str, str, str]]:
    """Each target of the collections issue, what this run measured, and pass/fail."""
    import statistics

    def best(metric: str, prefix: str = "skyward") -> Row | None:
        found = [r for r in rows if r.get("metric") == metric and r["subject"].startswith(prefix) and r["runs"]]
        if not found:
            return None
        return found[0]

    checks = []
    for text, metric, peer, limit in TARGETS:
        ours = best(metric)
        if ours is None:
            checks.append((text, "not measured", "?"))
            continue
        if peer is not None:
            theirs = best(metric, peer)
            if theirs is None:
                checks.append((text, "peer not measured", "?"))
                continue
            ratio = ours["median_s"] / theirs["median_s"]
            checks.append((text, f"{ratio:.2f}x ({ours['median_s'] * 1e3:.3f} ms vs {theirs['median_s'] * 1e3:.3f} ms)", "pass" if ratio <= limit else "FAIL"))
        elif metric == "eventual increments":
            checks.append((text, f"{ours['median_s']:,.0f}/s", "pass" if ours["median_s"] >= limit else "FAIL"))
        else:
            checks.append((text, f"{ours['median_s'] * 1e6:.1f} us", "pass" if ours["median_s"] <= limit else "FAIL"))
    convergence = [r for r in rows if r.get("metric") == "convergence" and r["runs"]]
    if convergence:
        worst = convergence[0]["max_s"]
        checks.append(("eventual converges within 100 ms", f"median {convergence[0]['median_s'] * 1e3:.1f} ms, max {worst * 1e3:.1f} ms", "pass" if worst <= 0.1 else "FAIL"))
    wake = [r for r in rows if r.get("metric") == "queue wake" and r["runs"]]
    if wake:
        checks.append(("waiting get wakes within 10 ms of a put", f"median {wake[0]['median_s'] * 1e3:.2f} ms, max {wake[0]['max_s'] * 1e3:.2f} ms", "pass" if statistics.median([wake[0]["median_s"]]) <= 0.01 else "FAIL"))
    return checks


def main() -> None:
    from benchmarks.common import format_value

    rows = run(quick="--quick" in sys.argv)
    print(markdown_table(
        ("subject", "median", "min", "max", "runs"),
        ((r["subject"], format_value(r["median_s"], r.get("unit", "s")), format_value(r["min_s"], r.get("unit", "s")),
          format_value(r["max_s"], r.get("unit", "s")), r["runs"]) for r in rows),
    ))
    print()
    print(markdown_table(("target", "measured", "result"), verdicts(rows)))


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from benchmarks import bench_collections  # subjects run by name: not as __main__

    bench_collections.main()
