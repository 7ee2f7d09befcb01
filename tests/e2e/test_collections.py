"""Distributed collections on real 4-node local pools, under both executors: the
reference documents' examples (examples/collections_tour.py), the documented API with
its corrections, atomicity under contention, consistency and the process bridge."""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.util
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import skyward as sky
from skyward.collections import DISABLED

ROOT = Path(__file__).resolve().parents[2]
QUIET = sky.Options(console=False, logging=False)
SETTLE = 10.0


def eventually(read: Callable[[], Any], expected: Any, timeout: float = SETTLE) -> Any:
    """``read()`` once it equals ``expected``, else its last value after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    value = read()
    while value != expected and time.monotonic() < deadline:
        time.sleep(0.02)
        value = read()
    return value


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def process_pool() -> Iterator[sky.Pool]:
    options = QUIET.with_(worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=4, options=options) as pool:
        yield pool


@pytest.fixture(params=["thread", "process"])
def pool(request: pytest.FixtureRequest) -> sky.Pool:
    """The shared 4-node pool of each executor."""
    return request.getfixturevalue("pool4" if request.param == "thread" else "process_pool")


def _threads(pool: sky.Pool) -> bool:
    """True for the thread-executor pool: the full-size runs of the issue go there; the
    process pool repeats them smaller (every operation also crosses the bridge)."""
    return pool.options.resolved_worker.resolved_executor == "thread"


# ----------------------------------------------------------------- tasks


@sky.function
def count(name: str, consistency: str, times: int) -> int:
    counter = sky.counter(name, consistency=consistency)
    for _ in range(times):
        counter.increment()
    return counter.value


@sky.function
def read_counter_until(name: str, expected: int) -> int:
    counter = sky.counter(name)
    return eventually(lambda: counter.value, expected)


@sky.function
def locked_increments(lock_name: str, dict_name: str, consistency: str, rounds: int) -> None:
    lock = sky.lock(lock_name)
    state = sky.dict(dict_name, consistency=consistency)
    for _ in range(rounds):
        with lock:
            state["n"] = state.get("n", 0) + 1


@sky.function
def barrier_rounds(name: str, counter_name: str, rounds: int) -> list[tuple[int, int]]:
    info = sky.instance_info()
    barrier = sky.barrier(name, n=info.total_nodes)
    arrived = sky.counter(counter_name, consistency="strong")
    seen = []
    for _ in range(rounds):
        arrived.increment()
        index = barrier.wait(timeout=60)
        seen.append((index, arrived.value))
    return seen


@sky.function
def dict_semantics(name: str, consistency: str) -> dict:
    d = sky.dict(name, consistency=consistency)
    found: dict[str, Any] = {}
    d["none"] = None
    found["none"] = d["none"]
    found["none_in"] = "none" in d
    found["get_none"] = d.get("none", "default")
    try:
        d["missing"]
    except KeyError as exc:
        found["missing"] = f"KeyError {exc}"
    found["get_default"] = d.get("missing", 5)
    d.update({"a": 1, "b": 2}, c=3)
    d.update([("d", 4)])
    found["updated"] = [d[k] for k in "abcd"]
    found["pop"] = d.pop("a")
    found["pop_again"] = d.pop("a", "gone")
    found["a_in"] = "a" in d
    del d["b"]
    try:
        del d["b"]
    except KeyError:
        found["del_twice"] = "KeyError"
    d[(1, "t")] = "tuple key"
    found["tuple"] = d[(1, "t")]
    found["int_float"] = (d.set(1, "one"), d.get(1.0))[1]
    for what in (lambda: len(d), lambda: d.keys(), lambda: list(d)):
        try:
            what()
        except TypeError as exc:
            found.setdefault("enumeration", []).append(str(exc))
    return found


@sky.function
def pop_keys(name: str, consistency: str, keys: int) -> list[int]:
    d = sky.dict(name, consistency=consistency)
    return [k for k in range(keys) if d.pop(k, None) is not None]


@sky.function
def paired_updates(name: str, keys: tuple[str, str], rounds: int) -> None:
    d = sky.dict(name, consistency="strong")
    for i in range(1, rounds + 1):
        d.update({keys[0]: i, keys[1]: i})


@sky.function
def paired_reads(name: str, keys: tuple[str, str], rounds: int) -> list[tuple[int, int]]:
    d = sky.dict(name, consistency="strong")
    seen = []
    for _ in range(rounds):
        second = d.get(keys[1], 0)
        first = d.get(keys[0], 0)
        seen.append((second, first))
    return seen


@sky.function
def queue_consume(name: str, items: int) -> list[Any]:
    q = sky.queue(name)
    return [q.get(timeout=30) for _ in range(items)]


@sky.function
def queue_wait(name: str, ready: str) -> Any:
    sky.dict(ready, consistency="strong")["waiting"] = True
    return sky.queue(name).get(timeout=60)


@sky.function
def lock_behaviour(name: str) -> dict:
    lock = sky.lock(name, timeout=0.2)
    found: dict[str, Any] = {}
    try:
        lock.release()
    except RuntimeError as exc:
        found["release_unheld"] = str(exc)
    found["acquire"] = lock.acquire()
    found["locked"] = lock.locked()
    lock.release()
    found["locked_after"] = lock.locked()
    return found


@sky.function
def release_the_wrong_lock(held_name: str, other_name: str) -> tuple[bool, bool, str]:
    """Hold one lock and wrongly release another: (still counted as holding, the hold's
    token unchanged, the refusal)."""
    from skyward.collections.lock import holds_lock

    with sky.lock(held_name) as lock:
        token = lock.token
        try:
            sky.lock(other_name).release()
        except RuntimeError as exc:
            refusal = str(exc)
        return holds_lock(), lock.token == token, refusal


@sky.function
def fenced_write(lock_name: str, dict_name: str, value: str) -> int:
    """Write ``value`` under the lock, fenced with its token; the token."""
    with sky.lock(lock_name) as lock:
        sky.dict(dict_name, consistency="strong").set("owner", value, fence=lock.token)
        return lock.token


@sky.function
def hold_lock(name: str, seconds: float) -> bool:
    lock = sky.lock(name)
    with lock:
        time.sleep(seconds)
    return True


@sky.function
def try_lock(name: str, timeout: float) -> dict:
    lock = sky.lock(name, timeout=timeout)
    found: dict[str, Any] = {"acquire": lock.acquire(timeout=timeout)}
    try:
        with lock:
            pass
    except TimeoutError as exc:
        found["with"] = str(exc)
    return found


@sky.function
def same_name_kinds(name: str) -> dict:
    d = sky.dict(name, consistency="strong")
    c = sky.counter(name, consistency="strong")
    s = sky.set(name, consistency="strong")
    q = sky.queue(name)
    d["k"] = "dict"
    c.increment(7)
    s.add("member")
    q.put("queued")
    with sky.lock(name):
        pass
    return {"dict": d["k"], "counter": c.value, "set": len(s), "queue": q.get(timeout=5)}


@sky.function
def write_own(name: str) -> int:
    node = sky.instance_info().node
    sky.dict(name)[node] = node * 10
    return node


@sky.function
def read_all(name: str, nodes: int) -> list[int]:
    d = sky.dict(name)
    return [eventually(lambda n=n: d.get(n), n * 10) for n in range(nodes)]


@sky.function
def read_your_writes(name: str, rounds: int) -> int:
    node = sky.instance_info().node
    d = sky.dict(name)
    c = sky.counter(f"{name}-{node}")
    stale = 0
    for i in range(rounds):
        d[node] = i
        c.increment()
        stale += d[node] != i
    stale += c.value < rounds
    return stale


@sky.function
def read_threshold(shared: Any) -> float:
    return shared["threshold"]


@sky.function
def async_everything(name: str) -> dict:
    async def main() -> dict:
        d = sky.dict(name)
        s = sky.set(name, consistency="strong")
        c = sky.counter(name, consistency="strong")
        q = sky.queue(name)
        lock = sky.lock(name)
        b = sky.barrier(name, n=1)
        await d.set_async("k", None)
        found = {"get": await d.get_async("k", "x"), "contains": await d.contains_async("k")}
        await d.update_async({"u": 1})
        found["pop"] = await d.pop_async("u")
        await d.delete_async("k")
        await s.add_async(1)
        await s.add_async(2)
        await s.discard_async(1)
        found["set"] = (await s.contains_async(2), await s.len_async())
        await c.increment_async(5)
        await c.decrement_async(2)
        found["counter"] = await c.value_async()
        await c.reset_async(10)
        found["reset"] = await c.value_async()
        await q.put_async("a")
        found["queue"] = (await q.len_async(), await q.empty_async(), await q.get_async(1), await q.get_async(0.05))
        async with lock:
            found["locked"] = await lock.locked_async()
        found["barrier"] = await b.wait_async(5)
        return found

    return asyncio.run(main())


@sky.function
def lonely_barrier(name: str) -> list[str]:
    barrier = sky.barrier(name, n=2)
    found = []
    for _ in range(2):
        try:
            barrier.wait(timeout=0.3)
        except sky.BrokenBarrierError as exc:
            found.append(str(exc))
    barrier.reset()
    return found


@sky.function
def child_pid(name: str, seconds: float) -> None:
    sky.dict(name, consistency="strong")["pid"] = os.getpid()
    with sky.lock(name):
        sky.dict(name, consistency="strong")["locked"] = True
        time.sleep(seconds)


# ----------------------------------------------------------------- tests


def test_reference_examples(pool4: sky.Pool) -> None:
    spec = importlib.util.spec_from_file_location("collections_tour", ROOT / "examples" / "collections_tour.py")
    assert spec is not None and spec.loader is not None
    tour = importlib.util.module_from_spec(spec)  # not in sys.modules: its functions travel by value
    spec.loader.exec_module(tour)
    found = tour.tour(pool4)

    assert found["cache"] == [{"node": n, "processed": 40} for n in range(4)]
    embedding = tour.compute_embedding("item-3")
    assert eventually(lambda: pool4.dict("embeddings").get("item-3"), embedding) == embedding
    assert all(1 <= step <= 8 for step in found["steps"])
    assert eventually(lambda: pool4.counter("global_steps").value, 8) == 8
    assert found["dedup"][:5] == ["processed"] * 5
    assert eventually(lambda: len(pool4.set("processed_batches")), 5) == 5
    assert found["queue"] == [task * 2 for task in range(20)]
    for epoch, results in enumerate(found["epochs"]):
        assert [r["node"] for r in results] == [0, 1, 2, 3]
        assert [r["loss"] for r in results] == [1.0 / (epoch + 1 + n) for n in range(4)]
    assert found["phased"] == [4, 4, 4, 4]
    assert found["checkpoint"] == [True, True, True, True, False]
    assert found["best"] == (0.0, 7)
    assert sorted(set(found["workers"])) == [1, 2, 3]
    assert eventually(lambda: pool4.counter("saves").value >= 3, True)
    assert found["consistency"] == ("eventual", "strong")
    assert found["async"] == (42, True)
    assert pool4.queue("async-queue").get(timeout=5) == 42


def test_strong_counter_loses_no_increment(pool: sky.Pool) -> None:
    times = 1000 if _threads(pool) else 250
    name = unique("strong")
    finals = count(name, "strong", times) @ pool
    assert pool.counter(name, consistency="strong").value == 4 * times
    assert max(finals) == 4 * times


@sky.function
def increment_from_threads(name: str, threads: int, times: int) -> list[int]:
    """``threads`` threads of this task increment strong counter ``name`` ``times`` each
    at once (their calls share the host's calls: ``collections.combiner``); the values
    each increment returned."""
    counter = sky.counter(name, consistency="strong")
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        parts = pool.map(lambda _: [counter.increment() for _ in range(times)], range(threads))
        return [value for part in parts for value in part]


def test_concurrent_strong_increments_each_return_a_value_no_other_did(pool: sky.Pool) -> None:
    """Increments made at once in one process go to the host together; each still
    answers the value its own increment left, as if applied alone."""
    name = unique("combined")
    values = [v for part in increment_from_threads(name, 8, 100) @ pool for v in part]
    assert sorted(values) == list(range(1, 4 * 8 * 100 + 1))
    assert pool.counter(name, consistency="strong").value == 4 * 8 * 100


@sky.function
def put_from_threads(name: str, threads: int, times: int) -> list[str]:
    """``threads`` threads of this task put ``times`` items each on queue ``name`` at
    once (their puts share the host's calls), ``(node, thread, i)``; thread 0 also puts
    an unpicklable item midway among them. What each of those puts raised."""
    queue = sky.queue(name)
    node = sky.instance_info().node

    def put(thread: int) -> str:
        raised = ""
        for i in range(times):
            queue.put((node, thread, i))
            if thread == 0 and i == times // 2:
                try:
                    queue.put(threading.Lock())
                except TypeError as exc:
                    raised = str(exc)
        return raised

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(put, range(threads)))


def test_concurrent_puts_arrive_once_each_in_each_threads_order(pool: sky.Pool) -> None:
    """Puts made at once in one process go to the host together, in the order they came;
    an item that cannot be pickled fails its own put only."""
    name = unique("combined-queue")
    for raised in put_from_threads(name, 8, 100) @ pool:
        assert "cannot be pickled" in raised[0] and raised[1:] == [""] * 7
    queue = pool.queue(name)
    items = [queue.get(timeout=10) for _ in range(4 * 800)]
    assert sorted(items) == [(n, t, i) for n in range(4) for t in range(8) for i in range(100)]
    for n in range(4):
        for t in range(8):
            assert [i for (node, thread, i) in items if (node, thread) == (n, t)] == list(range(100))
    assert queue.empty()


def test_eventual_counter_converges_everywhere(pool: sky.Pool) -> None:
    name = unique("eventual")
    count(name, "eventual", 1000) @ pool
    assert eventually(lambda: pool.counter(name).value, 4000) == 4000
    assert read_counter_until(name, 4000) @ pool == [4000] * 4


@sky.function
def bump(name: str) -> int:
    sky.counter(name).increment()
    return 1


def test_a_tasks_eventual_writes_are_visible_when_its_result_arrives(pool: sky.Pool) -> None:
    """The end of a task is a release point: its node has the owner apply its eventual
    writes before the result leaves, and the client reads a slot afresh once after a
    result came. The client read the counter first (it is cached), as a user checking
    it would; before, it then saw 46 of 50, or 4 of 5."""
    runs = 100 if _threads(pool) else 8
    short = []
    name = unique("visible")
    counter = pool.counter(name)
    for run in range(runs):
        assert counter.value == 50 * run  # the client has it cached now
        if run % 10 == 9:  # one task a call (most runs map: 50 items a run, for CI's time)
            assert sum(bump(name) >> pool for _ in range(50)) == 50
        else:
            assert sum(pool.map(bump, [name] * 50)) == 50
        if counter.value != 50 * (run + 1):
            short.append((run, counter.value - 50 * run))
            break
    assert short == []


def test_eventual_reads_your_writes(pool: sky.Pool) -> None:
    assert read_your_writes(unique("ryw"), 200) @ pool == [0, 0, 0, 0]


@pytest.mark.parametrize("consistency", ["strong", "eventual"])
def test_lock_protects_read_modify_write(pool: sky.Pool, consistency: str) -> None:
    rounds = 200 if _threads(pool) and consistency == "strong" else 50
    lock, state = unique("lock"), unique("state")
    locked_increments(lock, state, consistency, rounds) @ pool
    assert pool.dict(state, consistency="strong")["n"] == 4 * rounds


def test_barrier_is_reusable_and_returns_arrival_index(pool: sky.Pool) -> None:
    rounds = 20
    per_node = barrier_rounds(unique("barrier"), unique("arrivals"), rounds) @ pool
    for round_ in range(rounds):
        indices = sorted(node[round_][0] for node in per_node)
        assert indices == [0, 1, 2, 3], f"round {round_}: {indices}"
        assert all(node[round_][1] >= 4 * (round_ + 1) for node in per_node), f"round {round_} released early"


@pytest.mark.parametrize("consistency", ["strong", "eventual"])
def test_dict_api_and_corrections(pool: sky.Pool, consistency: str) -> None:
    found = dict_semantics(unique("semantics"), consistency) >> pool
    assert found["none"] is None and found["none_in"] is True and found["get_none"] is None
    assert found["missing"] == "KeyError 'missing'"
    assert found["get_default"] == 5
    assert found["updated"] == [1, 2, 3, 4]
    assert (found["pop"], found["pop_again"], found["a_in"]) == (1, "gone", False)
    assert found["del_twice"] == "KeyError"
    assert found["tuple"] == "tuple key"
    assert found["int_float"] == "one"
    assert len(found["enumeration"]) == 3
    assert all("entity-per-key" in message and "sky.set()" in message for message in found["enumeration"])


@pytest.mark.parametrize("consistency", ["strong", "eventual"])
def test_pop_is_atomic(pool: sky.Pool, consistency: str) -> None:
    name, keys = unique("pop"), 200
    pool.dict(name, consistency="strong").update({k: k for k in range(keys)})
    popped = pop_keys(name, consistency, keys) @ pool
    flat = [k for part in popped for k in part]
    assert sorted(flat) == list(range(keys)), "a key was popped twice or never"


def test_update_is_atomic_across_shards(pool4: sky.Pool) -> None:
    from skyward.collections.config import host_count
    from skyward.collections.placement import shard_of

    hosts = host_count(pool4.current_nodes())
    second = next(key for key in (f"k{i}" for i in range(100)) if shard_of(key, hosts) != shard_of("k", hosts))
    keys, name = ("k", second), unique("update")
    writer = pool4.run_async(paired_updates(name, keys, 300), target=0)
    reads = [pool4.run_async(paired_reads(name, keys, 300), target=node) for node in (1, 2, 3)]
    writer.result(timeout=120)
    for future in reads:
        for second, first in future.result(timeout=120):
            assert first >= second, "a reader saw the second key of an update before the first"


def test_queue_is_fifo_and_get_times_out(pool: sky.Pool) -> None:
    name = unique("queue")
    q = pool.queue(name)
    for item in range(50):
        q.put(item)
    assert len(q) == 50 and not q.empty()
    assert queue_consume(name, 50) >> pool == list(range(50))
    assert q.empty() and len(q) == 0
    assert q.get(timeout=0.05) is None


def test_waiting_get_receives_a_later_put(pool: sky.Pool) -> None:
    name, ready = unique("queue"), unique("ready")
    waiting = pool.run_async(queue_wait(name, ready))
    assert eventually(lambda: pool.dict(ready, consistency="strong").get("waiting"), True) is True
    pool.queue(name).put({"payload": 1})
    assert waiting.result(timeout=60) == {"payload": 1}


def test_barrier_wait_times_out_and_breaks(pool: sky.Pool) -> None:
    timed_out, still_broken = lonely_barrier(unique("lonely")) >> pool
    assert "timed out after 0.3s with fewer than 2 arrivals" in timed_out
    assert "is broken" in still_broken and "reset()" in still_broken


def test_lock_ownership_and_timeouts(pool: sky.Pool) -> None:
    name = unique("lock")
    found = lock_behaviour(name) >> pool
    assert "does not hold it" in found["release_unheld"]
    assert (found["acquire"], found["locked"], found["locked_after"]) == (True, True, False)

    holder = pool.run_async(hold_lock(name, 3.0), target=0)
    assert eventually(lambda: pool.lock(name).locked(), True) is True
    blocked = pool.run(try_lock(name, 0.2), target=1)
    assert blocked["acquire"] is False
    assert "could not be acquired within its timeout of 0.2s" in blocked["with"]
    assert holder.result(timeout=60) is True
    assert pool.lock(name).locked() is False


def test_a_write_fenced_with_an_earlier_holds_token_is_refused(pool: sky.Pool) -> None:
    """Each hold of a lock has a larger fencing token, on nodes and on the client; a
    strong dict refuses a write fenced with a token older than its key's (what a holder
    that lost the lock to its lease would write late), and keeps the newer value."""
    lock_name, dict_name = unique("lock"), unique("fenced")
    first = fenced_write(lock_name, dict_name, "first") >> pool
    second = pool.run(fenced_write(lock_name, dict_name, "second"), target=1)
    assert second > first > 0
    owner = pool.dict(dict_name, consistency="strong")
    with pool.lock(lock_name) as lock:
        third = lock.token
        assert third > second
    with pytest.raises(RuntimeError, match="token: the caller does not hold the lock"):
        _ = lock.token
    with pytest.raises(sky.StaleFenceError, match=rf"fence={first}\): refused.*newer fencing token {second}"):
        owner.set("owner", "late", fence=first)
    assert owner["owner"] == "second"
    owner.set("owner", "third", fence=third)
    assert owner["owner"] == "third"


def test_releasing_a_lock_not_held_leaves_the_callers_holds_alone(pool: sky.Pool) -> None:
    holding, same_token, refusal = release_the_wrong_lock(unique("lock"), unique("other")) >> pool
    assert "does not hold it (it is not locked)" in refusal
    assert holding and same_token


def test_a_process_child_fences_with_its_holds_token(process_pool: sky.Pool) -> None:
    lock_name, dict_name = unique("lock"), unique("fenced")
    first = fenced_write(lock_name, dict_name, "first") >> process_pool
    second = fenced_write(lock_name, dict_name, "second") >> process_pool
    assert second > first > 0
    assert process_pool.dict(dict_name, consistency="strong")["owner"] == "second"


def test_client_lock_release_by_other_thread_is_refused(pool4: sky.Pool) -> None:
    import threading

    lock = pool4.lock(unique("lock"))
    assert lock.acquire(timeout=5)
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _capture(lock.release, errors))
    thread.start()
    thread.join(timeout=30)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError)
    lock.release()
    assert not lock.locked()


def _capture(fn: Callable[[], Any], errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)


def test_kinds_with_one_name_do_not_collide(pool: sky.Pool) -> None:
    name = unique("shared-name")
    assert same_name_kinds(name) >> pool == {"dict": "dict", "counter": 7, "set": 1, "queue": "queued"}


def test_same_name_is_the_same_collection_on_every_node(pool: sky.Pool) -> None:
    name = unique("everywhere")
    assert write_own(name) @ pool == [0, 1, 2, 3]
    assert read_all(name, 4) @ pool == [[0, 10, 20, 30]] * 4
    client = pool.dict(name)
    assert [eventually(lambda n=n: client.get(n), n * 10) for n in range(4)] == [0, 10, 20, 30]


def test_client_seeds_and_reads(pool4: sky.Pool) -> None:
    name = unique("seed")
    pool4.dict(name).update({"threshold": 0.5})
    pool4.counter(name, consistency="strong").reset(100)
    count(name, "strong", 1) @ pool4
    assert pool4.counter(name, consistency="strong").value == 104
    assert read_threshold(pool4.dict(name)) @ pool4 == [0.5] * 4
    assert repr(pool4.dict(name)) == f"sky.dict({name!r}, consistency='eventual')"


def test_every_method_has_an_async_twin(pool: sky.Pool) -> None:
    found = async_everything(unique("async")) >> pool
    assert found == {
        "get": None, "contains": True, "pop": 1, "set": (True, 1), "counter": 3, "reset": 10,
        "queue": (1, False, "a", None), "locked": True, "barrier": 0,
    }


def test_process_child_killed_while_holding_a_lock_frees_it(process_pool: sky.Pool) -> None:
    name = unique("child-lock")
    holder = process_pool.run_async(child_pid(name, 60.0), target=1)
    state = process_pool.dict(name, consistency="strong")
    assert eventually(lambda: state.get("locked"), True) is True
    os.kill(state["pid"], signal.SIGKILL)
    with pytest.raises(sky.NodeCrashedError):
        holder.result(timeout=60)
    lock = process_pool.lock(name)
    assert lock.acquire(timeout=10), "the lock of a killed process was not freed"
    lock.release()


def test_bad_arguments_name_the_fix(pool4: sky.Pool) -> None:
    with pytest.raises(ValueError, match="consistency='linear'.*strong"):
        pool4.dict("x", consistency="linear")
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        pool4.barrier("x", n=0)
    with pytest.raises(TypeError, match="name must be a str"):
        pool4.counter(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes an int"):
        pool4.counter("x").increment(1.5)  # type: ignore[arg-type]


@sky.function
def put_unpicklable_key(name: str) -> str:
    try:
        sky.dict(name)[threading.Lock()] = 1
    except TypeError as exc:
        return str(exc)
    return "no error"


def test_unpicklable_keys_and_bad_updates_name_the_collection_and_the_fix(pool: sky.Pool) -> None:
    name = unique("d")
    named = rf"sky\.dict\('{name}'\)\.set\((key=)?<unlocked _thread\.lock.*cannot be pickled.*use a str, int"
    with pytest.raises(TypeError, match=named):
        pool.dict(name)[threading.Lock()] = 1
    assert re.search(named, put_unpicklable_key(name) >> pool)
    with pytest.raises(TypeError, match=rf"sky\.dict\('{name}'\)\.update\(5\): expects a mapping .* got int"):
        pool.dict(name).update(5)  # type: ignore[arg-type]


def test_a_collection_used_after_its_pool_closed_is_unavailable() -> None:
    with sky.Compute(nodes=1, options=QUIET) as pool:
        shared = pool.dict(unique("d"))
        shared["k"] = 1
    for documented in (sky.CollectionUnavailableError, sky.PoolClosedError):
        with pytest.raises(documented, match="pool that is closed"):
            shared["k"]


@sky.function
def make_dict() -> str:
    try:
        sky.dict("anything")
    except RuntimeError as exc:
        return str(exc)
    return "no error"


def test_cluster_false_disables_every_constructor() -> None:
    with sky.Compute(nodes=1, options=QUIET.with_(cluster=False)) as pool:
        assert make_dict() >> pool == DISABLED
        for make in (
            lambda: pool.dict("d"), lambda: pool.set("s"), lambda: pool.counter("c"),
            lambda: pool.queue("q"), lambda: pool.barrier("b", 2), lambda: pool.lock("l"),
        ):
            with pytest.raises(RuntimeError, match="Options\\(cluster=False\\)"):
                make()


def test_a_batch_sent_again_is_applied_once(process_pool: sky.Pool) -> None:
    """A node cache sends its batch again while the host cannot be reached (a partition:
    ``NodeCache._exchanged``), so a host may get a batch twice: it applies each operation
    once, whichever copy came first, and of an answer the first copy took with it says
    that it was lost."""
    import ray

    from skyward.collections.config import NAMESPACE
    from skyward.collections.placement import home_of

    name = unique("resent")
    counter = process_pool.counter(name, consistency="eventual")
    assert counter.value == 0  # its hosts answer
    config = process_pool._open.cluster.collections.config
    hosts = ray.get_actor(config.hosts_name, namespace=NAMESPACE)
    index = home_of("counter", name, config.hosts)
    batch = [("counter", name, "add", (5,), None)]
    first = ray.get(hosts.exchange.remote(index, "resent-test", 0, batch), timeout=30)
    again = ray.get(hosts.exchange.remote(index, "resent-test", 0, batch), timeout=30)
    later = ray.get(hosts.exchange.remote(index, "resent-test", 1, [("counter", name, "add", (1,), None)]), timeout=30)
    assert first[0] == [(True, 5)] and first[2] == 0, first
    [(ok, error)] = again[0]
    assert not ok and "applied when first sent; its answer was lost" in str(error) and again[2] == 0, again
    assert later[0] == [(True, 6)] and later[2] == 1, later
    assert eventually(lambda: process_pool.counter(name, consistency="eventual").value, 6) == 6


@sky.function
def write_then_wait(name: str, seconds: float, folder: str) -> str:
    """Say it started, write once told to go, say it wrote, then wait ``seconds``."""
    Path(folder, "started").touch()
    deadline = time.monotonic() + 60
    while not Path(folder, "go").exists():
        assert time.monotonic() < deadline, "never told to go"
        time.sleep(0.02)
    sky.dict(name, consistency="eventual")["held"] = 1
    Path(folder, "written").touch()
    time.sleep(seconds)
    return "returned as if its write had been applied"


def _wait_for_file(path: Path) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path.name} after 60 s"
        time.sleep(0.02)


def test_a_task_whose_eventual_writes_were_lost_fails_naming_them(tmp_path: Path) -> None:
    """A task's eventual write is parked on its host (a prepared update holds the key)
    when the host dies: the write is lost, so the task fails with
    CollectionUnavailableError naming it, where it used to return its result."""
    import ray

    from skyward.collections.actors import WAIT_GROUP
    from skyward.collections.config import NAMESPACE
    from skyward.collections.placement import shard_of

    options = QUIET.with_(worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=1, options=options) as pool:  # its own: a host is killed
        name = unique("lost")
        assert pool.dict(name, consistency="eventual").get("held") is None  # its hosts answer
        config = pool._open.cluster.collections.config
        hosts = ray.get_actor(config.hosts_name, namespace=NAMESPACE)
        index = shard_of("held", config.hosts)
        task = write_then_wait(name, 3.0, str(tmp_path)) > pool
        _wait_for_file(tmp_path / "started")  # under load a task's start takes seconds
        # the key is held for PREPARE_TIMEOUT from here, as by an update of many shards,
        # and the task writes at once
        holding = hosts.__ray_call__.options(concurrency_group=WAIT_GROUP).remote(
            lambda actor: actor._shards[index].prepare("held-by-test", name, ("held",), 30.0, time.monotonic() + 30.0)
        )
        assert ray.get(holding, timeout=30)
        (tmp_path / "go").touch()
        _wait_for_file(tmp_path / "written")
        time.sleep(0.5)  # the write, sent in the background, waits at the host for the held key
        ray.kill(hosts, no_restart=True)
        with pytest.raises(sky.CollectionUnavailableError, match=rf"1 write to sky.dict\('{name}'\)"):
            task.result(timeout=60)


def test_a_strong_call_sent_again_is_applied_once(process_pool: sky.Pool) -> None:
    """A process sends a strong call again, under the same ticket, while the host cannot
    be reached (``LocalOperations._request``): the host applies it once and answers every
    copy with the first one's answer, and refuses a copy that comes after the caller had
    its answer."""
    import ray

    from skyward.collections.actors import pack
    from skyward.collections.config import NAMESPACE
    from skyward.collections.placement import home_of
    from skyward.collections.replies import with_ticket
    from skyward.core.codec import load_payload

    name = unique("called-again")
    assert process_pool.counter(name, consistency="strong").value == 0  # its hosts answer
    config = process_pool._open.cluster.collections.config
    hosts = ray.get_actor(config.hosts_name, namespace=NAMESPACE)
    index = home_of("counter", name, config.hosts)

    def add(amount: int, ticket: tuple[str, int, int]) -> object:
        request = with_ticket(ticket, pack(("counter", name, "add", (amount,))))
        return load_payload(ray.get(hosts.call.remote(index, request), timeout=30))

    assert add(5, ("again-test", 0, 0)) == (True, 5)
    assert add(5, ("again-test", 0, 0)) == (True, 5)
    assert add(1, ("again-test", 1, 1)) == (True, 6)
    ok, error = add(5, ("again-test", 0, 0))
    assert not ok and "after the caller had taken its answer" in str(error), error
    assert process_pool.counter(name, consistency="strong").value == 6


def _lane_peers(path: str) -> int:
    """How many connections the host listening at ``path`` has accepted (and still holds).
    The kernel names them by the path the host bound before it renamed the socket into
    place (``core.unix_listener``)."""
    import psutil

    found = 0
    bound = (path, f"{path}.")
    for process in psutil.process_iter():
        try:
            found += sum(
                1 for c in process.net_connections(kind="unix")
                if c.laddr.startswith(bound) and c.status != psutil.CONN_LISTEN
            )
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@sky.function
def increment_times(name: str, times: int) -> int:
    counter = sky.counter(name, consistency="strong")
    for _ in range(times):
        counter.increment()
    return counter.value


def test_strong_calls_of_a_local_pool_go_by_the_hosts_lane(process_pool: sky.Pool) -> None:
    """The client and the nodes send a strong operation to its host on the host's Unix
    socket (``host_lane``), not through Ray; every increment counts once. The socket's
    path goes with its pool (``process_pool`` keeps the Ray directory it is in)."""
    from skyward.collections.host_lane import lane_path
    from skyward.collections.placement import home_of

    with sky.Compute(nodes=2, options=QUIET) as pool:
        name = unique("by-lane")
        counter = pool.counter(name, consistency="strong")
        counter.increment()
        config = pool._open.cluster.collections.config
        path = lane_path(config.lanes_dir, config.pool_id, home_of("counter", name, config.hosts))
        assert path and os.path.exists(path), (config, path)
        before = _lane_peers(path)
        assert before >= 1, "the client's increment did not come by the lane"
        assert max(increment_times(name, 50) @ pool) == 101
        assert _lane_peers(path) >= before + 2, "the nodes' increments did not come by the lane"
        assert counter.value == 101
    assert os.path.isdir(config.lanes_dir), "the Ray directory went with the pool: nothing is checked"
    assert not os.path.exists(path), "the host's socket path outlived its pool"


def test_a_strong_call_sent_by_the_lane_and_again_through_ray_is_applied_once(process_pool: sky.Pool) -> None:
    """A caller whose lane broke after sending sends the same ticket through Ray: the
    host applies the operation once, whichever way each copy came."""
    import ray

    from skyward.collections.actors import pack
    from skyward.collections.config import NAMESPACE
    from skyward.collections.host_lane import HostLaneClient, lane_path
    from skyward.collections.placement import home_of
    from skyward.collections.replies import with_ticket
    from skyward.core.codec import load_payload

    name = unique("lane-again")
    assert process_pool.counter(name, consistency="strong").value == 0  # its hosts answer
    config = process_pool._open.cluster.collections.config
    index = home_of("counter", name, config.hosts)
    hosts = ray.get_actor(config.hosts_name, namespace=NAMESPACE)
    lane = HostLaneClient(lane_path(config.lanes_dir, config.pool_id, index))
    request = with_ticket(("lane-again-test", 0, 0), pack(("counter", name, "add", (5,))))
    try:
        by_lane = lane.call(request, 30.0)
        assert by_lane is not None, "the host's lane did not answer"
        assert load_payload(by_lane) == (True, 5)
        assert load_payload(ray.get(hosts.call.remote(index, request), timeout=30)) == (True, 5)
        again = lane.call(request, 30.0)
        assert again is not None and load_payload(again) == (True, 5)
    finally:
        lane.close()
    assert process_pool.counter(name, consistency="strong").value == 5


def test_callers_who_find_no_lane_at_a_hosts_path_go_through_ray() -> None:
    """Where a host's socket is gone and its path holds something else, its callers find
    no lane and every operation goes through Ray, as on a remote pool. (That a host which
    cannot listen at its path leaves what is there: tests/unit/test_unix_listener.py.)"""
    import stat

    from skyward.collections.host_lane import lane_path

    with sky.Compute(nodes=2, options=QUIET) as pool:
        config = pool._open.cluster.collections.config
        taken = [lane_path(config.lanes_dir, config.pool_id, index) for index in range(config.hosts)]
        assert all(taken), config
        deadline = time.monotonic() + 60  # the hosts start with the pool, without the open waiting
        while not all(os.path.exists(path) and stat.S_ISSOCK(os.stat(path).st_mode) for path in taken):
            assert time.monotonic() < deadline, "the hosts never listened"
            time.sleep(0.05)
        for path in taken:  # a host listens at its path once, so what replaces it stays
            os.unlink(path)
            os.mkdir(path)
        try:
            counter = pool.counter("through-ray", consistency="strong")
            assert max(increment_times("through-ray", 20) @ pool) == 40
            counter.increment()
            assert counter.value == 41
            assert all(os.path.isdir(path) for path in taken), "a host replaced what was at its path"
        finally:
            for path in taken:
                os.rmdir(path)
