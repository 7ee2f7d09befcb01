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
    Target("R-broadcast", "remote 100 MB broadcast ≤ 1.0x Ray put + tasks by its driver on host 0 (issue 40; "
           "1.2x in issue 17)",
           at_most_times("R", "skyward broadcast", "Ray (driver on host 0) broadcast", 1.0)),
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
        "**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 1.11 s to 4 ready nodes against Dask's 691 ms (1.61x), `ray.init` plus 4 actors 3.47 s (0.32x). Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray's own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 1.20 s to 4 ready nodes against Dask's 781 ms (1.54x), `ray.init` plus 4 actors 2.75 s (0.44x). Since this run a local pool's open also waits until its collection hosts answer (their start went on for 50-370 ms after the open returned, beside the first tasks), a cost the open now shows. Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script's function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured 1.08 s to 4 ready nodes against Dask's 723 ms (1.50x), `ray.init` plus 4 actors 2.73 s (0.40x). Nothing on a local open's path changed. Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured 1.57 s against Dask's 937 ms (1.68x) and 1.11 s against 757 ms (1.47x); `ray.init` plus 4 actors 3.31 s and 2.76 s (0.47x and 0.40x). Nothing on a local open's path changed since the runs before. Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured 1.64 s against Dask's 888 ms (1.85x) and 1.28 s against 844 ms (1.52x); `ray.init` plus 4 actors 3.14 s and 3.17 s (0.52x and 0.41x). "
        "**Where it stands.** 1.23 s to 4 ready nodes against Dask's LocalCluster 888 ms (1.38x) and "
        "`ray.init` plus 4 actors 3.81 s (0.32x) in the run of 2026-12-05 08:12, the best full run (3.7x "
        "on 2026-11-26, 1.58x at 04:39 that day). A skyward pool's cold start is a private Ray instance (a GCS, a raylet and Ray "
        "worker processes), while Dask starts 4 plain Python processes.\n\n"
        "**Where the time goes.** An open of 2026-12-05 by the timestamps of the GCS's and the raylet's "
        "logs (1.39 s): the raylet registered 0.25 s in; the client's connection as Ray's driver took "
        "0.37 s, while the two workers Ray starts when a driver connects booted beside it; the 4 agents' "
        "actors were created on those two and on two more workers Ray started then (it starts as many at "
        "once as the machine has cores), each agent ready 0.6-0.7 s after its creation was sent; the "
        "collections' hosts, a fifth worker, after them. `/proc/stat` over three opens: 2.2-2.4 s of CPU "
        "in 1.3-1.5 s, 1.7 of the 2 cores busy, so the open is its processes' CPU: each Ray worker about "
        "0.4 s, of which `import ray` is about 0.3 s (754 modules; `-X importtime`), and skyward's "
        "modules on top of it 60-70 ms.\n\n"
        "**Done.** Ray starts lean (`providers/ray_start.py`, docs/architecture.md): no API server, "
        "autoscaler or log monitor, the raylet's registration asked for every 10 ms instead of once a "
        "second (`ray.init` 2.0-3.2 s before, 0.87 s after); a stand-in takes the place of Ray's "
        "dashboard agent and of its runtime-env agent, which starts only when an agent with a "
        "`runtime_env` asks for it (`providers/ray_agent_stand_in.py`): alternating A/B runs measured "
        "1.80 against 1.99 s, then 1.14 against 1.42 s, the pool's PSS 398 against 488 MiB. Since "
        "2026-12-05 no process of the pool imports pydantic, starlette or pyarrow for Ray's serializers, "
        "which it never uses (`providers/ray_worker.py`: 50-70 ms of CPU a process where pydantic is "
        "installed), and no raylet waits its random second for the object store (`ray_start.CONNECT`, "
        "docs/architecture.md): 5 alternating opens measured a median of 1.32 s against 1.60 s. Later "
        "that day: the local Ray is told it has no GPU (`num_gpus=0`: Ray imported its NVML binding and "
        "asked NVML for devices on every start), Ray is imported without `requests`, which a pool's Ray "
        "processes never call (`providers/ray_import.py`: 35-50 ms of CPU in the client and in each "
        "worker), and the storage machinery, the process executor and the config file's reader load "
        "only for the pools that use them: a script that imports skyward and opens a 4-node pool, 8 "
        "runs alternating, 1.56 s against 1.65 s.\n\n"
        "**What would close it.** For the case that matters (a script run again and again while it is "
        "written), a kept pool: `sky.Local(keep_warm=...)` or `Options(keep_alive=...)` reach 4 ready "
        "nodes in 0.1 s (B4-warm, B4-kept). Cold, a local transport without Ray for pools that need no "
        "Ray feature: the engine already runs without Ray on the fake transport (tests/fake_cluster.py) "
        "and dispatch already goes over the agents' Unix-socket lanes, but the agents' start, their event"
        " poll, broadcasts and the collections' hosts are Ray's today.\n\n"
        "**Full runs** (skyward ÷ Dask): 2026-12-01 14:34 5.15x, 17:41 2.25x; 2026-12-02 07:09 2.69x; "
        "2026-12-03 06:15 2.16x, 07:04 2.15x, 13:34 2.22x, 17:03 2.27x, 20:37 2.30x; 2026-12-04 01:53 "
        "1.80x, 16:28 1.69x, 22:40 2.06x; 2026-12-05 04:39 1.58x, 08:12 1.38x."
    ),
    "B5-cpu": (
        '**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 2.6% of a core (max 2.8%) against Ray\'s 3.3% with 4 idle actors (0.79x). Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray\'s own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 3.0% of a core (max 3.4%) against Ray\'s 3.3% with 4 idle actors (0.91x). Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script\'s function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured 3.4% of a core (max 3.8%) against Ray\'s 4.3% with 4 idle actors (0.79x). Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured 3.1% (max 3.4%) and 2.8% of a core (max 3.0%); Ray with 4 idle actors 3.5% and 2.5% (0.89x and 1.12x). Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured 4.2% (max 4.6%) and 3.2% of a core (max 3.8%), Ray with 4 idle actors 4.0% in the second (0.80x). '
        "**Where it stands.** An idle 4-node pool used 5.1% of a core (max 5.4%) in the run of 2026-12-05"
        " 08:12, Ray with 4 idle actors 5.7% (0.89x) and Dask's LocalCluster 14.2%; the pool's memory is "
        "388 MiB PSS against Ray's 593 MiB (416 MiB at 04:39, before Ray was imported without "
        "`requests`; see B4-dask). At 04:39 that day: 4.9% against Ray's 6.3%; the pool's memory was "
        "416 MiB PSS against Ray's 593 MiB (456 MiB in the run of 2026-12-04 22:40: its workers no longer"
        " load pydantic, see B4-dask). The best full run measured 1.7% (2026-12-04 01:53). The figure "
        "moves with the virtual machine's cost of a wake-up: the same processes measured 1.7% in one run "
        "and 3.6% on another machine the same day.\n\n"
        "**Where the time goes.** `perf record -a` for 10 s of an idle pool (2026-12-03): the 4 agents "
        "0.23-0.26% of a core each, the raylet 0.22%, the GCS 0.17%, the client 0.14%. `perf record -g` "
        "of one agent: every sample of its main thread in Ray's task-execution loop "
        "(`CoreWorker::RunTaskExecutionLoop`: boost.asio's timers, Ray's `PeriodicalRunner` and the "
        "`check_signals` callback of `_raylet.pyx`), the rest in Ray's gRPC threads; none in a thread of "
        "skyward's. Per-thread /proc counts: each agent's main thread wakes 99 times a second. Ray's core"
        " worker runs that signal check every 10 ms in every worker process, a period written in "
        "`core_worker.cc`, not a setting (`RAY_get_check_signal_interval_milliseconds` is another loop's:"
        " `perf trace` still saw 492 `epoll_wait` calls of 10.04 ms in 4.94 s). The collections' hosts, "
        "one more idle Ray worker since 2026-12-04, wake as often.\n\n"
        "**Done.** Nodes sample metrics only while someone listens, an idle agent holds its event poll 30"
        " s, and the pool's Ray runs no log monitor, autoscaler monitor, API server or dashboard agent, "
        "and its runtime-env agent only when asked for (see B4-dask).\n\n"
        "**What would close it.** Nothing of skyward's wakes an idle pool; 5 idle Ray workers cost about "
        "1.2% of a core before any work, and the raylet and GCS 0.4% more, so under Ray the target cannot"
        " be met. A local transport without Ray (see B4-dask) would close it.\n\n"
        "**Full runs** (the pool; Ray with 4 idle actors): 2026-12-01 14:34 2.7%, 3.4%; 17:41 2.1%, 3.1%;"
        " 2026-12-02 03:40 4.8%, 6.4%; 07:09 4.4%, 4.1%; 2026-12-03 06:15 3.0%, 3.5%; 07:04 3.4%, 5.6%; "
        "13:34 5.5%, 6.8%; 17:03 6.4%, 7.4%; 20:37 2.1%, 3.0%; 2026-12-04 01:53 1.7%, 2.0%; 16:28 3.6%, "
        "5.4%; 22:40 4.4%, 5.8%; 2026-12-05 04:39 4.9%, 6.3%; 08:12 5.1%, 5.7%."
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
        "share. The full runs since passed (1.03x on 2026-12-05 04:39) until 08:12 that day: 1.45x, "
        "skyward's 47.98 ms as in the run before (48.09 ms) against Ray's 33.05 ms (min 16.96 ms, 46.63 "
        "ms the run before); the B3 group alone right after it measured 49.26 ms against 46.88 ms "
        "(1.05x). Nothing on the local broadcast's path changed between those runs."
    ),
    "R-trip": (
        "**Latest.** Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured 713 µs against Ray's 770 µs (0.93x) and 1.00 ms against 1.13 ms (0.88x), a pass in both, the SSH tunnel alone 126 µs and 214 µs. Since the runs before, a call with plain arguments is pickled by the C pickler alone by the remote encoder too, and a node agent does less per call (docs/architecture.md, the local lanes): both ends of a remote `>>` run that code. Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured 868 µs against Ray's 827 µs (1.05x, a pass), then 1.12 ms against 897 µs (1.25x), when the SSH tunnel alone, with no engine on either end, took 198 µs against 137 µs in the first: the machine was slower in the second run. "
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
        "**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 146 ms (min 123 ms, max 172 ms) against Ray's 315 ms (min 238 ms, max 697 ms), 0.46x. Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray's own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 215 ms (min 188 ms, max 305 ms) against Ray's 526 ms (min 288 ms, max 1.96 s), 0.41x: since this run the head relay sends a broadcast to each node over its lane instead of through Ray's object store (docs/architecture.md). The R group alone on that tree, just before the run: 173 ms (min 154 ms) against 352 ms (0.49x). Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script's function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured skyward's 100 MB broadcast at 391 ms (min 308 ms) against Ray's 385 ms (min 243 ms, max 824 ms), 1.02x: skyward's figure is the day's usual one (373 ms and 500 ms in the runs of 17:33 and 18:07), Ray's its fastest. The R group alone twice right after it, on the same tree: 322 ms against 538 ms (0.60x) and 387 ms against 526 ms (0.74x). Nothing on a broadcast's path changed since the runs of 17:33 and 18:07. Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured skyward's 100 MB broadcast at 373 ms (min 318 ms) against Ray's 624 ms (min 317 ms), 0.60x, and at 500 ms (min 458 ms) against 717 ms (min 417 ms, max 2.45 s), 0.70x, over 9 broadcasts each. Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured skyward's 100 MB broadcast at 445 ms (min 288 ms) against Ray's 359 ms (min 308 ms), 1.24x over 3 broadcasts each, and, timing 3 a round since (9 each), at 477 ms (min 344 ms) against Ray's 856 ms (min 307 ms, max 1.70 s), 0.56x: a pass, by the peer's spread more than by skyward's speed (the best of each is still Ray's). Since the run of 12:45 the relay receives an upload into memory backed by huge pages and each node makes the `bytes` it hands the function the same way (`core/huge_pages.py`): alone, 15 broadcasts each, the trees alternating twice, a median of 403 and 381 ms against 498 and 468 ms. "
        '**Where it stands.** 459 ms (min 434) for a 100 MB argument to every node of a 3-host pool agai'
        "nst Ray's 406 ms (min 401) in the run of 2026-12-05 12:45: 1.13x, from 1.96x in the run of 08:1"
        "2 that day and 1.63x at 04:39. Ray's driver runs on host 0 and already holds the data there, so"
        " it pays `ray.put` and 3 tasks; skyward's client holds it on this machine and first sends it to"
        ' the head relay, which then does the same put and calls. The R group alone the same day, before'
        " and after: 730 ms against Ray's 444 ms (1.65x) before, 474 ms against 380 ms (1.25x) after. Tw"
        "o full runs passed because Ray's driver was slow that time (0.76x on 2026-11-26, Ray 1.59 s; 0."
        '52x on 2026-12-03 13:34, Ray 2.66 s).\n\n**Where the time goes.** Timed on the client (2026-12-05'
        ', 6 broadcasts of 100 MB to 3 hosts, after the change below): 340-430 ms in all, of which the u'
        "pload to the relay 98-122 ms and the client's pickling under 1 ms (the argument out of band). T"
        "he upload is TLS's 48 ms for 100 MB (a blocking socket on loopback, measured alone) and the rel"
        "ay's fresh 100 MB receive buffer: `bytearray(100 MB)` takes 43 ms here, its page faults. The ot"
        "her ~250 ms are what Ray's driver does too: `ray.put` on the head, host 0's agent reading in pl"
        "ace, hosts 1 and 2 pulling the object through Ray's object manager, and each agent's copy into "
        'the `bytes` the function gets. Before the change, a split with timestamps (2026-12-03): the cli'
        'ent pickled the argument in 48 ms and framed the message in 45 ms, the body took 240 ms through'
        " the SSH channel, the relay decoded it in 43 ms; a cProfile of the channel's send showed asyncs"
        "sh's Python per 32 KB packet.\n\n**Done.** A large argument that does not compress goes to the he"
        'ad relay over a TLS upload lane beside the SSH channel (`engine/transports/upload_lane.py`, doc'
        's/architecture.md): the SSH channel moved 100 MB in 250-550 ms here, a blocking TLS socket in 4'
        "8 ms. A remote pool's large `bytes` argument travels out of band (the client copied it into the"
        " pickle for 50 ms), and the relay stores out-of-band buffers in Ray's object store as such (Ray"
        ' copied a `bytes` buffer into its pickle and rebuilt a `bytearray` one by copying it: 450-570 m'
        's against 340-430 ms). Before, on the SSH channel: AES-GCM offered first (a 3-host broadcast 1.'
        '61-1.71 s before, 1.40-1.51 s after), and a pickle of 1 MiB or more stored out of band (`RayTra'
        'nsport.share`), so each agent unpickles the request where it lies.\n\n**Tried and not kept.** asy'
        "ncio's TLS transport for the lane: 220 ms per 100 MB against 48 ms for a blocking socket in a t"
        "hread. An anonymous `mmap` as the relay's receive buffer: 105 ms per 100 MB on loopback, the sa"
        'me as a `bytearray` (its page faults move into the receive, they do not go). Earlier, on the SS'
        "H channel: the relay sending the payload to the other hosts' agents over their TCP lanes instea"
        "d of Ray's object store (no gain); OpenSSH's own tunnel (`ssh -W`): 0.27-0.29 s per 100 MB agai"
        "nst 0.25-0.27 s for asyncssh; reading the relay's frames with a `BufferedProtocol` (at most 50 "
        'ms).\n\n**What would have closed it, before the lanes carried it.** What was left was the upload itself, 100-120 ms of the 2 shared co'
        "res that Ray's driver on host 0 never spends: the data has to cross from the client to the clus"
        "ter. Keeping the relay's receive buffer for the next upload of the same size would save its pag"
        'e faults (about 40 ms per 100 MB) at the price of holding that memory between broadcasts; not d'
        'one. For data this large, `sky.Volume` or object storage, which every node reads directly, skip'
        "s the client's link altogether.\n\n**Full runs** (skyward ÷ Ray; the SSH tunnel alone): 2026-12-0"
        '1 11:15 1.59x, 0.82 s; 14:34 1.96x, 365 ms; 17:41 1.61x, 380 ms; 2026-12-02 03:40 1.96x, 449 ms'
        '; 07:09 1.95x, 402 ms; 2026-12-03 13:34 0.52x; 17:03 1.91x, 509 ms; 20:37 1.73x, 380 ms; 2026-1'
        '2-04 01:53 1.78x, 391 ms; 16:28 1.55x, 507 ms; 22:40 1.71x, 527 ms; 2026-12-05 04:39 1.63x, 410'
        ' ms; 08:12 1.96x, 547 ms; 12:45 (the upload lane) 1.13x, 465 ms, a path the broadcast no longer'
        ' takes.'
    ),
    "R-warm": (
        '**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 2.65 s (max 2.68 s), a pass, the `ray start` phase 1.48 s and the agents 0.87 s; the cold open 7.66 s. Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray\'s own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 3.56 s (min 3.28 s, max 4.14 s), a miss, the `ray start` phase 1.97 s (55%) and the agents 1.20 s; the cold open 11.8 s. Nothing on a remote open\'s path changed since 21:10; the hosts\' own `ray start` took 1.5x as long as then (1.31 s), as Ray\'s in the M group took twice as long as in the run of 22:31 that day (2.55 s warm, a pass, not committed). Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script\'s function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured 2.45 s (max 2.55 s), a pass, the `ray start` phase 1.31 s and the agents 0.81 s; the cold open 8.63 s. Since the runs of 17:33 and 18:07 the command that bootstraps a host goes on as its watchdog (one SSH command, one login shell, fewer per host) and a warm bootstrap reuses its environment\'s report instead of starting Python for it: a warm open of 3 hosts, the trees alternating twice (6 opens each), reached `ray start` in 0.82 and 0.76 s against 0.99 and 0.90 s (the whole open moved more with Ray\'s start: 3.47 and 3.09 s against 3.53 and 3.02 s). Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured 3.28 s (max 3.55 s) and 3.49 s (max 3.65 s), the `ray start` phase 1.74 s in both and the agents 1.05 s and 1.21 s; the cold open 10.7 s and 10.1 s. Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured 3.56 s (max 4.09) and 3.59 s (max 4.06), the `ray start` phase 1.67 s and the agents 1.18 s in the second; the cold open 11.5 s and 9.71 s. '
        "**Where it stands.** Missed in the run of 2026-12-05 12:45: 4.29 s (min 3.65 s), the `ray start` "
        "phase 2.31 s and the agents 1.49 s, on a machine that started processes 1.6x slower than at 08:12"
        " (`python -c pass` 38 ms against 24 ms; the cold open 13.2 s against 9.86 s); not measured alone "
        "after it. Nothing on the open's path changed since 08:12 but the relay's upload lane, which "
        "listens once the agents answer. Missed in the run of 2026-12-05 08:12: 3.44 s (max 3.45), the `ray start` "
        "phase 1.71 s and the agents 1.11 s, on a machine slower in that run's second half than in its "
        "first (the M group's Ray took 10.79 s for 10,000 tasks on 1 host against 6.65 s at 04:39, and "
        "its own `ray start` on 1 host 3.66 s against 3.35 s); the S1 group alone right after it measured"
        " 3.12 s (min 3.02 s), and 4 times more, alternating with the tree of before that day's change "
        "to Ray's import (`providers/ray_import.py`), 3.10 and 2.96 s against 3.25 and 3.28 s (the `ray"
        " start` phase 1.52 and 1.59 s against 1.67 and 1.77 s). Met in the run of 04:39 that day: a warm open of a 3-host SSH pool "
        "(environments already installed) took 2.86 s (max 3.30), of which `ray start` on the 3 hosts "
        "1.53 s and the agents 0.99 s (they overlap), from 5.02 s in the run of 2026-12-04 22:40 and 8.06"
        " s on 2026-11-25. The S1 group alone, the two trees alternating twice that hour on a busier "
        "machine, measured 3.24 and 3.21 s against 4.26 and 4.84 s, the `ray start` phase 1.80 and 1.64 s"
        " against 3.14 and 3.65 s: with 3 hosts starting Ray at once on 2 cores, a connection to a raylet"
        " or its object store that came before its socket cost a second almost every time (see B4-dask). "
        "The issue's other form of the target, \"the measured share that is the hosts' own `ray start` on "
        "shared cores, with the rest cut\": `ray start` is 70% of the open, and what comes before it is "
        "1.0-1.1 s.\n\n"
        "**Where the time goes.** A timeline of 3 warm opens (2026-12-04, each step of `RemoteHosts` "
        "stamped): connect 0.04 s, facts 0.23 s, each host's bootstrap 0.2-0.6 s and its watchdog's start"
        " 0.15-0.3 s, so `ray start` began at 1.0-1.1 s; the head's `ray start` took 2.0-2.2 s (1.26 s "
        "wall and 0.92 s of CPU alone on this machine, 0.7 s of it importing Ray and its command line), "
        "the other hosts joined 0.4-1.3 s after the head's address was known, and the relay answered 0.25"
        " s later. Sampling every process's CPU during a warm open: 4.3 s of CPU in a 5.2 s open on 2 "
        "cores, the three `ray start` processes 1.56 s, the agents' Ray workers 1.45 s, the relay 0.43 s."
        " Each SSH command costs a host about 0.1 s of CPU in root's `~/.bashrc` (pyenv's init; `perf "
        "record -a` during 20 commands).\n\n"
        "**Done.** Every host's `ray start` is lean (`providers/ray_start.py`: no API server, monitors or"
        " dashboard agent, the runtime-env agent only when asked for, the registration asked for every 10"
        " ms; `ray start --head` alone 2.15 s before, 1.04 s after). The joining hosts' `ray start` and "
        "the head relay boot with the head's and read the address on stdin; the relay starts the agents "
        "while the other hosts join. The facts command makes the pool's directories and the bootstrap "
        "reports skyward's place and versions from one Python start (the `ship` phase 0.52 s before, "
        "under 0.01 s after). Since 2026-12-05 every process a host's `ray start` runs tries a connection"
        " to its raylet or object store again after 10 ms instead of a second (`ray_start.CONNECT`), and "
        "its workers import nothing for Ray's serializers (`providers/ray_worker.py`), and each host's `ray "
        "start` and workers import Ray without `requests` (`providers/ray_import.py`).\n\n"
        "**Tried and not kept.** Beginning each host's `ray start` as soon as that host is ready rather "
        "than once every host is: 5.30, 4.75 and 4.73 s against 4.70, 3.96 and 4.85 s, since on 2 shared "
        "cores the head's start then competes with the other hosts' bootstraps.\n\n"
        "**What would close it.** On this machine the open's floor is the hosts' CPU: 3 Ray starts and 3 "
        "agents' boots on 2 cores. Where hosts are machines of their own the three starts run truly in "
        "parallel. What skips them is a pool kept between scripts: `Options(keep_alive=...)` reaches "
        "every node's first answer in 0.07 s (R-kept).\n\n"
        "**Full runs** (warm open; its `ray start` phase): 2026-12-01 14:34 8.68 s, 5.85 s; 17:41 7.17 s,"
        " 4.53 s; 2026-12-02 03:40 8.47 s, 6.48 s; 07:09 7.11 s, 5.43 s; 2026-12-03 06:15 9.04 s, 6.80 s;"
        " 07:04 8.61 s, 6.55 s; 13:34 7.58 s, 5.50 s; 17:03 6.16 s, 4.30 s; 20:37 5.45 s, 3.90 s; "
        "2026-12-04 01:53 4.97 s, 3.44 s; 16:28 4.60 s, 2.82 s; 22:40 5.02 s, 3.50 s; 2026-12-05 04:39 "
        "2.86 s, 1.53 s; 08:12 3.44 s, 1.71 s."
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
        "**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured a script's function at 65 µs against ProcessPoolExecutor's 173 µs (0.37x, a pass), an imported function 65 µs. Since the run before, a plain call travels as a bare tuple the node makes a request of, a small lane frame is read with one `recv`, and both ends do less per call (docs/architecture.md): an A/B, the trees alternating three times, gave 66-68 µs against 81-86 µs. Right after this run, five fresh pools alternating with ProcessPoolExecutor (30 warm-up and 170 timed calls each): 62-79 µs against 124-194 µs (0.35x-0.54x). Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray's own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured a script's function at 159 µs against ProcessPoolExecutor's 284 µs (0.56x, a pass), an imported function 143 µs. Since this run a local pool's open returns once its collection hosts answer: their start had gone on for 50-370 ms beside the first calls (in fresh pools, 30 warm-up and 170 timed calls each, a script's function took 129-185 µs before and 111-185 µs after, the imported one 156-175 µs and 101-141 µs). Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script's function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured a script's function at 113 µs against ProcessPoolExecutor's 217 µs (0.52x, a pass), an imported function 103 µs. Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured a script's function at 135 µs against ProcessPoolExecutor's 232 µs (0.58x, a pass) and 162 µs against 198 µs (0.82x), an imported function 126 µs and 110 µs; the B1 group alone right after the second, 110 µs against 177 µs (0.62x), an imported function 116 µs. The gap between a script's function and an imported one moves between runs (9 µs, 52 µs, -6 µs) more than the code accounts for: the check that the node's copy is still current (~2.5 µs) and the node's lookup of it. Since the runs before, a call with plain arguments of a function the node holds or imports is pickled by the C pickler alone, and the agent does less per call (docs/architecture.md, the local lanes): an A/B, the trees alternating three times, gave 132-160 µs against 194-240 µs (ProcessPoolExecutor 259-312 µs). Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured a script's function at 169 µs against ProcessPoolExecutor's 238 µs (0.71x) and 169 µs against 189 µs (0.89x); an imported function 163 and 156 µs. Nothing on a small `>>`'s path changed but a size check per frame on the lanes. "
        "**Where it stands.** Missed in the run of 2026-12-05 12:45: 182 µs against ProcessPoolExecutor's "
        "258 µs (0.71x), on a machine that started processes 1.6x slower than at 08:12 (`python -c pass` "
        "38 ms against 24 ms). The B1 group alone right after it, the tree of 08:12 and this one taking "
        "turns twice: 254 µs against 229 µs (1.11x) and 179 µs against 208 µs (0.86x) for the tree of "
        "08:12, 250 µs against 251 µs (1.00x) and 183 µs against 195 µs (0.94x) for this one. So neither "
        "tree met it on that machine, and the change between them (the remote path's upload lane) did "
        "not move it. Met in the run of 2026-12-05 08:12: 144 µs against 256 µs (0.56x), an "
        "imported function 134 µs. Before it: 163 µs for a script's function against ProcessPoolExecutor's 271 µs in the "
        "run of 2026-12-05 04:39 (0.6015x, shown as 0.60x: a hair over the target), an imported function "
        "141 µs; the B1 group alone right after it measured 130 µs against 199 µs (0.66x). That run is "
        "the best of the full runs, the worst since the function is shipped once 1.06x. "
        "ProcessPoolExecutor's submit is a pickle down a pipe to an idle worker and one back; ours is the"
        " same on the agent's Unix-socket lane, plus the driver's dispatch (a slot from the scheduler, a "
        "request id, events for the console).\n\n"
        "**Where the time goes.** A split on 2026-12-03 on a quiet machine (a 4-node pool, 3,000 `>>` of "
        "a script's function, stamps at both ends of the lane read from one clock, medians; 231 µs a "
        "round trip): the client before its send 44 µs, the send 21 µs, until the agent's read returned "
        "23 µs, the agent's handling 59 µs (decoding the 199-byte request 20 µs, which takes 4 µs in a "
        "warm loop; the call 22 µs; encoding the outcome 10.5 µs), the agent's send 24 µs, until the "
        "client's read returned 41 µs, the client after it 14 µs. The two sends and two wake-ups are "
        "about 110 µs of it. On the client's thread (`time.thread_time`) a `>>` is 107-117 µs of CPU, of "
        "which the lane's send and read 44-49 µs; the same `>>` answered at once takes 29 µs in a warm "
        "loop (cProfile: 45% encoding the request, 17% the shipped function's validity check, 10% the "
        "scheduler's slot). psutil's per-thread times put 110-130 µs of the agents' CPU in each call, "
        "where `NodeRunner.execute` of the same request takes 17 µs in a warm loop: `>>` goes round-robin"
        " (as the reference documents say), so each agent runs its code cold after sleeping through the "
        "other three calls, as ProcessPoolExecutor's 4 workers are woken in turn too. The floor, measured"
        " on 2026-12-02 on a machine about 3x slower (two processes, a Unix socket, one pickle each way):"
        " 28.5 µs back to back, 104 µs when the caller sleeps 2 ms between calls.\n\n"
        "**Done.** A script's function goes to each node once and then as a 16-byte digest "
        "(`engine/shipping.py`; 1.5x before, when cloudpickle shipped its code with every call). "
        "skyward's own classes pickle by name, through a flat dispatch table (`wire._WIRE_GLOBALS`); the "
        "request is a `msgspec.Struct`; the right side of `>>` is checked once per type. The caller's "
        "thread writes the lane and reads the answer when a slot is free (`PoolDriver.run_now`), and the "
        "agent runs the call on the lane's own thread, so neither end hands it to another thread.\n\n"
        "**Tried and not kept.** Reading a frame's length and body in one system call (a 16 KiB first "
        "read on both ends): 229-241 µs against 221-228 µs, alternating 3 times.\n\n"
        "**What would close it.** 0.6x was 150 µs against the ProcessPoolExecutor of the run of "
        "2026-12-04 22:40; the wake-ups of two processes on 2 shared cores are about 110 µs of any round "
        "trip here, so what is left to cut is the code each end runs cold (about 45 µs on the client "
        "before its send, 59 µs on the agent). Each remaining piece is a few µs (the shipped function's "
        "check 8 µs, the scheduler's slot, the outcome's pickle 3.7 µs); none alone closed the 22 µs that"
        " run was over; the run of 2026-12-05 04:39 was 0.4 µs over.\n\n"
        "**Full runs** (skyward ÷ ProcessPoolExecutor): 2026-12-01 14:34 0.90x, 17:41 0.88x; 2026-12-02 "
        "03:40 0.97x, 07:09 0.95x; 2026-12-03 06:15 1.06x, 07:04 0.89x, 13:34 0.69x, 17:03 0.89x, 20:37 "
        "0.89x; 2026-12-04 01:53 0.92x, 16:28 0.77x, 22:40 0.69x; 2026-12-05 04:39 0.60x, 08:12 0.56x (a "
        "pass: 144 µs against 256 µs)."
    ),
    "B2-best": (
        "**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 2.03 ms for 10,000 items of a script's function against ProcessPoolExecutor's 2.94 ms at chunksize=1,000 (0.69x, a pass), an imported function 2.39 ms. Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray's own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 3.82 ms for 10,000 items of a script's function against ProcessPoolExecutor's 5.67 ms at chunksize=1,000 (0.67x, a pass), an imported function 4.43 ms. Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script's function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured 3.54 ms against ProcessPoolExecutor's 3.68 ms at chunksize=1,000 (0.96x, a pass), an imported function 5.00 ms. Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured a script's function's map at 3.85 ms against ProcessPoolExecutor's 5.47 ms at chunksize=1,000 (0.70x, a pass), then 3.89 ms against 3.25 ms (1.20x); the B2 group alone right after the second, 3.70 ms against 5.57 ms (0.66x). A map's path changed only in what a node does per chunk, which the day's agent trims made cheaper. **Where it stands.** Met in the run of 2026-12-05 08:12 (0.90x; see below). Before it: "
        "4.76 ms (max 8.21) for a map of a script's function against "
        "ProcessPoolExecutor's 3.81 ms at chunksize=1,000 (1.25x) in the run of 2026-12-05 04:39, an "
        "imported function 3.91 ms (1.03x). The B2 group alone right after it measured 3.34 ms against "
        "3.89 ms (0.86x, a pass), and the full runs of 2026-12-02 07:09 and 2026-12-04 22:40 0.60x and "
        "0.65x: a median of 8 maps of 3-5 ms each moves by half between runs of the same code on this "
        "machine.\n\n"
        "**Where the time goes.** ProcessPoolExecutor at chunksize=1,000 sends 10 chunks and pickles the "
        "function by reference; the map sends as few (7 to 10, counted by wrapping `wire._dump`). A "
        "py-spy profile of the client (200 Hz, 326 maps) shows its own work as pickling each chunk's "
        "items and writing them to the lane, the rest waiting on the nodes and the event loop's thread "
        "hand-offs.\n\n"
        "**Done.** A map gives no chunk less than about 5 ms of work once the first chunks' pace is known"
        " (`engine/driver.py`, `MIN_CHUNK_SECONDS`; before, its guided chunks ended in a tail of single "
        "items: 3.33x on 2026-11-28); a script's function goes to each node once (`engine/shipping.py`); "
        "a chunk runs as `list(map(fn, items))`, the per-item timeout's watcher asking the items' "
        "iterator which item runs (`node/execution.py`, `MapCursor`; before, each item took a lock and "
        "read the clock, about 300 ns, more than the work of a trivial item).\n\n"
        "**What would close it.** In the runs where it misses, the spread of the group's few samples; a "
        "cheaper round trip per chunk (see B1-ppe) would leave more room under it. Since the run of "
        "2026-12-05 08:12 each subject maps 24 times (12 in each of 2 rounds), not 8: that run measured "
        "3.70 ms against ProcessPoolExecutor's 4.13 ms at chunksize=1,000 (0.90x, a pass), an imported "
        "function 3.75 ms."
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
        "**Where it stands.** Met in the run of 2026-12-05 08:12: 282 ms against `import ray` 246 ms "
        "(1.15x), since Ray is imported without `requests` and the storage machinery, the process "
        "executor and the config file's reader are left to the pools that use them (see B4-dask); that "
        "run's row also counts what `sky.Compute` and the collections' hosts import, which the start "
        "counted before. The run of 04:39 that day: 323 ms against 241 ms (1.34x); the full runs from "
        "2026-12-01 17:41 to then measured 1.28x to 1.35x, four of them passes. The row "
        "counts `import skyward` (3 ms) and everything the first local open imports: Ray (the peer's "
        "whole row) and skyward's own modules on top of it. A kept pool's client never imports Ray "
        "(B4-kept-import). The run of 2026-11-26 (0.64x) counted `import skyward` alone, before issue 41 "
        "made the row count what the open imports, so it is not the same measure.\n\n"
        "**Where the time goes.** `python -X importtime`, the row's modules imported after `import ray`: "
        "skyward's modules take 50-90 ms of their own time (medians of 3-5 runs, 2026-12-03 to "
        "2026-12-05), none above 13 ms. The largest is `observe/events.py` (9-12.5 ms): its 21 public "
        "event dataclasses, whose frozen methods CPython 3.11 writes with one `exec` each (126 calls). "
        "`ray.dag` and `ray.experimental.channel` (14.5 ms) load only at `ray.shutdown`, outside the row.\n\n"
        "**Done.** rich, packaging, the kept pool's client and the older reference's events are imported "
        "where they are first needed (994 modules on the path before, 920 after; "
        "tests/unit/test_import_cost.py). The 63 message classes and 71 internal records are msgspec "
        "Structs (importing the codec and its messages after Ray: 34 ms before, 8.5 ms after). 47 "
        "dataclasses are left, 40 of them public records that the reference documents make frozen "
        "dataclasses (users may `dataclasses.replace` them); the 7 others are named in "
        "tests/unit/test_import_cost.py.\n\n"
        "**What would close it.** skyward's own share is now 57-100 ms of a path where Ray's import alone"
        " moves by 50 ms from run to run, so the ratio passes and misses with Ray's speed that hour "
        "(1.28x at 16:28 and 1.32x at 22:40 on 2026-12-04, on the same tree). Defining the 21 events more"
        " cheaply would save about 9 ms (1.30x in the run of 2026-12-05 04:39); a local transport without"
        " Ray (see B4-dask) would take Ray off the path.\n\n"
        "**Full runs** (skyward ÷ `import ray`): 2026-11-30 05:30 1.65x; 2026-12-01 14:34 1.38x, 17:41 "
        "1.29x; 2026-12-02 03:40 1.42x; 2026-12-03 06:15 1.35x, 07:04 1.30x, 13:34 1.34x, 17:03 1.33x, "
        "20:37 1.29x; 2026-12-04 01:53 1.31x, 16:28 1.28x, 22:40 1.32x; 2026-12-05 04:39 1.34x."
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
        '**Latest.** The full run of 2026-12-06 03:05 (this table; load average 0.77 at its start) measured 84% (calls) and 86% (map) of an ideal of 1.99 s; Ray tasks 82%, Dask 73%, ProcessPoolExecutor 92%. Before it, the full run of 2026-12-06 00:14 (load average 0.98 at its start, the machine about 2x slower in its last groups than at 22:31 the day before: Ray\'s own `ray start` took 5.62 s on 1 host and 11.04 s on 4 hosts in the M group, against 2.44 s and 6.67 s) measured 91% (calls) and 79% (map) of an ideal of 1.77 s; Ray tasks 78%, Dask 71%, ProcessPoolExecutor 92%. Before it, the full run of 2026-12-05 21:10 (load average 0.44 at its start, the quietest machine of the day: a `>>` of a script\'s function 113 µs, the warm open of 3 SSH hosts 2.45 s) measured 101% (calls) and 104% (map) of an ideal of 1.72 s, a pass; Ray tasks 90%, Dask 83%, ProcessPoolExecutor 116%. Two full runs before it, 2026-12-05 17:33 (load average 0.97 at its start) and 18:07 (0.57, the machine busier than in the first: the SSH tunnel alone took 214 µs against 126 µs), measured 82% (calls) and 84% (map) of an ideal of 1.94 s, then 75% and 77% of an ideal of 1.77 s; Ray tasks 79% and 67%, Dask 64% and 63%, ProcessPoolExecutor 86% and 82%. Before them, the two full runs of that afternoon (14:38, load average 0.50 at its start; 15:16, 1.68) measured 100% (calls) and 103% (map) of the ideal, a pass, then 80% and 84% of an ideal of 1.70 s, with Ray tasks at 73%, Dask 71% and ProcessPoolExecutor 91%. '
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
        " The full run of 2026-12-05 04:39 measured 95% (calls) and 94% (map), a pass; the one of 08:12 "
        "that day 82% and 86% of an ideal of 1.86 s, with Ray tasks 78%, Dask 69% and "
        "ProcessPoolExecutor 95%, and the B6 group alone right after it 85% and 89%. Not the code "
        "between those runs: the group alone 4 times more, alternating the tree of 04:39 with the one of"
        " 08:12, gave 93% and 92%, then 85% and 85% for the first, 86% and 91%, then 88% and 91% for the"
        " second. The run of 12:45 that day, on a machine that started processes 1.6x slower: 83% "
        "(calls) and 77% (map) of an ideal of 2.02 s, Ray tasks 80%; nothing on the local path changed "
        "since 08:12."
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
