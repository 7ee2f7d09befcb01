"""C2 — one counter and one queue under many writers: where a collection's host saturates.

A collection lives on one host actor (names hash to the pool's hosts; on a remote pool
they all run on node 0), so what 1,000 nodes incrementing one counter or appending to
one queue get is what that one process serves, shared among them. A local pool of 4
nodes (thread executors of 16 slots) runs 1, 4, 16 and 64 writers at once, spread over
the nodes as separate tasks; each calls strong `counter.increment()` (then
`queue.put(i)`, then an eventual counter's `increment()`) back to back for a few
seconds from a common start. Measured: the total rate, and the CPU the host actor
processes (`ray::CollectionHost`, psutil) spent per operation, whose inverse is what
one host core serves: the saturation point. On this 2-core machine the writers and the
host share the cores, so the measured total stops growing early; the host's CPU per
operation is what carries over to 1,000 machines, each of which gets a thousandth of
that when all write at once. Not measured: 1,000 Ray clients' connections to one actor.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "C2"
TITLE = "C2 — one counter and one queue under 1 to 64 writers"
WRITERS = (1, 4, 16, 64)
NODES = 4
SLOTS = 16
KINDS = ("strong counter.increment", "queue.put", "eventual counter.increment")


def run(quick: bool = False) -> list[Row]:
    try:
        found = isolated(measure, 1.0 if quick else 3.0, WRITERS[:3] if quick else WRITERS, timeout=900)
    except SubjectFailed as exc:
        return [failed_row(GROUP, "skyward writers", exc)]
    rows = []
    for kind in KINDS:
        measured = {int(writers): counts for writers, counts in found[kind].items()}  # JSON made the keys strings
        for writers, (ops, seconds, host_cpu) in sorted(measured.items()):
            per_op = host_cpu / ops if ops else float("nan")
            note = (f"{ops:,} ops in {seconds:.1f} s; the host spent {per_op * 1e6:,.1f} µs of CPU per op: "
                    f"one host core serves {1 / per_op:,.0f}/s" if ops and host_cpu else f"{ops:,} ops")
            rows.append(row(GROUP, f"skyward {kind}, {writers} writer{'s' if writers > 1 else ''}", [ops / seconds],
                            note, unit="ops/s", metric=f"{kind} {writers}",
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
    """CPU seconds the pool's collection host actors have used so far."""
    import psutil

    total = 0.0
    for process in psutil.process_iter(["cmdline"]):
        try:
            if any("CollectionHost" in part for part in process.info["cmdline"] or ()):
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
