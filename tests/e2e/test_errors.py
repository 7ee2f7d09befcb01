"""Remote errors, unpicklable values, timeouts and crashed workers."""

from __future__ import annotations

import os
import threading
import time

import pytest
from helpers.usermod import UserError, raise_user_error

import skyward as sky


@sky.function
def divide(a: int, b: int) -> float:
    return a / b


@sky.function
def echo(value):
    return value


@sky.function
def returns_lock():
    return threading.Lock()


@sky.function
def sleep_for(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


@sky.function
def busy_for(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


@sky.function
def hard_exit() -> None:
    os._exit(3)


@sky.function
def segfault() -> None:
    import ctypes

    ctypes.string_at(0)


def test_remote_exception_keeps_its_type_and_traceback(pool4: sky.Pool) -> None:
    with pytest.raises(ZeroDivisionError) as error:
        divide(1, 0) >> pool4
    assert isinstance(error.value.__cause__, sky.RemoteTraceback)
    assert "divide" in error.value.__cause__.text and "return a / b" in error.value.__cause__.text
    assert any("on node" in note for note in error.value.__notes__)


def test_user_defined_exception_class(pool4: sky.Pool) -> None:
    with pytest.raises(UserError) as error:
        raise_user_error(7) >> pool4
    assert error.value.code == 7
    with pytest.raises(UserError):
        raise_user_error(8) @ pool4


def test_unpicklable_argument_is_named_at_dispatch(pool4: sky.Pool) -> None:
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"argument 0 \(<unlocked _thread.lock"):
        echo(lock) >> pool4
    with pytest.raises(TypeError, match="keyword argument 'value'"):
        echo(value=lock) @ pool4


def test_unpicklable_function_is_named(pool4: sky.Pool) -> None:
    lock = threading.Lock()

    @sky.function
    def uses_lock():
        return lock.locked()

    with pytest.raises(TypeError, match="the function"):
        uses_lock() >> pool4


def test_unpicklable_result_names_the_task(pool4: sky.Pool) -> None:
    with pytest.raises(TypeError, match="returns_lock.*cannot be pickled"):
        returns_lock() >> pool4
    assert echo(1) >> pool4 == 1


def test_timeouts_raise_and_free_the_slot() -> None:
    options = sky.Options(console=False, logging=False, default_compute_timeout=30)
    with sky.Compute(nodes=1, options=options) as pool:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="timeout of 0.5s"):
            sleep_for(30).with_timeout(0.5) >> pool
        with pytest.raises(TimeoutError):
            busy_for(30).with_timeout(0.5) >> pool
        assert echo("free") >> pool == "free"
        assert time.monotonic() - started < 10

        timed = sky.function(timeout=0.5)(sleep_for.local)
        with pytest.raises(TimeoutError):
            timed(30) >> pool
        with pytest.raises(TimeoutError):
            pool.map(sleep_for, [0, 30], timeout=0.5)
        assert sky.gather(echo(1), echo(2)) >> pool == (1, 2)


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_a_maps_timeout_is_per_item_and_names_the_item_that_ran_out(executor: str) -> None:
    """Items that each finish within the timeout pass however long their chunk takes;
    the item that runs out fails the map, named, and no sooner than its timeout."""
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor=executor))
    with sky.Compute(nodes=1, options=options) as pool:
        assert pool.map(sleep_for, [0.3] * 6, timeout=0.6) == ["done"] * 6
        started = time.monotonic()
        with pytest.raises(TimeoutError) as error:
            pool.map(sleep_for, [0.05, 0.05, 0.05, 30, 0.05], timeout=0.6)
        assert time.monotonic() - started >= 0.6 + 0.15
        assert error.value.failed_item == 3  # type: ignore[attr-defined]
        assert echo("free") >> pool == "free"


def test_a_worker_process_slower_to_start_than_the_timeout_does_not_fail_item_0() -> None:
    """With a fresh worker process per task, each map chunk waits for a process to start
    (longer than the 0.1 s timeout here) before its first item: that wait is not item 0's
    time, so the map passes; an item that runs out still fails it, named."""
    worker = sky.Worker(executor="process", reuse_processes=False)
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=False, worker=worker)) as pool:
        assert pool.map(sleep_for, [0.01] * 3, timeout=0.1) == ["done"] * 3
        with pytest.raises(TimeoutError) as error:
            pool.map(sleep_for, [0.01, 5], timeout=0.1)
        assert error.value.failed_item == 1  # type: ignore[attr-defined]


def test_pool_default_timeout_applies() -> None:
    options = sky.Options(console=False, logging=False, default_compute_timeout=0.5)
    with sky.Compute(nodes=1, options=options) as pool:
        with pytest.raises(TimeoutError):
            sleep_for(30) >> pool
        assert sleep_for(0.1).with_timeout(5) >> pool == "done"


def test_a_crashing_task_names_the_node_and_the_pool_recovers() -> None:
    with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False)) as pool:
        with pytest.raises(sky.NodeCrashedError, match="node 1") as error:
            pool.run(hard_exit(), target=1)
        assert error.value.node == 1
        with pytest.raises(sky.NodeCrashedError):
            pool.run(segfault(), target=1)
        assert echo("alive") @ pool == ["alive", "alive"]
