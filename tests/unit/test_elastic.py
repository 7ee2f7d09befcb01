"""Elastic pools without Ray: the scheduler over a changing node set, the autoscaling
policy, health tracking, and whole pools on the fake cluster (tests/fake_cluster.py)
whose nodes join, leave and are lost (``FakeMembership.lose``), with the retry rules
of the driver."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fake_cluster import FakeMembership, FakeProvider

import skyward as sky
from skyward.engine.autoscale import Autoscaler, Load
from skyward.engine.health import HealthTracker
from skyward.engine.scheduler import ALL, SlotScheduler

FAST = sky.Options(
    console=False, logging=False, reconcile_tick_interval=0.05, autoscale_cooldown=0.2, autoscale_idle_timeout=0.5,
)
WAIT = 10.0


def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.02)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


def on(loop: asyncio.AbstractEventLoop, coroutine: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result(5)


# ---------------------------------------------------------------- scheduler

def test_a_node_that_joins_serves_waiting_work(loop: asyncio.AbstractEventLoop) -> None:
    scheduler = SlotScheduler([], 1, loop)

    async def go() -> tuple[Any, Any]:
        waiting = asyncio.ensure_future(scheduler.acquire(None))
        broadcast = asyncio.ensure_future(scheduler.acquire(ALL))
        await asyncio.sleep(0.05)
        assert scheduler.pressure() == 2, "work waits on a pool with no node: both would be served by a node"
        scheduler.add(0)
        first = await asyncio.wait_for(waiting, 1)
        scheduler.release(first)
        return first, await asyncio.wait_for(broadcast, 1)

    assert on(loop, go()) == (0, [0])


def test_work_pinned_to_a_removed_node_fails_clearly_and_a_lost_one_waits(loop: asyncio.AbstractEventLoop) -> None:
    scheduler = SlotScheduler(3, 1, loop)

    async def go() -> None:
        assert await scheduler.acquire(1) == 1
        assert await scheduler.acquire(2) == 2
        removed = asyncio.ensure_future(scheduler.acquire(2))
        replaced = asyncio.ensure_future(scheduler.acquire(1))
        await asyncio.sleep(0.05)
        scheduler.remove(2, "scaled down")
        with pytest.raises(sky.NodeRemovedError, match="node 2 is no longer part of the pool \\(scaled down\\)"):
            await removed
        scheduler.expect(1)  # lost: its replacement comes
        scheduler.release(1)  # the lost node's slot: stale, frees nothing
        await asyncio.sleep(0.05)
        assert not replaced.done()
        scheduler.add(1)
        assert await asyncio.wait_for(replaced, 1) == 1
        assert scheduler.busy_on(1) == 1, "the stale release did not free the replacement's slot"
        with pytest.raises(sky.NodeRemovedError):
            await scheduler.acquire(2)

    on(loop, go())


def test_a_broadcast_takes_the_nodes_present_and_skips_a_draining_one(loop: asyncio.AbstractEventLoop) -> None:
    scheduler = SlotScheduler(3, 1, loop)

    async def go() -> None:
        scheduler.drain(2)
        nodes = await scheduler.acquire(ALL)
        assert nodes == [0, 1]
        scheduler.release(nodes)
        assert scheduler.ranks() == [0, 1] and scheduler.idle_since(2) is not None
        scheduler.undrain(2)
        assert await scheduler.acquire(ALL) == [0, 1, 2]

    on(loop, go())


def test_a_broadcast_waits_for_a_full_node_and_holds_back_later_work(loop: asyncio.AbstractEventLoop) -> None:
    scheduler = SlotScheduler(3, 1, loop)

    async def go() -> None:
        assert await scheduler.acquire(1) == 1
        broadcast = asyncio.ensure_future(scheduler.acquire(ALL))
        later = asyncio.ensure_future(scheduler.acquire(None))
        pinned = asyncio.ensure_future(scheduler.acquire(0))
        await asyncio.sleep(0.05)
        assert not broadcast.done() and not later.done() and not pinned.done(), "node 1 is full: all wait in order"
        scheduler.release(1)
        assert await asyncio.wait_for(broadcast, 1) == [0, 1, 2]
        scheduler.release([0, 2])
        anywhere = await asyncio.wait_for(later, 1)
        assert anywhere in (0, 2), "node 1 is still the broadcast's"
        if anywhere == 0:
            await asyncio.sleep(0.05)
            assert not pinned.done(), "node 0's one slot is taken"
            scheduler.release(0)
        assert await asyncio.wait_for(pinned, 1) == 0

    on(loop, go())


def grants_per_second(nodes: int, grants: int = 4000) -> float:
    """Grants a second with every slot of ``nodes`` nodes taken and ``grants`` waiters
    queued, each released as soon as it is served, after one task pinned to every node
    and one broadcast (what a pool has done before its map)."""

    async def go() -> float:
        loop = asyncio.get_running_loop()
        scheduler = SlotScheduler(nodes, 2, loop)
        for node in range(nodes):
            scheduler.release(await scheduler.acquire(node))
        scheduler.release(await scheduler.acquire(ALL))
        held = [await scheduler.acquire(None) for _ in range(nodes * 2)]
        finished = asyncio.Event()
        served = 0

        def done(future: asyncio.Future[int]) -> None:
            nonlocal served
            served += 1
            loop.call_soon(scheduler.release, future.result())
            if served == grants:
                finished.set()

        start = time.perf_counter()
        for _ in range(grants):
            asyncio.ensure_future(scheduler.acquire(None)).add_done_callback(done)
        await asyncio.sleep(0)
        for node in held:
            scheduler.release(node)
        await asyncio.wait_for(finished.wait(), 60)
        return grants / (time.perf_counter() - start)

    return asyncio.run(go())


def test_a_grant_costs_the_same_at_1000_nodes_as_at_10() -> None:
    grants_per_second(10, 200)  # warm up
    small = max(grants_per_second(10) for _ in range(3))
    large = max(grants_per_second(1000) for _ in range(3))
    assert large >= small / 3, (
        f"{large:.0f} grants/s at 1,000 nodes against {small:.0f} at 10: a grant scans the nodes "
        "(about 20x before the open set)"
    )


# ---------------------------------------------------------------- policy

def load(now: float, members: int, pressure: int = 0, idle: dict[int, float | None] | None = None, joining: int = 0) -> Load:
    return Load(now, members, joining, pressure, 1, idle if idle is not None else {n: None for n in range(members)})


def test_the_autoscaler_grows_for_waiting_work_and_shrinks_idle_nodes_from_the_top() -> None:
    scaler = Autoscaler(sky.Nodes(desired=2, max=8), cooldown=10, idle_timeout=5)
    assert scaler.decide(load(0, 2, pressure=198)).target == 8, "up to the ceiling"
    assert scaler.decide(load(1, 2, pressure=198, joining=6)).reason is None, "joining nodes will take the work"
    idle = {n: 0.0 for n in range(8)}
    assert scaler.decide(load(9, 8, idle=idle)).reason is None, "cooldown after scaling up"
    idle[7] = None  # the highest node is busy: the idle ones below it stay (ranks stay dense)
    assert scaler.decide(load(20, 8, idle=idle)).reason is None
    idle[7] = 0.0
    decision = scaler.decide(load(20, 8, idle=idle))
    assert decision.target == 2 and decision.reason == "6 nodes idle for 5s", "down to the floor"
    assert scaler.decide(load(21, 2, pressure=3)).reason is None, "no growing right after shrinking"


def test_a_pool_with_no_node_wakes_at_once() -> None:
    scaler = Autoscaler(sky.Nodes(desired=1, min=0, max=4), cooldown=60, idle_timeout=1)
    assert scaler.decide(load(10, 1, idle={0: 0.0})).target == 0
    woken = scaler.decide(load(11, 0, pressure=2, idle={}))
    assert woken.target == 2, "no cooldown when nothing could serve"
    assert woken.reason == "waking: 2 tasks waiting"
    scaler.settle()
    assert scaler.target == 0, "a wake that failed: back to the floor until work waits again"


def test_a_pool_that_could_not_wake_fails_the_work_waiting(loop: asyncio.AbstractEventLoop) -> None:
    scheduler = SlotScheduler([], 1, loop)

    async def go() -> None:
        waiting = [asyncio.ensure_future(scheduler.acquire(want)) for want in (None, ALL, None)]
        await asyncio.sleep(0.05)
        assert scheduler.fail_waiting(sky.WakeError("no machine")) == 3
        for future in waiting:
            with pytest.raises(sky.WakeError, match="no machine"):
                await future
        assert scheduler.pressure() == 0 and scheduler.waiting() == 0
        scheduler.add(0)
        assert await asyncio.wait_for(scheduler.acquire(None), 1) == 0, "later work is served as before"

    on(loop, go())


def test_health_checks_replace_a_node_after_failures_in_a_row() -> None:
    tracker = HealthTracker(sky.HealthChecker(check=lambda: True, interval=1, failures=2, warmup=5))
    tracker.joined(0, 0.0)
    assert tracker.due(4.9) == [] and tracker.due(5.0) == [0] and tracker.due(5.0) == []
    assert tracker.record(0, 5.0, "RuntimeError: disk full") is None
    assert tracker.due(5.5) == [] and tracker.due(6.0) == [0]
    assert tracker.record(0, 6.0, None) is None, "a success resets the count"
    tracker.due(7.0)
    tracker.record(0, 7.0, "RuntimeError: disk full")
    tracker.due(8.0)
    assert "<lambda> 2 times in a row (last: RuntimeError: disk full)" in str(
        tracker.record(0, 8.0, "RuntimeError: disk full")
    )


def test_health_checker_and_nodes_are_validated() -> None:
    with pytest.raises(ValueError, match="HealthChecker.check"):
        sky.HealthChecker(check=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="HealthChecker.failures=0"):
        sky.HealthChecker(check=lambda: True, failures=0)
    with pytest.raises(ValueError, match="Options.health_checker"):
        sky.Options(health_checker=lambda: True)
    nodes = sky.Nodes(desired=2, min=0, max=4)
    assert (nodes.floor, nodes.ceiling, nodes.elastic) == (0, 4, True)
    assert not sky.Nodes(3).elastic and sky.Nodes.of((2, 8)).ceiling == 8


# ---------------------------------------------------------------- pools on the fake cluster

@sky.function
def where() -> tuple[int, int, int]:
    info = sky.instance_info()
    assert info is not None
    return info.node, info.total_nodes, len(info.peers)


@sky.function
def nap(seconds: float) -> int:
    time.sleep(seconds)
    info = sky.instance_info()
    assert info is not None
    return info.node


def slow_increment(x: int) -> int:
    time.sleep(0.01)
    return x + 1


def membership(pool: sky.Pool) -> FakeMembership:
    assert pool._open is not None
    return pool._open.cluster.membership  # type: ignore[return-value]


def test_partial_readiness_then_growth_and_every_node_sees_the_membership() -> None:
    with sky.Compute(provider=FakeProvider(join_delay=0.3), nodes=sky.Nodes(desired=3, min=1), options=FAST) as pool:
        assert pool.current_nodes() == 1
        assert where() >> pool == (0, 1, 1), "work starts on the first node"
        eventually(lambda: pool.current_nodes() == 3, "growing to 3")
        assert sorted(where() @ pool) == [(0, 3, 3), (1, 3, 3), (2, 3, 3)]


def test_resize_up_and_down_mid_map_keeps_every_result() -> None:
    resized: list[sky.ClusterResized] = []
    pool = sky.Compute(provider=FakeProvider(), nodes=2, options=FAST)
    pool.on(sky.ClusterResized, resized.append)
    with pool:
        future = threading.Thread(target=lambda: results.extend(pool.map(lambda x: (time.sleep(0.01), x * x)[1], range(200))))
        results: list[int] = []
        future.start()
        pool.resize(4)
        eventually(lambda: pool.current_nodes() == 4, "growing to 4")
        pool.resize(1)
        future.join(WAIT)
        assert results == [x * x for x in range(200)]
        eventually(lambda: pool.current_nodes() == 1, "shrinking to 1")
        assert where() >> pool == (0, 1, 1)
        with pytest.raises(ValueError, match=r"target=3 is not valid: .*the rank of a node the pool has \(0\)"):
            pool.run(where(), target=3)
    assert {e.reason for e in resized} >= {"resize to 4", "resize to 1"}


def test_autoscale_up_under_a_queue_and_back_down_when_idle() -> None:
    with sky.Compute(provider=FakeProvider(), nodes=(1, 4), options=FAST) as pool:
        futures = [nap(0.02) > pool for _ in range(200)]
        eventually(lambda: pool.current_nodes() == 4, "scaling up to the ceiling")
        assert {future.result(WAIT) for future in futures} == {0, 1, 2, 3}
        eventually(lambda: pool.current_nodes() == 1, "scaling down after the idle timeout")


def test_scale_to_zero_and_wake_on_demand() -> None:
    with sky.Compute(provider=FakeProvider(join_delay=0.1), nodes=sky.Nodes(1, min=0, max=2), options=FAST) as pool:
        assert nap(0) >> pool == 0
        eventually(lambda: pool.current_nodes() == 0, "idling down to no node")
        assert where() >> pool == (0, 1, 1), "a call wakes it"
        assert where() @ pool == [(0, 1, 1)]


def test_a_lost_node_is_replaced_at_its_rank_and_a_map_loses_no_item() -> None:
    events: list[Any] = []
    pool = sky.Compute(provider=FakeProvider(join_delay=0.2), nodes=3, options=FAST)
    pool.on(sky.InstancePreempted, events.append)
    pool.on(sky.InstanceReplaced, events.append)
    with pool:
        mapped = threading.Thread(target=lambda: results.extend(pool.map(slow_increment, range(200))))
        results: list[int] = []
        mapped.start()
        time.sleep(0.2)
        membership(pool).lose(1, "spot interruption")
        mapped.join(WAIT)
        assert results == [x + 1 for x in range(200)], "every result, in order, once"
        eventually(lambda: pool.current_nodes() == 3, "the replacement joining")
        assert sorted(where() @ pool) == [(0, 3, 3), (1, 3, 3), (2, 3, 3)], "it took the freed rank"
    assert any(isinstance(e, sky.InstancePreempted) and e.node == 1 for e in events)
    assert any(isinstance(e, sky.InstanceReplaced) and e.node == 1 for e in events)


def test_a_loss_found_by_the_reconcile_check_fails_over_pinned_work() -> None:
    with sky.Compute(provider=FakeProvider(join_delay=0.2), nodes=2, options=FAST) as pool:
        pinned = pool.run_async(nap(1.0), target=1)
        time.sleep(0.2)
        membership(pool).lose(1, "host gone", preempted=False, pushed=False)
        assert pinned.result(WAIT) == 1, "it ran again on the replacement of node 1"


def test_retries_run_out_with_a_preempted_error_on_a_pool() -> None:
    options = FAST.with_(retry_on_interruption=0)
    with sky.Compute(provider=FakeProvider(join_delay=0.2), nodes=2, options=options) as pool:
        doomed = pool.run_async(nap(5.0), target=1)
        time.sleep(0.2)
        membership(pool).lose(1)
        with pytest.raises(sky.PreemptedError, match="interrupted on its only attempt: node 1 was lost"):
            doomed.result(WAIT)


def test_a_node_failing_its_health_check_is_replaced() -> None:
    flaky = {"fail": True}

    def check() -> bool:
        info = sky.instance_info()
        return not (info is not None and info.node == 1 and flaky["fail"])

    replaced: list[sky.InstanceReplaced] = []
    checker = sky.HealthChecker(check=check, interval=0.05, failures=2, warmup=0)
    pool = sky.Compute(provider=FakeProvider(), nodes=2, options=FAST.with_(health_checker=checker))
    pool.on(sky.InstanceReplaced, replaced.append)
    with pool:
        eventually(lambda: any(e.node == 1 for e in replaced), "node 1 replaced")
        flaky["fail"] = False
        assert 1 in membership(pool).removed and "health check" in replaced[0].reason
        assert pool.current_nodes() == 2


def test_elastic_forms_need_a_resizable_provider() -> None:
    class Fixed(FakeProvider):
        resizable = False  # type: ignore[misc]

    with pytest.raises(ValueError, match=r"Spec.nodes=Nodes\(desired=1, max=4, min=None\) is not valid .*cannot add"):
        sky.Compute(provider=Fixed(), nodes=(1, 4), options=sky.Options(console=False))
    with pytest.raises(ValueError, match="Options.autoscale_cooldown=0.2 has no effect"):
        sky.Compute(provider=Fixed(), nodes=2, options=FAST)
