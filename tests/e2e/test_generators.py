"""Generator functions stream: ``for x in gen() >> pool`` yields each value on the client
as the node produces it (thread and process executors), errors come after the values
before them, and the other operators refuse a generator naming ``>>``."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

import skyward as sky


@sky.function
def countdown(n: int) -> Iterator[int]:
    for value in range(n, 0, -1):
        yield value


@sky.function
def slow_pair() -> Iterator[float]:
    yield time.time()
    time.sleep(1.5)
    yield time.time()


@sky.function
def fails_after(n: int) -> Iterator[int]:
    yield from range(n)
    raise ValueError(f"stopped after {n}")


@sky.function
def printed_and_yielded() -> Iterator[str]:
    print("before")
    yield "value"


def test_values_arrive_in_order(pool4: sky.Pool) -> None:
    assert list(countdown(5) >> pool4) == [5, 4, 3, 2, 1]
    assert list(countdown(0) >> pool4) == []
    assert list(countdown(2000) >> pool4) == list(range(2000, 0, -1))


def test_each_value_arrives_as_it_is_produced(pool4: sky.Pool) -> None:
    values = slow_pair() >> pool4
    first = next(values)
    seen_at = time.time()
    assert seen_at - first < 1.0  # not held back until the generator ended
    second = next(values)
    assert second - first >= 1.4
    assert list(values) == []


def test_an_error_follows_the_values_before_it(pool4: sky.Pool) -> None:
    got = []
    with pytest.raises(ValueError, match="stopped after 3"):
        for value in fails_after(3) >> pool4:
            got.append(value)
    assert got == [0, 1, 2]


def test_other_operators_name_the_streaming_one(pool4: sky.Pool) -> None:
    with pytest.raises(TypeError, match=r"generator function: iterate its values with `for value in countdown\(...\) >> pool`"):
        countdown(2) @ pool4
    with pytest.raises(TypeError, match="generator function"):
        pool4.map(countdown, [1, 2])


def test_process_executor_streams_too(pool2_process: sky.Pool) -> None:
    assert list(countdown(4) >> pool2_process) == [4, 3, 2, 1]
    assert list(printed_and_yielded() >> pool2_process) == ["value"]


@pytest.fixture(scope="module")
def pool2_process() -> Iterator[sky.Pool]:
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=2, options=options) as pool:
        yield pool
