"""Strong collections checked by their histories (tests/history.py): three nodes and the
client operate on one strong counter and strong dict keys at once, each writing down
every operation as it is invoked and as it completes (a file per process, so a killed
node's operations survive it, those in flight left of unknown outcome); the histories
must be linearizable, with a node's agent killed mid-run too; locks are held by one
holder at a time. A planted anomaly, the client reading through its eventual cache while
calling it strong, is found: the checker can fail."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from history import COUNTER, REGISTER, linearizable, overlapping_holds
from recorded_history import histories, operate

import skyward as sky

pytestmark = pytest.mark.slow


@sky.function
def on_node(name: str, count: int, seed: int, directory: str) -> int:
    node = sky.instance_info().node
    # each attempt is a process of its own: a task run again may share a node and a pid with another
    process = f"n{node}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    return operate(name, process, count, seed + node, os.path.join(directory, f"{process}.log"))


@sky.function
def agent_pid() -> int:
    return os.getpid()


def _run(pool: sky.Pool, directory: Path, count: int, seed: int, client_consistency: str = "strong",
         kill: bool = False) -> None:
    name = f"hist-{uuid.uuid4().hex[:8]}"
    client = threading.Thread(
        target=operate, args=(name, "client", count, seed, str(directory / "client.log"), client_consistency)
    )
    if kill:
        victim = pool.run(agent_pid(), target=2)
        threading.Thread(target=_kill_midway, args=(victim, directory), daemon=True).start()
    client.start()
    try:
        on_node(name, count, seed, str(directory)) @ pool
    except sky.NodeCrashedError:
        assert kill, "a node crashed without being killed"
    client.join(120)


def _kill_midway(victim: int, directory: Path) -> None:
    """SIGKILL node 2's agent once its task has written down 20 operations."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        logs = list(directory.glob("n2.*.log"))
        if logs and len(logs[0].read_text().splitlines()) >= 40:
            os.kill(victim, signal.SIGKILL)
            return
        time.sleep(0.002)


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.Pool]:
    with sky.Compute(nodes=3, options=sky.Options(console=False, logging=False)) as opened:
        yield opened


def test_strong_collections_are_linearizable_in_100_short_runs(pool: sky.Pool, tmp_path: Path) -> None:
    for run in range(100):
        directory = tmp_path / f"run{run}"
        directory.mkdir()
        _run(pool, directory, 24, run)
        _check_linearizable(directory, 4 * 24, run)


def _check_linearizable(directory: Path, operations: int, run: int) -> None:
    """The ``operations`` written down under ``directory`` are all there, and the counter's
    history and each dict key's are linearizable."""
    counter, keys = histories(directory)
    assert len(counter) + sum(map(len, keys.values())) == operations
    assert linearizable(counter, COUNTER) is None, (run, str(linearizable(counter, COUNTER)))
    for key, ops in keys.items():
        violation = linearizable(ops, REGISTER)
        assert violation is None, (run, key, str(violation))


@sky.function
def on_node_threads(name: str, threads: int, count: int, seed: int, directory: str) -> int:
    """``operate`` from ``threads`` threads of the task at once: their counter increments
    share the host's calls (``collections.combiner``); each thread is a process of the
    history."""
    node = sky.instance_info().node
    attempt = uuid.uuid4().hex[:6]
    workers = [
        threading.Thread(target=operate, args=(
            name, f"n{node}.{attempt}.t{t}", count, seed * 100 + node * 10 + t,
            os.path.join(directory, f"n{node}.{attempt}.t{t}.log"),
        ))
        for t in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    return count * threads


def test_strong_collections_are_linearizable_with_threads_writing_at_once_on_each_node(
    pool: sky.Pool, tmp_path: Path
) -> None:
    """Four threads a node (and two on the client) operate at once, so a process's
    concurrent increments go to the host as one call: still linearizable, in 10 runs."""
    for run in range(10):
        directory = tmp_path / f"run{run}"
        directory.mkdir()
        name = f"hist-{uuid.uuid4().hex[:8]}"
        clients = [
            threading.Thread(target=operate, args=(name, f"client{c}", 12, 7_000 + run * 10 + c,
                                                   str(directory / f"client{c}.log")))
            for c in range(2)
        ]
        for client in clients:
            client.start()
        assert on_node_threads(name, 4, 12, run, str(directory)) @ pool == [48] * 3
        for client in clients:
            client.join(120)
        _check_linearizable(directory, 14 * 12, run)


def test_strong_collections_stay_linearizable_when_a_node_is_killed(pool: sky.Pool, tmp_path: Path) -> None:
    _run(pool, tmp_path, 120, 99, kill=True)
    counter, keys = histories(tmp_path)
    on_node_2: dict[str, int] = {}
    for op in counter + [op for ops in keys.values() for op in ops]:
        if op.process.startswith("n2."):
            on_node_2[op.process] = on_node_2.get(op.process, 0) + 1
    assert any(20 <= done < 120 for done in on_node_2.values()), on_node_2  # one was killed midway
    unknown = [op for op in counter + [op for ops in keys.values() for op in ops] if op.completed is None]
    assert len(unknown) <= 1, unknown  # at most the operation in flight on the killed node
    assert linearizable(counter, COUNTER) is None, str(linearizable(counter, COUNTER))
    for ops in keys.values():
        assert linearizable(ops, REGISTER) is None, str(linearizable(ops, REGISTER))


def test_a_stale_read_served_as_strong_is_found(pool: sky.Pool, tmp_path: Path) -> None:
    """The planted anomaly: the client's operations go through its eventual cache (its
    reads may be stale) while the history calls them strong."""
    found = False
    for run in range(5):
        directory = tmp_path / f"run{run}"
        directory.mkdir()
        _run(pool, directory, 60, 1000 + run, client_consistency="eventual")
        counter, keys = histories(directory)
        if linearizable(counter, COUNTER) is not None or any(linearizable(ops, REGISTER) for ops in keys.values()):
            found = True
            break
    assert found, "5 runs with the client reading through its cache and no anomaly found: the checker sees nothing"


@sky.function
def hold_lock(name: str, rounds: int) -> list[tuple[str, float, float, int]]:
    holder = f"n{sky.instance_info().node}"
    holds = []
    for _ in range(rounds):
        with sky.lock(name) as lock:
            acquired = time.monotonic()
            token = lock.token
            time.sleep(0.002)
            released = time.monotonic()
        holds.append((holder, acquired, released, token))
    return holds


def test_a_lock_has_one_holder_at_a_time_by_its_history(pool: sky.Pool) -> None:
    """No two holds overlap, and the fencing tokens grow in the order of the holds."""
    name = f"hist-lock-{uuid.uuid4().hex[:8]}"
    holds = [hold for node in hold_lock(name, 40) @ pool for hold in node]
    assert len(holds) == 120
    assert overlapping_holds([hold[:3] for hold in holds]) == []
    tokens = [token for *_, token in sorted(holds, key=lambda hold: hold[1])]
    assert tokens == sorted(set(tokens)), "a later hold got a token no larger than an earlier one's"
