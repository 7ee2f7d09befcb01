"""The targets of issue 6, how each is checked against one run's rows, and why a missed
target is missed (what profiling found, and what would close it).

A target whose rows are missing or failed is reported as not measured (``passed`` None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.common import Check, Row

GIB_IN_MIB = 1024.0
Verdict = tuple[str, bool | None]


@dataclass(frozen=True, slots=True)
class Target:
    """One target: an id, what it asks, and how to read it from the rows. ``machine_bound``:
    a time, rate, CPU share or memory figure, which holds or not by the machine it runs on
    and what else runs there; the benchmarks judge it, the tests do not."""

    id: str
    text: str
    check: Callable[[Sequence[Row]], Verdict]
    machine_bound: bool = True


def find(rows: Sequence[Row], group: str, subject: str) -> Row | None:
    """The measured row of ``group`` whose subject is ``subject``, or else the first
    that starts with it."""
    mine = [r for r in rows if r["group"] == group]
    for candidate in [r for r in mine if r["subject"] == subject] or [r for r in mine if r["subject"].startswith(subject)]:
        return candidate if candidate["runs"] and not math.isnan(candidate["median_s"]) else None
    return None


def fastest_peer(rows: Sequence[Row], group: str, metric: str = "") -> Row | None:
    """The measured peer row (a subject not skyward's) of ``group`` and ``metric`` with
    the lowest median: each peer at its best setting, whichever peer that is."""
    measured = [r for r in rows if r["group"] == group and r.get("metric", "") == metric
                and not r["subject"].startswith("skyward") and r["runs"] and not math.isnan(r["median_s"])]
    return min(measured, key=lambda r: r["median_s"], default=None)


def fact(rows: Sequence[Row], group: str, subject: str, name: str) -> Any:
    """A fact a row recorded, or None."""
    found = find(rows, group, subject)
    return None if found is None else found.get("facts", {}).get(name)


def compared(
    group: str, ours: str, other: str, judge: Callable[[float, float], Verdict],
) -> Callable[[Sequence[Row]], Verdict]:
    """``judge(skyward's median, the other row's median)``; not measured when either row is."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine, theirs = find(rows, group, ours), find(rows, group, other)
        if mine is None or theirs is None:
            return "not measured", None
        return judge(mine["median_s"], theirs["median_s"])

    return check


def at_most_times(group: str, ours: str, peer: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median ÷ the peer's median must be at most ``limit``."""
    def judge(mine: float, theirs: float) -> Verdict:
        return f"{mine / theirs:.2f}x", mine / theirs <= limit

    return compared(group, ours, peer, judge)


def slowest_at_most(group: str, prefix: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """The slowest median of the measured rows of ``group`` whose subject starts with
    ``prefix`` must be at most ``limit`` seconds; that row is named beside it."""
    def check(rows: Sequence[Row]) -> Verdict:
        measured = [r for r in rows if r["group"] == group and r["subject"].startswith(prefix)
                    and r["runs"] and not math.isnan(r["median_s"])]
        if not measured:
            return "not measured", None
        slowest = max(measured, key=lambda r: r["median_s"])
        return f"{slowest['median_s']:.3f} s ({slowest['subject']})", slowest["median_s"] <= limit

    return check


def at_most_times_fastest(group: str, ours: str, limit: float, metric: str = "") -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median ÷ the fastest peer's median of ``metric`` (``fastest_peer``) must
    be at most ``limit``; the peer row is named beside the ratio."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine, best = find(rows, group, ours), fastest_peer(rows, group, metric)
        if mine is None or best is None:
            return "not measured", None
        ratio = mine["median_s"] / best["median_s"]
        return f"{ratio:.2f}x ({best['subject']})", ratio <= limit

    return check


def at_least_faster(group: str, ours: str, peer: str, factor: float) -> Callable[[Sequence[Row]], Verdict]:
    """The peer's median ÷ skyward's median must be at least ``factor``."""
    def judge(mine: float, theirs: float) -> Verdict:
        return f"{theirs / mine:.1f}x faster", theirs / mine >= factor

    return compared(group, ours, peer, judge)


def at_most(group: str, ours: str, limit: float, unit: str = "s") -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median must be at most ``limit`` (max shown beside it)."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine = find(rows, group, ours)
        if mine is None:
            return "not measured", None
        scale = 1e3 if unit == "ms" else 1.0
        shown = f"{mine['median_s'] * scale:,.3g} {unit} (max {mine['max_s'] * scale:,.3g})"
        return shown, mine["median_s"] <= limit

    return check


def fact_at_most(group: str, ours: str, name: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """A fact in seconds the skyward row recorded must be at most ``limit``."""
    def check(rows: Sequence[Row]) -> Verdict:
        value = fact(rows, group, ours, name)
        return ("not measured", None) if value is None else (f"{value * 1e3:,.0f} ms", value <= limit)

    return check


def beyond_at_most(group: str, ours: str, base: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median minus the median of its ``base`` row must be at most ``limit`` s."""
    def judge(mine: float, warm: float) -> Verdict:
        return f"{_ms(mine - warm)} beyond ({_ms(mine)} against {_ms(warm)})", mine - warm <= limit

    return compared(group, ours, base, judge)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:,.1f} ms"


def rate_at_least(group: str, ours: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median rate (ops/s) must be at least ``limit``."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine = find(rows, group, ours)
        if mine is None:
            return "not measured", None
        return f"{mine['median_s']:,.0f} ops/s", mine["median_s"] >= limit

    return check


def is_true(group: str, ours: str, name: str, yes: str, no: str) -> Callable[[Sequence[Row]], Verdict]:
    """A boolean fact the skyward row recorded must be true."""
    def check(rows: Sequence[Row]) -> Verdict:
        value = fact(rows, group, ours, name)
        return ("not measured", None) if value is None else ((yes, True) if value else (no, False))

    return check


def map_time(rows: Sequence[Row]) -> Verdict:
    """B2: 10,000 items within 0.1 s (a quick run's fewer items get a proportional limit)."""
    mine = find(rows, "B2", "skyward")
    if mine is None:
        return "not measured", None
    items = mine.get("facts", {}).get("items", 10_000)
    limit = 0.1 * items / 10_000
    shown = f"{mine['median_s']:.3g} s for {items:,} items (max {mine['max_s']:.3g})"
    return shown, mine["median_s"] <= limit


def shutdown(rows: Sequence[Row]) -> Verdict:
    """B4: skyward's shutdown within 1.5 s, with none of the pool's processes left alive."""
    mine = find(rows, "B4", "skyward Compute(nodes=4) shutdown")
    if mine is None:
        return "not measured", None
    left = mine.get("facts", {}).get("left", 0)
    shown = f"{mine['median_s']:.3g} s (max {mine['max_s']:.3g})" + (f", {left} processes left alive" if left else "")
    return shown, mine["median_s"] <= 1.5 and not left


def serialized_once(rows: Sequence[Row]) -> Verdict:
    """B3: the broadcast argument was serialized once by the client."""
    return serialized_once_in(rows, "B3", "skyward")


def serialized_once_in(rows: Sequence[Row], group: str, subject: str) -> Verdict:
    """The broadcast argument of ``subject`` was serialized once by the client."""
    count = fact(rows, group, subject, "serializations")
    return ("not measured", None) if count is None else (f"{count}x per broadcast", count == 1)


def efficiency(rows: Sequence[Row]) -> Verdict:
    """B6: ideal ÷ measured, for the 200 separate calls and for ``pool.map`` alike."""
    values = [fact(rows, "B6", subject, "efficiency") for subject in ("skyward 200 calls", "skyward pool.map")]
    if None in values:
        return "not measured", None
    shown = f"{values[0]:.0%} calls, {values[1]:.0%} map"
    return shown, all(value >= 0.90 for value in values)


def idle_cpu(rows: Sequence[Row]) -> Verdict:
    """B5: the idle pool's CPU use, as a share of one core."""
    mine = find(rows, "B5", "skyward Compute(nodes=4) idle CPU")
    if mine is None:
        return "not measured", None
    return f"{mine['median_s']:.1f}% of a core (max {mine['max_s']:.1f}%)", mine["median_s"] <= 1.0


def flat_curve(rows: Sequence[Row]) -> Verdict:
    """X: the largest point of the futures and map series against a moderate one."""
    pairs = (("futures = 50,000", "futures = 1,000"), ("map items = 1,000,000", "map items = 10,000"))
    ratios = []
    for large, small in pairs:
        big, little = find(rows, "X", f"skyward per call, {large}"), find(rows, "X", f"skyward per call, {small}")
        if big is None or little is None:
            return "not measured", None
        ratios.append(big["median_s"] / little["median_s"])
    return ", ".join(f"{r:.2f}x" for r in ratios), all(r <= 1.5 for r in ratios)


def metrics_delivered(nodes: int) -> Callable[[Sequence[Row]], Verdict]:
    """N at ``nodes`` nodes: the metric events delivered per second against those the
    nodes sent (99% or more: the windows of sending and counting are not the same instant)."""
    subject = f"{nodes:,} nodes: metrics at 1 Hz, client CPU"

    def check(rows: Sequence[Row]) -> Verdict:
        delivered, sent = fact(rows, "N", subject, "delivered_per_s"), fact(rows, "N", subject, "sent_per_s")
        if delivered is None or not sent:
            return "not measured", None
        return f"{delivered:,}/s delivered of {sent:,}/s sent", delivered >= 0.99 * sent
    return check


def churn_survived(nodes: int) -> Callable[[Sequence[Row]], Verdict]:
    """N at ``nodes`` nodes, some lost during a map: none of its items lost, none run more
    than twice, and every lost node launched again (at least one lost, or nothing was tested)."""
    subject = f"{nodes:,} nodes losing"

    def check(rows: Sequence[Row]) -> Verdict:
        facts = [fact(rows, "N", subject, name) for name in ("losses", "launches", "retried_once", "retried_more",
                                                              "items_missing")]
        if None in facts:
            return "not measured", None
        losses, launches, once, more, missing = facts
        shown = f"{losses} lost, {launches} launched; {once} items run again once, {more} more often, {missing} missing"
        return shown, losses > 0 and launches >= losses and more == 0 and missing == 0
    return check


def elastic_grew(nodes: int) -> Callable[[Sequence[Row]], Verdict]:
    """N: the elastic pool reached ``nodes`` nodes with at most 5% more launches than the
    ``nodes - 10`` it needed, and came back to its 10 once idle."""
    subject = f"elastic 10 → {nodes:,} nodes"

    def check(rows: Sequence[Row]) -> Verdict:
        found = find(rows, "N", subject)
        peak, launches, floor = (fact(rows, "N", subject, name) for name in ("peak", "launches", "floor"))
        if peak is None or launches is None or floor is None:
            return "not measured", None
        if found is None:  # its time to the top is NaN: it never got there
            return f"peak {peak} nodes, never {nodes:,}", False
        shown = f"{nodes:,} nodes in {found['median_s']:.0f} s, {launches} launches, back to {floor}"
        return shown, peak >= nodes and launches <= 1.05 * (nodes - 10) and floor == 10
    return check


def simulated_targets(nodes: int) -> tuple[Target, ...]:
    """Issue 37's targets for a simulated pool of ``nodes`` nodes (group N): 1,000 in a
    full run, 100 in a quick one (``--quick``), which CI runs."""
    at, simulated = f"{nodes:,} nodes", f"{nodes:,} simulated nodes"
    return (
        Target("N-open", f"opening a pool of {simulated} costs the control plane ≤ 5 s (issue 37)",
               at_most("N", f"{at}: open (control plane)", 5.0)),
        Target("N-close", "closing it ≤ 5 s, its relay process gone (issue 37)", at_most("N", f"{at}: close", 5.0)),
        Target("N-at", f"`f() @ pool` on {simulated}, a small argument, ≤ 0.5 s (issue 37)",
               at_most("N", f"{at}: f() @ pool", 0.5)),
        Target("N-once", f"`f(x) @ pool` on {simulated} with a 100 MB argument: serialized once, sent to the "
               "relay once (issue 37)", lambda rows: serialized_once_in(rows, "N", f"{at}: f(100 MB) @ pool"),
               machine_bound=False),
        Target("N-map", f"`pool.map` of 1,000,000 trivial items on {simulated} ≥ 500,000 items/s "
               "through the client, in order (issue 37)", rate_at_least("N", f"{at}: pool.map", 500_000)),
        Target("N-events", f"metrics of {simulated} at 1 Hz: the client under 20% of one core (issue 37)",
               at_most("N", f"{at}: metrics at 1 Hz, client CPU", 20.0, "%")),
        Target("N-events-memory", "the same: the client under 500 MB (issue 37)",
               at_most("N", f"{at}: metrics at 1 Hz, client peak memory", 500.0, "MiB")),
        Target("N-events-lost", "the same: every metric event sent is delivered (issue 37)", metrics_delivered(nodes),
               machine_bound=False),
        Target("N-console", f"the same: the rich console under 10% of one core, summarising {at} (issue 37)",
               at_most("N", f"{at}: metrics at 1 Hz, the rich console's CPU", 10.0, "%")),
        Target("N-losses", f"{simulated}, some lost during a map (1% a minute in a full run): no item lost, each "
               "retried once, the pool refilled (issue 37)", churn_survived(nodes), machine_bound=False),
        Target("N-elastic", f"an elastic pool growing 10 → {simulated} under waiting work and shrinking back "
               f"when idle, without thrashing (launches ≤ 1.05x the {nodes - 10:,} needed; issue 37)",
               elastic_grew(nodes), machine_bound=False),
    )


TARGETS = (
    Target("B1-actor", "`>>` round trip ≤ 1.3x a raw Ray actor call",
           at_most_times("B1", "skyward", "Ray actor call", 1.3)),
    Target("B1-task", "`>>` round trip ≤ 0.5x a Ray task", at_most_times("B1", "skyward", "Ray task", 0.5)),
    Target("B1-dask", "`>>` round trip ≤ 0.2x a Dask pinned submit",
           at_most_times("B1", "skyward", "Dask pinned submit", 0.2)),
    Target("B1-ppe", "`>>` round trip of a script's function ≤ 0.6x ProcessPoolExecutor's submit-and-result (issue 40)",
           at_most_times("B1", "skyward f() >> pool, f in the script", "ProcessPoolExecutor.submit", 0.6)),
    Target("B2-time", "`pool.map` of 10,000 items ≤ 0.1 s, chunking chosen automatically (no knob)",
           map_time),
    Target("B2-ppe", "`pool.map` ≥ 15x faster than ProcessPoolExecutor.map chunksize=1",
           at_least_faster("B2", "skyward", "ProcessPoolExecutor.map chunksize=1", 15)),
    Target("B2-best", "`pool.map` ≤ 1.0x the fastest peer at its best setting: ProcessPoolExecutor.map at its best "
           "chunk size (issue 40), Ray and Dask tasks of 1,000 items, joblib (issue 41)",
           at_most_times_fastest("B2", "skyward", 1.0)),
    Target("B2-ray", "`pool.map` ≥ 50x faster than Ray tasks", at_least_faster("B2", "skyward", "Ray tasks", 50)),
    Target("B2-order", "`pool.map` results in input order",
           is_true("B2", "skyward", "in_order", "in order", "out of order"), machine_bound=False),
    Target("B2-stream", "streaming results still possible (`pool.map(..., stream=True)`)",
           is_true("B2", "skyward", "streaming", "streamed in order", "streaming map failed"),
           machine_bound=False),
    Target("B3-ratio", "100 MB broadcast ≤ 1.2x Ray put + 4 tasks",
           at_most_times("B3", "skyward", "Ray put + 4 tasks", 1.2)),
    Target("B3-once", "broadcast argument serialized once, not once per node", serialized_once,
           machine_bound=False),
    Target("B4-start", "start to 4 ready nodes ≤ 1.0x ray.init + 4 actors",
           at_most_times("B4", "skyward Compute(nodes=4) start", "ray.init + 4 actors start", 1.0)),
    Target("B4-dask", "cold start to 4 ready nodes ≤ 1.0x Dask LocalCluster(4) (issue 17)",
           at_most_times("B4", "skyward Compute(nodes=4) start", "Dask LocalCluster(4) start", 1.0)),
    Target("B4-warm", "warm open (the same script run again) ≤ 0.5 s to 4 ready nodes (issue 17)",
           at_most("B4", "skyward warm open", 0.5)),
    Target("B4-kept", "the same 4-node script run again on its kept pool reaches every node's first answer ≤ 0.3 s, "
           "`import skyward` not counted (issue 24)",
           at_most("B4", "skyward kept pool, the script run again (keep_alive)", 0.3)),
    Target("B4-kept-import", "the same, with the script's `import skyward`: ≤ 0.4 s (issue 41)",
           at_most("B4", "skyward kept pool, the script run again (keep_alive), with `import skyward`", 0.4)),
    Target("B4-import", "`import skyward` and what the first open imports (Ray among it) ≤ 1.3x importing Ray "
           "alone (issue 17; issue 41 counts what the open imports)",
           at_most_times("B4", "skyward Compute(nodes=4) import", "ray.init + 4 actors import", 1.3)),
    Target("B4-import-own", "`import skyward` alone ≤ 100 ms in a fresh interpreter (issue 40)",
           fact_at_most("B4", "skyward Compute(nodes=4) import", "own_import_s", 0.1)),
    Target("B4-shutdown", "shutdown ≤ 1.5 s with no process of the pool left alive", shutdown),
    Target("B5", "idle 4-node pool ≤ 1.0 GB PSS", at_most("B5", "skyward", GIB_IN_MIB, "MiB")),
    Target("B5-cpu", "idle 4-node pool ≤ 1% of a core (issue 17)", idle_cpu),
    Target("B6", "200 × 20 ms numpy tasks ≥ 90% of ideal, separate calls and pool.map alike (issue 17)", efficiency),
    Target("C1-strong", "strong collection op ≤ 1.2x a raw Ray actor call (same Ray instance, interleaved)",
           at_most_times("C1", "skyward strong counter.increment (client)", "Ray actor call, same instance (sync", 1.2)),
    Target("C1-read", "eventual read hit ≤ 20 µs",
           at_most("C1", "skyward eventual dict[k] cache hit (in a task)", 20e-6, "ms")),
    Target("C1-rate", "eventual counter increments ≥ 50,000/s from one node",
           rate_at_least("C1", "skyward eventual counter.increment rate (in a task)", 50_000)),
    Target("C1-first", "the first operation on a collection inside a task ≤ 50 ms beyond a warm one (issue 40)",
           beyond_at_most("C1", "skyward first counter.increment in a task right after the open, one per shard",
                          "skyward counter.increment in a task, warm", 0.05)),
    Target("C1-first-running", "the same for a new collection on a shard used before (issue 40)",
           beyond_at_most("C1", "skyward first counter.increment of a new counter in a task, its shard used before",
                          "skyward counter.increment in a task, warm", 0.05)),
    Target("S1-warm", "warm start of an SSH pool of 3 hosts ≤ 15 s (issue 4)",
           at_most("S1", "3 hosts warm start", 15.0)),
    Target("R-trip", "remote `>>` round trip ≤ 1.2x a Ray actor call on the same hosts (issue 17)",
           at_most_times("R", "skyward round trip", "Ray (driver on host 0) round trip", 1.2)),
    Target("R-map", "remote map of 10,000 items ≤ 1.2x the fastest peer at its best setting: Ray or Dask, one task "
           "per item or tasks of 1,000 items (issue 41)",
           at_most_times_fastest("R", "skyward map", 1.2, "map 10,000")),
    Target("R-map-ray", "remote map of 10,000 items ≥ 20x faster than Ray tasks, one per item (issue 17)",
           at_least_faster("R", "skyward map", "Ray (driver on host 0) map 10,000", 20)),
    Target("R-broadcast", "remote 100 MB broadcast ≤ 1.2x Ray put + tasks (issue 17)",
           at_most_times("R", "skyward broadcast", "Ray (driver on host 0) broadcast", 1.2)),
    Target("R-warm", "warm open of an SSH pool of 3 hosts ≤ 3 s (issue 17)", at_most("S1", "3 hosts warm start", 3.0)),
    Target("R-cold", "cold open of an SSH pool of 3 hosts ≤ 15 s (issue 17)", at_most("S1", "3 hosts cold start", 15.0)),
    Target("R-kept", "the same script run again on its kept pool of 3 SSH hosts reaches every node's first answer ≤ 1 s (issue 24)",
           at_most("S1", "3 hosts kept pool, the script run again", 1.0)),
    Target("R-kept-import", "the same, with the script's `import skyward`: ≤ 1.1 s (issue 41)",
           at_most("S1", "3 hosts kept pool, the script run again, with `import skyward`", 1.1)),
    Target("K-kept", "the same script run again on its kept pool on an emulated cloud reaches every node's first answer ≤ 1 s (issue 24)",
           at_most("K", "2 Droplets kept pool, the script run again", 1.0)),
    Target("K-kept-import", "the same, with the script's `import skyward`: ≤ 1.1 s (issue 41)",
           at_most("K", "2 Droplets kept pool, the script run again, with `import skyward`", 1.1)),
    Target("X-flat", "per-call cost flat as the work grows: 50,000 futures ≤ 1.5x 1,000, 1,000,000 map items per item ≤ 1.5x 10,000 (issue 17)",
           flat_curve),
    Target("H1", "per-task cost of 50,000 `>` futures ≤ 1.5x that of 1,000 (issue 11)",
           at_most_times("H1", "skyward 50,000", "skyward 1,000", 1.5)),
    Target("H2", "streamed map of 1 GiB of results: client peak memory ≤ 256 MiB (issue 11)",
           at_most("H2", "skyward", 256.0, "MiB")),
    Target("CLI-ls", "`sky ls` (one kept pool) answers ≤ 0.3 s in a fresh process (issue 42)",
           at_most("CLI", "sky ls, one kept pool", 0.3)),
    Target("CLI-help", "`sky --help` answers ≤ 0.3 s in a fresh process (issue 42)", at_most("CLI", "sky --help", 0.3)),
    Target("CLI-all", "every `sky` command timed answers ≤ 0.3 s in a fresh process (issue 42)",
           slowest_at_most("CLI", "sky ", 0.3)),
    *simulated_targets(1_000),
    Target("D-lost", "the pool daemon under load and a SIGKILL loses nothing: every script gets its pool, every "
           "run its exit, every pool is adopted again, nothing is left after `sky down --all` (issue 36)",
           at_most("D", "lost:", 0.0, "")),
)


def check_all(rows: Sequence[Row]) -> list[Check]:
    """Every target, checked against ``rows``."""
    checks: list[Check] = []
    for target in TARGETS:
        measured, passed = target.check(rows)
        checks.append({"id": target.id, "target": target.text, "measured": measured, "passed": passed})
    return checks


EXPLANATIONS: dict[str, str] = {
    "B4-dask": (
        "A skyward pool's cold start is a private Ray instance, while Dask's LocalCluster "
        "starts 4 plain Python processes with no GCS or raylet. Since 2026-12-01 that Ray "
        "starts lean (`skyward/providers/ray_start.py`, docs/architecture.md): no API server, "
        "autoscaler or log monitor, and no one-second wait for the raylet's registration. "
        "`ray.init` fell from 2.0-3.2 s to 0.87 s here, and the run of 2026-12-01 "
        "17:41 measured skyward 1.50 s, `ray.init` plus 4 actors 3.47 s and Dask 0.67 s "
        "(2.25x, from 5.15x in the run of 14:34 that day and 3.7x in the run of 2026-11-26). "
        "What is left is Ray's: its raylet registers with the GCS only once its dashboard "
        "agent, a Python process, has booted and reported its port (0.4-0.7 s after the "
        "raylet starts, by the timestamps of raylet.out), now and then after a second wait "
        "of its own before its object manager starts (1.0 s, at random); then 4 Ray workers "
        "boot and import skyward (0.5-0.6 s in all). What closes that for the case that "
        "matters (a script run again and again while it is written) is a kept pool "
        "(`Options(keep_alive=...)` or `sky.Local(keep_warm=...)`, B4-kept and B4-warm: "
        "85-90 ms). What would close it cold: a local transport without Ray (the engine "
        "already runs without Ray on the fake transport, tests/fake_cluster.py, and dispatch "
        "already goes over the agents' Unix-socket lanes) for pools that need no Ray feature."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): skyward 3.00 s, `ray.init` plus 4 actors 3.26 s (0.92x), Dask 1.11 s (2.69x)."
        " Two full runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at "
        "their starts) slower than the day before's (ProcessPoolExecutor's submit 226-258 µs "
        "against 160 µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, "
        "skyward 2.28 s, `ray.init` plus 4 actors 3.21 s (0.71x), Dask 1.05 s (2.16x); at "
        "07:04, this table's, 2.49 s, 4.36 s (0.57x) and 1.16 s (2.15x)."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): skyward 2.09 s, `ray.init` plus 4 actors 4.05 s (0.52x), Dask 944 ms (2.22x)."
        " Since 2026-12-03 17:00 a stand-in runs where Ray's dashboard agent would (`providers/ray_agent_stand_in.py`, docs/architecture.md): the raylet registered 0.57-0.62 s after its start with Ray's agent, which reported its ports about 0.6 s after it was started, and now registers once the runtime-env agent has booted (0.47-0.53 s; 4 opens each, alternating, timestamps of raylet.out), with one Python process fewer booting on the same cores. The B4 and B5 groups alone, one run of each tree: the start 1.80 s against 1.99 s (Dask 821 and 878 ms: 2.19x and 2.27x), the pool's PSS 439 MiB against 488 MiB. The full run of 17:03 (this table's; load average 0.34 at its start): skyward 2.08 s (max 3.03), `ray.init` plus 4 actors 3.09 s (0.67x), Dask 914 ms (2.27x). Next in the raylet's way is the runtime-env agent, which boots Ray and aiohttp in Python (0.45-0.5 s of CPU) and which a pool needs only when an agent starts with a `runtime_env` (an Image's interpreter or a plugin's launcher); not tried."
        " The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): 1.42 s against Dask's 618 ms (2.30x) and `ray.init` plus 4 actors 3.47 s (0.41x)."
        " Since 2026-12-04 the stand-in also takes the runtime-env agent's place (docs/architecture.md): it reports the agent's port at once and starts Ray's agent only when something connects, which a pool does only for an agent with a `runtime_env`. The B4, B5 and S1 groups alone, the two trees alternating twice: skyward 1.14 and 1.13 s against 1.42 and 1.40 s (Dask 620 and 616 ms: 1.83x and 1.83x, from 2.20x and 2.26x), the pool's PSS 398 MiB against 439 MiB."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start), the first with the runtime-env agent's stand-in: 1.11 s against Dask's 613 ms (1.80x, from 2.30x in the run of 2026-12-03 20:37) and `ray.init` plus 4 actors 2.45 s (0.45x)."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): 1.39 s against Dask's 820 ms (1.69x) and `ray.init` plus 4 actors 2.93 s (0.47x)."
        " Since 2026-12-04 22:00 a pool starts its collections' hosts (one Ray actor holding every shard) beside its agents, so that a task's first operation on a collection does not wait for a Ray worker's boot (C1-first, 576 ms before): one more Ray worker boots on the same 2 cores during the open. The B4 and B5 groups alone, one run of each tree: 1.67 s against 1.44 s (Dask 850 and 817 ms: 1.96x and 1.76x). The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): 1.64 s against Dask's 799 ms (2.06x) and `ray.init` plus 4 actors 2.78 s (0.59x). Where each booting process has a core of its own the hosts' boot overlaps the agents' at no cost to the open; here it costs the open about 0.2 s."
    ),
    "B5-cpu": (
        "Idle, the skyward pool's process tree used 5.2% of a core (4.0-6.4%) in the run of "
        "2026-11-25 14:43, Ray alone with 4 idle actors 5.0% (4.8-5.2%) in the same run, "
        "Dask's LocalCluster 17.3%. So skyward adds nothing measurable to Ray's own idle "
        "cost: nodes sample metrics only while someone listens, an idle agent holds its event "
        "poll 30 s, and the pool's Ray starts neither its log monitor nor its autoscaler "
        "monitor (the log monitor streams worker logs to the GCS for `log_to_driver`, which "
        "skyward turns off; idle it polls every 0.1 s, ~0.7% of a core; the pool's PSS fell "
        "from 599 to 556 MiB). What is left is Ray's, per process with psutil: raylet "
        "0.5-0.7%, GCS 0.3%, the dashboard and runtime-env agents, and each idle Ray core "
        "worker ~0.7% (its own gRPC and metrics threads). Closing it: a local transport "
        "without Ray (see B4-dask); no setting of Ray's brings its daemons under 1%. The run "
        "of 2026-12-01 14:34: the pool 2.7% of a core, Ray with 4 idle actors 3.4%, Dask "
        "10.8%. Since then the pool's Ray starts no API server either (B4-dask); the "
        "run of 2026-12-01 17:41: the pool 2.1%, Ray with 4 idle actors 3.1%, Dask 8.2%, and "
        "the pool's memory 472 MiB PSS against Ray's 584 MiB."
        " The run of 2026-12-02 03:40 began with a load average of 3.56 (a test run had just ended) on a machine about 1.6x slower than the evening before (`import ray` 304 ms against 186 ms, Ray's idle actors 6.4% of a core against 3.1%): the pool 4.8%, Ray with 4 idle actors 6.4% (0.75x)."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): the pool 4.4%, Ray with 4 idle actors 4.1% (1.07x), Dask 13.9%."
        " Profiled on 2026-12-03 on a quiet machine, a 4-node pool idle from 3 s after its "
        "open: per-thread /proc times over 10 s gave the pool 1.7% of a core, and `perf "
        "record -a` for 10 s (each process's CPU time summed from its samples' periods) the 4 "
        "agents 0.23-0.26% each (0.96% together), the raylet 0.22%, the GCS 0.17%, the client "
        "0.14% and the dashboard agent 0.01%. `perf record -g` of one agent for 10 s (37 ms "
        "of CPU): 115 of its 149 samples in the process's main thread, every one in Ray's "
        "task-execution loop (`CoreWorker::RunTaskExecutionLoop`: boost.asio's timers and "
        "epoll, Ray's `PeriodicalRunner` and the `check_signals` callback of `_raylet.pyx`), "
        "the rest in Ray's gRPC threads (`client.poll0`, `server.poll0`, `worker.io`); no "
        "sample in a thread of skyward's (the event poll, the metrics sampler). Ray's core "
        "worker runs that signal check every 10 ms in every worker process, a period written "
        "in its code (`core_worker.cc`), not a setting, so 4 idle Ray workers cost about 1% "
        "of a core before any work of skyward's, and the raylet and GCS 0.4% more: under Ray "
        "the target cannot be met, and what closes it is the local transport without Ray "
        "named under B4-dask. The B5 row measures the 5 s from 2 s after the open, sooner "
        "than the profile: the full runs of that day measured the pool at 3.0% (06:15) and "
        "3.4% (07:04, this table's), Ray with 4 idle actors at 3.5% and 5.6%, Dask at 14.0% "
        "and 17.0%."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): the pool 5.5% of a core, Ray with 4 idle actors 6.8% (0.81x), Dask 14.7%."
        " The full run of 2026-12-03 17:03 (this table's): the pool 6.4% of a core, Ray with 4 idle actors 7.4% (0.86x), Dask 16.9%; the pool's PSS 440 MiB, 58 MiB less than in the run before, with a stand-in in the dashboard agent's place (see B4-dask). Per-thread /proc counts that day, 10 s of an idle 4-node pool: each agent's main thread woke 99 times a second (Ray's 10 ms signal check above) and used 0.4-0.6% of a core, Ray's `worker.io` thread woke 11-13 times a second and its gRPC pollers 2-6 times each; the 4 agents together used 2.6% of a core."
        " The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): the pool 2.1% of a core, Ray with 4 idle actors 3.0% (0.70x), Dask 8.0%; the pool's PSS 439 MiB."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start): the pool 1.7% of a core (max 2.0%), Ray with 4 idle actors 2.0% (0.85x), Dask 6.5%; the pool's memory 399 MiB PSS against Ray's 593 MiB, one Python process fewer since Ray's runtime-env agent starts only when asked for (see B4-dask). What is left is the raylet, the GCS and the 4 idle Ray core workers, as above. Profiled again that morning (a 4-node pool idle for 30 s, each thread's CPU from /proc): the 4 agents 1.1-1.2% of a core, 1.1% of it on their main threads, Ray's 10 ms signal check above (`perf trace -s` of one main thread: 492 `epoll_wait` calls in 4.94 s, 10.04 ms each); `RAY_get_check_signal_interval_milliseconds=1000` left it as it was, since that setting is another loop's."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): the pool 3.6% of a core (max 4.2%), Ray with 4 idle actors 5.4% (0.67x, from 0.85x), Dask 14.5%; the pool's memory 399 MiB PSS against Ray's 592 MiB. The same processes wake as often as before; each wake-up costs more on this machine."
        " Since 2026-12-04 22:00 the pool also holds its collections' hosts, one idle Ray worker (62 MiB of PSS in this table; see docs/collections.md and B4-dask), whose main thread wakes every 10 ms as each agent's does. The B4 and B5 groups alone, one run of each tree: the pool 5.6% of a core against 5.0% (Ray with 4 idle actors 6.4% and 7.3%), 456 MiB against 400 MiB. The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): the pool 4.4% of a core (max 5.2%), Ray with 4 idle actors 5.8% (0.76x), Dask 12.0%; the pool's memory 456 MiB PSS against Ray's 593 MiB (0.77x)."
    ),
    "B4-warm": (
        "`sky.Local(keep_warm=...)` now keeps the pool (docs/kept-pools.md), so a script run "
        "again adopts its node processes as B4-kept does: no Ray in the client, no agent "
        "start. Before, it kept Ray and spare agents in the pool daemon and the client joined "
        "that Ray instance as a driver: 0.96 s in the run of 2026-11-26 13:56, 0.55 s of it "
        "Ray's client-side start."
    ),
    "B3-ratio": (
        "Noise, not the engine: the two engines' figures have the same shape, a minimum of "
        "15-18 ms with typical runs at 40-50 ms and bursts to 170 ms for both, and a median "
        "can land on a burst for one of them. Full runs: 0.96x (2026-11-24), 2.41x and "
        "0.98x (2026-11-25); B3 run alone twice between those: 1.37x and 1.06x. Both engines "
        "do the same work: one `ray.put` of the 100 MB buffer into shared memory (skyward "
        "pickles the call with the array out of band, so the buffer is not copied), then 4 "
        "actor calls that read it without copying. The spread comes from the object store's "
        "fresh pages (a 100 MB put faults them in) on a machine whose 2 cores the 4 workers "
        "share."
    ),
    "R-trip": (
        "The peers run their driver on host 0, inside the cluster's network; skyward's client "
        "stays on this machine and reaches the pool over a channel of its SSH connection to "
        "the head relay on host 0, which passes each call to the node's agent over a lane (a "
        "Unix socket to the agent on its own host, TCP with a proven secret to the others). "
        "The run of 2026-11-25 23:06 measured 1.03 ms against Ray's 0.86 ms (1.19x, a pass "
        "by a hair; Ray's own call moved 0.71-0.86 ms across that day's runs). Timed inside "
        "one 3-host `>>` that evening: the driver and encoding 130 us, handing the frame to "
        "the SSH connection's loop 90 us, SSH both ways plus the relay 760 us (of which the "
        "relay's lane call to the agent, the agent included, ~240 us and its reply ~40 us), "
        "waking the caller 45 us. What moved it from 1.67x: a `>>` waits on the calling "
        "thread instead of a round of the driver's loop, the stream is an SSH channel driven "
        "on its connection's loop instead of a forwarded local port, the relay calls lanes "
        "from its loop instead of through a thread, and the by-value encoder stopped walking "
        "sys.modules on every call (~50-80 us). What is left is Python's SSH (asyncssh) "
        "both ways and the hop into its loop. Not a regression of skyward's: an A/B on 3 test "
        "hosts on 2026-11-26 (600 `>>` each, the two trees alternating twice, a quiet machine) "
        "gave this tree 1.09 and 1.06 ms (p10 0.97 and 0.96 ms) against 1.05 and 1.05 ms (p10 "
        "0.95 and 0.95 ms) for commit 45d5152, the tree of the 1.19x run; the ratio moves with "
        "Ray's own call (0.66-1.05 ms across runs) and the machine's load. "
        "Since 2026-12-01 the SSH connection offers AES-GCM before asyncssh's default "
        "ChaCha20-Poly1305 (`CIPHERS` in `providers/ssh/connection.py`), which asyncssh runs "
        "as three calls into `cryptography` a packet: 22 us a small packet against 3-5 us, "
        "and a `>>` crosses the connection twice. An A/B that day on 3 test hosts (400 `>>` "
        "per pool, the two ciphers alternating twice, a loaded machine): 1.60 and 1.95 ms "
        "with ChaCha20, 1.39 and 1.48 ms with AES-GCM (p10 1.37 and 1.66 ms, 1.19 and 1.26 "
        "ms). The R group run alone before and after it: 2.29 ms against Ray's 2.01 ms "
        "(1.14x), then 1.59 ms against 1.59 ms (1.00x). The full run of 2026-12-01 11:15, on "
        "a machine about twice as slow as that day's later one, measured 1.92 ms against "
        "Ray's 1.85 ms (1.04x, a pass), and the run of 14:34 722 µs against 721 µs "
        "(1.00x)."
        " Two full runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at "
        "their starts) slower than the day before's (ProcessPoolExecutor's submit 226-258 µs "
        "against 160 µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, 1.16 "
        "ms against Ray's 827 µs (1.41x); at 07:04, this table's, 1.31 ms against 1.06 ms "
        "(1.24x). The SSH tunnel alone took 340 and 350 µs a round trip, so without it "
        "skyward's `>>` took 0.82 and 0.96 ms, Ray's call within the spread of Ray's own "
        "(0.83-1.06 ms that morning): the gap is the tunnel between this machine and host 0, "
        "which Ray's driver on host 0 does not cross."
    ),
    "R-broadcast": (
        "Ray's driver already holds the 100 MB on host 0 and pays only `ray.put` plus 3 "
        "tasks; skyward's client holds it on this machine and first sends it through the SSH "
        "tunnel to the relay, which then does the same put and calls (the argument is "
        "serialized once by the client either way). The tunnel alone moves 100 MB in "
        "0.53-0.62 s (this group's 'SSH tunnel alone' row), which is the gap and its spread: "
        "1.78 s against Ray's 1.28 s (1.39x) in the run of 2026-11-25 14:43; 1.65 s against "
        "0.88 s (1.86x) and 1.70 s against 1.93 s (0.88x) in the two runs before it that day. "
        "Closing it: a transfer that does not go through Python's SSH (an OpenSSH tunnel, or "
        "TLS straight to the relay), or `sky.Volume`/object storage for data that large, "
        "which every node reads directly. "
        "Since 2026-12-01 the SSH connection offers AES-GCM first (see R-trip): with "
        "asyncssh's default ChaCha20-Poly1305 encrypting 100 MB took 160 ms of the client's "
        "CPU, with AES-GCM 35 ms. An asyncssh forward to an echo server on a test host moved "
        "100 MB in 0.92-1.19 s with ChaCha20 and 0.60-0.65 s with AES-GCM (3 rounds each, "
        "alternating); a 3-host pool's `size(data) @ pool` took 1.61 and 1.71 s before, 1.40 "
        "and 1.51 s after. The R group run alone before and after it, on a loaded machine: "
        "2.29 s against Ray's 1.78 s (1.29x), then 1.76 s against 1.48 s (1.19x, a pass). "
        "What is left of the tunnel is asyncssh's Python per 32 KB packet (a cProfile of the "
        "send: the socket's `send`, its packet framing and the channel's buffer, about 0.1 s "
        "each per 100 MB); OpenSSH's sshd sets that packet size for the channel. The full "
        "run of 2026-12-01 11:15, on a machine about twice as slow as that day's later one, "
        "measured 1.84 s against Ray's 1.16 s (1.59x, from 2.29x in the run of 2026-11-30), "
        "the tunnel alone moving 100 MB in 0.82 s: the gap. The run of 14:34: 791 ms "
        "against Ray's 404 ms (1.96x), the tunnel alone 365 ms, again the gap; the "
        "run of 2026-12-01 17:41: 839 ms against Ray's 521 ms (1.61x), the tunnel alone 380 ms. "
        "Tried on 2026-12-02 and not kept: the relay sending the payload to the other hosts' "
        "agents over their TCP lanes (encoded once, sent in slices, the buffers read as "
        "views of the frame) instead of through the object store. A py-spy profile of the "
        "first version (250 Hz, relay, client and agents) put the relay's time in asyncio "
        "copying each 100 MB write into its buffer; without those copies, 8 broadcasts of "
        "100 MB on a 3-host pool, alternating trees, had medians of 0.96 and 0.76 s with "
        "lanes against 0.79 and 0.89 s through Ray: no gain, so Ray's object transfer is "
        "not what the relay's side spends. The R group alone the same hour (a slower "
        "machine: the tunnel alone 0.45-0.57 s) measured 0.95-1.26 s against Ray's "
        "0.54-0.59 s. Every process of the transfer shares the 2 cores, and skyward does "
        "strictly more work than Ray's driver on host 0 (the tunnel's encryption and "
        "asyncssh's per-packet Python on top of the same fan-out), so on this machine the "
        "target needs a transfer that costs less CPU than asyncssh, not a different fan-out."
        " The run of 2026-12-02 03:40: 1.13 s against Ray's 576 ms (1.96x), the tunnel alone 449 ms: again the gap."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): 936 ms against Ray's 479 ms (1.95x), the tunnel alone 402 ms."
        " The full run of 2026-12-03 13:34 passed (0.52x) because Ray's driver took 2.66 s that time (1.73-3.24 s); in the full run of 17:03 (this table's) Ray's driver took 610 ms and skyward 1.16 s (1.91x), the SSH tunnel alone moving 100 MB in 509 ms: the gap, as before."
        " On 2026-12-03 at 20:00, on a quiet machine, a 3-host pool's `size(data) @ pool` of 100 MB (`os.urandom`) was split with timestamps written by the client, the relay and the agents (one clock; 4 broadcasts of 0.72-0.80 s): the client pickled the argument in 48 ms and framed the message in 45 ms before the relay read the frame's header; the body arrived through the tunnel 240 ms later; the relay decoded it in 43 ms and stored it with `ray.put` in 10 ms; then 200 ms passed before even host 0's own agent began to run, and each agent ran for 60-90 ms. Ray was copying the whole pickle out of the object store into a bytes object on every node before the agent saw it, while hosts 1 and 2 pulled 100 MB each. Since then a pickle of 1 MiB or more is stored out of band (`RayTransport.share`, docs/architecture.md), so each agent unpickles the request where it lies in the store: host 0's agent began 3 ms after the call, and the same broadcasts took 0.69 and 0.71 s against 0.78 and 0.79 s (medians of 6, the trees alternating twice). The R group alone, alternating twice: 867 and 794 ms against 888 and 855 ms, while Ray's driver took 0.70-2.08 s across those four runs. An OpenSSH tunnel (`ssh -W`, AES-GCM) moved 100 MB to an echo server on a test host in 0.27-0.29 s against 0.25-0.27 s for the pool's own asyncssh channel (with 0.12 against 0.18 s of the client's CPU), so it would not shorten the transfer here; this group's 'SSH tunnel alone' row also goes through a local port forward, a hop the pool's channel does not take. What is left before the fan-out is copying: the client's pickle of an in-band `bytes` (about 50 ms), the message's msgpack copy (about 45 ms), and on the relay asyncio's stream buffer, `readexactly` and msgspec's decoding of the body (about 150 ms of its CPU; py-spy at 250 Hz, 8 broadcasts). The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): 821 ms against Ray's 475 ms (1.73x), the tunnel alone 380 ms."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start): 757 ms against Ray's 425 ms (1.78x), the tunnel alone 391 ms: the gap, as before. Measured on 2026-12-04 and not kept: reading the relay's frames with a `BufferedProtocol` that reads a large frame's body straight into one buffer took 97-107 ms of the relay's CPU per 100 MB message against 147-158 ms for asyncio's `StreamReader` over loopback TCP, and msgspec's copy of the body is 40 ms of what is left. That is at most about 50 ms of an 820 ms broadcast, and it means allocating up front the size a frame's header claims, before the body has arrived; not worth that risk for this gain."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): 974 ms against Ray's 629 ms (1.55x), the tunnel alone 507 ms: the gap, as before."
        " The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): 1.24 s against Ray's 726 ms (1.71x; Ray's driver 0.58-2.08 s), the tunnel alone 527 ms: the gap, as before."
    ),
    "R-warm": (
        "An SSH pool's warm open (environments already on the hosts) is connect, facts, "
        "version check, starting Ray on 3 hosts and the head relay, then the agents: 8.06 s "
        "in the run of 2026-11-25 14:43. Its phases are in the S1 row's note: `ray start` on "
        "the 3 hosts 5.33 s (each host starts a GCS or raylet, a dashboard agent and a "
        "runtime-env agent, the head also Ray's API server; the 3 hosts share this machine's "
        "2 cores), the relay and 3 agents 1.04 s, SSH and the rest ~0.2 s. Ray's autoscaler "
        "monitor and log monitors are no longer started on the hosts (skyward resizes pools "
        "itself and its agents capture task output), two Python daemons fewer: an A/B of S1 "
        "measured the `ray start` phase 5.37 s before and 5.21 s after, within this machine's "
        "spread. Closing it: a remote pool daemon, the local one's design on the head host "
        "(Ray and spare agents kept for an idle period, reached through the pool's SSH "
        "connection), so a second script skips `ray start` and the agents' start; on separate "
        "machines the 3 starts would also run truly in parallel. The run of 2026-12-01 14:34: "
        "8.68 s, of which `ray start` 5.85 s, the agents 0.76 s and shipping 0.44 s. Since "
        "then every host's `ray start` is lean (`skyward/providers/ray_start.py`, run as "
        "`python -m skyward.providers.ray_start start ...`: no API server on the head, and "
        "each raylet's registration asked for every 10 ms instead of once a second; `ray "
        "start --head` alone took 2.15 s and takes 1.04 s on this machine). The run "
        "of 17:41: 7.17 s, of which `ray start` 4.53 s (the head's, then the other two "
        "hosts' at once), the agents 0.77 s and shipping 0.43 s. A timeline of a warm open "
        "that evening (each of the client's steps stamped) showed the rest: each SSH command "
        "cost a host ~0.1 s of CPU (Debian's bash reads root's `~/.bashrc`, which runs "
        "pyenv's init, even for a command: `perf record -a` during 20 commands found bash, "
        "readlink and pyenv), and the head relay's Python booted only once Ray was up (0.4 "
        "s). Since then the joining hosts' `ray start` and the head relay begin with the "
        "head's `ray start` and read the address or config they wait for on stdin, a host's "
        "two directories take one command and the GCS's port is read over SFTP. S1 run 3 "
        "times each way, alternating, on a machine slower than the run: warm opens "
        "6.22, 6.79 and 8.93 s after, 8.13, 8.43 and 8.66 s before (medians of 3 opens); "
        "on this machine the 3 hosts' starts still share 2 cores, so booting ahead mostly "
        "helps where hosts are separate machines. Since 2026-12-02 the relay also gets its "
        "config once the head's Ray answers, and joins Ray and starts the agents while the "
        "other hosts join (so S1's `agents` phase now overlaps its `ray` phase): 5 warm "
        "opens, 3 rounds alternating, had medians of 8.98, 9.19 and 7.62 s against 9.85, "
        "9.56 and 7.12 s before, within the noise of hosts that share 2 cores."
        " The run of 2026-12-02 03:40, on a machine about 1.6x slower than the evening before: warm 8.47 s, of which `ray start` 6.48 s and the agents 3.24 s (they overlap since the relay starts beside the joining hosts); cold 14.84 s, a pass."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): warm 7.11 s, of which `ray start` 5.43 s and the agents 2.62 s; cold 13.69 s, a pass."
        " Two full runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at "
        "their starts) slower than the day before's (ProcessPoolExecutor's submit 226-258 µs "
        "against 160 µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, warm "
        "9.04 s, of which `ray start` 6.80 s and the agents 3.64 s (they overlap); at 07:04, "
        "this table's, warm 8.61 s, of which `ray start` 6.55 s and the agents 3.80 s. `ray "
        "start` on the 3 hosts, which share the machine's 2 cores, is three quarters of the "
        "open, as before."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): warm 7.58 s (max 7.82), of which `ray start` 5.50 s and the agents 2.80 s (they overlap) and shipping 0.38 s; `ray start` on the 3 hosts is again three quarters of the open."
        " Since 2026-12-03 17:00 a stand-in runs where Ray's dashboard agent would on every host (see B4-dask), so each host boots one Python process fewer while the 3 share 2 cores: the S1 group alone, the two trees alternating twice, measured warm opens of 6.67 and 6.32 s against 7.29 and 6.98 s before, their `ray start` phase 4.65 and 4.51 s against 5.23 and 5.16 s. The full run of 17:03 (this table's; load average 0.34 at its start): warm 6.16 s (max 6.36), of which `ray start` 4.30 s and the agents 2.03 s (they overlap); cold 11.9 s, a pass (15.2 s in the run of 13:34), of which `ray start` 5.08 s, installing skyward 2.52 s, the agents 2.38 s and shipping 1.76 s. Next is the runtime-env agent (see B4-dask)."
        " The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): warm 5.45 s (max 5.82), of which `ray start` 3.90 s and the agents 1.76 s (they overlap); cold 11.5 s, a pass."
        " Since 2026-12-04 the runtime-env agent too is a stand-in until something asks for a runtime env (see B4-dask): the S1 group alone, the two trees alternating twice, measured warm opens of 4.34 and 4.68 s against 4.51 and 5.58 s, their `ray start` phase 2.51 and 3.13 s against 2.97 and 4.08 s."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start): warm 4.97 s (max 5.16), of which `ray start` 3.44 s, the agents 1.59 s (they overlap) and shipping 0.53 s; cold 10.6 s, a pass, of which `ray start` 4.47 s, installing skyward 2.97 s, the agents 1.77 s and shipping 1.39 s. The shipping phase of a warm open is mostly one SSH command per host that makes its private directories, and each SSH command costs a host about 0.1 s of CPU in root's `~/.bashrc` (see above)."
        " Since 2026-12-04 12:30 that command is gone: the facts command makes the directories as well, the bootstrap script reports skyward's place and versions from one Python start instead of two, and each host goes from its bootstrap to its watchdog without waiting for the others (a timeline of a warm open that morning, under load, had `ray start` begin at 1.3-1.5 s instead of 1.96 s). The S1 group alone, the two trees alternating twice: warm opens of 4.51 and 4.63 s against 4.78 and 4.84 s (medians of 3), the `ship` phase under 0.01 s against 0.52-0.53 s. What is left before `ray start` on a warm host is three SSH commands (facts, bootstrap, watchdog), each a login shell's start and the last two a Python start; joining the watchdog's start to the bootstrap's command would save one more."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): warm 4.60 s (max 4.96), of which `ray start` 2.82 s and the agents 1.54 s (they overlap), shipping 0.01 s; cold 11.1 s, a pass. A timeline of warm opens that afternoon (each step of `RemoteHosts` stamped, 3 opens): connect 0.04 s, facts 0.23 s, each host's bootstrap 0.2-0.6 s and its watchdog's start 0.15-0.3 s, so `ray start` began at 1.0-1.1 s; then the head's `ray start` took 2.0-2.2 s (1.26 s wall and 0.92 s of CPU alone on this machine, 0.7 s of it importing Ray and its `ray start` command line), the other hosts joined 0.4-1.3 s after the head's address was known, and the relay answered 0.25 s later. Sampling every process's CPU during a warm open found 4.3 s of CPU in a 5.2 s open on 2 cores: the three `ray start` processes 1.56 s, the 3 agents' Ray workers 1.45 s, the relay 0.43 s. Tried that afternoon and not kept: beginning each host's `ray start` as soon as that host is ready, rather than once every host is (the head's then began at 0.7 s instead of 1.05 s); the S1 group alone, alternating three times, measured warm opens of 5.30, 4.75 and 4.73 s against 4.70, 3.96 and 4.85 s before, because on 2 shared cores the head's start then competes with the other hosts' bootstraps. On hosts of their own it would start the head sooner; here it does not, so the open's floor on this machine is the hosts' CPU."
        " The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): warm 5.02 s (max 5.50), of which `ray start` 3.50 s and the agents 1.82 s (they overlap); cold 12.4 s, a pass. Since that evening the head also boots the collections' hosts (one Ray worker) beside the agents: the S1 group alone after that run, the two trees alternating twice, measured warm opens of 5.37 and 5.42 s against 5.30 and 5.35 s for the tree before, within this machine's spread."
    ),
    "R-cold": (
        "The cold open adds building each host's environment to the warm open: 20.4 s for 3 "
        "hosts in the run of 2026-11-25 14:43 (18.5 s and 15.1 s in earlier runs). Its phases "
        "(the S1 row's note): installing skyward and its dependencies from the shipped wheels "
        "7.64 s, `ray start` 6.65 s, shipping the wheels 1.80 s, agents 1.46 s. The 3 hosts "
        "share this machine's 2 cores, so the builds run one after another in effect; on "
        "separate machines they run in parallel. A cold `ray start` costs ~1 s more per host "
        "than a warm one because a fresh environment has no bytecode yet; compiling it while "
        "installing was measured and does not pay: in a fresh venv on this machine, `ray "
        "start --head` took 3.35 s without bytecode and 2.2-2.3 s with it, but compiling it "
        "first took 2.66 s (`compileall` of the environment, 2,928 files) or 1.80 s "
        "(importing the modules Ray's daemons use, once), more than the start saves. Closing "
        "it: the remote pool daemon (see R-warm) for every open after the first; for the "
        "first, hosts that do not share cores. The run of 2026-12-01 14:34: 15.04 s, of which "
        "`ray start` 7.20 s, installing skyward 3.37 s, shipping 1.29 s and the agents 0.85 "
        "s. The run of 17:41, with the lean `ray start` of R-warm: 15.44 s, of "
        "which `ray start` 6.24 s, installing skyward 4.87 s, shipping 1.44 s and the agents "
        "0.85 s; the second the lean start saved went to the install, the phase that varies "
        "most between runs (3.4-7.6 s)."
        " The run of 2026-12-02 07:09, on a quiet machine, measured 13.69 s, a pass. Two full "
        "runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at their starts) "
        "slower than the day before's (ProcessPoolExecutor's submit 226-258 µs against 160 "
        "µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, 18.3 s, of which "
        "`ray start` 9.61 s, the agents 4.39 s, installing skyward 3.07 s and shipping 2.47 "
        "s; at 07:04, this table's, 19.6 s, of which `ray start` 10.05 s, the agents 4.40 s, "
        "installing skyward 3.44 s and shipping 2.62 s. The phases that grew are `ray start` "
        "and the agents, Ray's processes booting from fresh environments on cores shared by "
        "the 3 hosts, on a machine whose tunnel and ProcessPoolExecutor ran 1.4-1.9x slower "
        "than the day before."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): 15.2 s, of which `ray start` 7.75 s, the agents 3.64 s, installing skyward 2.38 s and shipping 2.05 s: 0.2 s over the target, where the run of 07:04 was 4.6 s over it."
    ),
    "C1-strong": (
        "Met since 2026-12-02: a strong op that does not wait goes to its host on the host's "
        "Unix socket (`collections/host_lane.py`), not through Ray. The full run of 03:40 "
        "that day: a client's strong `counter.increment` 42 µs against the interleaved Ray "
        "actor call's 620 µs (0.07x), 77 µs in a task, Redis `INCR` 92 µs. A probe of 1,000 "
        "interleaved calls on a 4-node pool measured a client's strong `counter.increment` "
        "at 197-318 µs against the plain Ray actor's 832-1,262 µs (0.24-0.25x), and in a "
        "task 50-150 µs, where it had been 1.1-1.4 ms because a process that had not started "
        "the host looked it up in Ray's registry on every op. Before: a strong op from the "
        "client was one call to the collection's host, a Ray actor in "
        "the pool's Ray instance, as the peer's is: 708 µs against 571 µs (1.24x) in the "
        "run of 2026-12-01 17:41, 617 µs against 509 µs (1.21x) in the run of 14:34 "
        "that day, 1.19x in the run of 2026-11-30. The same group's "
        "Ray call measured alone in a fresh interpreter gives 1.19x. Measured that day with "
        "3 rounds of 1,000 interleaved calls on a 4-node pool: a strong "
        "`counter.increment` 701-705 µs, a plain Ray actor's `incr` 598-602 µs, and one "
        "with concurrency groups as the collection host has 606-611 µs (1.16x-1.17x). So "
        "Ray's threaded actor is not the difference. A cProfile of 2,000 client ops (239 "
        "Python calls an op, Ray's included) puts the client's share in the combiner that "
        "batches concurrent writes, the steps that carry the call's deadline and the "
        "reply's ticket: about 25 µs an op of skyward's own time. The host's side, profiled "
        "the same evening with py-spy at 1,000 Hz for 6 s while the client sent 7,173 "
        "strong increments: skyward's code was under 1% of the host process's samples (it "
        "waits in Ray's core worker for the next call). The rest is the shape of the call: "
        "the peer's `incr()` takes no argument and returns an int, while a strong op sends "
        "its request (ticket, kind, name, op, arguments) packed as one bytes argument and "
        "gets bytes back. Three rounds of 1,000 interleaved calls on one Ray actor with a "
        "concurrency group measured 537-550 µs with no argument, 569-576 µs with one bytes "
        "argument and 640-659 µs with the same request as 5 separate arguments: packing "
        "already saves 70-80 µs, and the one argument still costs Ray about 30 µs. That "
        "accounts for about 55 µs of the ~100 µs gap; the rest is not located yet (neither "
        "process's Python shows it). Closing it: fewer layers for a single write with "
        "nobody waiting behind it (the client's 25 µs); the argument's 30 µs is Ray's."
    ),
    "B1-actor": (
        "A local pool sends `>>` over the node agent's Unix-socket lane (see "
        "docs/architecture.md), not through a Ray actor call. Profiled on a loaded 2-core "
        "machine: encoding the request 13 µs, decoding it on the node 5 µs; a lane round trip "
        "to one fixed agent 0.10-0.14 ms, round-robin over 4 agent processes 0.15-0.21 ms (each "
        "call wakes a process that has slept through the other three; a raw Ray actor call pays "
        "the same, 0.84 vs 0.71 ms). Through Ray the same call cost 0.9-1.4 ms, 1.2x a raw "
        "actor call for `agent.execute` alone. If this target is missed, the lane was not used "
        "(a Ray instance started by the user, or an argument with buffers of 1 MiB or more, "
        "which go through the object store): check `pool._driver._lanes`."
    ),
    "B1-task": (
        "Half a Ray task is about one raw Ray actor call (1.3-1.5 ms vs 0.7 ms here): no "
        "dispatch that itself goes through a Ray actor call can meet it. The lane (see B1-actor) "
        "is what meets it; a miss means the lane was not used."
    ),
    "B4-start": (
        "Opening a pool is `ray.init` (the same call as the peer's, plus token auth) and then "
        "4 node agents, each importing skyward on top of Ray. Timed inside each agent during a "
        "pool open (before the event hub was dropped): 0.75-0.81 s from process start until "
        "Ray loads the agent class (Ray's worker boot, which the peer pays too), then "
        "0.5-1.0 s importing skyward under load, then 0.02 s in `NodeAgent.__init__`. The "
        "event-hub actor (a fifth process, 1.5x before) is gone: agents serve their own "
        "events. `ray.init` alone varies from 2.2 to 3.6 s between identical runs on this "
        "machine, so a miss within that spread is noise; otherwise what is left to cut is "
        "the agents' import (the Rich console and the collections proxies still load on "
        "every node). Two full runs of the same code on 2026-11-23 measured 0.89x and 1.12x; "
        "the two of 2026-11-25 1.17x (3.01 vs 2.57 s) and 0.89x (3.16 vs 3.53 s); on the "
        "AMD machine of the run of 2026-11-25 14:43 1.16x (3.77 vs 3.26 s), and two B4-only "
        "runs right after it 1.26x (3.75 vs 2.97 s) and 0.95x (3.64 vs 3.85 s), the second "
        "with the log monitor left running (stopping it after `ray.init` costs no start "
        "time). The run of 2026-12-01 14:34: 3.76 s against 2.64 s (1.42x); the B4 "
        "group alone four times that hour, the trees before and after that day's Struct "
        "change alternating: 1.09x, 1.05x, 1.07x and 1.05x. Both `ray.init` and skyward's "
        "start fall into one of two modes there, about 2.5 s or 3.5 s, so a run whose "
        "medians land in different modes misses by 1 s. The modes are Ray's wait for its "
        "raylet (asked once a second), which skyward's start no longer has: since that day "
        "Ray starts lean (`skyward/providers/ray_start.py`, B4-dask), and the run "
        "of 17:41 measured 1.50 s against 3.47 s (0.43x)."
    ),
    "B1-ppe": (
        "ProcessPoolExecutor's submit is a pickle down a pipe to an idle worker and one back; "
        "ours is the same on the agent's Unix-socket lane plus the driver's dispatch (a slot "
        "from the scheduler, a request id, events for the console). Since 2026-11-29 a script's "
        "function goes to each node once and then as a 16-byte digest (`engine/shipping.py`): "
        "the rerun of that day measured it at 517 µs against 402 µs for an imported function "
        "and ProcessPoolExecutor's 469 µs (1.10x; 1.5x before, when cloudpickle shipped the "
        "function's code with every call). What is left is profiled under B1-actor: a round "
        "trip to one fixed agent is 0.10-0.14 ms, round-robin over 4 agent processes 0.15-0.21 "
        "ms, because each call wakes a process that slept through the other three, as "
        "ProcessPoolExecutor's 4 workers are woken in turn too. The caller's thread writes the "
        "lane and reads the answer when a slot is free (`PoolDriver.run_now`), and the agent "
        "runs a call on the lane's own thread, so neither end hands it to another thread. Split "
        "on 2026-12-01 with timestamps at both ends of the lane (a 1-node pool, 3,000 `>>` of a "
        "script's function, medians): the client before its send 126-145 µs, of which encoding "
        "the request 60-89 µs; the agent from reading the request to writing the outcome 67-87 "
        "µs; the sends and wake-ups between them about 45 µs; the client after the reply 21-25 "
        "µs. cProfile and py-spy put the encoding's time in cloudpickle's checks of skyward's "
        "own classes and functions (`TaskRequest`, `SkywardFunction`, the shipped function's "
        "reference: about 5 µs each), `dataclasses.fields` pickling and unpickling the frozen "
        "request both ways, and the runtime `Protocol` check of `>>`'s right side (12 µs). "
        "Those now go by name without asking cloudpickle (`wire._WIRE_GLOBALS`), the request "
        "pickles as its fields (`TaskRequest.__reduce__`; since later that day the request is a "
        "`msgspec.Struct`, which pickles the same way in C: 1.8 µs to pickle and 1.6 µs to "
        "load, against 1.9 and 2.3 µs) and the right side is checked once per type: the same "
        "split then measured 176-201 µs a round trip against 258-312 µs, the client before its "
        "send 71-88 µs and the agent 41-58 µs. The B1 group alone, old tree then new, on a "
        "machine that day about twice as slow as the run of this table (a Ray actor call "
        "0.99-1.19 ms): 359 µs against ProcessPoolExecutor's 295 µs (1.22x), then 306 µs "
        "against 260 µs (1.18x); the full run of 2026-12-01 11:15 measured 1.30x on the old "
        "tree, and the run of 14:34, on the new one and a quiet machine, 143 µs against 159 µs "
        "(0.90x, from 1.05x in the run of 2026-11-30); the run of 17:41 127 µs "
        "against 144 µs (0.88x). What is left on the "
        "client is the shipped function's validity check (8 µs: every global it reads is looked "
        "up again, so a rebound one is sent afresh) and the driver's bookkeeping, each a few "
        "µs; on the agent, decoding 5.5 µs, running 6.4 µs, the outcome's pickle 3.7 µs, the "
        "slot and the output's flush 6 µs, the rest thread wake-ups on 2 shared cores. 0.6x "
        "(about 95 µs against the ProcessPoolExecutor of the run of 2026-12-01 17:41) is below what a Python client "
        "and a Python agent woken in turn cost here, so it is left open."
        " The run of 2026-12-02 03:40, on a slower machine: 304 µs against ProcessPoolExecutor's 313 µs (0.97x)."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): 152 µs against ProcessPoolExecutor's 160 µs (0.95x), an imported function 147 µs."
        " On 2026-12-02 at 13:10 UTC, on a different machine (a Firecracker VM about 3x slower: `sum(range(1000))` 25 µs, a Ray actor call 2.60 ms), the cost of running code that slept was measured, each side timed in its own process. The floor (two processes, a Unix socket, one pickle each way): 28.5 µs back to back, 104 µs when the caller sleeps 2 ms between calls (4 servers in turn: 29 and 144 µs). Skyward's client outside the lane call, pure CPU: 135-144 µs back to back, 427-446 µs after a 2 ms sleep. On the node, decoding the request, running it and encoding the outcome: 34, 30 and 17 µs on a 1-node pool (each call right after the last), 111-119, 99-102 and 53-54 µs on each agent of a 4-node pool, where `>>` goes round-robin (as the reference documents say) and each agent sleeps through the other three's calls. So B1's 4-node round trip is mostly code run cold, as ProcessPoolExecutor's 4 woken workers run theirs; what cuts it is less code per call: since that day the picklers get a flat dispatch table (a ChainMap cost each object a Python lookup and a KeyError), and encoding a request of a script's function took 23-28 µs there instead of 29-45 µs (minimum of 15 × 5,000). The B1 group alone on that machine: 622 µs against ProcessPoolExecutor's 554 µs (1.12x)."
        " Two full runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at "
        "their starts) slower than the day before's (ProcessPoolExecutor's submit 226-258 µs "
        "against 160 µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, 240 µs "
        "against ProcessPoolExecutor's 226 µs (1.06x); at 07:04, this table's, 230 µs against "
        "258 µs (0.89x), an imported function 225 µs."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): 180 µs against ProcessPoolExecutor's 262 µs (0.69x), the best ratio yet. The split of that day, on a quiet machine (a 4-node pool, 3,000 `>>` of a script's function, stamps at both ends of the lane read from one clock, medians): the client before its send 44 µs, the send 21 µs, until the agent's read returned 23 µs, the agent's handling 59 µs (decoding the 199-byte request 20 µs, which takes 4 µs in a warm loop; the call 22 µs; encoding the outcome 10.5 µs), the agent's send 24 µs, until the client's read returned 41 µs, the client after it 14 µs: 231 µs, of which the two sends and two wake-ups are about 110 µs. Reading a frame's length and body in one system call instead of two (a 16 KiB first read on both ends) changed nothing measurable: 229-241 µs against 221-228 µs for the tree before, alternating 3 times; it was not kept."
        " The full run of 2026-12-03 17:03 (this table's; load average 0.34 at its start): 232 µs against ProcessPoolExecutor's 259 µs (0.89x), an imported function 227 µs; a 3-second test of mine ran during this group. The B1 group alone right after that run: 213 µs against 300 µs (0.71x), an imported function 209 µs. Measured that day on the client's thread (`time.thread_time`, 3,000 `>>` on a 4-node pool): 107-117 µs of CPU a `>>`, of which the lane call itself (its send and its read, the request encoded beforehand) 44-49 µs; the same `>>` with the lane's answer returned at once takes 29 µs in a warm loop, and cProfile puts 45% of that in encoding the request, 17% in the shipped function's validity check and 10% in the scheduler's slot. psutil's per-thread times put 110-130 µs of the agents' CPU (the sockets' kernel time and the wake-up included) in each call, where `NodeRunner.execute` of the same request takes 17 µs in a warm loop in one process: code run cold, as the split above found."
        " The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): 180 µs against ProcessPoolExecutor's 203 µs (0.89x), an imported function 165 µs; a Ray actor call 772 µs."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start): 177 µs against ProcessPoolExecutor's 192 µs (0.92x), an imported function 169 µs; a Ray actor call 763 µs."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): 186 µs against ProcessPoolExecutor's 241 µs (0.77x), an imported function 169 µs; a Ray actor call 825 µs."
        " The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): 172 µs against ProcessPoolExecutor's 250 µs (0.69x), an imported function 222 µs; a Ray actor call 955 µs."
    ),
    "B2-best": (
        "ProcessPoolExecutor at chunksize=1,000 sends 10 chunks and pickles the function by "
        "reference. The full run of 2026-11-28 measured skyward's map at 3.33x of it: its "
        "guided chunks ended in a tail of single items, 58 round trips of a few hundred "
        "microseconds each. A map now gives no chunk less than about 5 ms of work once the "
        "first chunks' pace is known (`engine/driver.py`, `MIN_CHUNK_SECONDS`), and since "
        "2026-11-29 a script's function goes to each node once (`engine/shipping.py`): in "
        "the B2 rerun of that day a script's function and an imported one took the same "
        "(13.1 and 13.2 ms; 28.3 ms before the chunk floor), against 8.65 ms for "
        "ProcessPoolExecutor at chunksize=1,000 (1.52x; the B1/B4/CLI rerun half an hour "
        "earlier measured 11.1 and 6.75 ms against 7.09 ms, this group's spread on a loaded "
        "2-core machine). The map now sends as few chunks as the peer (7 to 10, counted by "
        "wrapping `wire._dump`), so what is left is the cost of each: a py-spy profile of "
        "the client (200 Hz, 326 maps) shows its own work as pickling each chunk's items and "
        "writing them to the lane, the rest waiting on the nodes and the event loop's "
        "thread hand-offs (the map waits on a future the loop resolves). Closing it: a "
        "cheaper round trip per chunk, as B1-ppe. Since issue 41 the target is the fastest "
        "peer of any kind at its best setting; in the full run of 2026-11-29 06:01 that was "
        "still ProcessPoolExecutor at chunksize=1,000 (8.86 ms, against 13.6 ms for a "
        "script's function and 9.6 ms for an imported one); Ray's and Dask's tasks of 1,000 "
        "items took 70 ms and 404 ms. The cheaper request encoding of 2026-12-01 (see "
        "B1-ppe) does not move it: the B2 group alone, old tree then new, measured 13.4 ms "
        "against 7.83 ms (1.71x), then 12.4 ms against 7.13 ms (1.73x); a map sends a "
        "handful of requests, so their encoding was never its cost. The run of 2026-12-01 "
        "14:34, on a quiet machine: 4.15 ms against 3.41 ms (1.22x, from 1.40x in the run "
        "of 2026-11-30); the run of 17:41: 4.65 ms for a script's function and "
        "4.28 ms for an imported one against 2.78 ms (1.67x), the spread this group shows "
        "between runs of the same code (1.22x to 1.73x that day)."
        " Closed on 2026-12-02: each item of a chunk took a lock and read the clock on its node "
        "for its per-item timeout (about 300 ns an item, more than the work of a trivial one); "
        "a chunk now runs as `list(map(fn, items))` and the timeout's watcher asks the items' "
        "iterator which item runs (`node/execution.py`, `MapCursor`). The full run of 07:09: "
        "2.33 ms for a script's function and 2.03 ms for an imported one against "
        "ProcessPoolExecutor's 3.87 ms at chunksize=1,000 (0.60x)."
    ),
    "B4-kept": (
        "The adoption itself is fast: with skyward's modules already loaded, opening the kept "
        "pool took 28 ms (cProfile of `Compute.__enter__`, 2026-11-28: the daemon's answer, "
        "the relay's stream, the wheel fingerprint's `importlib.metadata` 14 ms). The rest is "
        "importing skyward's own modules, which `import skyward` (5-12 ms) defers to the first "
        "open: about 300 modules, 165 dataclasses built at import (0.23 s of the open under "
        "cProfile), the Rich console, psutil, asyncio, the image and metrics modules "
        "(`-X importtime`: `skyward.api.pool` 190 ms, `skyward.api.config_file` 184 ms, "
        "under the load of this run's other groups). Before the import was made lazy, the same "
        "row measured 31 ms and `import skyward` 137 ms: the cost moved, it did not grow. The "
        "full run of 2026-11-28 ran without skyward's bytecode (the sandbox sets "
        "PYTHONDONTWRITEBYTECODE and the checkout is editable), compiling 120 modules on every "
        "open; the run now compiles it first, as a wheel install does, and this row did not "
        "move (368 ms both times): import work, not compiling. The rerun of 2026-11-29 "
        "measured 265 ms, a pass, after the storage package and the `sky` commands became "
        "lazy and a script's function went to each node once; should it miss again, an "
        "adopting client should import only what a kept pool's client needs (no image "
        "builder or metrics modules until they are used)."
    ),
    "B4-import": (
        "Counted since issue 41: `import skyward` (5-12 ms) plus what the first open imports, Ray "
        "(the peer's whole row) and skyward's own modules on top of it: 357 ms against `import "
        "ray` 216 ms in the full run of 2026-11-30 05:30 (1.65x). Ray is imported by the local "
        "pool's client only; a kept pool's client never imports it. Profiled on 2026-11-30 with "
        "`python -X importtime` and a wrapped `dataclasses._process_class`: the path loaded 994 "
        "modules, among them rich (about 45 ms, for a live panel the pool had not asked for), "
        "packaging through the wheel builder (about 25 ms, for an Image that installs), a kept "
        "pool's client (about 15 ms) and the older reference's events (about 10 ms). Each is now "
        "imported where it is first needed (920 modules; tests/unit/test_import_cost.py): an A/B "
        "of 14 alternating runs that day measured the path at 508 ms best and 577 ms median, "
        "against 569 and 642 ms before and `import ray` 352 and 392 ms (1.44x best, 1.47x median, "
        "from 1.62x and 1.64x). What is left of skyward's share is mostly defining its classes: "
        "192 dataclasses on the path (63 in `core/messages.py`, 21 in `observe/events.py`) cost "
        "1.0-1.2 ms each on the loaded machine, 62 % of it in `exec` of the six methods CPython "
        "3.11 writes for a frozen dataclass, one `exec` each. Closing it: fewer classes on the "
        "path, or a cheaper way to define them. Since 2026-12-01 the 63 message classes are "
        "msgspec Structs (`core/messages.py`, docs/architecture.md): importing `core/codec.py` "
        "and its messages after Ray took 34 ms and takes 8.5 ms (medians of 6 alternating runs), "
        "msgspec's own import included. The B4 group alone, run three times that day, measured "
        "1.53x for the tree before and 1.55x and 1.48x after: 25 ms is within the spread of its "
        "5 runs. The full run of 2026-12-01 14:34, on a quiet machine (load 0.3 at its start), "
        "measured 287 ms against `import ray` 208 ms (1.38x), with 118 dataclasses on the path. "
        "Since then skyward's own records there are Structs too (71 classes in 36 modules: the "
        "driver's requests and outcomes, node handles, membership, the metrics collectors, the "
        "launch and relay records; docs/architecture.md), which leaves 47 dataclasses, 40 of "
        "them public and the other 7 named in tests/unit/test_import_cost.py. 12 alternating "
        "runs that day, each a fresh interpreter timing B4's imports, measured the path at 273 "
        "ms median and 269 ms best, against 298 and 286 ms before and `import ray` 224 and 216 "
        "ms: 1.22x median and 1.24x best, from 1.33x and 1.32x. The B4 group alone, the two "
        "trees alternating twice that hour: 1.44x and 1.40x before (259 and 280 ms against 180 "
        "and 201 ms), 1.27x and 1.29x after (235 and 248 ms against 185 and 192 ms)."
        " The run of 2026-12-02 03:40 began with a load average of 3.56 (a test run had just ended) on a machine about 1.6x slower than the evening before (`import ray` 304 ms against 186 ms, Ray's idle actors 6.4% of a core against 3.1%): the path took 431 ms against `import ray` 304 ms (1.42x); the run of 2026-12-01 17:41 measured 241 against 186 ms (1.29x, a pass). Nothing of that stop touched the import path."
        " Two full runs on 2026-12-03, on a quiet machine (load average 0.24 and 0.28 at "
        "their starts) slower than the day before's (ProcessPoolExecutor's submit 226-258 µs "
        "against 160 µs, the SSH tunnel's 100 MB 757-762 ms against 402 ms): at 06:15, 404 ms "
        "against `import ray` 298 ms (1.35x); at 07:04, this table's, 443 ms against 342 ms "
        "(1.30x, a pass). Profiled that morning with `python -X importtime` and a wrapped "
        "`dataclasses._process_class`: the 167 modules skyward's path adds to Ray's take 105 "
        "ms of their own time, 39 ms of it defining its 47 dataclasses, 16 ms of those the 21 "
        "event classes of `observe/events.py`. The reference documents make the events, "
        "`Spec`, `Image`, `Options` and the other public records frozen dataclasses, and "
        "users may `dataclasses.replace` them, so they stay dataclasses "
        "(tests/unit/test_import_cost.py names the 7 others); without their cost the path "
        "would be 1.22x. The rest is the bodies of skyward's modules, none above 6 ms of its "
        "own."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): 387 ms against `import ray` 289 ms (1.34x); the run of 07:04 that day measured 443 ms against 342 ms (1.30x, a pass). What is skyward's own, the difference, stayed at 98-101 ms; Ray's import was 53 ms faster, so the ratio rose. The changes between the two runs load no module the path did not load before."
        " The full run of 2026-12-03 17:03 (this table's): 364 ms against `import ray` 272 ms (1.33x). `-X importtime` that day, 5 runs each importing the row's modules after `import ray`: skyward's modules on the path took 74 ms of their own time (median), the largest `observe/events.py` at 12.5 ms (its 21 event dataclasses: 126 `exec` calls of CPython 3.11's dataclass code, 9 ms under cProfile); Ray's `ray.dag` and `ray.experimental.channel` (14.5 ms) load only at `ray.shutdown`, outside this row."
        " The full run of 2026-12-04 01:53 (load average 0.19 at its start): 239 ms against `import ray` 182 ms (1.31x; 1.29x, a pass, in the run of 2026-12-03 20:37). skyward's own share, the difference, is 57 ms, the smallest yet (74-101 ms in the runs of 2026-12-03), while Ray's import was the fastest yet, so the ratio is at the target's edge from Ray's side. `-X importtime` that morning, 3 runs each importing the row's modules after `import ray`: skyward's modules took 50 ms of their own time (median; `ray.dag` and `ray.experimental.channel`, 14.5 ms, load at the interpreter's exit, outside the row), `observe/events.py` still the largest at 9.0 ms (its 21 public event dataclasses), then `model/spec.py` 2.8 ms and `core/instance.py` 2.1 ms; no module the path does not need."
        " The full run of 2026-12-04 16:28 (this table's; load average 0.02 over 1 minute and 1.11 over 5 at its start, a test run had ended 3 minutes before; a different virtual machine from the run of 01:53, whose idle timers cost more: every engine's idle CPU in B5 was 2.2-2.7x that run's): 299 ms against `import ray` 233 ms (1.28x, a pass). Measured that afternoon with 10 alternating fresh interpreters: 318 ms against 256 ms (1.24x)."
        " The full run of 2026-12-04 22:40 (this table's; load average 0.45 over 1 minute at its start, on a machine slower that hour than at 16:28: a warm S1 open of the tree before took 5.30-5.35 s against 4.60 s): 315 ms against `import ray` 239 ms (1.32x). The row imports the same modules as in the run of 16:28 (1.28x, a pass): the module of the collections' hosts, which an open imports since that evening (about 3 ms), is counted in the start, not here. So this is the spread of one machine's imports, within which this target has passed and missed before."
    ),
    "CLI-ls": (
        "`sky ls` is a fresh interpreter (42 ms for `python -c pass` here), click (40-50 ms), "
        "`importlib.metadata` for the console script's entry point (80 ms; a wheel install "
        "reads the same), the editable install's import hook (44 ms; a wheel has none) and "
        "its command's module. Since 2026-11-29 `sky` imports a command's module only when "
        "it runs (`cli/main.py`, `LAZY`): `sky --help` fell from 0.337 s to 0.127 s (CLI-help) "
        "and `sky ls` from 0.346 s to 0.316 s, since `ls` still needs the pool daemon's client "
        "and its message types (`skyward.core.messages`: frozen dataclasses until 2026-12-01, "
        "35-60 ms under `-X importtime`, msgspec Structs since) and the Rich table. The answer itself is one request "
        "to the daemon. Without the editable hook, which a user's wheel install does not "
        "have, it is about 0.27 s. Since the same day `ls` no longer loads the events, their "
        "bus and `importlib.metadata` (about 60 ms under `-X importtime`: the logger names "
        "are `observe/log_names.py`, the version `core/version.py`). What is left to cut: "
        "the table printed without Rich."
    ),
    "CLI-all": (
        "The slowest `sky` command timed is named beside the figure. `sky ls`, `logs` and "
        "`events` read the registry and the pool's log and ask the pool daemon (CLI-ls says "
        "what their imports cost); `sky api` reads the daemon's files. Commands that open "
        "pools or ask a cloud are timed by their `--help` here, their work by the other groups. "
        "In the full run of 2026-11-29 06:01 `sky logs NAME -n 5` missed by 3 ms (0.303 s) on "
        "a machine whose floor (`python -c pass`) was 44 ms; the run of 2026-11-29 10:31, on a "
        "machine whose floor was 22 ms, measured every command at 0.14 s or less. A miss by "
        "little is this machine's spread; what would give more room is the same as CLI-ls's "
        "(cheaper message types, no Rich for a table)."
    ),
    "H1": (
        "The full run of 2026-11-29 10:31 measured 1.74x: 316 µs a task for 50,000 futures "
        "against 181 µs for 1,000. Where the growth went, measured with `gc.callbacks` in a "
        "run of 50,000: 13 full collections of the cyclic garbage collector took 3.97 s of the "
        "run's 11.9 s. A full collection walks every object alive, and each pending future "
        "held 45 (33 once done): its Future and a second one between it and its task, each "
        "with a Condition, a lock and their bound methods, the task and coroutine, and the "
        "callbacks chaining them. The task now settles the Future itself and lets go of the "
        "task when it ends (`engine/interruptible.submit`): 25 objects a pending future, 12 a "
        "done one, and 9 full collections of 1.78 s in the same run. Two runs of H1 alone "
        "after it measured 1.24x (143 against 178 µs) and 1.16x (165 against 191 µs); with "
        "the collector off the two sizes cost the same (134-139 µs)."
    ),
    "CLI-help": (
        "`sky --help` lists the commands from `cli/main.py`'s `LAZY` table and imports none "
        "of their modules (0.127 s on 2026-11-29, 0.337 s before). A miss means a command "
        "module was imported at load again: `python -X importtime -m skyward.cli.main --help`."
    ),
    "B4-shutdown": (
        "Closing is almost all `ray.shutdown()`: Ray stops its processes one by one with "
        "SIGTERM and up to 1 s of grace each. The autoscaler monitor ignores SIGTERM, so every "
        "shutdown waited a full second for it (profiled: `monitor 1.008 s` of 1.16 s); skyward "
        "now kills that monitor right after `ray.init` (a fixed local instance never scales), "
        "which took the pool's close from 1.40 s to 0.44 s. A miss now means another Ray "
        "process was slow to exit; profile `ray._private.node.Node._kill_process_impl`."
        " Profiled on 2026-12-04 (cProfile of the client and `py-spy record --native` of a 4-node pool's "
        "close, 1.1 s that time): 0.5 s of it was skyward's event poll, whose thread was joined before the "
        "agents' pending polls were woken, so it ended only at its next 0.5 s tick; the agents are woken "
        "first now and that step takes about 11 ms. Of the 0.34 s left in `ray.shutdown()`, stopping the "
        "raylet and the GCS takes 0.03-0.05 s and the driver's core worker 0.25 s, nearly all of it in "
        "the destructor of Ray's GCS client joining its gRPC polling thread "
        "(`ClientCallManager::~ClientCallManager`)."
        " The full run of 2026-12-04 16:28 (this table's), the first since the event poll's fix: 353 ms "
        "(max 459 ms) against 829 ms in the run of 01:53, and `ray.init` plus 4 actors 1.35 s."
    ),
    "B6": (
        "The ideal is 200 × the task's time measured serially on an idle core, ÷ 2 cores; "
        "4 agent processes then share those 2 cores with the client and Ray. Measured: "
        "(1) time-slicing: CPU accounting (psutil) of one `sky.gather` of the 200 tasks gave "
        "4.51 CPU-s in the agents for 4.0 CPU-s of serial work, the client 0.13 CPU-s, "
        "Ray's processes 0.12. (2) Background: an idle 4-node pool uses 0.51 CPU-s per 5 s, "
        "5% of the machine: the agents 0.22 (0.16 with `Image(metrics=None)`), Ray's raylet, "
        "GCS and the event hub (since dropped) 0.25 (0.17 without metric events), the client 0.04. (3) Per "
        "call hand-offs: on the same pool the 200 tasks as `pool.map` (about 60 chunks) "
        "took 2.39-2.64 s and as 200 separate calls 2.61-2.95 s, so each call-to-call "
        "transition on a node costs a few ms while both cores are busy (0.2-0.3 ms on idle "
        "cores, B1): the agent waits for the client's threads to be scheduled to send it "
        "the next call. The same run's `pool.map` row shows the engine without (3). "
        "Other load on the machine takes cores from every engine alike (compare the peers' "
        "efficiency in the table). Candidates to close it, not yet measured on a quiet "
        "machine: let a node hold its next call while it runs one (`Worker(buffer=1)` does "
        "this today; as a default it would change what a slot means); sample metrics less "
        "often when nothing listens. Runs on 2026-11-23 measured 75% (machine loaded), 82%, 86% (before the hub was dropped) and "
        "88%; the calibrated ideal itself moved from 1.72 s to 1.99 s "
        "between runs, and skyward matched or led Ray tasks and Dask in each."
        " The run of 2026-12-02 03:40 began with a load average of 3.56 (a test run had just ended) on a machine about 1.6x slower than the evening before (`import ray` 304 ms against 186 ms, Ray's idle actors 6.4% of a core against 3.1%): 79% (calls) and 84% (map) of the ideal, with every peer lower too: Ray tasks 74%, Dask 68%, ProcessPoolExecutor 86% (96% the evening before)."
        " The run of 2026-12-02 07:09, on a quiet machine (load average 0.74 at its start): 83% (calls) and 90% (map, a pass) of an ideal of 1.98 s; Ray tasks 81%, Dask 68%, "
        "ProcessPoolExecutor 91%."
        " The full run of 2026-12-03 13:34 (this table's; load average 0.92 at its start, a package install had just ended): 87% (calls) and 90% (map, a pass) of an ideal of 1.92 s; Ray tasks 80%, Dask 73%, ProcessPoolExecutor 89% (96% in the run of 07:04 that day, when skyward's calls made 91%)."
        " The full run of 2026-12-03 20:37 (this table's; load average 0.59 at its start): 87% (calls) and 86% (map) of an ideal of 2.00 s, with ProcessPoolExecutor itself at 88% (skyward's calls 1.01x its time), Ray tasks 82%, Dask 76%: on that run's machine no engine reached 90%, and skyward's calls took what ProcessPoolExecutor's map took."
    ),
    "N-events-lost": (
        "Not a loss: the simulated nodes sent fewer than the row counts as sent. The row's "
        "\"sent\" is the ticks of one round a second in the window, but the simulator "
        "(tests/simulated_cluster.py) slept a second after each round of 1,000 nodes' "
        "batches, which took tens of milliseconds more on the machine of 2026-12-03, so its "
        "period drifted past a second. The full run of 07:04 that day, this table's, counted "
        "7,583 events a second delivered of 7,982; the N group's metrics rows alone, right "
        "after on a quiet machine, 7,876 of 7,962, and 7,614 of 7,968 on the tree before this "
        "table's (so not the map change of that hour). The simulator now keeps a fixed grid, "
        "as skyward's `MetricSampler` does: the same rows then counted 7,993 delivered of "
        "7,993 sent."
    ),
    "N-console": (
        "The console's share is the difference of two separate 20 s runs (the client with the "
        "console drawing, less the client without), each on a machine shared with the 1,000 "
        "simulated nodes' process and the relay, so it carries both runs' noise: 8.3% in the "
        "run of 2026-12-03 06:15, 12.0% in this table's run of 07:04, and when the rows were "
        "run alone after it, 11.3% with the simulator of that run, then 6.7% once the "
        "simulator kept a fixed grid (see N-events-lost). Not profiled further."
        " Profiled on 2026-12-03 (py-spy, 1,000 simulated nodes, 20 s): most of the console's time was rich drawing the nodes table 4 times a second, and the rest the event bus matching each of 8,000 metric events a second against the console's 21 subscriptions. The table is now drawn at most once a second (`TABLE_EVERY`, as often as nodes sample metrics) and the bus works out an event class's handlers once: the console's share, measured as the row does, alternating twice, went from 6.2% to 2.7% of a core, and the full run of 13:34 that day measured 4.9%, a pass."
    ),
    "C1-first": (
        "Until 2026-12-04 a pool's collections lived on one Ray actor per shard, each started "
        "by the first operation that needed it, which waited for a Ray worker to boot: 576 ms "
        "(518-588 ms over the 4 shards) against 5 µs warm in the full run of 2026-12-04 19:38, "
        "all but about 25 ms of it Ray's (`import ray` and connecting to the raylet, by "
        "timestamps of the host's `__init__`). Since then one actor holds every shard and the "
        "pool starts it beside its agents (docs/collections.md), so the first operation finds "
        "it running; the open does not wait for it, so a miss here would be a task that ran "
        "before that actor's worker had booted."
    ),
    "D-lost": (
        "The run of 2026-12-02 03:40 counted one follower (of 200 HTTP clients that "
        "each submit a run and follow its output) that never saw its run's `exit` event; "
        "every script got its pool, every pool was adopted again after the SIGKILL, and "
        "nothing was left after `sky down --all`. The runs of 2026-12-01 (14:34 and 17:41) "
        "lost nothing. The row keeps only the count, not the follower's last error, so it "
        "is not located yet: a follower gives up after three times the test's length, and "
        "this run's machine was about 1.6x slower than the evening before (see B4-import), "
        "so a run that ended after that deadline counts as lost too. Next: record each lost "
        "follower's last state in the row's note, then run group D alone until it shows again."
        " Since then the row's note gives each lost run's last state. The group alone, 4 "
        "times that morning, and the full run of 07:09 lost nothing."
    ),
}

UNEXPLAINED = (
    "No analysis is recorded for this target yet. Profile the skyward subject "
    "(`py-spy record -o profile.svg --subprocesses -- .venv/bin/python -m benchmarks.isolate ...`)."
)


def explain(checks: Sequence[Check]) -> list[tuple[str, str]]:
    """(title, text) for every missed target, in target order."""
    return [
        (f"{check['id']}: {check['target']} (measured {check['measured']})",
         EXPLANATIONS.get(check["id"], UNEXPLAINED))
        for check in checks
        if check["passed"] is False
    ]
