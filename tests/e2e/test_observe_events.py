"""Events of real pools: the order of a pool's life, a failing task, progress, handlers."""

from __future__ import annotations

import threading

import pytest
from fake_cluster import skip_if_fake

import skyward as sky

# The shared pool keeps the local Ray instance running, so each pool here starts in ~1 s.
pytestmark = pytest.mark.usefixtures("warm_ray")

QUIET = sky.Options(console=False, logging=False)
NO_METRICS = sky.Image(metrics=None)


@sky.function
def shout(word: str) -> str:
    print(f"{word}!")
    return word.upper()


@sky.function
def boom(message: str) -> None:
    raise ValueError(message)


def square(x: int) -> int:
    if x == 13:
        raise ValueError("unlucky 13")
    return x * x


def lifecycle(events: list[object]) -> list[str]:
    return [type(e).__name__ for e in events if not isinstance(e, (sky.Metric, sky.Progress))]


def test_the_event_sequence_of_a_pool_life() -> None:
    events: list[object] = []
    pool = sky.Compute(nodes=2, image=NO_METRICS, options=QUIET)
    pool.on(sky.Event, events.append)
    with pool:
        assert shout("hey") >> pool == "HEY"
    assert lifecycle(events) == [
        "ClusterRequested", "ClusterProvisioned", "BootstrapPhase", "BootstrapPhase",
        "InstanceProvisioned", "InstanceBootstrapped", "InstanceProvisioned", "InstanceBootstrapped",
        "ClusterReady",
        "TaskStarted", "Log", "TaskCompleted",
        "InstanceDestroyed", "InstanceDestroyed", "CostFinal", "ClusterDestroyed",
    ]
    requested, provisioned, engine, agents = events[:4]
    assert (requested.provider, requested.nodes, requested.pool) == ("local", 2, pool.name)
    assert (engine.phase, agents.phase) == ("engine", "agents") and agents.duration > 0
    started, log, completed = [e for e in events if isinstance(e, (sky.TaskStarted, sky.Log, sky.TaskCompleted))]
    assert started.name == completed.name == "shout" and started.task_id == completed.task_id
    assert started.node == completed.node == log.node
    assert (log.line, log.stream, log.task_id) == ("hey!", "stdout", started.task_id)
    assert completed.error is None and completed.duration > 0
    final = next(e for e in events if isinstance(e, sky.CostFinal))
    assert (final.total_cost, final.hourly_rate, final.ondemand_count) == (0.0, 0.0, 2)
    times = [e.timestamp for e in events]
    assert times == sorted(times)


def test_the_event_sequence_of_a_failing_task() -> None:
    events: list[object] = []
    pool = sky.Compute(nodes=1, image=NO_METRICS, options=QUIET)
    pool.on(sky.TaskStarted, events.append)
    pool.on(sky.TaskCompleted, events.append)
    pool.on(sky.Progress, events.append)
    with pool:
        with pytest.raises(ValueError, match="bad input"):
            boom("bad input") >> pool
        started, completed = events
        assert isinstance(started, sky.TaskStarted) and isinstance(completed, sky.TaskCompleted)
        assert completed.task_id == started.task_id and completed.name == "boom"
        assert completed.error.startswith("ValueError: bad input")
        events.clear()
        with pytest.raises(ValueError, match="unlucky 13"):
            pool.map(square, range(20))
        progress = [e for e in events if isinstance(e, sky.Progress)]
        assert progress[0].done == 0 and progress[-1].finished and progress[-1].failed >= 1
        failed = [e for e in events if isinstance(e, sky.TaskCompleted) and e.error]
        assert len(failed) == 1 and "unlucky 13" in failed[0].error
        assert shout("still") >> pool == "STILL"


def test_progress_counts_map_broadcast_and_gather_to_their_totals(pool4: sky.Pool) -> None:
    events: list[sky.Progress] = []
    stop = pool4.on(sky.Progress, events.append)
    try:
        assert pool4.map(lambda x: x + 1, range(1000)) == list(range(1, 1001))
        shout("all") @ pool4
        assert sky.gather(*(shout(w) for w in "abc")) >> pool4 == ("A", "B", "C")
    finally:
        stop()
    batches: dict[str, list[sky.Progress]] = {}
    for event in events:
        batches.setdefault(event.batch_id, []).append(event)
    kinds = {b[0].kind: b for b in batches.values()}
    assert set(kinds) == {"map", "broadcast", "gather"}
    mapped = kinds["map"]
    assert mapped[0].done == 0 and mapped[-1].finished and mapped[-1].done == mapped[-1].total == 1000
    done = [e.done for e in mapped]
    assert done == sorted(done) and len(done) > 3  # counted chunk by chunk, not only at the end
    assert [e.done for e in kinds["broadcast"]][-1] == 4 and kinds["broadcast"][-1].total == 4
    assert kinds["gather"][-1].done == 3 and kinds["gather"][-1].finished and kinds["gather"][0].name == "shout"


def test_a_raising_handler_is_reported_once_and_the_pool_goes_on(pool4: sky.Pool) -> None:
    errors: list[sky.Error] = []
    calls: list[int] = []

    def broken(event: sky.TaskCompleted) -> None:
        calls.append(1)
        raise RuntimeError("handler bug")

    stops = [pool4.on(sky.TaskCompleted, broken), pool4.on(sky.Error, errors.append)]
    try:
        assert [shout("x") >> pool4 for _ in range(3)] == ["X"] * 3
    finally:
        for stop in stops:
            stop()
    assert len(calls) == 3
    assert [e.message for e in errors] == [
        "event handler test_a_raising_handler_is_reported_once_and_the_pool_goes_on.<locals>.broken "
        "raised RuntimeError: handler bug (reported once)"
    ]


def test_unsubscribe_and_global_callbacks(pool4: sky.Pool) -> None:
    skip_if_fake(pool4, 'task output capture under pytest')
    mine: list[sky.Log] = []
    everything: list[object] = []
    stop = pool4.on(sky.Log, mine.append)
    with sky.use_callback(everything.append):
        shout("one") >> pool4
    stop()
    shout("two") >> pool4
    assert [e.line for e in mine] == ["one!"]
    assert {type(e).__name__ for e in everything} >= {"TaskStarted", "Log", "TaskCompleted"}
    assert "two!" not in [getattr(e, "line", None) for e in everything]


def test_handlers_run_off_the_calling_thread_without_blocking_it(pool4: sky.Pool) -> None:
    skip_if_fake(pool4, 'task output capture under pytest')
    threads: set[str] = set()
    arrived = threading.Event()

    def record(event: sky.Log) -> None:
        threads.add(threading.current_thread().name)
        arrived.set()

    stop = pool4.on(sky.Log, record)
    try:
        shout("where") >> pool4
        assert arrived.wait(5)
    finally:
        stop()
    assert threads == {"skyward-events"}
