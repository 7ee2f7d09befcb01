"""Every dispatch form on a real 4-node local pool."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future

import pytest
from fake_cluster import skip_if_fake
from helpers.usermod import Point, make_point, triple

import skyward as sky


@sky.function
def node_and_pid() -> tuple[int, int]:
    return sky.instance_info().node, os.getpid()


@sky.function
def echo(value):
    return value


@sky.function
def sleep_then(seconds: float, value):
    time.sleep(seconds)
    return value


def test_rshift_runs_on_one_node_round_robin(pool4: sky.Pool) -> None:
    nodes = [(node_and_pid() >> pool4)[0] for _ in range(8)]
    assert sorted(set(nodes)) == [0, 1, 2, 3]
    assert echo({"a": [1, 2]}) >> pool4 == {"a": [1, 2]}


def test_matmul_runs_on_every_node_in_node_order(pool4: sky.Pool) -> None:
    skip_if_fake(pool4, 'process per node')
    results = node_and_pid() @ pool4
    assert [node for node, _ in results] == [0, 1, 2, 3]
    assert len({pid for _, pid in results}) == 4


def test_group_runs_in_parallel_and_returns_a_tuple(pool4: sky.Pool) -> None:
    started = time.monotonic()
    a, b, c = (sleep_then(1.0, "a") & sleep_then(1.0, "b") & sleep_then(1.0, "c")) >> pool4
    assert (a, b, c) == ("a", "b", "c")
    assert time.monotonic() - started < 2.5


def test_gt_returns_a_future(pool4: sky.Pool) -> None:
    future = sleep_then(0.2, 42) > pool4
    assert isinstance(future, Future)
    assert future.result(timeout=30) == 42


def test_gather_streams_in_order_or_as_completed(pool4: sky.Pool) -> None:
    delays = [0.9, 0.1, 0.5]
    ordered = list(sky.gather(*(sleep_then(d, d) for d in delays), stream=True) >> pool4)
    assert ordered == delays
    completed = list(sky.gather(*(sleep_then(d, d) for d in delays), stream=True, ordered=False) >> pool4)
    assert completed == sorted(delays)
    assert sky.gather(echo(1), echo(2)) >> pool4 == (1, 2)


def test_sky_module_targets_the_active_pool(pool4: sky.Pool) -> None:
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=False)) as pool:
        assert echo(5) >> sky == 5
        assert echo(6) @ sky == [6]
        assert (echo(1) & echo(2)) >> sky == (1, 2)
        assert (echo(7) > sky).result(timeout=30) == 7
        results: list[int] = []
        thread = threading.Thread(target=lambda: results.append(echo(8) >> sky))
        thread.start()
        thread.join(30)
        assert results == [8]
        assert pool.current_nodes() == 1
        assert (node_and_pid() @ sky)[0][1] not in {pid for _, pid in node_and_pid() @ pool4}


def test_map_keeps_input_order_and_chunks(pool4: sky.Pool) -> None:
    calls: list[object] = []
    unsubscribe = pool4.on(sky.TaskStarted, calls.append)
    try:
        assert pool4.map(triple, range(10_000)) == [3 * i for i in range(10_000)]
    finally:
        unsubscribe()
    # guided chunks, but none with less than ~5 ms of work once their pace is known: the
    # tail of single items (58 chunks in all) is gone; each chunk's event counts its items.
    # The pace is each chunk's round trip, so a slow path or a loaded machine reads it
    # slower and makes the floor smaller (31 chunks once in CI's container pass, when its
    # published ports added 40 ms to every round trip)
    assert 4 <= len(calls) <= 40, f"10,000 items took {len(calls)} tasks"
    assert sum(getattr(call, "items", 0) or 0 for call in calls) == 10_000, calls
    assert pool4.map(lambda x: x + 1, []) == []
    assert pool4.map(echo, ["a", "b"]) == ["a", "b"]


def test_map_can_stream_results_in_order(pool4: sky.Pool) -> None:
    results = pool4.map(triple, range(2_000), stream=True)
    assert not isinstance(results, list)
    assert list(results) == [3 * i for i in range(2_000)]
    first = pool4.map(triple, range(2_000), stream=True)
    assert [next(first), next(first)] == [0, 3]
    first.close()
    assert list(pool4.map(triple, [], stream=True)) == []


def test_run_targets(pool4: sky.Pool) -> None:
    assert pool4.run(node_and_pid(), target="head")[0] == 0
    assert pool4.run(node_and_pid(), target=2)[0] == 2
    assert pool4.run_async(node_and_pid(), target=3).result(timeout=30)[0] == 3
    with pytest.raises(ValueError, match="target=7"):
        pool4.run(node_and_pid(), target=7)
    assert pool4.broadcast(echo(1)) == [1, 1, 1, 1]
    assert pool4.run_parallel(echo(1) & echo(2)) == (1, 2)
    assert pool4.current_nodes() == 4
    with pytest.raises(ValueError, match="Spec.nodes"):
        pool4.resize("eight")  # resizing for real is tests/e2e/test_elastic.py's (pool4 is shared)


def test_user_module_functions_and_classes(pool4: sky.Pool) -> None:
    point = make_point(3, -4) >> pool4
    assert isinstance(point, Point) and point.norm1() == 7
    assert pool4.map(Point.norm1, [Point(1, 1), Point(2, -2)]) == [2, 4]


def test_dispatch_inside_a_task_is_refused_clearly(pool4: sky.Pool) -> None:
    @sky.function
    def nested():
        return echo(1) >> sky

    @sky.function
    def captured():
        return echo(1) >> pool4

    with pytest.raises(RuntimeError, match="inside a running task is not supported"):
        nested() >> pool4
    with pytest.raises(RuntimeError, match="inside a running task is not supported"):
        captured() >> pool4


def test_misuse_on_a_real_pool(pool4: sky.Pool) -> None:
    with pytest.raises(TypeError, match="pending call"):
        42 >> pool4  # noqa: B018
    with pytest.raises(TypeError, match=r"call it first: `echo\(...\) >> pool`"):
        echo >> pool4
    with pytest.raises(TypeError, match="pending call"):
        42 @ pool4  # noqa: B018
    with pytest.raises(TypeError, match="pending call"):
        42 > pool4  # noqa: B018


def test_shard_on_every_node_is_disjoint_and_complete(pool4: sky.Pool) -> None:
    @sky.function
    def mine(seed):
        return sky.shard(list(range(103)), shuffle=seed != "off", seed=None if seed == "pool" else 5)

    for seed in ("off", "fixed", "pool"):
        parts = mine(seed) @ pool4
        assert len(parts) == 4
        assert sorted(x for part in parts for x in part) == list(range(103)), seed
