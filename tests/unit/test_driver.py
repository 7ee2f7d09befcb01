"""The one dispatch engine without Ray: ``PoolDriver`` over the in-process
``FakeTransport`` (tests/fake_cluster.py). Error mapping of every transport failure,
timeouts, slot fairness and map chunking, fast."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fake_cluster import FakeTransport

import skyward as sky
from skyward.core.instance import InstanceInfo, NetworkInfo
from skyward.engine.driver import PoolDriver
from skyward.engine.events import EventFeed
from skyward.engine.scheduler import ALL, SlotScheduler
from skyward.engine.transport import Disconnected, NodeLost, Refused
from skyward.engine.wire import encode
from skyward.node.agent import AgentSetup, NodeRunner


class Harness:
    """A driver over ``nodes`` in-process nodes, with its loop on a thread."""

    def __init__(self, nodes: int, worker: sky.Worker, timeout: float = 30.0, retries: int = 3) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        infos = [InstanceInfo(n, 0, nodes, 1, 0.0, 0.0, "127.0.0.1", 0, "job", [], None, NetworkInfo("lo")) for n in range(nodes)]
        self.runners = [NodeRunner(AgentSetup(info, worker, ".", ())) for info in infos]
        self.transport = FakeTransport(self.runners, nodes * worker.slots + 2)
        self.events: list[Any] = []
        self.feed = EventFeed(self.events.append, lambda message: self.events.append(message))
        self.transport.open(self.loop, self.feed)
        self.driver = PoolDriver(
            self.transport, encode, worker, timeout, self.events.append, lambda _: True,
            self.feed.wait_delivered, self.loop, nodes, retries,
        )

    def run(self, coroutine: Any, timeout: float = 30) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.driver.close()
        self.transport.close()
        self.feed.stop()
        for runner in self.runners:
            runner.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(2, sky.Worker(concurrency=1))
    try:
        yield h
    finally:
        h.close()


@sky.function
def add(a: int, b: int) -> int:
    return a + b


@sky.function
def node_of() -> int:
    info = sky.instance_info()
    assert info is not None
    return info.node


@sky.function
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_run_broadcast_and_map(harness: Harness) -> None:
    assert harness.run(harness.driver.run(add(2, 3))) == 5
    assert harness.run(harness.driver.broadcast(node_of())) == [0, 1]
    assert harness.driver.run_now(add(1, 1)) == 2
    chunks: list[tuple[int, list[int]]] = []
    double = add(0, 0).__class__(lambda x: x * 2)
    before = len(harness.transport.calls)
    assert harness.run(harness.driver.map(double, list(range(50)))) == [x * 2 for x in range(50)]
    assert len(harness.transport.calls) - before < 20, "items travel in chunks, not one call each"
    assert harness.run(harness.driver.map(double, list(range(50)), lambda s, v: chunks.append((s, v)))) == []
    assert [value for _, values in sorted(chunks) for value in values] == [x * 2 for x in range(50)]


def test_a_node_its_task_ended_is_a_node_crash_not_retried(harness: Harness) -> None:
    harness.transport.fail_next(1, NodeLost(1, "it ended because its task called os._exit(3)", by_task=True))
    before = len(harness.transport.calls)
    with pytest.raises(sky.NodeCrashedError, match="node 1's agent process died while running add") as caught:
        harness.run(harness.driver.run(add(1, 2), target=1))
    assert not isinstance(caught.value, sky.PreemptedError)
    assert caught.value.node == 1 and "not retried" in str(caught.value)
    assert len(harness.transport.calls) - before == 1, "it ran once"
    assert any(isinstance(e, sky.InstanceReplaced) and e.node == 1 for e in harness.events)
    assert harness.run(harness.driver.run(add(1, 2), target=1)) == 3, "the pool goes on"


def test_a_node_lost_to_the_infrastructure_is_retried(harness: Harness) -> None:
    harness.transport.fail_next(1, NodeLost(1, "killed from outside"))
    before = len(harness.transport.calls)
    assert harness.run(harness.driver.run(add(1, 2), target=1)) == 3
    assert len(harness.transport.calls) - before == 2, "it ran again"
    harness.transport.fail_next(0, NodeLost(0, "killed from outside"))
    assert harness.driver.run_now(add(2, 2), target=0).lost == 1, "run_now hands the retry to run"


def test_retries_run_out_with_a_preempted_error() -> None:
    harness = Harness(1, sky.Worker(), retries=1)
    try:
        for _ in range(2):
            harness.transport.fail_next(0, NodeLost(0, "spot interruption"))

        def lose_every_time() -> None:
            harness.transport.fail_next(0, NodeLost(0, "spot interruption"))

        original = harness.transport._run

        def run(node: int, payload: Any) -> Any:
            lose_every_time()
            return original(node, payload)

        harness.transport._run = run  # type: ignore[method-assign]
        with pytest.raises(sky.PreemptedError, match=r"interrupted on all 2 attempts.*spot interruption") as caught:
            harness.run(harness.driver.run(add(1, 2)))
        assert caught.value.attempts == 2 and isinstance(caught.value, sky.NodeCrashedError)
        with pytest.raises(sky.PreemptedError, match=r"map\(.*\) was interrupted") as mapped:
            harness.run(harness.driver.map(add(0, 0).__class__(lambda x: x), [1, 2, 3]))
        assert mapped.value.failed_item == 0
    finally:
        harness.close()


def test_refused_and_disconnected_name_the_cause(harness: Harness) -> None:
    harness.transport.fail_next(0, Refused(0, "cannot decode"))
    with pytest.raises(RuntimeError, match="node 0 could not run add: cannot decode"):
        harness.run(harness.driver.run(add(1, 2), target=0))
    harness.transport.fail_next(0, Disconnected(0, "tunnel closed"))
    with pytest.raises(ConnectionError, match="lost with the connection to the pool: tunnel closed"):
        harness.run(harness.driver.run(add(1, 2), target=0))
    harness.transport.fail_next(0, Disconnected(0, "tunnel closed"))
    harness.driver.closing = True
    with pytest.raises(sky.PoolClosedError):
        request = harness.driver._request(add(1, 2))
        harness.run(harness.driver._execute(harness.driver._attempt(0, encode(request), request)))


def test_a_call_that_outlives_its_timeout_is_a_timeout_error(harness: Harness) -> None:
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"nap did not finish within its timeout of 0.3s"):
        harness.run(harness.driver.run(nap(5).with_timeout(0.3)))
    assert time.monotonic() - started < 3


def test_a_hung_node_times_out_the_call_at_its_deadline(harness: Harness) -> None:
    harness.transport.hold(1)
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="add did not finish within its timeout of 0.2s on node 1"):
            harness.run(harness.driver.run(add(1, 1).with_timeout(0.2), target=1))
        assert time.monotonic() - started < 3
    finally:
        harness.transport.release(1)


def test_remote_errors_keep_their_type_and_map_items_their_index(harness: Harness) -> None:
    def explode(x: int) -> int:
        if x == 37:
            raise KeyError("thirty-seven")
        return x

    with pytest.raises(KeyError, match="thirty-seven") as caught:
        harness.run(harness.driver.map(add(0, 0).__class__(explode), list(range(60))))
    assert any("item 37" in note for note in caught.value.__notes__)


def test_output_is_delivered_before_the_result(harness: Harness) -> None:
    @sky.function
    def speak() -> str:
        print("before the result")
        return "done"

    # The runners' output goes through NodeRunner.line when a TaskStream routes it; here
    # the line is put directly, as an agent's stream would, then the result waits for it.
    runner = harness.runners[0]
    runner.line("", "stdout", "node line")
    assert harness.run(harness.driver.run(speak(), target=0)) == "done"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(getattr(e, "line", None) == "node line" for e in harness.events):
        time.sleep(0.01)
    assert any(getattr(e, "line", None) == "node line" for e in harness.events)


def test_scheduler_serves_in_arrival_order_and_a_broadcast_holds_back_later_work() -> None:
    loop = asyncio.new_event_loop()
    order: list[str] = []

    async def scenario() -> None:
        scheduler = SlotScheduler(2, 1, loop)
        first = await scheduler.acquire(None)
        second = await scheduler.acquire(None)
        assert {first, second} == {0, 1}

        async def want(label: str, what: Any) -> Any:
            granted = await scheduler.acquire(what)
            order.append(label)
            return granted

        pinned = asyncio.ensure_future(want("pinned-1", 1))
        everything = asyncio.ensure_future(want("all", ALL))
        anyone = asyncio.ensure_future(want("any", None))
        await asyncio.sleep(0)
        scheduler.release(0)  # node 0 free: the pinned waiter wants 1, the broadcast needs both
        await asyncio.sleep(0)
        assert order == [], "a later request must not pass a waiting broadcast"
        scheduler.release(1)
        await asyncio.sleep(0)
        assert order == ["pinned-1"]
        scheduler.release(1)
        await asyncio.sleep(0)
        assert order == ["pinned-1", "all"]
        scheduler.release([0, 1])
        await asyncio.sleep(0)
        assert order == ["pinned-1", "all", "any"]
        await asyncio.gather(pinned, everything, anyone)

    loop.run_until_complete(scenario())
    loop.close()


def test_a_cancelled_waiter_gives_its_slot_to_the_next() -> None:
    loop = asyncio.new_event_loop()

    async def scenario() -> None:
        scheduler = SlotScheduler(1, 1, loop)
        await scheduler.acquire(None)
        cancelled = asyncio.ensure_future(scheduler.acquire(None))
        waiting = asyncio.ensure_future(scheduler.acquire(None))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        assert scheduler.waiting() == 1
        scheduler.release(0)
        assert await asyncio.wait_for(waiting, 1) == 0
        assert scheduler.busy() == 1 and scheduler.waiting() == 0

    loop.run_until_complete(scenario())
    loop.close()


def test_many_waiters_are_served_without_rescanning_them() -> None:
    """20,000 waiters on one slot: each release looks at queue heads only, so serving all
    of them takes about as long per grant as serving a few (counted, not timed)."""
    loop = asyncio.new_event_loop()

    async def scenario() -> int:
        scheduler = SlotScheduler(1, 1, loop)
        await scheduler.acquire(None)
        looked = 0
        original = scheduler._try

        def counting(want: Any) -> Any:
            nonlocal looked
            looked += 1
            return original(want)

        scheduler._try = counting  # type: ignore[method-assign]
        waiters = [asyncio.ensure_future(scheduler.acquire(None)) for _ in range(20_000)]
        await asyncio.sleep(0)
        for _ in waiters:
            scheduler.release(0)
            await asyncio.sleep(0)
        await asyncio.gather(*waiters)
        return looked

    looked = loop.run_until_complete(scenario())
    loop.close()
    assert looked <= 20_000 * 2


LOOKED = [0]
"""Nodes a scheduler looked at, through the two structures below."""


class _CountedSet(set[int]):
    """A set that counts the members it is asked about or yields."""

    def __contains__(self, item: object) -> bool:
        LOOKED[0] += 1
        return super().__contains__(item)

    def __iter__(self) -> Iterator[int]:
        for item in super().__iter__():
            LOOKED[0] += 1
            yield item


class _CountedDict(dict[int, int]):
    """A dict that counts the keys read."""

    def __getitem__(self, key: int) -> int:
        LOOKED[0] += 1
        return super().__getitem__(key)


def test_a_grant_among_a_thousand_busy_nodes_looks_at_a_few() -> None:
    """1,000 nodes of one slot, all busy but two: a grant takes the first free one after
    the round-robin cursor without walking the busy ones (counted, not timed)."""
    loop = asyncio.new_event_loop()

    async def scenario() -> list[int]:
        scheduler = SlotScheduler(1000, 1, loop)
        assert [await scheduler.acquire(None) for _ in range(1000)] == list(range(1000)), "round robin, rank order"
        scheduler.release(700)
        scheduler.release(300)
        scheduler._open = _CountedSet(scheduler._open)
        scheduler._free = _CountedDict(scheduler._free)
        granted = [await scheduler.acquire(None), await scheduler.acquire(None)]
        scheduler.release(5)
        scheduler.release(6)
        return [*granted, await scheduler.acquire(None)]

    assert loop.run_until_complete(scenario()) == [300, 700, 5], "the first free node at or after the cursor, wrapping"
    loop.close()
    assert LOOKED[0] <= 3 * 16, f"{LOOKED[0]} nodes looked at for 3 grants"


def test_a_map_over_many_slots_ends_in_chunks_of_an_eighth_of_its_first() -> None:
    """A chunk's round trip grows with the chunks queued behind it, so over many slots
    the pace floor alone let trivial items end in chunks of a few items (12 chunks a
    slot); the share floor keeps the tail at 1/8 of the first chunks, about 6 a slot."""
    nodes, per_node = 128, 1_000
    h = Harness(nodes, sky.Worker(concurrency=1))
    try:
        double = add(0, 0).__class__(lambda x: x * 2)
        items = list(range(nodes * per_node))
        assert h.run(h.driver.map(double, items), timeout=120) == [x * 2 for x in items]
        sizes = [event.items for event in h.events if isinstance(event, sky.TaskStarted)]
        assert sum(sizes) == len(items)
        assert len(sizes) <= 7 * nodes, f"{len(sizes)} chunks for {nodes} slots"
        assert sorted(sizes)[1] >= per_node // 2 // 8, sorted(sizes)[:5]  # but the last of all, the rest
    finally:
        h.close()
