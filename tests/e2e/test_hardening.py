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
