"""Distributed collections on both providers: the tests of tests/e2e/test_collections.py
that matter most, on a 3-node local pool and on the 3-host SSH pool (``any_pool``), plus
the client side of an SSH pool (``pool.dict(...)`` & co. forwarded through the head
relay to node 0's agent, see skyward/collections/gateway.py): blocking ops with their timeouts,
concurrency on the one stream, ``_async`` twins, and lock leases tied to the
connection."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import skyward as sky
from tests.e2e.test_collections import (
    ROOT,
    barrier_rounds,
    count,
    eventually,
    hold_lock,
    locked_increments,
    queue_consume,
    queue_wait,
    read_threshold,
    try_lock,
    unique,
)

pytestmark = pytest.mark.slow  # the SSH pool bootstraps three hosts
NODES = 3


@sky.function
def phased_all() -> int:
    """The tour's ``phased`` for any pool size (the tour's says n=4)."""
    b = sky.barrier("sync", n=sky.instance_info().total_nodes)
    sky.counter("part_one", consistency="strong").increment()
    b.wait()
    return sky.counter("part_one", consistency="strong").value


@sky.function
def barrier_once(name: str, parties: int) -> int:
    return sky.barrier(name, n=parties).wait(timeout=60)


# ----------------------------------------------------------------- both providers


def test_reference_examples(any_pool: sky.Pool) -> None:
    spec = importlib.util.spec_from_file_location("collections_tour", ROOT / "examples" / "collections_tour.py")
    assert spec is not None and spec.loader is not None
    tour = importlib.util.module_from_spec(spec)  # not in sys.modules: its functions travel by value
    spec.loader.exec_module(tour)
    tour.phased = phased_all
    found = tour.tour(any_pool)
    pool = any_pool

    assert found["cache"] == [{"node": n, "processed": 40} for n in range(NODES)]
    embedding = tour.compute_embedding("item-3")
    assert eventually(lambda: pool.dict("embeddings").get("item-3"), embedding) == embedding
    assert all(1 <= step <= 8 for step in found["steps"])
    assert eventually(lambda: pool.counter("global_steps").value, 8) == 8
    assert found["dedup"][:5] == ["processed"] * 5
    assert eventually(lambda: len(pool.set("processed_batches")), 5) == 5
    assert found["queue"] == [task * 2 for task in range(20)]
    for epoch, results in enumerate(found["epochs"]):
        assert [r["node"] for r in results] == list(range(NODES))
        assert [r["loss"] for r in results] == [1.0 / (epoch + 1 + n) for n in range(NODES)]
    assert found["phased"] == [NODES] * NODES
    assert found["checkpoint"] == [True, True, True, True, False]
    assert found["best"] == (0.0, 7)
    assert sorted(set(found["workers"])) == [1, 2, 3]
    assert eventually(lambda: pool.counter("saves").value >= 3, True)
    assert found["consistency"] == ("eventual", "strong")
    assert found["async"] == (42, True)
    assert pool.queue("async-queue").get(timeout=5) == 42


def test_strong_counter_loses_no_increment(any_pool: sky.Pool) -> None:
    times, name = 500, unique("strong")
    finals = count(name, "strong", times) @ any_pool
    assert any_pool.counter(name, consistency="strong").value == NODES * times
    assert max(finals) == NODES * times


def test_eventual_counter_converges_on_the_client(any_pool: sky.Pool) -> None:
    name = unique("eventual")
    count(name, "eventual", 300) @ any_pool
    assert eventually(lambda: any_pool.counter(name).value, NODES * 300) == NODES * 300


@pytest.mark.parametrize("consistency", ["strong", "eventual"])
def test_lock_protects_read_modify_write(any_pool: sky.Pool, consistency: str) -> None:
    rounds = 100 if consistency == "strong" else 30
    lock, state = unique("lock"), unique("state")
    locked_increments(lock, state, consistency, rounds) @ any_pool
    assert any_pool.dict(state, consistency="strong")["n"] == NODES * rounds


def test_barrier_is_reusable_and_returns_arrival_index(any_pool: sky.Pool) -> None:
    rounds = 10
    per_node = barrier_rounds(unique("barrier"), unique("arrivals"), rounds) @ any_pool
    for round_ in range(rounds):
        assert sorted(node[round_][0] for node in per_node) == list(range(NODES)), f"round {round_}"
        assert all(node[round_][1] >= NODES * (round_ + 1) for node in per_node), f"round {round_} released early"


def test_queue_is_fifo_and_get_times_out(any_pool: sky.Pool) -> None:
    name = unique("queue")
    q = any_pool.queue(name)
    for item in range(50):
        q.put(item)
    assert len(q) == 50 and not q.empty()
    assert queue_consume(name, 50) >> any_pool == list(range(50))
    assert q.empty() and len(q) == 0
    started = time.monotonic()
    assert q.get(timeout=0.3) is None
    assert 0.3 <= time.monotonic() - started < 5


def test_client_seeds_and_reads(any_pool: sky.Pool) -> None:
    name = unique("seed")
    any_pool.dict(name).update({"threshold": 0.5})
    any_pool.counter(name, consistency="strong").reset(100)
    count(name, "strong", 1) @ any_pool
    assert any_pool.counter(name, consistency="strong").value == 100 + NODES
    assert read_threshold(any_pool.dict(name)) @ any_pool == [0.5] * NODES
    strong = any_pool.dict(name, consistency="strong")
    strong["k"] = None
    assert strong["k"] is None and "k" in strong and strong.pop("k") is None and "k" not in strong
    with pytest.raises(KeyError):
        strong["missing"]
    s = any_pool.set(name, consistency="strong")
    s.add("a")
    s.add("b")
    s.discard("a")
    assert "b" in s and "a" not in s and len(s) == 1


def test_waiting_task_get_receives_a_client_put(any_pool: sky.Pool) -> None:
    name, ready = unique("queue"), unique("ready")
    waiting = any_pool.run_async(queue_wait(name, ready))
    assert eventually(lambda: any_pool.dict(ready, consistency="strong").get("waiting"), True) is True
    any_pool.queue(name).put({"payload": 1})
    assert waiting.result(timeout=60) == {"payload": 1}


def test_client_lock_against_tasks(any_pool: sky.Pool) -> None:
    name = unique("lock")
    lock = any_pool.lock(name, timeout=5)
    assert lock.acquire() and lock.locked()
    blocked = any_pool.run(try_lock(name, 0.2), target=1)
    assert blocked["acquire"] is False and "within its timeout of 0.2s" in blocked["with"]
    errors: list[BaseException] = []
    thread = threading.Thread(target=lambda: _capture(lock.release, errors))
    thread.start()
    thread.join(timeout=30)
    assert len(errors) == 1 and isinstance(errors[0], RuntimeError), errors
    lock.release()
    assert not lock.locked()

    holder = any_pool.run_async(hold_lock(name, 2.0), target=0)
    assert eventually(lambda: lock.locked(), True) is True
    started = time.monotonic()
    assert lock.acquire(timeout=0.3) is False
    assert 0.3 <= time.monotonic() - started < 5
    with any_pool.lock(name, timeout=30) as taken:  # waits for the task's release
        assert taken.locked()
    assert holder.result(timeout=60) is True
    assert not lock.locked()


@sky.function
def fenced_owner(lock_name: str, store: str) -> int:
    """Write "task" to ``store``'s key "owner" under the lock, fenced; the hold's token."""
    with sky.lock(lock_name) as lock:
        sky.dict(store, consistency="strong").set("owner", "task", fence=lock.token)
        return lock.token


def test_client_lock_tokens_fence_its_writes(any_pool: sky.Pool) -> None:
    """The client's hold has a token, read through any proxy of the lock; a task's later
    hold has a larger one, and the client's late write fenced with its old token is
    refused, on a local pool and through the SSH pool's relay alike."""
    name, store = unique("lock"), unique("fenced")
    assert any_pool.lock(name).acquire()
    first = any_pool.lock(name).token  # another proxy of the same lock: the same hold
    any_pool.dict(store, consistency="strong").set("owner", "client", fence=first)
    any_pool.lock(name).release()
    with pytest.raises(RuntimeError, match="does not hold the lock"):
        _ = any_pool.lock(name).token
    second = any_pool.run(fenced_owner(name, store), target=1)
    assert second > first
    with pytest.raises(sky.StaleFenceError, match=f"fence={first}\\): refused"):
        any_pool.dict(store, consistency="strong").set("owner", "late", fence=first)
    assert any_pool.dict(store, consistency="strong")["owner"] == "task"


