"""C2 — one counter and one queue under many writers: where a collection's host saturates.

A collection lives on one shard of the pool's hosts actor (names hash to the shards; on
a remote pool the actor runs on node 0), so what 1,000 nodes incrementing one counter or appending to
one queue get is what that one process serves, shared among them. A local pool of 4
nodes (thread executors of 250 slots) runs 1, 4, 16, 64, 256 and 1,000 writers at once,
spread over the nodes as separate tasks; each calls strong `counter.increment()` (then
`queue.put(i)`, then an eventual counter's `increment()`) back to back for a few
seconds from a common start. Measured: the total rate, and the CPU the hosts actor's
process (`ray::CollectionHosts`, psutil) spent per operation, whose inverse is what one
host core serves: the saturation point. A node's concurrent strong increments of
one counter share the host's calls (`collections.combiner`), and so do its puts to one
queue (up to 64 a call), so the cost per write falls as writers per node grow. The peer: a
plain Ray actor holding an int, its `incr` called the same way by as many Ray tasks (in
a Ray instance of its own with 4 CPUs; up to 64, each a worker process), and its
process's CPU per call. On this 2-core machine the writers and the host share the
cores, so the measured total stops growing early; the host's CPU per operation is what
carries over to 1,000 machines, each of which gets a thousandth of that when all write
at once. Not measured: 1,000 Ray clients' connections to one actor (here 1,000 writers
are threads of 4 processes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "C2"
TITLE = "C2 — one counter and one queue under 1 to 1,000 writers"
WRITERS = (1, 4, 16, 64, 256, 1_000)
PEER_WRITERS = 64
"""The most writers of the peer: each of its writers is a Ray worker process (about
100 MB here), so 1,000 of them do not fit this machine."""
NODES = 4
SLOTS = 250
KINDS = ("strong counter.increment", "queue.put", "eventual counter.increment")
PEER = "Ray actor holding an int, incr"
"""The peer of the strong counter: a plain Ray actor called by as many Ray tasks."""


def run(quick: bool = False) -> list[Row]:
    seconds, writers = (1.0, WRITERS[:3]) if quick else (3.0, WRITERS)
    try:
        found = isolated(measure, seconds, writers, timeout=900)
        found[PEER] = isolated(ray_actor, seconds, tuple(w for w in writers if w <= PEER_WRITERS), timeout=600)
    except SubjectFailed as exc:
        return [failed_row(GROUP, "skyward writers", exc)]
    rows = []
    for kind in (*KINDS, PEER):
        measured = {int(writers): counts for writers, counts in found[kind].items()}  # JSON made the keys strings
        for writers, (ops, seconds, host_cpu) in sorted(measured.items()):
            per_op = host_cpu / ops if ops else float("nan")
            note = (f"{ops:,} ops in {seconds:.1f} s; the host spent {per_op * 1e6:,.1f} µs of CPU per op: "
                    f"one host core serves {1 / per_op:,.0f}/s" if ops and host_cpu else f"{ops:,} ops")
            subject = kind if kind == PEER else f"skyward {kind}"
            rows.append(row(GROUP, f"{subject}, {writers} writer{'s' if writers > 1 else ''}", [ops / seconds],
                            note, unit="ops/s", metric=f"{KINDS[0] if kind == PEER else kind} {writers}",
                            facts={"writers": writers, "ops": ops, "host_cpu_per_op_s": per_op}))
    return rows


def _write(kind: str, name: str, start: float, seconds: float) -> int:
    """From ``start`` (a wall-clock time), ``kind`` operations back to back for
    ``seconds``: how many."""
    import skyward as sky

    if kind == "queue.put":
        call: Callable[[int], Any] = sky.queue(name).put
    else:
        counter = sky.counter(name, consistency="strong" if kind.startswith("strong") else "eventual")
        call = lambda _: counter.increment(1)
    time.sleep(max(0.0, start - time.time()))
    done, end = 0, start + seconds
    while time.time() < end:
        call(done)
        done += 1
    return done


def _host_cpu() -> float:
    """CPU seconds the collections' hosts actor of this process's pool (its Ray's worker,
    this process's descendant) has used so far."""
    import psutil

    total = 0.0
    for process in psutil.Process().children(recursive=True):
        try:
            if any("CollectionHosts" in part for part in process.cmdline()):
                times = process.cpu_times()
                total += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return total


def measure(seconds: float, writers: tuple[int, ...]) -> dict[str, dict[int, tuple[int, float, float]]]:
    """For each kind and number of writers: (operations, seconds, host CPU seconds)."""
    import skyward as sky

    write = sky.function(_write)
    found: dict[str, dict[int, tuple[int, float, float]]] = {kind: {} for kind in KINDS}
    options = sky.Options(console=False, logging=False, worker=sky.Worker(concurrency=SLOTS, executor="thread"))
    with sky.Compute(nodes=NODES, options=options) as pool:
        for kind in KINDS:
            for count in writers:
                name = f"c2-{kind.split()[0].replace('.', '-')}-{count}"
                write(kind, name, time.time() + 0.5, 0.3) @ pool  # each node's first call: connections, caches
                start = time.time() + 1.0 + count * 0.01
                before = _host_cpu()
                futures = [write(kind, name, start, seconds) > pool for _ in range(count)]
                ops = sum(future.result() for future in futures)
                found[kind][count] = (ops, seconds, _host_cpu() - before)
    return found


def ray_actor(seconds: float, writers: tuple[int, ...]) -> dict[int, tuple[int, float, float]]:
    """The peer: for each number of writers, Ray tasks calling one plain actor's ``incr``
    back to back for ``seconds`` (operations, seconds, the actor process's CPU seconds)."""
    import os

    import psutil
    import ray

    from benchmarks import engines

    @ray.remote(num_cpus=0)
    class Holder:
        def __init__(self) -> None:
            self.value = 0

        def pid(self) -> int:
            return os.getpid()

        def incr(self) -> int:
            self.value += 1
            return self.value

    @ray.remote(num_cpus=0)
    def write(holder: Any, start: float, seconds: float) -> int:
        time.sleep(max(0.0, start - time.time()))
        done, end = 0, start + seconds
        while time.time() < end:
            ray.get(holder.incr.remote())
            done += 1
        return done

    found: dict[int, tuple[int, float, float]] = {}
    with engines.ray_instance():
        holder = Holder.remote()  # type: ignore[attr-defined]
        process = psutil.Process(ray.get(holder.pid.remote()))
        for count in writers:
            ray.get([write.remote(holder, time.time() + 0.5, 0.3) for _ in range(count)])
            start = time.time() + 1.0 + count * 0.01
            times = process.cpu_times()
            ops = sum(ray.get([write.remote(holder, start, seconds) for _ in range(count)]))
            after = process.cpu_times()
            found[count] = (ops, seconds, after.user + after.system - times.user - times.system)
    return found
