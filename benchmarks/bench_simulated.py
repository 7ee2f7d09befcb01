"""N — a pool of 10, 100 and 1,000 simulated nodes through the real control plane.

The client, driver, scheduler, event bus and console are skyward's own, speaking the
relay protocol to the real head relay server in a process of its own; only the nodes
behind it are simulated, many per process (tests/simulated_cluster.py: each answers a
task as an agent does, inline on the relay's loop). So what grows with the node count
on the client's side shows here: opening (the control plane's part: the simulated
provisioning takes no time), `f() @ pool` with a small argument (one call per node), `f(x) @ pool` with a 100 MB
NumPy argument (counted serializations: the client serializes it once and sends it to
the relay once, and the relay hands it to each node's call; a simulated node reads it
once for all, where each real node reads its own copy at the same time),
`pool.map` of 1,000,000 trivial items (results in input order; items per second through
the client), and closing. Each size runs in a fresh interpreter, `@` five times and the
map three times (the medians). Then 1,000 nodes each send a one-GPU node's 8 metrics once a
second for 20 s, counted by a handler: the client's CPU (% of one core) and peak memory,
the events delivered against those sent, and the same again with the rich console
drawing the pool (to a terminal that discards it): the difference is the console's CPU.
Then work that takes time (waited on the relay's loop, so the nodes work at once): a
map of 120,000 one-second items while 1% of the 1,000 nodes vanish each minute (each
reported as a spot machine taken back): how often each item ran, the nodes lost and
launched again; and `Nodes(desired=10, max=1000)` given 40,000 waiting tasks of half a
second, each node a second to launch: the time to 1,000 nodes, the launches, and the
time back to 10 once idle. The nodes' work is serial in the relay process, so the map rate
is a floor for what the client can drive, not what 1,000 machines would compute.

Last, 100 and 1,000 nodes behind real lanes: the relay reaches every node as a remote
pool's head relay reaches the agents of the other hosts, over a TCP connection per node
that proves the pool's lane secret, to agents in 4 processes of their own
(``Behaviour.lanes``). Maps of 1,000,000 items (the first dials every lane; then the
median of three), 200 `f() >> pool` round trips, and what the relay holds: its open
files, its established connections and its memory. The agents' processes share the 2
cores with the relay and the client, where a real pool's agents have hosts of their own.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from benchmarks import payloads
from benchmarks.common import Row, failed_row, row
from benchmarks.isolate import SubjectFailed, isolated

GROUP = "N"
TITLE = "N — a simulated pool of 10, 100 and 1,000 nodes through the real relay"
TESTS = str(Path(__file__).resolve().parent.parent / "tests")
SIZES = (10, 100, 1_000)
ITEMS = 1_000_000
BROADCASTS = 5
MAPS = 3
"""Maps timed per size: one map of a million items lasts a fifth of a second, short
enough for one stall of a loaded machine to halve its rate, so the row is their median."""
LOST_ITEMS = 120_000
"""A map of a minute's work at 1,000 nodes of 2 slots with 1 s items: 1% of them lost."""
ELASTIC_TASKS = 40_000
BROADCAST_ELEMENTS = 12_500_000
"""float64: the 100 MB argument of a broadcast (B3's)."""


def run(quick: bool = False) -> list[Row]:
    rows: list[Row] = []
    for nodes in SIZES[:2] if quick else SIZES:
        try:
            measured = isolated(simulated_pool, nodes, ITEMS, timeout=600)
        except SubjectFailed as exc:
            rows.append(failed_row(GROUP, f"{nodes:,} nodes", exc))
            continue
        facts = {"nodes": nodes, "items": measured["items"]}
        rows += [
            row(GROUP, f"{nodes:,} nodes: open (control plane)", [measured["open"]], facts=facts, metric="open"),
            row(GROUP, f"{nodes:,} nodes: f() @ pool", measured["broadcast"], facts=facts, metric="broadcast"),
            row(GROUP, f"{nodes:,} nodes: pool.map of {measured['items']:,} items", measured["rates"],
                "items per second through the client", unit="ops/s", facts=facts, metric="map"),
            row(GROUP, f"{nodes:,} nodes: f(100 MB) @ pool", [measured["big"]],
                f"argument serialized {measured['serialized']}x, sent to the relay once, which hands it to every node",
                facts={**facts, "serializations": measured["serialized"]}, metric="broadcast 100 MB"),
            row(GROUP, f"{nodes:,} nodes: close", [measured["close"]], facts=facts, metric="close"),
        ]
    rows += _metrics_rows(SIZES[1] if quick else SIZES[-1], 5.0 if quick else 20.0)
    rows += _churn_rows(quick)
    rows += _lane_rows(SIZES[1:2] if quick else SIZES[1:])
    return rows


