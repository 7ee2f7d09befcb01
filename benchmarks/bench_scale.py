"""X — how the per-call cost grows with the work: a scale curve.

Four series, each the cost per call (or per item) as the work grows, so a reader sees
whether it stays flat: `>` futures submitted at once on a 4-node local pool (1,000 to
50,000), `pool.map` items on the same pool (10 to 1,000,000, trivial items), `>>`
round trips on local pools of 1 to 8 nodes (calls spread round-robin), and `>>` round
trips on SSH pools of 1 to 3 hosts (tests/hosts.py; skipped without root). The curve is
drawn into docs/images/scale.png (matplotlib, from the `bench` extra) and every point is
a row.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import engines, payloads
from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "X"
TITLE = "X — scale curve: cost per call as the work grows"
ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT / "docs" / "images" / "scale.png"
TESTS = str(ROOT / "tests")
FUTURES = (1_000, 5_000, 20_000, 50_000)
ITEMS = (10, 100, 1_000, 10_000, 100_000, 1_000_000)
LOCAL_NODES = (1, 2, 4, 8)
SSH_HOSTS = (1, 2, 3)
CALLS = 200


def run(quick: bool = False) -> list[Row]:
    series: dict[str, list[tuple[int, float]]] = {}
    rows: list[Row] = []
    for name, fn, args in (
        ("futures", _futures, (FUTURES[:2] if quick else FUTURES,)),
        ("map items", _map_items, (ITEMS[:4] if quick else ITEMS,)),
        ("local nodes", _local_nodes, (LOCAL_NODES[:2] if quick else LOCAL_NODES,)),
        ("SSH hosts", _ssh_hosts, (SSH_HOSTS[:1] if quick else SSH_HOSTS,)),
    ):
        try:
            points = isolated(fn, *args, timeout=1800)
        except SubjectFailed as exc:
            rows.append(failed_row(GROUP, f"skyward per call vs {name}", exc, metric=name))
            continue
        if isinstance(points, dict):
            rows.append(failed_row(GROUP, f"skyward per call vs {name}", f"not measured: {points['skipped']}", metric=name))
            continue
        series[name] = [(int(size), float(cost)) for size, cost in points]
        rows += [row(GROUP, f"skyward per call, {name} = {size:,}", [cost], metric=name) for size, cost in series[name]]
    if series:
        _plot(series)
    return rows


def _futures(sizes: list[int]) -> list[tuple[int, float]]:
    import skyward as sky

    task = sky.function(payloads.identity)
    points = []
    with engines.skyward_pool() as pool:
        [task(i) > pool for i in range(200)]
        for size in sizes:
            started = time.perf_counter()
            futures = [task(i) > pool for i in range(size)]
            for future in futures:
                future.result()
            points.append((size, (time.perf_counter() - started) / size))
    return points


def _map_items(sizes: list[int]) -> list[tuple[int, float]]:
    points = []
    with engines.skyward_pool() as pool:
        pool.map(payloads.identity, range(100))
        for size in sizes:
            started = time.perf_counter()
            pool.map(payloads.identity, range(size))
            points.append((size, (time.perf_counter() - started) / size))
    return points


def _round_trips(pool: Any) -> float:
    import skyward as sky

    task = sky.function(payloads.noop)
    for _ in range(20):
        task() >> pool
    started = time.perf_counter()
    for _ in range(CALLS):
        task() >> pool
    return (time.perf_counter() - started) / CALLS


def _local_nodes(counts: list[int]) -> list[tuple[int, float]]:
    import skyward as sky

    points = []
    for count in counts:
        with sky.Compute(nodes=count, options=sky.Options(console=False, logging=False)) as pool:
            points.append((count, _round_trips(pool)))
    return points


def _ssh_hosts(counts: list[int]) -> Any:
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from hosts import HostLab, available

    import skyward as sky

    reason = available()
    if reason is not None:
        return {"skipped": reason}
    points = []
    with HostLab.start(max(counts)) as lab:
        provider = sky.SSH(hosts=lab.strings(), key_path=lab.client_key, known_hosts=lab.known_hosts)
        for count in counts:
            with sky.Compute(provider=provider, nodes=count, options=sky.Options(console=False, logging=False)) as pool:
                points.append((count, _round_trips(pool)))
    return points


def _plot(series: dict[str, list[tuple[int, float]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(series), figsize=(4 * len(series), 3.4))
    for axis, (name, points) in zip(axes if len(series) > 1 else [axes], series.items()):
        sizes, costs = zip(*points)
        axis.plot(sizes, [c * 1e3 for c in costs], marker="o")
        if name in ("futures", "map items"):
            axis.set_xscale("log")
        axis.set_ylim(bottom=0)
        axis.set_title(f"per call vs {name}", fontsize=10)
        axis.set_xlabel(name)
        axis.set_ylabel("ms per call" if "nodes" in name or "hosts" in name else "ms per item")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    IMAGE.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(IMAGE, dpi=110)
    plt.close(figure)

