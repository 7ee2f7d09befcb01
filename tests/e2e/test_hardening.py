"""Issue 11, "Hardening": one regression test per failure the fault matrix found, on real
pools. Tests that need the client to die run it in a subprocess (``tests/e2e/faults.py``).
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from typing import Any

import pytest

import skyward as sky


@sky.function
def exits(how: str) -> None:
    if how == "exit":
        sys.exit(3)
    if how == "interrupt":
        raise KeyboardInterrupt("remote ctrl-c")
    raise GeneratorExit


@sky.function
def echo(value: Any) -> Any:
    return value


@sky.function
def sleeps(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _exit_in_map(value: int) -> int:
    if value == 5:
        sys.exit(7)
    return value


# ------------------------------------------------------------------------- 4: SystemExit & co.

def test_remote_sys_exit_is_a_task_error(pool4: sky.Pool) -> None:
    with pytest.raises(sky.TaskExitError) as raised:
        exits("exit") >> pool4
    assert raised.value.exit_code == 3
    assert "sys.exit(3)" in str(raised.value)
    assert echo(1) >> pool4 == 1  # the client and the pool go on


@pytest.mark.parametrize("how, name", [("interrupt", "KeyboardInterrupt"), ("generator", "GeneratorExit")])
def test_remote_base_exceptions_are_task_errors(pool4: sky.Pool, how: str, name: str) -> None:
    with pytest.raises(sky.TaskExitError, match=name):
        exits(how) >> pool4
    future = exits(how) > pool4
    assert isinstance(future.exception(timeout=30), sky.TaskExitError)


def test_sys_exit_in_a_map_item(pool4: sky.Pool) -> None:
    with pytest.raises(sky.TaskExitError) as raised:
        pool4.map(_exit_in_map, range(10))
    assert raised.value.exit_code == 7


# ------------------------------------------------------------------------- 9: inf is no limit

@pytest.mark.parametrize("value", [math.inf, 1e12])
def test_unlimited_timeouts_work(pool4: sky.Pool, value: float) -> None:
    assert sleeps(0.01).with_timeout(value) >> pool4 == 0.01
    assert (sleeps(0.01).with_timeout(value) > pool4).result(timeout=30) == 0.01
    assert pool4.map(echo.local, range(20), timeout=value) == list(range(20))
    queue = pool4.queue(f"inf-{value}")
    queue.put(1)
    assert queue.get(timeout=value) == 1
    lock = pool4.lock(f"inf-{value}", timeout=value)
    assert lock.acquire(timeout=value)
    lock.release()


def test_nan_timeouts_are_refused_before_anything_runs(pool4: sky.Pool) -> None:
    nan = float("nan")
    with pytest.raises(ValueError, match="timeout"):
        pool4.map(echo.local, [1], timeout=nan)
    with pytest.raises(ValueError, match="timeout"):
        pool4.queue("nan").get(timeout=nan)
    with pytest.raises(ValueError, match="timeout"):
        pool4.lock("nan", timeout=nan)
    barrier = pool4.barrier("nan", 1)
    with pytest.raises(ValueError, match="timeout"):
        barrier.wait(timeout=nan)
    assert barrier.wait(timeout=5) == 0  # not broken by the refused call


def test_pool_with_unlimited_timeouts() -> None:
    options = sky.Options(console=False, logging=False, default_compute_timeout=math.inf, shutdown_timeout=math.inf)
    with sky.Compute(nodes=1, options=options) as pool:
        future = sleeps(0.5) > pool
    assert future.result(timeout=0) == 0.5  # close waited for it: no limit, not "cancel at once"


# ------------------------------------------------------------------------- 2: a host crash

@sky.function
def reads(name: str) -> list[str]:
    """What a node sees of the collections ``name``: each value, or the error's name."""
    seen = []
    for read in (lambda: len(sky.queue(name)), lambda: sky.dict(name).get("k"), lambda: sky.counter(name).value,
                 lambda: sky.queue(name).put("lost")):
        try:
            seen.append(repr(read()))
        except Exception as exc:
            seen.append(type(exc).__name__)
    return seen


def _kill_hosts(pool: sky.Pool) -> None:
    import ray

    from skyward.collections.config import NAMESPACE

    config = pool._cluster.collections.config
    for index in range(config.hosts):
        try:
            ray.kill(ray.get_actor(config.host_name(index), namespace=NAMESPACE), no_restart=True)
        except ValueError:
            pass
    deadline = time.monotonic() + 20
    for index in range(config.hosts):  # ray.kill returns before the actor is gone
        while time.monotonic() < deadline:
            try:
                ray.get_actor(config.host_name(index), namespace=NAMESPACE)
            except ValueError:
                break
            time.sleep(0.05)


def test_lost_collection_host_is_never_silently_empty() -> None:
    options = sky.Options(console=False, logging=False)
    with sky.Compute(nodes=2, options=options) as pool:
        pool.queue("q").put(1)
        pool.dict("q")["k"] = 1
        pool.counter("q").increment()
        before = reads("q") @ pool  # every node uses them
        assert not [seen for seen in before if any("Error" in value for value in seen)]
        untouched = pool.queue("never-used-by-client")  # a name whose host the client never reached
        _kill_hosts(pool)
        lost = ["CollectionUnavailableError"] * 4
        assert reads("q") @ pool == [lost, lost]
        assert reads("fresh-name") @ pool == [lost, lost]  # first touched after the loss: not a new empty one
        for use in (lambda: pool.queue("q").put(2), lambda: untouched.put(2), lambda: pool.dict("q").get("k"),
                    lambda: pool.counter("other").value):
            with pytest.raises(sky.CollectionUnavailableError, match="state is lost"):
                use()
        assert echo(1) >> pool == 1  # dispatch is unaffected


# ------------------------------------------------------------------------- 3: use after close

def _ray_dirs() -> set[str]:
    import tempfile

    root = tempfile.gettempdir()
    return {name for name in os.listdir(root) if name.startswith(("ray", "sky-"))}


def test_collections_after_close_fail_at_once() -> None:
    import ray

    options = sky.Options(console=False, logging=False)
    with sky.Compute(nodes=1, options=options) as pool:
        eventual = pool.dict("d")
        eventual["k"] = "cached"
        assert eventual["k"] == "cached"
        proxies = [eventual, pool.dict("s", consistency="strong"), pool.set("s"), pool.counter("c"),
                   pool.queue("q"), pool.lock("l"), pool.barrier("b", 1)]
    before = _ray_dirs()
    uses = [lambda: eventual["k"], lambda: eventual.get("k"), lambda: eventual.set("k", 2), lambda: proxies[1].get("k"),
            lambda: proxies[2].add(1), lambda: proxies[3].increment(), lambda: proxies[3].value,
            lambda: proxies[4].put(1), lambda: len(proxies[4]), lambda: proxies[5].acquire(),
            lambda: proxies[6].wait(timeout=1)]
    for use in uses:
        started = time.monotonic()
        with pytest.raises(sky.PoolClosedError, match="closed"):
            use()
        assert time.monotonic() - started < 1.0
    assert not ray.is_initialized()
    assert _ray_dirs() <= before
