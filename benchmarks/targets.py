"""The targets of issue 6 and how each is checked against one run's rows.

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
    """One target: an id, what it asks, and how to read it from the rows."""

    id: str
    text: str
    check: Callable[[Sequence[Row]], Verdict]


def find(rows: Sequence[Row], group: str, subject: str) -> Row | None:
    """The measured row of ``group`` whose subject is (or starts with) ``subject``."""
    for candidate in rows:
        if candidate["group"] == group and candidate["subject"].startswith(subject):
            return candidate if candidate["runs"] and not math.isnan(candidate["median_s"]) else None
    return None


def fact(rows: Sequence[Row], group: str, subject: str, name: str) -> Any:
    """A fact a row recorded, or None."""
    found = find(rows, group, subject)
    return None if found is None else found.get("facts", {}).get(name)


def at_most_times(group: str, ours: str, peer: str, limit: float) -> Callable[[Sequence[Row]], Verdict]:
    """skyward's median ÷ the peer's median must be at most ``limit``."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine, theirs = find(rows, group, ours), find(rows, group, peer)
        if mine is None or theirs is None:
            return "not measured", None
        ratio = mine["median_s"] / theirs["median_s"]
        return f"{ratio:.2f}x", ratio <= limit

    return check


def at_least_faster(group: str, ours: str, peer: str, factor: float) -> Callable[[Sequence[Row]], Verdict]:
    """The peer's median ÷ skyward's median must be at least ``factor``."""
    def check(rows: Sequence[Row]) -> Verdict:
        mine, theirs = find(rows, group, ours), find(rows, group, peer)
        if mine is None or theirs is None:
            return "not measured", None
        speedup = theirs["median_s"] / mine["median_s"]
        return f"{speedup:.1f}x faster", speedup >= factor

    return check


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


def serialized_once(rows: Sequence[Row]) -> Verdict:
    """B3: the broadcast argument was serialized once by the client."""
    count = fact(rows, "B3", "skyward", "serializations")
    return ("not measured", None) if count is None else (f"{count}x per broadcast", count == 1)


def efficiency(rows: Sequence[Row]) -> Verdict:
    """B6: ideal ÷ measured, for the 200 separate calls."""
    value = fact(rows, "B6", "skyward 200 calls", "efficiency")
    return ("not measured", None) if value is None else (f"{value:.0%}", value >= 0.85)


TARGETS = (
    Target("B1-actor", "`>>` round trip ≤ 1.3x a raw Ray actor call",
           at_most_times("B1", "skyward", "Ray actor call", 1.3)),
    Target("B1-task", "`>>` round trip ≤ 0.5x a Ray task", at_most_times("B1", "skyward", "Ray task", 0.5)),
    Target("B1-dask", "`>>` round trip ≤ 0.2x a Dask pinned submit",
           at_most_times("B1", "skyward", "Dask pinned submit", 0.2)),
    Target("B2-time", "`pool.map` of 10,000 items ≤ 0.1 s, chunking chosen automatically (no knob)",
           map_time),
    Target("B2-ppe", "`pool.map` ≥ 15x faster than ProcessPoolExecutor.map chunksize=1",
           at_least_faster("B2", "skyward", "ProcessPoolExecutor.map chunksize=1", 15)),
    Target("B2-ray", "`pool.map` ≥ 50x faster than Ray tasks", at_least_faster("B2", "skyward", "Ray tasks", 50)),
    Target("B2-order", "`pool.map` results in input order",
           is_true("B2", "skyward", "in_order", "in order", "out of order")),
    Target("B2-stream", "streaming results still possible (`pool.map(..., stream=True)` or `pool.imap`)",
           is_true("B2", "skyward", "streaming", "available", "no streaming map in the API")),
    Target("B3-ratio", "100 MB broadcast ≤ 1.2x Ray put + 4 tasks",
           at_most_times("B3", "skyward", "Ray put + 4 tasks", 1.2)),
    Target("B3-once", "broadcast argument serialized once, not once per node", serialized_once),
    Target("B4-start", "start to 4 ready nodes ≤ 1.0x ray.init + 4 actors",
           at_most_times("B4", "skyward Compute(nodes=4) start", "ray.init + 4 actors start", 1.0)),
    Target("B4-shutdown", "shutdown ≤ 1.5 s", at_most("B4", "skyward Compute(nodes=4) shutdown", 1.5)),
    Target("B5", "idle 4-node pool ≤ 1.0 GB PSS", at_most("B5", "skyward", GIB_IN_MIB, "MiB")),
    Target("B6", "200 × 20 ms numpy tasks ≥ 85% of ideal on this machine's cores", efficiency),
)


def check_all(rows: Sequence[Row]) -> list[Check]:
    """Every target, checked against ``rows``."""
    checks: list[Check] = []
    for target in TARGETS:
        measured, passed = target.check(rows)
        checks.append({"id": target.id, "target": target.text, "measured": measured, "passed": passed})
    return checks
