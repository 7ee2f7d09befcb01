"""A map chunk run on a node (``node.execution``): results in order, the failing item
named, and which item runs readable from another thread without a per-item cost, and
timed by an `ItemClock` never early and at most a quarter of the timeout late."""

from __future__ import annotations

import time

import pytest

from skyward.engine.wire import MAP, TaskFailure, TaskRequest
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


def test_the_item_clock_times_each_item_from_when_it_was_first_seen() -> None:
    clock = ItemClock(0.2)
    first = clock.look(-1)  # nothing started yet: look again in a quarter of the timeout
    assert first is not None and first == pytest.approx(0.05, abs=0.005)
    time.sleep(0.15)
    assert clock.look(0) is not None  # item 0 is new: its clock starts now, not at the start
    time.sleep(0.15)
    wait = clock.look(0)
    assert wait is not None and wait < 0.051  # never early: 0.15 s of 0.2 s used, so 0.05 s at most
    time.sleep(wait + 0.01)
    assert clock.look(0) is None
    assert clock.item == 0
    assert ItemClock(0.2).item == 0  # a chunk that never started blames its first item
