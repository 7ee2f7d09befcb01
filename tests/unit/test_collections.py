"""Distributed collections without a cluster: placement, the entities a host actor holds,
the cache's replica, leases, argument checks and the proxies' surface."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import pickle
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

import skyward as sky
from skyward.collections import SharedBarrier, SharedCounter, SharedDict, SharedLock, SharedQueue, SharedSet
from skyward.collections.actors import LeaseTable, pack
from skyward.collections.cache import Replica
from skyward.collections.config import LEASE_TTL, MAX_HOSTS, MIN_HOSTS, check_name, check_timeout, host_count, resolve
from skyward.collections.entities import BarrierState, CounterStore, DictShard, Hooks, LockState, QueueState, SetStore
from skyward.collections.errors import BrokenBarrierError, StaleFenceError
from skyward.collections.markers import BUSY, MISSING, UNKNOWN
from skyward.collections.placement import home_of, shard_of
from skyward.collections.replies import Replies, Tickets, ticketed, with_ticket
from skyward.collections.steps import HostUnreachableError, Steps, Wait, pause, run, run_async, sent_again


class Recorder:
    """Hooks that record what an entity tells its host; ``with recorder.lock:`` plays
    the host's lock, held around every entity call."""

    def __init__(self, name: str = "x") -> None:
        self.changed: list[Any] = []
        self.held: set[str] = set()
        self.lock = threading.Condition()
        self.hooks = Hooks(name, self.changed.append, self.held.add, self.held.discard, self.lock)


def in_thread(recorder: Recorder, fn: Any) -> concurrent.futures.Future[Any]:
    """``fn()`` on another thread, holding the recorder's lock (as a host thread would)."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def body() -> None:
        with recorder.lock:
            future.set_result(fn())

    threading.Thread(target=body, daemon=True).start()
    return future


def until_waiting(recorder: Recorder, count: int = 1) -> None:
    """Wait until ``count`` threads wait on the recorder's condition."""
    for _ in range(500):
        with recorder.lock:
            if len(recorder.lock._waiters) >= count:  # type: ignore[attr-defined]
                return
        threading.Event().wait(0.01)
    raise AssertionError("no thread started waiting")


def test_placement_is_stable_and_follows_equality() -> None:
    assert shard_of("key", 8) == shard_of("key", 8)
    assert shard_of(1, 8) == shard_of(1.0, 8) == shard_of(True, 8)
    assert shard_of((1, "a"), 8) == shard_of((1.0, "a"), 8)
    assert shard_of(frozenset({1, 2}), 8) == shard_of(frozenset({2, 1}), 8)
    assert len({shard_of(f"k{i}", 4) for i in range(100)}) == 4
    assert {home_of(kind, "same", 16) for kind in ("dict", "set", "counter", "queue", "lock")} != {0}


def test_host_count_stays_in_bounds() -> None:
    assert host_count(1) == MIN_HOSTS and host_count(4) == 4 and host_count(1000) == MAX_HOSTS


def test_bad_names_and_levels_name_the_fix() -> None:
    assert resolve("dict", None) == "eventual" and resolve("dict", "strong") == "strong"
    with pytest.raises(ValueError, match="dict\\(consistency='fast'\\).*\"strong\", \"eventual\""):
        resolve("dict", "fast")
    with pytest.raises(TypeError, match="must be a str"):
        check_name("queue", 1)
    with pytest.raises(ValueError, match="must not be empty"):
        check_name("lock", "")
    assert check_timeout("get", None) is None and check_timeout("get", 0) == 0
    for bad in (-1, True, "5"):
        with pytest.raises(ValueError, match="get\\(timeout=.*use None \\(no limit\\) or a number of seconds"):
            check_timeout("get", bad)


