"""SSH pools that scale to zero: a lazy ``Nodes(desired=0)`` pool starts on its first
task, releases every host once idle, its head included (nothing of the pool is left on
them), and the next task starts it again; a start that fails is a ``sky.WakeError`` for
the task waiting, and the pool stays open. ``Nodes(desired=1, min=0)`` differs only in
starting at once (tests/e2e/cloud/test_cloud_elastic.py has it on a cloud). Seconds-scale
intervals; such pools run without collections (``Options(cluster=False)``)."""

from __future__ import annotations

import pytest
from conftest import pool_traces, ssh_provider, wait_for
from hosts import HostLab

import skyward as sky

SLEEPY = sky.Options(
    console=False, logging=False, cluster=False, reconcile_tick_interval=0.2, autoscale_cooldown=0.5,
    autoscale_idle_timeout=1.0,
)


@sky.function
def where() -> tuple[int, int]:
    info = sky.instance_info()
    if info is None:
        raise RuntimeError("not on a node")
    return info.node, info.total_nodes


@sky.function
def square(x: int) -> int:
    return x * x


def test_a_lazy_pool_starts_on_its_first_task_sleeps_leaving_nothing_and_wakes(lab: HostLab) -> None:
    """One cycle: opened with no node (nothing on the hosts), started by its first task,
    asleep once idle (nothing of it left on the hosts: the head's Ray, relay, agent and
    watchdog stopped, its directories removed), woken by the next task."""
    resized: list[sky.ClusterResized] = []
    pool = sky.Compute(provider=ssh_provider(lab), nodes=sky.Nodes(desired=0), options=SLEEPY)
    pool.on(sky.ClusterResized, resized.append)
    with pool:
        assert pool.current_nodes() == 0
        assert not any(pool_traces(lab, pool.id).values()), "the pool started something before its first task"
        assert where() >> pool == (0, 1), "its first task starts it"
        asleep = wait_for(lambda: pool.current_nodes() == 0 and not any(pool_traces(lab, pool.id).values()), 60)
        assert asleep, f"still on the hosts while idle: {pool_traces(lab, pool.id)}"
        assert pool.map(square, range(5)) == [0, 1, 4, 9, 16], "a task wakes it"
        assert where() @ pool == [(0, 1)]
    assert not any(pool_traces(lab, pool.id).values()), f"left on the hosts after close: {pool_traces(lab, pool.id)}"
    reasons = [event.reason for event in resized]
    assert any("sleeps" in reason for reason in reasons), reasons
    assert sum("waking" in reason for reason in reasons) == 2, reasons


def test_a_wake_that_fails_fails_the_waiting_task_and_the_next_one_tries_again(lab: HostLab) -> None:
    closed_port = f"root@{lab.hosts[0].address}:2"  # nothing listens there: the head cannot start
    provider = ssh_provider(lab, hosts=[closed_port])
    cause = r"could not start node 0 for the work waiting: .*cannot reach .*:2 over SSH"
    with sky.Compute(provider=provider, nodes=sky.Nodes(desired=0), options=SLEEPY) as pool:
        for _ in range(2):
            with pytest.raises(sky.WakeError, match=cause):
                where() >> pool
        assert pool.current_nodes() == 0
    assert not any(pool_traces(lab, pool.id).values())