def _lane_rows(sizes: tuple[int, ...]) -> list[Row]:
    """Pools whose relay calls every node through a real TCP lane."""
    rows: list[Row] = []
    for nodes in sizes:
        at = f"{nodes:,} nodes behind TCP lanes"
        try:
            measured = isolated(lanes_pool, nodes, ITEMS, timeout=600)
        except SubjectFailed as exc:
            rows.append(failed_row(GROUP, at, exc))
            continue
        facts = {"nodes": nodes, "first_map": round(measured["first"]), "open_files": measured["files"],
                 "lanes": measured["lanes"], "relay_mib": round(measured["relay_mib"])}
        rows += [
            row(GROUP, f"{at}: pool.map of {ITEMS:,} items", measured["rates"],
                f"items per second through the client; the first map, which dials every lane: {measured['first']:,.0f}",
                unit="ops/s", facts=facts, metric="lanes map"),
            row(GROUP, f"{at}: f() >> pool", measured["trips"], "one node's lane, through the client and the relay",
                facts=facts, metric="lanes trip"),
            row(GROUP, f"{at}: the relay's open files", [measured["files"]],
                f"{measured['lanes']} lane connections established, the relay's RSS {measured['relay_mib']:.0f} MiB",
                unit="files", facts=facts, metric="lanes files"),
        ]
    return rows


def lanes_pool(nodes: int, items: int) -> dict[str, Any]:
    """A simulated pool of ``nodes`` behind real TCP lanes: the rate of its first map and
    of three more, ``>>`` round trips, and the relay's open files, established
    connections and memory after them."""
    import sys

    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import psutil
    from simulated_cluster import Behaviour, SimulatedProvider

    import skyward as sky

    noop = sky.function(payloads.noop)
    provider = SimulatedProvider(behaviour=Behaviour(lanes=True))
    with sky.Compute(provider=provider, nodes=nodes, options=sky.Options(console=False, logging=False)) as pool:
        rates = []
        for _ in range(MAPS + 1):
            began = time.perf_counter()
            results = pool.map(payloads.identity, range(items))
            rates.append(items / (time.perf_counter() - began))
            assert results == list(range(items)), "results in input order"
        noop() >> pool  # warm-up
        trips = []
        for _ in range(200):
            began = time.perf_counter()
            noop() >> pool
            trips.append(time.perf_counter() - began)
        relay = psutil.Process(provider.relays[0])
        lanes = [c for c in relay.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED]
        files, relay_mib = relay.num_fds(), relay.memory_info().rss / 2**20
    return {"first": rates[0], "rates": rates[1:], "trips": trips,
            "files": files, "lanes": len(lanes), "relay_mib": relay_mib}


def _churn_rows(quick: bool) -> list[Row]:
    """Nodes lost during a map, and an elastic pool growing to the most nodes and back."""
    nodes = SIZES[1] if quick else SIZES[-1]
    rows: list[Row] = []
    try:
        lost = isolated(losses_during_map, nodes, *((30_000, 0.05, 0.1) if quick else (LOST_ITEMS, 1.0, 0.01)),
                        timeout=900)
        facts = {key: lost[key] for key in ("losses", "launches", "retried_once", "retried_more", "items_missing")}
        rows.append(row(GROUP, f"{nodes:,} nodes losing {lost['rate']:.0%} a minute: pool.map of {lost['items']:,} items",
                        [lost["seconds"]], f"{lost['losses']} nodes lost, {lost['launches']} launched in their place; "
                        f"{lost['retried_once']} items run again once, {lost['retried_more']} more than once, "
                        f"{lost['items_missing']} missing", facts=facts, metric="losses"))
    except SubjectFailed as exc:
        rows.append(failed_row(GROUP, f"{nodes:,} nodes losing nodes during a map", exc))
    try:
        grown = isolated(elastic_growth, nodes, *((5_000, 0.5) if quick else (ELASTIC_TASKS, 0.5)), timeout=900)
        facts = {key: grown[key] for key in ("peak", "launches", "back_s", "floor", "tasks")}
        rows.append(row(GROUP, f"elastic 10 → {nodes:,} nodes under {grown['tasks']:,} waiting tasks: time to the top",
                        [grown["to_top"]], f"peak {grown['peak']} nodes, {grown['launches']} launches, back to "
                        f"{grown['floor']} nodes {grown['back_s']:.0f} s after the work ended", facts=facts,
                        metric="elastic"))
    except SubjectFailed as exc:
        rows.append(failed_row(GROUP, f"elastic 10 → {nodes:,} nodes", exc))
    return rows