def test_client_joins_a_barrier_with_tasks(any_pool: sky.Pool) -> None:
    name = unique("barrier")
    barrier = any_pool.barrier(name, NODES + 1)
    results: list[list[int]] = []
    thread = threading.Thread(target=lambda: results.append(barrier_once(name, NODES + 1) @ any_pool))
    thread.start()
    index = barrier.wait(timeout=60)
    thread.join(timeout=60)
    assert sorted([index, *results[0]]) == list(range(NODES + 1))


def test_blocking_client_ops_do_not_block_the_stream(any_pool: sky.Pool) -> None:
    """A client thread waiting in queue.get leaves the stream free for other work."""
    name = unique("queue")
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(any_pool.queue(name).get(timeout=30)))
    waiter.start()
    started = time.monotonic()
    counter = any_pool.counter(unique("c"), consistency="strong")
    for _ in range(20):
        counter.increment()
    assert (sky.function(lambda: 1)() >> any_pool) == 1
    assert time.monotonic() - started < 10, "other requests waited for the blocked get"
    assert waiter.is_alive()
    any_pool.queue(name).put("late")
    waiter.join(timeout=30)
    assert got == ["late"]


def test_client_async_twins(any_pool: sky.Pool) -> None:
    name = unique("async")

    async def main() -> dict:
        d = any_pool.dict(name)
        c = any_pool.counter(name, consistency="strong")
        q = any_pool.queue(name)
        lock = any_pool.lock(name)
        await d.set_async("k", 1)
        await c.increment_async(5)
        await q.put_async("a")
        found = {"get": await d.get_async("k"), "counter": await c.value_async()}
        found["queue"] = (await q.get_async(1), await q.get_async(0.05))
        async with lock:
            found["locked"] = await lock.locked_async()
        waits = await asyncio.gather(*(q.get_async(5) for _ in range(3)), q.put_async("x"), q.put_async("y"), q.put_async("z"))
        found["gathered"] = sorted(w for w in waits if w is not None)
        return found

    assert asyncio.run(main()) == {"get": 1, "counter": 5, "queue": ("a", None), "locked": True, "gathered": ["x", "y", "z"]}


