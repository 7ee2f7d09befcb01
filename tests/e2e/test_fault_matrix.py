"""The fault matrix of issue 11: kill node agents (idle and busy), executor children,
collection hosts and the client itself (SIGKILL and SIGTERM, in a subprocess), then
count what the pool left behind: processes, files under its temp dir, /dev/shm
segments. The count must be zero within 10 s of the pool's end (its close, or its
client's death). Slow: each case opens a pool of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from terminal import like_a_terminal

import skyward as sky
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.local.reaper import live_marked
from tests.e2e.idle_client import idle_client

pytestmark = [pytest.mark.slow, pytest.mark.own_ray]
GONE_WITHIN = 10.0


@sky.function
def pid() -> int:
    return os.getpid()


@sky.function
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _title(process: int) -> str:
    try:
        with open(f"/proc/{process}/cmdline", "rb") as cmdline:
            return cmdline.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _kill_soon(process: int, delay: float = 0.5) -> None:
    import threading

    threading.Timer(delay, lambda: os.kill(process, signal.SIGKILL)).start()


@pytest.fixture
def watched_pool(request: pytest.FixtureRequest) -> Iterator[sky.Pool]:
    """A 2-node pool; after the test, nothing of it may be left."""
    executor = getattr(request, "param", "thread")
    if LocalRay.in_use():
        pytest.fail("another pool of this process holds the local Ray instance, so its leftovers cannot be "
                    "counted; the own_ray marker runs these tests before any shared pool")
    shm = set(os.listdir("/dev/shm"))
    options = sky.Options(console=False, logging=False, worker=sky.Worker(executor=executor))
    with sky.Compute(nodes=2, options=options) as pool:
        temp_dir = LocalRay.temp_dir()
        assert temp_dir and live_marked(temp_dir)
        yield pool
    deadline = time.monotonic() + GONE_WITHIN
    while time.monotonic() < deadline and (live_marked(temp_dir) or os.path.exists(temp_dir)):
        time.sleep(0.2)
    assert live_marked(temp_dir) == [], [_title(p) for p in live_marked(temp_dir)]
    assert not os.path.exists(temp_dir)
    assert set(os.listdir("/dev/shm")) <= shm


@pytest.mark.parametrize("watched_pool", ["thread", "process"], indirect=True)
def test_idle_agent_killed(watched_pool: sky.Pool) -> None:
    """The pool replaces the killed process (the agent, or with ``process`` the executor's
    child that runs the tasks) and node 1 runs tasks again, in another process."""
    agent = watched_pool.run(pid(), target=1)
    os.kill(agent, signal.SIGKILL)
    deadline = time.monotonic() + 60
    answers: list[object] = []
    while time.monotonic() < deadline and not (answers and isinstance(answers[-1], int) and answers[-1] != agent):
        try:
            answers.append(watched_pool.run(pid(), target=1))
        except sky.NodeCrashedError as error:
            answers.append(error)
            time.sleep(0.2)
    assert answers and isinstance(answers[-1], int) and answers[-1] != agent, answers[-5:]
    assert watched_pool.run(pid(), target=1) == answers[-1]  # and it stays


@pytest.mark.parametrize("watched_pool", ["process"], indirect=True)
def test_an_idle_child_killed_is_replaced_before_the_next_task(watched_pool: sky.Pool) -> None:
    """A task child that died while idle had nothing running: the next task gets a fresh
    child, with no crash reported (it used to be sent down the dead child's pipe and fail
    with BrokenPipeError)."""
    child = watched_pool.run(pid(), target=1)
    os.kill(child, signal.SIGKILL)
    time.sleep(0.5)  # gone before the next task comes
    assert watched_pool.run(pid(), target=1) != child


@pytest.mark.parametrize("watched_pool", ["thread"], indirect=True)
def test_busy_agent_killed(watched_pool: sky.Pool) -> None:
    """A kill from outside is an interruption, not the task's doing: the task runs
    again on the agent Ray put in its place (Options.retry_on_interruption)."""
    agent = watched_pool.run(pid(), target=0)
    _kill_soon(agent)
    assert watched_pool.run(nap(2), target=0) == 2
    assert watched_pool.run(pid(), target=0) != agent


@pytest.mark.parametrize("watched_pool", ["process"], indirect=True)
def test_busy_executor_child_killed(watched_pool: sky.Pool) -> None:
    child = watched_pool.run(pid(), target=0)  # the child serves the next task too
    _kill_soon(child)
    with pytest.raises(sky.NodeCrashedError, match=r"SIGKILL \(signal 9\)"):
        watched_pool.run(nap(30), target=0)
    assert watched_pool.run(nap(0.01), target=0) == 0.01


@pytest.mark.parametrize("watched_pool", ["thread"], indirect=True)
def test_collection_host_killed(watched_pool: sky.Pool) -> None:
    queue = watched_pool.queue("matrix")
    queue.put(1)
    watched_pool.dict("matrix")["k"] = 1
    temp_dir = LocalRay.temp_dir()
    assert temp_dir is not None
    hosts = [p for p in live_marked(temp_dir) if "CollectionHosts" in _title(p)]
    assert hosts
    for host in hosts:
        os.kill(host, signal.SIGKILL)
    time.sleep(1.0)
    with pytest.raises(sky.CollectionUnavailableError):
        queue.put(2)
    with pytest.raises(sky.CollectionUnavailableError):
        watched_pool.dict("matrix").get("k")
    with pytest.raises(sky.CollectionUnavailableError):  # a new name on a host that died
        watched_pool.counter(_name_on_host_of_queue("matrix", watched_pool)).increment()
    assert watched_pool.run(nap(0.01)) == 0.01


def _name_on_host_of_queue(queue: str, pool: sky.Pool) -> str:
    from skyward.collections.placement import home_of

    hosts = pool._open.cluster.collections.config.hosts
    wanted = home_of("queue", queue, hosts)
    return next(f"fresh-{n}" for n in range(1000) if home_of("counter", f"fresh-{n}", hosts) == wanted)


def _client_killed(how: signal.Signals, home: Path) -> dict[str, Any]:
    with idle_client(home, preexec_fn=like_a_terminal) as client:
        marked = live_marked(client.temp_dir)
        assert any("CollectionHosts" in _title(p) for p in marked)
        assert len(marked) >= 5  # GCS, raylet, 2 agents, hosts, executor children
        client.process.send_signal(how)
        try:
            client.process.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            client.process.kill()
            _, stderr = client.process.communicate()
            raise AssertionError(f"the client did not exit within 90 s of {how.name}; its stderr:\n{stderr}") from None
        client.wait_for_its_pool_to_go(GONE_WITHIN)
        return {
            "left": [_title(p) for p in live_marked(client.temp_dir)],
            "temp_dir": os.path.exists(client.temp_dir),
            "shm": set(os.listdir("/dev/shm")) - client.shm,
            "bystander": client.bystander.is_running() and client.bystander.status(),
        }


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_client_killed(how: signal.Signals, tmp_path: Path) -> None:
    assert _client_killed(how, tmp_path) == {"left": [], "temp_dir": False, "shm": set(), "bystander": psutil.STATUS_SLEEPING}
