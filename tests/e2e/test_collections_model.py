"""Property: random operation sequences, each operation run on a node hypothesis picks,
on strong collections give exactly the results of a sequential model (Python's dict,
set, int and deque), under both executors."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skyward as sky

KEYS = st.sampled_from(["a", "b", 1, (1, "t"), None])
VALUES = st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))
OPS = st.one_of(
    st.tuples(st.just("dict_set"), KEYS, VALUES),
    st.tuples(st.just("dict_get"), KEYS),
    st.tuples(st.just("dict_item"), KEYS),
    st.tuples(st.just("dict_pop"), KEYS),
    st.tuples(st.just("dict_del"), KEYS),
    st.tuples(st.just("dict_contains"), KEYS),
    st.tuples(st.just("dict_update"), st.dictionaries(KEYS, VALUES, max_size=3)),
    st.tuples(st.just("counter_add"), st.integers(-3, 3)),
    st.tuples(st.just("counter_reset"), st.integers(-3, 3)),
    st.tuples(st.just("counter_value")),
    st.tuples(st.just("set_add"), KEYS),
    st.tuples(st.just("set_discard"), KEYS),
    st.tuples(st.just("set_contains"), KEYS),
    st.tuples(st.just("set_len")),
    st.tuples(st.just("queue_put"), VALUES),
    st.tuples(st.just("queue_get")),
    st.tuples(st.just("queue_len")),
)
STEPS = st.lists(st.tuples(st.integers(0, 3), OPS), min_size=1, max_size=25)


def apply(op: tuple[Any, ...], d: Any, c: Any, s: Any, q: Any, shared_counter: bool) -> Any:
    """Run ``op`` on dict ``d``, counter ``c``, set ``s`` and queue ``q`` (collections or
    their models: the same code drives both); returns its result, or the error's type."""
    kind, *args = op
    try:
        if kind == "dict_set":
            d[args[0]] = args[1]
            return None
        if kind == "dict_get":
            return d.get(args[0], "default")
        if kind == "dict_item":
            return d[args[0]]
        if kind == "dict_pop":
            return d.pop(args[0], "default")
        if kind == "dict_del":
            del d[args[0]]
            return None
        if kind == "dict_contains":
            return args[0] in d
        if kind == "dict_update":
            d.update(args[0])
            return None
        if kind == "counter_add":
            return c.increment(args[0]) if shared_counter else c.add(args[0])
        if kind == "counter_reset":
            c.reset(args[0])
            return None
        if kind == "counter_value":
            return c.value
        if kind == "set_add":
            s.add(args[0])
            return None
        if kind == "set_discard":
            s.discard(args[0])
            return None
        if kind == "set_contains":
            return args[0] in s
        if kind == "set_len":
            return len(s)
        if kind == "queue_put":
            q.put(args[0])
            return None
        if kind == "queue_get":
            return q.get(timeout=0)
        if kind == "queue_len":
            return len(q)
    except KeyError:
        return KeyError
    raise AssertionError(f"unknown op {op!r}")


class CounterModel:
    def __init__(self) -> None:
        self.value = 0

    def add(self, amount: int) -> int:
        self.value += amount
        return self.value

    def reset(self, value: int) -> None:
        self.value = value


class QueueModel:
    def __init__(self) -> None:
        self.items: deque[Any] = deque()

    def put(self, item: Any) -> None:
        self.items.append(item)

    def get(self, timeout: float) -> Any:
        return self.items.popleft() if self.items else None

    def __len__(self) -> int:
        return len(self.items)


@sky.function
def run_ops(name: str, ops: list[tuple[Any, ...]]) -> list[Any]:
    d = sky.dict(name, consistency="strong")
    c = sky.counter(name, consistency="strong")
    s = sky.set(name, consistency="strong")
    q = sky.queue(name)
    return [apply(op, d, c, s, q, True) for op in ops]


@pytest.fixture(scope="module")
def process_pool() -> Iterator[sky.Pool]:
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=4, options=options) as pool:
        yield pool


@pytest.fixture(params=["thread", "process"])
def pool(request: pytest.FixtureRequest) -> sky.Pool:
    return request.getfixturevalue("pool4" if request.param == "thread" else "process_pool")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=STEPS)
def test_strong_collections_match_a_sequential_model(pool: sky.Pool, steps: list[tuple[int, tuple[Any, ...]]]) -> None:
    name = f"model-{uuid.uuid4().hex[:8]}"
    d: dict[Any, Any] = {}
    c, s, q = CounterModel(), set(), QueueModel()
    expected = [apply(op, d, c, s, q, False) for _, op in steps]

    got: list[Any] = []
    batch: list[tuple[Any, ...]] = []
    for index, (node, op) in enumerate(steps):
        batch.append(op)
        if index + 1 == len(steps) or steps[index + 1][0] != node:
            got.extend(pool.run(run_ops(name, batch), target=node))
            batch = []
    assert got == expected
