"""``cluster.first_failure``, which an SSH pool's Ray start waits on: the first failure
of a joining host or of the head's next step is raised as soon as it comes, not once the
slowest of the others has ended, and nothing it started is left running."""

from __future__ import annotations

import asyncio
import time

import pytest

from skyward.providers.ssh.cluster import first_failure


async def _slow(cancelled: list[str], name: str, seconds: float = 30.0) -> None:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        cancelled.append(name)
        raise


async def _fails(error: Exception, after: float = 0.0) -> None:
    await asyncio.sleep(after)
    raise error


def test_the_head_steps_failure_comes_at_once_and_the_joining_hosts_are_cancelled() -> None:
    cancelled: list[str] = []
    started = time.monotonic()
    with pytest.raises(ValueError, match="a plugin's bad option"):
        asyncio.run(first_failure([_slow(cancelled, "host 1"), _slow(cancelled, "host 2"),
                                   _fails(ValueError("a plugin's bad option"), after=0.05)]))
    assert time.monotonic() - started < 5
    assert sorted(cancelled) == ["host 1", "host 2"]


def test_a_hosts_failure_comes_at_once_and_the_head_step_is_cancelled() -> None:
    cancelled: list[str] = []
    with pytest.raises(RuntimeError, match="ray start. failed on node 1"):
        asyncio.run(first_failure([_fails(RuntimeError("`ray start` failed on node 1"), after=0.05),
                                   _slow(cancelled, "head")]))
    assert cancelled == ["head"]


def test_of_failures_that_come_together_the_earliest_listed_is_raised() -> None:
    with pytest.raises(RuntimeError, match="host"):
        asyncio.run(first_failure([_fails(RuntimeError("host")), _fails(ValueError("head"))]))


def test_all_succeeding_is_waited_for_and_nothing_is_cancelled() -> None:
    cancelled: list[str] = []
    assert asyncio.run(first_failure([_slow(cancelled, "a", 0.05), _slow(cancelled, "b", 0.1)])) is None
    assert cancelled == []
    assert asyncio.run(first_failure([])) is None
