"""Wrong arguments to dispatch calls and collection methods on a real pool raise
TypeError/ValueError naming the parameter within a second: never a hang, never silently
accepted (issue 11). One shared pool; Hypothesis draws the wrong values."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import pytest
from fake_cluster import skip_if_fake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skyward as sky

FUZZ = settings(
    max_examples=25, deadline=2000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


class _Opaque:
    pass


wrong_timeout = st.one_of(
    st.just(float("nan")), st.floats(max_value=-1e-6, allow_nan=False), st.integers(max_value=-1),
    st.text(max_size=3), st.booleans(), st.just([]), st.just(_Opaque()),
)
not_a_bool = st.one_of(st.text(max_size=3), st.integers(), st.just(None), st.floats(allow_nan=True), st.just([1]))
wrong_name = st.one_of(st.integers(), st.floats(allow_nan=True), st.just(None), st.just(b"x"), st.just(""),
                       st.lists(st.integers(), max_size=1))


def _refused(call: Callable[[], Any], name: str) -> None:
    started = time.monotonic()
    with pytest.raises((TypeError, ValueError)) as raised:
        call()
    assert time.monotonic() - started < 1.0, f"took {time.monotonic() - started:.2f}s"
    assert name in str(raised.value), f"{name!r} not named in: {raised.value}"


def _double(value: int) -> int:
    return value * 2


@sky.function
def echo(value: Any) -> Any:
    return value


# ------------------------------------------------------------------------- dispatch

@FUZZ
@given(items=st.one_of(st.integers(), st.floats(allow_nan=True), st.just(None), st.just(_Opaque()), st.booleans()))
def test_map_items(pool4: sky.Pool, items: Any) -> None:
    _refused(lambda: pool4.map(_double, items), "items")


@FUZZ
@given(fn=st.one_of(st.integers(), st.text(max_size=3), st.just(None), st.just([len])))
def test_map_fn(pool4: sky.Pool, fn: Any) -> None:
    _refused(lambda: pool4.map(fn, [1]), "function")


@FUZZ
@given(timeout=wrong_timeout.filter(lambda v: not isinstance(v, bool)))
def test_map_timeout(pool4: sky.Pool, timeout: Any) -> None:
    _refused(lambda: pool4.map(_double, [1], timeout=timeout), "timeout")


@FUZZ
@given(stream=not_a_bool)
def test_map_stream(pool4: sky.Pool, stream: Any) -> None:
    _refused(lambda: pool4.map(_double, [1], stream=stream), "stream")


@FUZZ
@given(target=st.one_of(st.integers().filter(lambda n: not 0 <= n < 4),
                        st.text(max_size=4).filter(lambda t: t != "head"),
                        st.floats(allow_nan=True), st.booleans(), st.just([0])))
def test_run_target(pool4: sky.Pool, target: Any) -> None:
    _refused(lambda: pool4.run(echo(1), target=target), "target")


@FUZZ
@given(timeout=wrong_timeout)
def test_with_timeout(pool4: sky.Pool, timeout: Any) -> None:
    _refused(lambda: echo(1).with_timeout(timeout) >> pool4, "timeout")


def test_right_values_still_work(pool4: sky.Pool) -> None:
    assert pool4.map(_double, range(3), timeout=math.inf) == [0, 2, 4]
    assert list(pool4.map(_double, (x for x in range(3)), stream=True)) == [0, 2, 4]
    assert pool4.run(echo(5), target="head") == 5


# ------------------------------------------------------------------------- collections

@FUZZ
@given(name=wrong_name)
def test_collection_names(pool4: sky.Pool, name: Any) -> None:
    skip_if_fake(pool4, "distributed collections")
    for factory in (pool4.dict, pool4.set, pool4.counter, pool4.queue, pool4.lock):
        _refused(lambda: factory(name), "name")
    _refused(lambda: pool4.barrier(name, 1), "name")


@FUZZ
@given(consistency=st.one_of(st.text(max_size=4), st.integers(), st.just(True)))
def test_collection_consistency(pool4: sky.Pool, consistency: Any) -> None:
    skip_if_fake(pool4, "distributed collections")
    _refused(lambda: pool4.dict("fuzz", consistency=consistency), "consistency")
    _refused(lambda: pool4.counter("fuzz", consistency=consistency), "consistency")


@FUZZ
@given(timeout=wrong_timeout)
def test_collection_timeouts(pool4: sky.Pool, timeout: Any) -> None:
    skip_if_fake(pool4, "distributed collections")
    # made first: the first use of a collection may wait for its hosts, which is not the refusal timed here
    queue, lock, barrier = pool4.queue("fuzz"), pool4.lock("fuzz"), pool4.barrier("fuzz", 1)
    _refused(lambda: queue.get(timeout=timeout), "timeout")
    _refused(lambda: pool4.lock("fuzz", timeout=timeout), "timeout")
    _refused(lambda: lock.acquire(timeout=timeout), "timeout")
    _refused(lambda: barrier.wait(timeout=timeout), "timeout")


@FUZZ
@given(blocking=not_a_bool)
def test_lock_blocking(pool4: sky.Pool, blocking: Any) -> None:
    skip_if_fake(pool4, "distributed collections")
    _refused(lambda: pool4.lock("fuzz").acquire(blocking=blocking), "blocking")


@FUZZ
@given(parties=st.one_of(st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=2), st.booleans()))
def test_barrier_parties(pool4: sky.Pool, parties: Any) -> None:
    _refused(lambda: pool4.barrier("fuzz-parties", parties), "n must be an int >= 1")


@pytest.mark.parametrize("collection, put", [
    ("queue", lambda pool, value: pool.queue("fuzz-bad").put(value)),
    ("dict", lambda pool, value: pool.dict("fuzz-bad", consistency="strong").set("the-key", value)),
    ("dict", lambda pool, value: pool.dict("fuzz-bad").set("the-key", value)),
    ("set", lambda pool, value: pool.set("fuzz-bad", consistency="strong").add(value)),
])
def test_unpicklable_values_name_the_collection(pool4: sky.Pool, collection: str, put: Any) -> None:
    skip_if_fake(pool4, "distributed collections")
    import threading

    _refused(lambda: put(pool4, threading.Lock()), f"sky.{collection}('fuzz-bad')")


def test_too_deeply_nested_argument(pool4: sky.Pool) -> None:
    nested: list[Any] = []
    for _ in range(100_000):
        nested = [nested]
    _refused(lambda: echo(nested) >> pool4, "nested too deeply")
    skip_if_fake(pool4, "distributed collections")
    _refused(lambda: pool4.queue("fuzz-deep").put(nested), "sky.queue('fuzz-deep')")