def _capture(fn: Any, errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.parametrize("any_pool", ["local"], indirect=True)  # it drives a Gateway in this process: a Ray driver
def test_client_end_frees_what_the_client_held(any_pool: sky.Pool) -> None:
    """The agent's side of a remote client (its ``Gateway``), driven here with the local
    client's own engine: when the client goes away, the locks its threads hold are freed
    at once (not after the 3.75 s lease expiry), the barriers they joined break, and its
    waiting operations stop."""
    assert any_pool.spec is not None and any_pool.spec.provider.name == "local"
    import concurrent.futures

    from skyward.collections.gateway import Gateway, decode_answer, encode_operation

    operations = any_pool._collections_operations()
    gateway = Gateway(lambda: operations, 0)
    lock_name, barrier_name, queue_name = unique("lease"), unique("lease-barrier"), unique("lease-queue")
    holder = "client/4242/thread-1"

    def op(call_id: int, name: str, *args: Any) -> Any:
        return decode_answer(gateway.run(encode_operation(name, args), "c1", call_id))

    assert any_pool.lock(lock_name).locked() is False
    assert op(1, "lock_acquire", lock_name, holder, 5.0) > 0  # the hold's fencing token
    op(2, "barrier_join", barrier_name, 2, holder)
    waiting: concurrent.futures.Future[bytes] = concurrent.futures.Future()
    gateway.submit(encode_operation("queue_get", (queue_name, None)), waiting.set_result, "c1", 3)
    time.sleep(0.5)
    started = time.monotonic()
    gateway.end_client("c1")
    ended = time.monotonic()
    assert ended - started < 3.0, "the waiting get did not stop within a slice"
    with pytest.raises(BaseException) as stopped:
        decode_answer(waiting.result(5))
    assert not isinstance(stopped.value, concurrent.futures.TimeoutError)
    assert eventually(lambda: any_pool.lock(lock_name).locked(), False, timeout=10) is False
    assert time.monotonic() - ended < 2.5, "the lock waited for its lease to expire instead"
    with pytest.raises(sky.BrokenBarrierError):
        any_pool.barrier(barrier_name, 2).wait(timeout=5)


def test_forwarding_engine_sends_operations_and_proxies_need_a_pool_to_load() -> None:
    """No pool needed: a forwarding engine (an executor child's, a remote client's)
    sends (op, args) and returns the answer; a proxy unpickled where no pool is open
    says so at once."""
    import concurrent.futures
    import pickle

    from skyward.collections import SharedCounter
    from skyward.collections.gateway import ForwardingOperations

    sent: list[tuple[str, tuple[Any, ...]]] = []

    def call(op: str, args: tuple[Any, ...]) -> concurrent.futures.Future[Any]:
        sent.append((op, args))
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        future.set_result(41 + len(sent))
        return future

    counter = SharedCounter(ForwardingOperations(call, "a test"), "c", "strong")
    assert counter.increment(2) == 42
    assert asyncio.run(counter.value_async()) == 43
    assert sent == [("counter_add", ("c", 2, True)), ("counter_get", ("c", True, False))]
    with pytest.raises(AttributeError):
        ForwardingOperations(call, "a test").not_an_operation  # noqa: B018

    # In a fresh interpreter no pool is open (here a session fixture's pool may be).
    probe = (
        "import pickle, sys\n"
        "from skyward.core.errors import NoActivePoolError\n"
        "try:\n"
        "    pickle.loads(sys.stdin.buffer.read())\n"
        "except NoActivePoolError as exc:\n"
        "    print('no pool:', 'sky.Compute' in str(exc))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], input=pickle.dumps(counter), capture_output=True, cwd=ROOT, timeout=60)
    assert done.stdout.decode().strip() == "no pool: True", done.stderr.decode()
