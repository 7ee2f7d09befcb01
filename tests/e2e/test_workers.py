"""Worker(concurrency, buffer, executor, reuse_processes) on real pools."""

from __future__ import annotations

import itertools
import os
import threading
import time

import pytest

import skyward as sky


@sky.function
def pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


@sky.function
def where() -> tuple[int, int, str]:
    return sky.instance_info().node, os.getpid(), threading.current_thread().name


@sky.function
def command_line() -> str:
    import psutil

    return next(part for part in psutil.Process().cmdline() if part.startswith("skyward."))


@sky.function
def loud(n: int) -> int:
    print(f"line {n}")
    return n


@sky.function
def spin(seconds: float) -> str:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return "done"


@sky.function
def hard_exit() -> None:
    os._exit(9)


@sky.function
def span_of(seconds: float) -> tuple[int, float, float]:
    began = time.monotonic()  # one clock for every process of the machine
    time.sleep(seconds)
    return os.getpid(), began, time.monotonic()


def test_concurrency_runs_tasks_side_by_side(pool2_concurrent: sky.Pool) -> None:
    # When each task ran, not how long all took: a loaded CI machine may start them late,
    # but one slot could never run two at the same time.
    spans = sky.gather(*(span_of(1.0) for _ in range(4))) >> pool2_concurrent
    assert len({pid for pid, _, _ in spans}) == 2
    edges = sorted([(began, 1) for _, began, _ in spans] + [(ended, -1) for _, _, ended in spans])
    assert max(itertools.accumulate(step for _, step in edges)) >= 2, f"the tasks ran one at a time: {sorted(spans, key=lambda span: span[1])}"


def test_concurrency_one_serialises_a_node() -> None:
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=False)) as pool:
        started = time.monotonic()
        sky.gather(pid_after(0.5), pid_after(0.5)) >> pool
        assert time.monotonic() - started >= 0.95


def test_buffer_accepts_more_tasks_than_slots() -> None:
    options = sky.Options(console=False, logging=False, worker=sky.Worker(concurrency=1, buffer=2))
    with sky.Compute(nodes=1, options=options) as pool:
        started = time.monotonic()
        assert len(set(sky.gather(*(pid_after(0.3) for _ in range(3))) >> pool)) == 1
        assert time.monotonic() - started >= 0.85


def test_process_executor_reuses_children() -> None:
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor="process"))
    with sky.Compute(nodes=2, options=options) as pool:
        assert command_line() @ pool == ["skyward.node.process_worker"] * 2
        child_pids = {pid_after(0) >> pool for _ in range(6)}
        assert len(child_pids) == 2
        assert pool.map(loud, range(5)) == list(range(5))
        with pytest.raises(TimeoutError):
            spin(30).with_timeout(0.5) >> pool
        with pytest.raises(sky.NodeCrashedError, match="died"):
            hard_exit() >> pool
        assert sorted(node for node, _, _ in where() @ pool) == [0, 1]


def test_process_executor_fresh_process_per_task() -> None:
    worker = sky.Worker(executor="process", reuse_processes=False)
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=False, worker=worker)) as pool:
        pids = [pid_after(0) >> pool for _ in range(3)]
        assert len(set(pids)) == 3
