"""Liveness of locks and barriers when a node process dies: a pool of its own, whose
node agents are killed with SIGKILL (Ray restarts them). Its tasks are not retried
(``retry_on_interruption=0``): a retried holder would take the lock again."""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator

import pytest

import skyward as sky
from skyward.collections.config import CHECK_EVERY, LEASE_TTL, RENEW_EVERY

QUIET = sky.Options(console=False, logging=False, retry_on_interruption=0)
DEAD_HOLDER_BOUND = RENEW_EVERY + LEASE_TTL + CHECK_EVERY
WAIT = 30.0


@pytest.fixture(scope="module")
def pool3() -> Iterator[sky.Pool]:
    with sky.Compute(nodes=3, options=QUIET) as pool:
        yield pool


@sky.function
def hold_and_hang(lock_name: str, state: str) -> None:
    lock = sky.lock(lock_name)
    lock.acquire()
    sky.dict(state, consistency="strong")["pid"] = os.getpid()
    time.sleep(600)


@sky.function
def join_and_hang(barrier_name: str, state: str) -> None:
    sky.barrier(barrier_name, n=3)
    sky.dict(state, consistency="strong")["pid"] = os.getpid()
    time.sleep(600)


@sky.function
def join_and_wait(barrier_name: str) -> str:
    barrier = sky.barrier(barrier_name, n=3)
    try:
        barrier.wait(timeout=WAIT)
    except sky.BrokenBarrierError as exc:
        return f"broken: {exc}"
    return "passed"


def _pid(pool: sky.Pool, state: str) -> int:
    found = pool.dict(state, consistency="strong")
    deadline = time.monotonic() + WAIT
    while found.get("pid") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return int(found["pid"])


def test_lock_of_a_killed_node_is_freed(pool3: sky.Pool) -> None:
    lock_name, state = f"lock-{uuid.uuid4().hex[:8]}", f"state-{uuid.uuid4().hex[:8]}"
    holder = pool3.run_async(hold_and_hang(lock_name, state), target=2)
    pid = _pid(pool3, state)
    lock = pool3.lock(lock_name)
    assert lock.locked()
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    assert lock.acquire(timeout=WAIT), "the lock of a killed holder was never freed"
    freed_after = time.monotonic() - started
    lock.release()
    with pytest.raises(sky.NodeCrashedError):
        holder.result(timeout=WAIT)
    print(f"lock freed {freed_after:.2f}s after its holder was killed (design bound {DEAD_HOLDER_BOUND:g}s)")


def test_barrier_breaks_when_a_participant_is_killed(pool3: sky.Pool) -> None:
    barrier_name, state = f"barrier-{uuid.uuid4().hex[:8]}", f"state-{uuid.uuid4().hex[:8]}"
    doomed = pool3.run_async(join_and_hang(barrier_name, state), target=1)
    pid = _pid(pool3, state)
    waiters = [pool3.run_async(join_and_wait(barrier_name), target=node) for node in (0, 2)]
    os.kill(pid, signal.SIGKILL)
    for waiter in waiters:
        outcome = waiter.result(timeout=WAIT + 10)
        assert outcome.startswith("broken:"), outcome
        assert "participant died" in outcome
    with pytest.raises(sky.NodeCrashedError):
        doomed.result(timeout=WAIT)
    pool3.barrier(barrier_name, n=3).reset()
