"""Elastic local pools for real: nodes are agent processes on this machine's private Ray,
so growing, shrinking, losing and replacing them is real. Intervals are seconds-scale."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

import pytest

import skyward as sky

pytestmark = pytest.mark.slow
FAST = sky.Options(
    console=False, logging=False, reconcile_tick_interval=0.2, autoscale_cooldown=0.5, autoscale_idle_timeout=2.0,
)
WAIT = 180.0
"""A liveness bound, not a speed claim: three agents joining took over 60 s once in CI,
whose two streams share two cores (a few seconds on a quiet machine)."""


def eventually(check: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:g}s")
        time.sleep(0.05)


@sky.function
def where() -> tuple[int, int, int]:
    info = sky.instance_info()
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.total_nodes, len(info.peers)


@sky.function
def nap(seconds: float) -> int:
    time.sleep(seconds)
    info = sky.instance_info()
    return -1 if info is None else info.node


@sky.function
def pid() -> int:
    return os.getpid()


@sky.function
def exits() -> None:
    os._exit(3)


def slow_square(x: int) -> int:
    time.sleep(0.02)
    return x * x


def test_partial_readiness_starts_work_before_the_last_node_is_up() -> None:
    ready: dict[int, float] = {}
    pool = sky.Compute(nodes=sky.Nodes(desired=4, min=1), options=FAST)
    pool.on(sky.InstanceBootstrapped, lambda e: ready.setdefault(e.node, time.monotonic()))
    with pool:
        assert pool.current_nodes() >= 1
        first = (nap(0) >> pool, time.monotonic())
        eventually(lambda: pool.current_nodes() == 4, "growing to 4")
        last_up = max(ready.values())
        assert first[1] < last_up, "the first task finished before the last node was up"
        assert sorted(where() @ pool) == [(n, 4, 4) for n in range(4)], "every node sees the whole membership"
    print(f"first result {last_up - first[1]:.2f}s before the last node was up")


def test_autoscale_up_under_200_queued_tasks_and_back_down_when_idle() -> None:
    resized: list[sky.ClusterResized] = []
    pool = sky.Compute(nodes=(1, 3), options=FAST)
    pool.on(sky.ClusterResized, resized.append)
    with pool:
        futures = [nap(0.05) > pool for _ in range(200)]
        eventually(lambda: pool.current_nodes() == 3, "scaling up to the ceiling")
        assert {future.result(WAIT) for future in futures} == {0, 1, 2}
        eventually(lambda: pool.current_nodes() == 1, "scaling down after the idle timeout")
    reasons = [event.reason for event in resized]
    assert any(reason.startswith("autoscale:") and "tasks waiting" in reason for reason in reasons), reasons
    assert any(reason.startswith("autoscale:") and "idle for 2s" in reason for reason in reasons), reasons


def test_resize_up_and_down_during_a_map_keeps_every_result() -> None:
    with sky.Compute(nodes=2, options=FAST) as pool:
        results: list[int] = []
        mapping = threading.Thread(target=lambda: results.extend(pool.map(slow_square, range(300))))
        mapping.start()
        pool.resize(4)
        eventually(lambda: pool.current_nodes() == 4, "growing to 4")
        pool.resize(1)
        mapping.join(WAIT)
        assert results == [x * x for x in range(300)]
        eventually(lambda: pool.current_nodes() == 1, "shrinking to 1")
        assert where() >> pool == (0, 1, 1)
        assert pool.map(slow_square, range(20)) == [x * x for x in range(20)]


def test_scale_to_zero_and_wake() -> None:
    with sky.Compute(nodes=sky.Nodes(desired=1, min=0, max=2), options=FAST) as pool:
        counter = pool.counter("kept", consistency="strong")
        counter.increment()
        assert nap(0) >> pool == 0
        eventually(lambda: pool.current_nodes() == 0, "idling down to no node")
        assert where() >> pool == (0, 1, 1), "a call wakes the pool"
        assert counter.value == 1, "collections outlive the nodes (their hosts are not node agents)"


def test_a_killed_agent_is_an_interruption_its_task_runs_again() -> None:
    with sky.Compute(nodes=2, options=FAST) as pool:
        agents = {node: pool.run(pid(), target=node) for node in range(2)}
        results: list[int] = []
        mapping = threading.Thread(target=lambda: results.extend(pool.map(slow_square, range(200))))
        mapping.start()
        time.sleep(0.5)
        os.kill(agents[1], signal.SIGKILL)
        mapping.join(WAIT)
        assert results == [x * x for x in range(200)], "the lost chunks ran again, the finished ones were kept"
        assert pool.run(pid(), target=1) != agents[1], "Ray replaced the agent in place"


def test_a_task_that_ends_its_own_process_is_not_retried() -> None:
    ran: list[sky.TaskStarted] = []
    pool = sky.Compute(nodes=1, options=FAST)
    pool.on(sky.TaskStarted, ran.append)
    with pool:
        with pytest.raises(sky.NodeCrashedError, match=r"called os._exit\(3\).*not retried") as crashed:
            exits() >> pool
        assert not isinstance(crashed.value, sky.PreemptedError)
        assert sum(1 for event in ran if event.name.endswith("exits")) == 1


def test_a_node_failing_its_health_check_is_replaced() -> None:
    replaced: list[sky.InstanceReplaced] = []
    checker = sky.HealthChecker(check=_healthy, interval=0.3, failures=2, warmup=0.5, timeout=5)
    pool = sky.Compute(nodes=2, options=FAST.with_(health_checker=checker))
    pool.on(sky.InstanceReplaced, replaced.append)
    with pool:
        sick = pool.run(pid(), target=1)
        pool.run(_mark_sick(), target=1)
        eventually(lambda: any(event.node == 1 for event in replaced), "node 1 replaced")
        assert "health check" in replaced[0].reason
        eventually(lambda: pool.current_nodes() == 2, "the replacement joining")
        assert pool.run(pid(), target=1) != sick


def _healthy() -> bool:
    return not os.environ.get("SKYWARD_TEST_SICK")


def _warm_check(flag: str) -> Callable[[], bool]:
    """A check that passes once ``flag`` exists (the model loaded). It carries the path
    itself: the nodes of a Ray instance this session started earlier do not see this
    process's later environment."""

    def _warmed_up() -> bool:
        return os.path.exists(flag)

    return _warmed_up


