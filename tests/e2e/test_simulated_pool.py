"""A pool of 100 simulated nodes through the real client, driver and relay server
(tests/simulated_cluster.py; benchmarks/bench_simulated.py measures 10 to 1,000): every
node answers an `@`, a map comes back whole and in order, a task's failure comes back
as its error, and closing leaves no relay process behind; nodes vanishing during a map
lose no item and are launched again."""

from __future__ import annotations

import time

import psutil
import pytest
from simulated_cluster import Behaviour, SimulatedProvider, attempt

import skyward as sky

NODES = 100


@sky.function
def rank_of(value: int) -> int:
    return value


@sky.function
def fails() -> None:
    raise ValueError("planted")


def _double(x: int) -> int:
    return 2 * x


def test_a_hundred_simulated_nodes_answer_through_the_real_relay() -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    options = sky.Options(console=False, logging=False)
    with sky.Compute(provider=SimulatedProvider(), nodes=NODES, options=options) as pool:
        relays = [child for child in psutil.Process().children(recursive=True) if child.pid not in before]
        assert any("simulated_cluster.py" in " ".join(child.cmdline()) for child in relays)
        assert rank_of(7) @ pool == [7] * NODES
        assert pool.map(_double, range(20_000)) == [2 * x for x in range(20_000)]
        with pytest.raises(ValueError, match="planted"):
            fails() >> pool
    assert not [child for child in relays if child.is_running() and child.status() != psutil.STATUS_ZOMBIE], (
        "closing the pool ended its relay process")


def test_nodes_lost_during_a_map_lose_no_item_and_are_launched_again() -> None:
    """A fifth of 50 nodes a minute vanish (accelerated from the benchmark's 1% of 1,000):
    a lost chunk's items run again once, elsewhere, and every lost node is launched again."""
    provider = SimulatedProvider(delay=0.2, behaviour=Behaviour(item_seconds=0.05, losses_per_minute=0.2, seed=3))
    lost: list[int] = []
    with sky.Compute(provider=provider, nodes=50, options=sky.Options(console=False, logging=False)) as pool:
        pool.on(sky.InstancePreempted, lambda event: lost.append(event.node))
        runs = pool.map(attempt, range(10_000))
        deadline = time.monotonic() + 10
        while len(provider.memberships[0].added) < len(lost) and time.monotonic() < deadline:
            time.sleep(0.1)
        launched = list(provider.memberships[0].added)
    assert len(runs) == 10_000 and set(runs) <= {1, 2}, "every item delivered, none run more than twice"
    assert lost, "nodes were lost while the map ran"
    assert 2 in runs, "the items of a lost node's chunk ran again"
    assert set(lost) <= set(launched), "each lost node launched again, at its rank"


def test_an_elastic_pool_launches_its_nodes_many_at_once() -> None:
    """Growing to 60 nodes whose launches take half a second each: 32 launch together
    (``engine.reconciler.MEMBERSHIP_THREADS``), so they join in about a second, not four."""
    provider = SimulatedProvider(delay=0.5)
    with sky.Compute(provider=provider, nodes=sky.Nodes(desired=60, min=1),
                     options=sky.Options(console=False, logging=False)) as pool:
        deadline = time.monotonic() + 20
        while len(provider.memberships[0].added) < 59 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rank_of(1) @ pool
    assert provider.memberships[0].most_at_once >= 32


