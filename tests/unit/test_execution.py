"""A map chunk run on a node (``node.execution``): results in order, the failing item
named, and which item runs readable from another thread without a per-item cost, and
timed by an `ItemClock` never early and at most a quarter of the timeout late."""

from __future__ import annotations

import pytest

from skyward.engine.wire import MAP, TaskFailure, TaskRequest
from skyward.node import execution
from skyward.node.execution import ItemClock, MapCursor, execute


def _chunk(fn: object, items: list[object]) -> TaskRequest:
    return TaskRequest("t1", "fn", fn, (items,), {}, None, MAP, None)


def test_the_cursor_names_the_item_running() -> None:
    cursor = MapCursor()
    assert cursor.index() == -1  # before the first item starts
    seen: list[int] = []
    assert execute(_chunk(lambda item: seen.append(cursor.index()) or item * 2, [5, 6, 7]), 0, cursor=cursor) == (
        True, [10, 12, 14])
    assert seen == [0, 1, 2]
    assert cursor.index() == 2


def test_a_failing_item_is_named_and_ends_the_chunk() -> None:
    ran: list[int] = []

    def fn(item: int) -> int:
        ran.append(item)
        if item == 3:
            raise ValueError("three")
        return item

    ok, failure = execute(_chunk(fn, [0, 1, 2, 3, 4]), 7)
    assert not ok and isinstance(failure, TaskFailure)
    assert (failure.type_name, failure.item, failure.node) == ("ValueError", 3, 7)
    assert ran == [0, 1, 2, 3]


def test_results_of_an_unhashable_class_pass_the_generator_check() -> None:
    class Unhashable(type):
        __hash__ = None  # type: ignore[assignment]

    ok, results = execute(_chunk(lambda item: Unhashable("Odd", (), {}), [0, 1]), 0)
    assert ok and len(results) == 2, results


def test_the_first_items_failure_names_item_0() -> None:
    ok, failure = execute(_chunk(lambda item: 1 / item, [0, 1]), 0)
    assert not ok and isinstance(failure, TaskFailure) and failure.item == 0


def test_a_generator_returned_by_an_item_fails_the_chunk_naming_that_item() -> None:
    ok, failure = execute(_chunk(lambda item: iter(()) if item != 2 else (x for x in ()), [0, 1, 2, 3]), 0)
    assert not ok and isinstance(failure, TaskFailure)
    assert (failure.type_name, failure.item) == ("TypeError", 2)
    assert "returned a generator" in failure.message


def test_on_item_is_told_each_item_before_it_runs() -> None:
    told: list[int] = []
    assert execute(_chunk(lambda item: told[-1] * 10 + item, [1, 2, 3]), 0, on_item=told.append) == (True, [1, 12, 23])
    assert told == [0, 1, 2]


def test_the_item_clock_times_each_item_from_when_it_was_first_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]  # the clock the ItemClock reads, moved by hand: the test does not depend on the machine's load
    monkeypatch.setattr(execution.time, "monotonic", lambda: now[0])
    clock = ItemClock(2.0)
    assert clock.look(-1) == pytest.approx(0.5)  # nothing started yet: look again in a quarter of the timeout
    now[0] += 1.5
    assert clock.look(0) == pytest.approx(0.5)  # item 0 is new: its clock starts now, not at the start
    now[0] += 1.6
    assert clock.look(0) == pytest.approx(0.4)  # never early: the next look lands on its deadline
    now[0] += 0.39
    assert clock.look(0) is not None  # 1.99 s of 2 s
    now[0] += 0.01
    assert clock.look(0) is None  # 2 s: expired
    assert clock.item == 0
    now[0] += 0.5
    assert clock.look(1) == pytest.approx(0.5)  # a new item starts a new clock
    assert ItemClock(2.0).item == 0  # a chunk that never started blames its first item


def test_the_wait_for_the_first_item_is_not_the_first_items_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # a worker process that takes longer than the timeout to start must not fail item 0,
    # which has not run; a chunk stuck before its first item still fails, later
    now = [100.0]
    monkeypatch.setattr(execution.time, "monotonic", lambda: now[0])
    clock = ItemClock(2.0)
    now[0] += 2.0 + ItemClock.START_ALLOWANCE - 0.01
    wait = clock.look(-1)
    assert wait == pytest.approx(0.01)  # not expired, and looked at again on the deadline
    now[0] += 0.01
    assert clock.look(-1) is None
    assert clock.item == 0
    started = ItemClock(2.0)
    now[0] += 10.0  # a slow start
    assert started.look(0) == pytest.approx(0.5)  # item 0 gets its whole timeout from here
    now[0] += 1.99
    assert started.look(0) is not None