def losses_during_map(nodes: int, items: int, item_seconds: float, rate: float) -> dict[str, Any]:
    """A map of ``items`` items of ``item_seconds`` each on ``nodes`` nodes of which a
    share ``rate`` vanishes each minute: how long it took, the nodes lost and launched,
    and how many times each item ran (1: once; a lost chunk's items run again)."""
    import collections
    import sys

    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from simulated_cluster import Behaviour, SimulatedProvider, attempt

    import skyward as sky

    provider = SimulatedProvider(delay=1.0, behaviour=Behaviour(item_seconds=item_seconds, losses_per_minute=rate, seed=7))
    losses = [0]
    with sky.Compute(provider=provider, nodes=nodes, options=sky.Options(console=False, logging=False)) as pool:
        pool.on(sky.InstancePreempted, lambda event: losses.__setitem__(0, losses[0] + 1))
        began = time.perf_counter()
        runs = pool.map(attempt, range(items))
        seconds = time.perf_counter() - began
        lost = losses[0]  # those after the map need not be replaced yet
        time.sleep(3)  # the last replacements join
        launches = len(provider.memberships[0].added)
    counted = collections.Counter(runs)
    return {"seconds": seconds, "items": items, "rate": rate, "losses": lost, "launches": launches,
            "retried_once": counted[2], "retried_more": sum(n for times, n in counted.items() if times > 2),
            "items_missing": items - len(runs)}


def elastic_growth(top: int, tasks: int, item_seconds: float) -> dict[str, Any]:
    """``Nodes(desired=10, max=top)`` given ``tasks`` waiting tasks of ``item_seconds``
    each (nodes take 1 s to provision): the seconds until it has ``top`` nodes, its peak,
    the launches, and how long after the work it is back to 10."""
    import sys

    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    from simulated_cluster import Behaviour, SimulatedProvider

    import skyward as sky

    provider = SimulatedProvider(delay=1.0, behaviour=Behaviour(item_seconds=item_seconds))
    work = sky.function(payloads.identity)
    options = sky.Options(console=False, logging=False, autoscale_idle_timeout=3.0, autoscale_cooldown=3.0)
    floor = 10
    with sky.Compute(provider=provider, nodes=sky.Nodes(desired=floor, max=top), options=options) as pool:
        membership = provider.memberships[0]

        def live() -> int:
            return floor + len(membership.added) - len(membership.removed)

        began = time.perf_counter()
        futures = [work(i) > pool for i in range(tasks)]
        peak, to_top = 0, None
        while not all(future.done() for future in futures):
            peak = max(peak, live())
            if peak >= top and to_top is None:
                to_top = time.perf_counter() - began
            time.sleep(0.2)
        assert [future.result() for future in futures] == list(range(tasks))
        launches = len(membership.added)
        ended = time.perf_counter()
        while live() > floor and time.perf_counter() - ended < 120:
            time.sleep(0.5)
        back = time.perf_counter() - ended
    return {"to_top": float("nan") if to_top is None else to_top, "peak": peak, "launches": launches, "back_s": back, "floor": live(), "tasks": tasks}


def _metrics_rows(nodes: int, seconds: float) -> list[Row]:
    """The client's CPU and memory under ``nodes`` nodes' metrics, without and with the console."""
    try:
        plain = isolated(metrics_load, nodes, seconds, False, timeout=300)
        drawn = isolated(metrics_load, nodes, seconds, True, timeout=300)
    except SubjectFailed as exc:
        return [failed_row(GROUP, f"{nodes:,} nodes: metrics at 1 Hz", exc)]
    facts = {"nodes": nodes, "delivered_per_s": round(plain["delivered_per_s"]), "sent_per_s": round(plain["sent_per_s"])}
    return [
        row(GROUP, f"{nodes:,} nodes: metrics at 1 Hz, client CPU", [plain["cpu"]],
            f"{plain['delivered_per_s']:,.0f} metric events/s delivered of {plain['sent_per_s']:,.0f} sent", unit="%",
            facts=facts, metric="events"),
        row(GROUP, f"{nodes:,} nodes: metrics at 1 Hz, client peak memory", [plain["peak_mib"]], "RSS", unit="MiB",
            facts=facts, metric="events"),
        row(GROUP, f"{nodes:,} nodes: metrics at 1 Hz, the rich console's CPU", [max(0.0, drawn["cpu"] - plain["cpu"])],
            f"the client with the console drawing: {drawn['cpu']:.1f}% of a core", unit="%",
            facts={**facts, "with_console": drawn["cpu"]}, metric="events"),
    ]