def test_the_warming_gate_holds_the_pool_until_every_node_passed_a_check(tmp_path: object) -> None:
    flag = f"{tmp_path}/warm"
    checker = sky.HealthChecker(check=_warm_check(flag), gate=True, warmup=60, interval=30, timeout=5)
    pool = sky.Compute(nodes=2, options=FAST.with_(health_checker=checker))
    ready: list[float] = []
    pool.on(sky.ClusterReady, lambda event: ready.append(time.monotonic()))
    warm_at: list[float] = []

    def warm_soon() -> None:
        time.sleep(4)
        warm_at.append(time.monotonic())
        open(flag, "w").close()

    threading.Thread(target=warm_soon, daemon=True).start()
    with pool:
        entered = time.monotonic()
        assert warm_at and ready and ready[0] >= warm_at[0], "the pool was ready before its nodes were warm"
        assert entered >= warm_at[0]
        assert len(pid() @ pool) == 2


def test_a_warming_gate_that_never_opens_fails_the_open_naming_the_nodes(tmp_path: object) -> None:
    checker = sky.HealthChecker(check=_warm_check(f"{tmp_path}/never"), gate=True, warmup=2, timeout=5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"warming gate: 2 of 2 nodes did not pass the health check \S*_warmed_up within 2s.*node 0: it returned False; node 1"):
        with sky.Compute(nodes=2, options=FAST.with_(health_checker=checker)):
            raise AssertionError("the block ran behind a closed gate")
    assert time.monotonic() - started < 60
    with pytest.raises(TypeError, match="HealthChecker.gate"):
        sky.HealthChecker(check=_warm_check("x"), gate="yes")  # type: ignore[arg-type]


@sky.function
def _mark_sick() -> None:
    os.environ["SKYWARD_TEST_SICK"] = "1"


@sky.function
def _join_and_wait(name: str, parties: int) -> str:
    barrier = sky.barrier(name, n=parties)
    try:
        barrier.wait(timeout=30)
    except sky.BrokenBarrierError as exc:
        return f"broken: {exc}"
    return "passed"


@sky.function
def _join_and_hold(barrier: str, lock: str) -> None:
    sky.barrier(barrier, n=3)
    sky.lock(lock).acquire()
    time.sleep(60)


def test_collections_across_a_node_leaving() -> None:
    events: list[sky.BroadcastStarted] = []
    options = FAST.with_(retry_on_interruption=0, shutdown_timeout=2.0)
    pool = sky.Compute(nodes=3, options=options)
    pool.on(sky.BroadcastStarted, events.append)
    with pool:
        pool.dict("kept")["key"] = "value"
        assert [node for node, _, _ in where() @ pool] == [0, 1, 2]
        assert events[-1].nodes == (0, 1, 2), "the broadcast says which nodes it went to"
        holder = pool.run_async(_join_and_hold("sized-for-3", "held"), target=2)
        eventually(lambda: pool.lock("held").locked(), "node 2 holding the lock")
        waiters = [pool.run_async(_join_and_wait("sized-for-3", 3), target=node) for node in (0, 1)]
        pool.resize(2)  # node 2 never finishes its task: it leaves when the drain times out (2s)
        outcomes = [waiter.result(WAIT) for waiter in waiters]
        assert all("node 2 left the pool (scaled down)" in outcome for outcome in outcomes), outcomes
        assert pool.lock("held").acquire(timeout=10), "the lock of the node that left was freed"
        assert pool.dict("kept")["key"] == "value", "collection state outlived the node"
        with pytest.raises(sky.PreemptedError):
            holder.result(WAIT)
        eventually(lambda: pool.current_nodes() == 2, "shrinking to 2")
        assert sorted(where() @ pool) == [(0, 2, 2), (1, 2, 2)]
        assert events[-1].nodes == (0, 1)


def test_a_barrier_breaks_naming_a_lost_node_and_the_node_is_replaced() -> None:
    from skyward.engine.membership import Loss

    with sky.Compute(nodes=3, options=FAST.with_(retry_on_interruption=0)) as pool:
        holder = pool.run_async(_join_and_hold("old-size", "held-2"), target=2)
        eventually(lambda: pool.lock("held-2").locked(), "node 2 holding the lock")
        waiters = [pool.run_async(_join_and_wait("old-size", 3), target=node) for node in (0, 1)]
        assert pool._open is not None and pool._open.reconciler is not None
        pool._open.reconciler.lost(Loss(2, "the test took it away"))
        outcomes = [waiter.result(WAIT) for waiter in waiters]
        assert all("node 2 left the pool (the test took it away)" in outcome for outcome in outcomes), outcomes
        with pytest.raises(sky.PreemptedError):
            holder.result(WAIT)
        assert pool.lock("held-2").acquire(timeout=10)
        eventually(lambda: pool.current_nodes() == 3, "the replacement joining")
        assert sorted(where() @ pool) == [(0, 3, 3), (1, 3, 3), (2, 3, 3)]