def test_outside_a_pool_every_factory_says_no_active_pool() -> None:
    # A fresh interpreter: in this one the e2e suite's shared pool may be open.
    script = (
        "import skyward as sky\n"
        "for make in (lambda: sky.dict('d'), lambda: sky.set('s'), lambda: sky.counter('c'),\n"
        "             lambda: sky.queue('q'), lambda: sky.barrier('b', 2), lambda: sky.lock('l')):\n"
        "    try:\n"
        "        make()\n"
        "    except sky.NoActivePoolError as error:\n"
        "        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith("No active pool") for line in lines), lines


def test_dict_shard_stores_none_and_tells_missing_apart() -> None:
    recorder = Recorder()
    shard = DictShard(recorder.hooks)
    with recorder.lock:
        shard.set("k", None)
        assert shard.get("k") is None and shard.contains("k")
        assert shard.get("other") is MISSING and not shard.contains("other")
        assert shard.pop("k") is None and shard.pop("k") is MISSING
        assert shard.delete("k") is False
        shard.update([("a", 1), ("b", 2)])
    assert recorder.changed == ["k", "k", "a", "b"] and shard.version == 4


def test_prepared_keys_wait_for_commit() -> None:
    recorder = Recorder()
    shard = DictShard(recorder.hooks)
    with recorder.lock:
        assert shard.prepare("t1", ("a",), 0)
        assert shard.busy(["a"]) and not shard.busy(["b"])
        assert not shard.prepare("t2", ("a",), 0)
    second = in_thread(recorder, lambda: shard.prepare("t2", ("a",), 5.0))
    until_waiting(recorder)
    with recorder.lock:
        shard.commit("t1", [("a", 1)])
    assert second.result(timeout=5) is True
    with recorder.lock:
        shard.abort("t2")
        assert shard.get("a") == 1 and not shard.busy(["a"])


def test_a_prepared_hold_lasts_until_its_given_time_and_no_longer() -> None:
    """A multi-shard update's holds last until the time it gives (past its last prepare),
    not PREPARE_TIMEOUT from each prepare: the first shard's hold cannot lapse while a
    later shard's prepare still waits."""
    from skyward.collections.actors import CollectionShard, pack
    from skyward.collections.config import CHECK_EVERY, CollectionsConfig

    shard = CollectionShard(CollectionsConfig("prepare-until", 1, True), 0)
    request = with_ticket(("prepare-test", 0, 0), pack(("dict", "d", "set", ("a", 1))))
    assert shard.prepare("long", "d", ("a",), 0, time.monotonic() + 60)
    assert shard.prepare("short", "d", ("b",), 0, time.monotonic() + CHECK_EVERY)
    time.sleep(CHECK_EVERY * 4)
    assert pickle.loads(shard.call(request)) == (False, BUSY), "a hold lapsed before its time"
    assert shard.prepare("other", "d", ("b",), 0, time.monotonic() + 60), "a hold outlived its time"
    shard.commit("long", "d", [("a", 2)], None)
    again = with_ticket(("prepare-test", 1, 1), pack(("dict", "d", "set", ("a", 1))))
    assert pickle.loads(shard.call(again)) == (True, None)


def test_an_update_whose_hold_lapsed_while_it_stalled_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-shard update that stalls past a hold's time (here the second shard's lock
    is taken while the first shard's hold runs out) writes on no shard: once every shard
    is prepared, each hold must still be there before anything is committed."""
    from skyward.collections import actors
    from skyward.collections.config import CHECK_EVERY, CollectionsConfig

    monkeypatch.setattr(actors, "PREPARE_TIMEOUT", 0.0)  # a hold lasts no longer than its prepare
    hosts = actors.CollectionHosts(CollectionsConfig("stalled-update", 2, True))
    first, second = hosts._shards
    stalled = second._lock
    stalled.acquire()
    outcome: list[actors.Outcome] = []
    update = threading.Thread(target=lambda: outcome.append(hosts.update_many("d", {0: [("a", 1)], 1: [("b", 2)]}, None)))
    update.start()
    deadline = time.monotonic() + 10
    while not first._entities and time.monotonic() < deadline:  # the update prepares the first shard
        time.sleep(0.01)
    with first._lock:  # that prepare, which made the dict's entity there, has ended
        assert first._entities, "the update never prepared the first shard"
    while first._prepared and time.monotonic() < deadline:  # and its hold is dropped meanwhile
        time.sleep(CHECK_EVERY / 4)
    assert not first._prepared, "the first shard's hold was never dropped"
    stalled.release()
    update.join(10)
    [(ok, error)] = outcome
    assert not ok and isinstance(error, TimeoutError) and "nothing was written" in str(error)
    for index, (shard, key) in enumerate(((first, "a"), (second, "b"))):
        read = with_ticket(("stalled-test", index, 0), pack(("dict", "d", "get", (key,))))
        assert pickle.loads(shard.call(read)) == (True, MISSING), f"shard {index} was written"


def test_set_and_counter_report_only_real_changes() -> None:
    recorder = Recorder()
    members = SetStore(recorder.hooks)
    with recorder.lock:
        members.add(1)
        members.add(1)
        members.discard(2)
    assert members.size() == 1 and recorder.changed == [1]
    counter = CounterStore(Recorder().hooks)
    assert counter.add(5) == 5 and counter.add(-2) == 3
    counter.reset(10)
    assert counter.get() == 10 and counter.version == 3


def test_queue_is_fifo_and_wakes_a_waiting_get() -> None:
    recorder = Recorder()
    queue = QueueState(recorder.hooks)
    with recorder.lock:
        for item in (1, None, 3):
            queue.put(item)
        drained = [queue.get(0) for _ in range(3)]
        assert queue.get(0) == (False, None)
    assert drained == [(True, 1), (True, None), (True, 3)]
    waiting = in_thread(recorder, lambda: queue.get(5.0))
    until_waiting(recorder)
    with recorder.lock:
        queue.put("late")
    assert waiting.result(timeout=5) == (True, "late") and queue.size() == 0


def test_barrier_returns_arrival_indices_round_after_round() -> None:
    recorder = Recorder("b")
    barrier = BarrierState(recorder.hooks)
    rounds = []
    with recorder.lock:
        for _ in range(3):
            arrivals = [barrier.arrive(3) for _ in range(3)]
            assert [barrier.await_round(generation, 0) for generation, _ in arrivals] == ["done"] * 3
            rounds.append([index for _, index in arrivals])
    assert rounds == [[0, 1, 2]] * 3


def test_barrier_wakes_waiters_and_breaks_when_a_participant_fails() -> None:
    recorder = Recorder("b")
    barrier = BarrierState(recorder.hooks)
    with recorder.lock:
        barrier.join("node/1/task-a", 2)
        generation, _ = barrier.arrive(2)
    waiter = in_thread(recorder, lambda: barrier.await_round(generation, 5.0))
    until_waiting(recorder)
    with recorder.lock:
        barrier.holder_gone("node/1/task-a", failed=True)
    assert waiter.result(timeout=5) == "broken"
    with recorder.lock:
        with pytest.raises(BrokenBarrierError, match="participant died"):
            barrier.arrive(2)
        barrier.reset()
        generation, _ = barrier.arrive(2)
        barrier.arrive(2)
        assert barrier.await_round(generation, 0) == "done"


def test_barrier_refuses_another_party_count() -> None:
    barrier = BarrierState(Recorder("b").hooks)
    barrier.check_parties(4)
    with pytest.raises(ValueError, match="created with n=4, not n=3"):
        barrier.check_parties(3)


def test_lock_belongs_to_its_holder_and_passes_to_the_next_waiter() -> None:
    recorder = Recorder("l")
    lock = LockState(recorder.hooks)
    with recorder.lock:
        assert lock.acquire("a", 0)
        assert not lock.acquire("b", 0)
        with pytest.raises(RuntimeError, match="does not hold it.*only the task"):
            lock.release("b")
    waiting = in_thread(recorder, lambda: lock.acquire("b", 5.0))
    until_waiting(recorder)
    with recorder.lock:
        lock.holder_gone("a", failed=True)
    assert waiting.result(timeout=5) > 0
    assert lock.holder == "b" and recorder.held == {"b"}


def test_a_holder_whose_lease_ran_out_is_told_it_lost_the_lock_when_it_releases() -> None:
    recorder = Recorder("l")
    lock = LockState(recorder.hooks)
    with recorder.lock:
        assert lock.acquire("a", 0)
        lock.lease_ran_out("a")  # cut off from the host: the lock is free for the next
        assert lock.acquire("b", 0)
        with pytest.raises(RuntimeError, match=r"lost the lock while it held it: its lease ran out.*may not have run alone"):
            lock.release("a")
        with pytest.raises(RuntimeError, match="does not hold it.*only the task"):
            lock.release("a")  # told once; after that it is any holder that does not hold it
        lock.lease_ran_out("c")  # a holder that held nothing here: nothing to tell
        with pytest.raises(RuntimeError, match="does not hold it.*only the task"):
            lock.release("c")
        lock.release("b")
        assert lock.acquire("d", 0)
        lock.lease_ran_out("d")
        assert lock.acquire("d", 0)  # held again before it released: the loss is past
        lock.release("d")
        with pytest.raises(RuntimeError, match="does not hold it.*only the task"):
            lock.release("d")


def test_lock_waiters_are_served_in_order_and_a_timeout_gives_up() -> None:
    recorder = Recorder("l")
    lock = LockState(recorder.hooks)
    with recorder.lock:
        assert lock.acquire("a", 0)
    first = in_thread(recorder, lambda: lock.acquire("b", 5.0))
    until_waiting(recorder, 1)
    second = in_thread(recorder, lambda: lock.acquire("c", 5.0))
    until_waiting(recorder, 2)
    with recorder.lock:
        assert lock.acquire("d", 0.01) == 0
        lock.release("a")
    assert first.result(timeout=5) > 0 and not second.done()
    with recorder.lock:
        lock.release("b")
    assert second.result(timeout=5) > first.result() and lock.holder == "c"


def test_each_hold_of_a_lock_has_a_larger_fencing_token_and_a_fenced_key_refuses_older_ones() -> None:
    recorder = Recorder("l")
    lock = LockState(recorder.hooks)
    shard = DictShard(Recorder("d").hooks)
    with recorder.lock:
        tokens = []
        for holder in "abc":
            tokens.append(lock.acquire(holder, 0))
            lock.release(holder)
        assert tokens == sorted(set(tokens)) and tokens[0] > 0, tokens
        first = lock.acquire("x", 0)
        lock.lease_ran_out("x")  # x is cut off; y takes the lock and writes
        second = lock.acquire("y", 0)
        assert second > first
    shard.set("owner", "y", second)
    shard.set("owner", "y again", second)  # the same hold writes as often as it likes
    with pytest.raises(StaleFenceError, match=rf"fence={first}\): refused.*newer fencing token {second}.*nothing was written"):
        shard.set("owner", "x", first)
    assert shard.get("owner") == "y again"
    shard.set("other", "x", first)  # fences are per key
    shard.set("owner", "unfenced")  # a write without a fence is not checked, nor does it reset the fence
    with pytest.raises(StaleFenceError):
        shard.set("owner", "x", first)
    assert shard.get("owner") == "unfenced"


def test_a_fence_is_a_positive_int_on_a_strong_dict_and_a_token_needs_a_hold() -> None:
    strong = SharedDict(None, "d", "strong")  # type: ignore[arg-type] - refused before any operation
    with pytest.raises(TypeError, match=r"fence=True\): a fence is a lock's fencing token, a positive int"):
        strong.set("k", 1, fence=True)
    with pytest.raises(TypeError, match=r"fence=0\)"):
        strong.set("k", 1, fence=0)
    with pytest.raises(ValueError, match=r"fenced writes are checked at the key's owner.*consistency='strong'"):
        SharedDict(None, "d", "eventual").set("k", 1, fence=5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"sky.lock\('l'\).token: the caller does not hold the lock"):
        _ = SharedLock(None, "l", None).token  # type: ignore[arg-type]


def test_leases_expire_unless_renewed(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr("skyward.collections.actors.time.monotonic", lambda: now[0])
    table = LeaseTable()
    table.grant("a")
    table.grant("b")
    now[0] += LEASE_TTL - 0.1
    assert table.renew(["a", "c"]) == ["c"]
    now[0] += 0.2
    assert table.expired() == ["b"] and len(table) == 1


def test_replica_shows_pending_writes_over_the_owners_value() -> None:
    replica = Replica("counter", "c")
    assert replica.confirm(None, 10, version=3)
    replica.refresh(None)
    assert replica.view[None] == 10
    replica.apply_local(None, "add", (5,))
    assert replica.view[None] == 15
    assert not replica.confirm(None, 7, version=2), "an older version must not win"
    dict_replica = Replica("dict", "d")
    dict_replica.apply_local("k", "set", (None,))
    assert dict_replica.view["k"] is None
    dict_replica.apply_local("k", "delete", ())
    assert dict_replica.view["k"] is MISSING
    assert dict_replica.view.get("other", UNKNOWN) is UNKNOWN


def test_steps_run_blocking_and_async() -> None:
    def steps(future: concurrent.futures.Future[int]) -> Any:
        value = yield Wait(future, 5.0, "test")
        return value + 1

    done: concurrent.futures.Future[int] = concurrent.futures.Future()
    threading.Timer(0.01, done.set_result, (41,)).start()
    assert run(steps(done)) == 42
    assert asyncio.run(run_async(steps(done))) == 42
    never: concurrent.futures.Future[int] = concurrent.futures.Future()
    with pytest.raises(TimeoutError, match="test got no answer within 0.05s"):
        run(steps_with_timeout(never))


def steps_with_timeout(future: concurrent.futures.Future[int]) -> Any:
    return (yield Wait(future, 0.05, "test"))


def test_pack_falls_back_to_cloudpickle() -> None:
    assert pickle.loads(pack((1, None))) == (1, None)
    assert pickle.loads(pack(lambda: 7))() == 7


@pytest.mark.parametrize("proxy", [SharedDict, SharedSet, SharedCounter, SharedQueue, SharedBarrier, SharedLock])
def test_every_public_method_has_an_async_twin(proxy: type) -> None:
    methods = {
        name for name, member in inspect.getmembers(proxy)
        if callable(member) and not name.startswith("_") and name not in ("keys", "values", "items")
    }
    missing = {name for name in methods if not name.endswith("_async") and f"{name}_async" not in methods}
    assert not missing, f"{proxy.__name__} lacks async twins of {missing}"
    if proxy is SharedCounter:
        assert "value_async" in methods


def test_exports() -> None:
    assert sky.BrokenBarrierError is BrokenBarrierError
    assert issubclass(sky.BrokenBarrierError, threading.BrokenBarrierError)
    for name in ("dict", "set", "counter", "queue", "barrier", "lock"):
        assert name in sky.__all__


def test_a_closed_pools_collection_error_is_both_documented_types() -> None:
    error = sky.CollectionClosedError("closed")
    assert isinstance(error, sky.PoolClosedError) and isinstance(error, sky.CollectionUnavailableError)


def test_an_unpicklable_key_names_the_collection_the_operation_and_the_fix() -> None:
    from skyward.collections.gateway import encode_operation
    from skyward.collections.local_operations import _dict_shard

    key = threading.Lock()
    with pytest.raises(TypeError, match=r"sky\.dict\('d'\)\.set\(key=<unlocked _thread\.lock.*cannot be pickled.*use a str, int"):
        _dict_shard("d", "set", key, 4)
    with pytest.raises(TypeError, match=r"sky\.dict\('d'\)\.update\(<unlocked _thread\.lock.*cannot be pickled.*use a str, int"):
        encode_operation("dict_update", ("d", [("a", 1), (key, 2)], True))


def test_update_with_neither_a_mapping_nor_pairs_names_the_fix() -> None:
    with pytest.raises(TypeError, match=r"sky\.dict\('d'\)\.update\(5\): expects a mapping or an iterable of \(key, value\) pairs, got int"):
        SharedDict(None, "d", "eventual").update(5)  # type: ignore[arg-type]


def test_tickets_name_the_lowest_call_their_process_still_waits_on() -> None:
    tickets = Tickets("n0/1/a")
    first, second, third = tickets.issue(), tickets.issue(), tickets.issue()
    assert tickets.ticket(third) == ("n0/1/a", 2, 0)
    tickets.settle(first)
    assert tickets.ticket(second) == ("n0/1/a", 1, 1)
    tickets.settle(third)
    tickets.settle(second)
    assert tickets.ticket(tickets.issue()) == ("n0/1/a", 3, 3)


def test_a_ticket_travels_as_a_line_ahead_of_its_request() -> None:
    request = pack(("counter", "c", "add", (1,)))
    ticket, operation = ticketed(with_ticket(("n1/42/ab cd", 7, 3), request))
    assert ticket == ("n1/42/ab cd", 7, 3) and bytes(operation) == request
    with pytest.raises(ValueError):
        ticketed(request.replace(b"\n", b""))


def test_a_host_applies_a_strong_call_once_whichever_copy_comes_first() -> None:
    """``Replies``: a copy after the first gets its answer; a copy while it runs waits for
    it (or, where it may not wait, is sent to the wait group); a copy after the caller took
    the answer is refused; BUSY applies nothing, so its copy runs."""
    lock = threading.Lock()
    replies = Replies(lock)
    with lock:
        assert replies.admit(("c", 0, 0), can_wait=False) is None
        replies.record(("c", 0, 0), (True, 5))
        assert replies.admit(("c", 0, 0), can_wait=False) == (True, 5)
        assert replies.admit(("c", 1, 0), can_wait=True) is None  # runs (a lock acquire, say)
        assert replies.admit(("c", 1, 0), can_wait=False) == (False, BUSY)
    copy = concurrent.futures.ThreadPoolExecutor(1).submit(lambda: _admitted(replies, lock, ("c", 1, 0)))
    with pytest.raises(concurrent.futures.TimeoutError):
        copy.result(timeout=0.3)  # waits for the first copy
    with lock:
        replies.record(("c", 1, 0), (True, 7))
    assert copy.result(timeout=5) == (True, 7)
    with lock:
        assert replies.admit(("c", 2, 2), can_wait=False) is None  # the caller has 0 and 1
        replies.record(("c", 2, 2), (False, BUSY))
        assert replies.admit(("c", 2, 2), can_wait=True) is None  # BUSY applied nothing
        replies.record(("c", 2, 2), (True, 8))
        (ok, error) = replies.admit(("c", 1, 0), can_wait=True)  # a stale copy
        assert not ok and "after the caller had taken its answer" in str(error)
        assert replies.admit(("other", 1, 0), can_wait=False) is None  # callers are apart


def _admitted(replies: Replies, lock: threading.Lock, ticket: tuple[str, int, int]) -> object:
    with lock:
        return replies.admit(ticket, can_wait=True)


def test_a_pause_waits_blocking_and_from_asyncio() -> None:
    for drive in (run, lambda steps: asyncio.run(run_async(steps))):
        started = time.monotonic()
        drive(pause(0.2))
        assert 0.2 <= time.monotonic() - started < 2


def unreachable_for(failures: int, sends: list[float]) -> Any:
    """A send that finds its host unreachable ``failures`` times, then answers; it
    records the seconds it was given each time in ``sends``."""

    def send(left: float) -> Steps[str]:
        sends.append(left)
        if len(sends) <= failures:
            raise HostUnreachableError("reset")
        yield from pause(0)
        return "answered"

    return send


def test_an_operation_is_sent_again_while_its_host_is_unreachable_blocking_and_from_asyncio() -> None:
    for drive in (run, lambda steps: asyncio.run(run_async(steps))):
        sends: list[float] = []
        started = time.monotonic()
        assert drive(sent_again(unreachable_for(2, sends), 10.0, "sky.counter('c').add")) == "answered"
        assert len(sends) == 3 and 1.0 <= time.monotonic() - started < 5  # every 0.5 s
        assert sends[0] > sends[1] > sends[2] > 8  # what is left of the 10 s each time


def test_an_operation_whose_host_stays_unreachable_raises_naming_it_and_how_long() -> None:
    sends: list[float] = []
    with pytest.raises(HostUnreachableError, match=r"sky.counter\('c'\).add: .* every 0.5s for 1.2s") as raised:
        run(sent_again(unreachable_for(99, sends), 1.2, "sky.counter('c').add"))
    assert 2 <= len(sends) <= 3 and str(raised.value.__cause__) == "reset"


def test_an_operation_that_fails_otherwise_is_not_sent_again() -> None:
    sends: list[float] = []

    def refused(left: float) -> Steps[str]:
        sends.append(left)
        raise KeyError("no such key")
        yield from pause(0)

    with pytest.raises(KeyError):
        run(sent_again(refused, 10.0, "sky.dict('d').pop"))
    assert len(sends) == 1