def test_a_hundred_nodes_answer_through_real_tcp_lanes() -> None:
    """With lanes the relay calls every node over a TCP connection of its own that proved
    the lane secret, to agents in processes of their own, which end with the pool. (An
    `@` shares its payload, which goes through Ray's object store on a real pool, not a
    lane: here it is answered on the relay's loop; a map's chunks take the lanes.)"""
    provider = SimulatedProvider(behaviour=Behaviour(lanes=True))
    with sky.Compute(provider=provider, nodes=NODES, options=sky.Options(console=False, logging=False)) as pool:
        relay = psutil.Process(provider.relays[0])
        agents = relay.children()
        assert len(agents) == 4
        assert rank_of(7) @ pool == [7] * NODES
        assert pool.map(_double, range(20_000)) == [2 * x for x in range(20_000)]
        lanes = {c.raddr for c in relay.net_connections("tcp") if c.status == psutil.CONN_ESTABLISHED}
        assert len({address.port for address in lanes}) == NODES, "a lane (or more) to every node"
        with pytest.raises(ValueError, match="planted"):
            fails() >> pool
    psutil.wait_procs(agents, timeout=15)
    assert not [agent for agent in agents if agent.is_running() and agent.status() != psutil.STATUS_ZOMBIE], (
        "the agents ended with the pool")


def test_a_broken_stream_to_the_relay_is_resumed_and_every_item_runs_once() -> None:
    """The client's stream to the relay reset twice during a map (as a NAT that dropped
    the connection): the client opens another and resumes the session, the calls in
    flight are answered once, and every item ran exactly once, in order."""
    import threading

    provider = SimulatedProvider(behaviour=Behaviour(item_seconds=0.01, resume_within=10.0))
    reports: list[str] = []
    with sky.Compute(provider=provider, nodes=20, options=sky.Options(console=False, logging=False)) as pool:
        pool.on(sky.Error, lambda event: reports.append(event.message))
        runs: list[int] = []
        mapping = threading.Thread(target=lambda: runs.extend(pool.map(attempt, range(100_000, 106_000))))
        mapping.start()
        for _ in range(2):
            time.sleep(0.4)
            assert provider.cut() == 1, "one stream at a time"
        assert mapping.is_alive(), "the cuts came while the map ran"
        mapping.join(timeout=120)
        assert not mapping.is_alive()
        assert runs == [1] * 6_000, "every item once, in order"
        assert sum("resumed the session" in report for report in reports) == 2, reports
        assert rank_of(3) @ pool == [3] * 20
        assert len(provider.streams) == 1, "the session's third stream is the one in use"


def test_a_silent_stream_is_given_up_for_a_new_one_and_every_item_runs_once() -> None:
    """The client hears nothing more on its stream (as when its address changed and the
    old connection will never answer): after ``probe_after`` seconds of silence it
    revives (here: cuts the silent stream) and resumes on a new one; every item ran
    exactly once, in order. A working stream, idle or busy, is never that silent."""
    import threading

    provider = SimulatedProvider(behaviour=Behaviour(item_seconds=0.01, resume_within=10.0), probe_after=1.5)
    reports: list[str] = []
    with sky.Compute(provider=provider, nodes=20, options=sky.Options(console=False, logging=False)) as pool:
        pool.on(sky.Error, lambda event: reports.append(event.message))
        time.sleep(3)  # idle: the relay answers the client's heartbeat
        assert not reports
        runs: list[int] = []
        mapping = threading.Thread(target=lambda: runs.extend(pool.map(attempt, range(300_000, 306_000))))
        mapping.start()
        time.sleep(0.4)
        assert provider.mute() == 1
        assert mapping.is_alive(), "the stream went silent while the map ran"
        mapping.join(timeout=120)
        assert not mapping.is_alive()
        assert runs == [1] * 6_000, "every item once, in order"
        assert [report for report in reports if "said nothing for" in report], reports
        assert [report for report in reports if "resumed the session" in report], reports


def test_without_resuming_a_broken_stream_ends_the_calls_in_flight() -> None:
    provider = SimulatedProvider(behaviour=Behaviour(item_seconds=0.002))
    with sky.Compute(provider=provider, nodes=5, options=sky.Options(console=False, logging=False)) as pool:
        import threading

        threading.Timer(0.3, provider.cut).start()
        with pytest.raises(ConnectionError, match="lost the connection to the cluster's head relay"):
            pool.map(attempt, range(200_000, 202_000))