def metrics_load(nodes: int, seconds: float, console: bool) -> dict[str, Any]:
    """A pool of ``nodes`` whose every node sends a one-GPU node's metrics once a second,
    watched for ``seconds`` by a handler counting them (``console``: and by the rich
    console, drawing to a terminal that discards it): the client's CPU (% of one core),
    its peak memory, and the metric events delivered against those the nodes sent."""
    import os
    import sys

    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import psutil
    from rich.console import Console
    from simulated_cluster import METRICS, SAMPLE_EVERY, SimulatedProvider

    import skyward as sky
    from skyward.observe.rich_console import RichConsole

    counted = [0]
    me = psutil.Process()
    options = sky.Options(console=False, logging=False)
    with open(os.devnull, "w") as discarded, sky.Compute(provider=SimulatedProvider(), nodes=nodes, options=options) as pool:
        pool.on(sky.Metric, lambda event: counted.__setitem__(0, counted[0] + 1))
        drawn = None
        if console:
            drawn = RichConsole(pool.on, console=Console(file=discarded, force_terminal=True, width=120))
        time.sleep(2 * SAMPLE_EVERY)  # the first samples are in
        cpu, began, before = sum(me.cpu_times()[:2]), time.monotonic(), counted[0]
        peak = 0.0
        while time.monotonic() - began < seconds:
            time.sleep(0.5)
            peak = max(peak, me.memory_info().rss / 2**20)
        elapsed = time.monotonic() - began
        share = 100 * (sum(me.cpu_times()[:2]) - cpu) / elapsed
        delivered = counted[0] - before
        if drawn is not None:
            drawn.close()
    expected = nodes * len(METRICS) * math.floor(elapsed / SAMPLE_EVERY)  # the ticks surely inside the window
    return {"cpu": share, "peak_mib": peak, "delivered_per_s": delivered / elapsed,
            "sent_per_s": expected / elapsed}


def simulated_pool(nodes: int, items: int) -> dict[str, Any]:
    """Open, broadcast, map and close one simulated pool of ``nodes``; the seconds of each
    (the map as items per second)."""
    import sys

    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import numpy
    from simulated_cluster import SimulatedProvider

    import skyward as sky

    noop = sky.function(payloads.noop)
    identity = payloads.identity
    started = time.perf_counter()
    pool = sky.Compute(provider=SimulatedProvider(), nodes=nodes, options=sky.Options(console=False, logging=False))
    pool.__enter__()
    try:
        opened = time.perf_counter() - started
        noop() @ pool  # warm-up: the function shipped once
        broadcast = []
        for _ in range(BROADCASTS):
            began = time.perf_counter()
            answers = noop() @ pool
            broadcast.append(time.perf_counter() - began)
            assert len(answers) == nodes
        probe = sky.function(payloads.in_script("probe_counted"))
        array = numpy.arange(BROADCAST_ELEMENTS, dtype=numpy.float64)
        probe(payloads.Counted(array)) @ pool  # warm-up
        payloads.Counted.pickled = 0
        began = time.perf_counter()
        answers = probe(payloads.Counted(array)) @ pool
        big = time.perf_counter() - began
        assert answers == [payloads.probe(array)] * nodes
        serialized = payloads.Counted.pickled
        rates = []
        for _ in range(MAPS):
            began = time.perf_counter()
            results = pool.map(identity, range(items))
            rates.append(items / (time.perf_counter() - began))
            assert results == list(range(items)), "results in input order"
    finally:
        began = time.perf_counter()
        pool.__exit__(None, None, None)
        closed = time.perf_counter() - began
    return {"open": opened, "broadcast": broadcast, "rates": rates, "close": closed, "items": items,
            "big": big, "serialized": serialized}
