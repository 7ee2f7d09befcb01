"""@sky.function, PendingFunction, groups and operator misuse: no pool needed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

import skyward as sky


@sky.function
def add(a: int, b: int = 0) -> int:
    return a + b


@sky.function(timeout=5)
def slow() -> None:
    return None


def test_calling_returns_a_frozen_pending_snapshot() -> None:
    pending = add(1, b=2)
    assert isinstance(pending, sky.PendingFunction)
    assert (pending.fn, pending.args, pending.kwargs, pending.timeout) == (add.local, (1,), {"b": 2}, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pending.timeout = 3  # type: ignore[misc]


def test_local_is_the_original_function_and_compute_is_an_alias() -> None:
    assert add.local(2, 3) == 5
    assert sky.compute is sky.function
    assert sky.PendingCompute is sky.PendingFunction


def test_timeouts() -> None:
    assert slow().timeout == 5
    assert add(1).with_timeout(sky.time.minutes(1)).timeout == 60.0
    assert add(1).with_timeout(3).args == (1,)
    with pytest.raises(ValueError, match="timeout"):
        add(1).with_timeout(-1)
    with pytest.raises(ValueError, match="timeout"):
        sky.function(timeout=0)


def test_and_builds_groups_and_gather_takes_flags() -> None:
    group = add(1) & add(2) & add(3)
    assert isinstance(group, sky.PendingFunctionGroup)
    assert [p.args for p in group.items] == [(1,), (2,), (3,)]
    gathered = sky.gather(add(1), add(2), stream=True, ordered=False)
    assert gathered.stream and not gathered.ordered and len(gathered) == 2


def test_precedence_trap_says_to_add_parentheses() -> None:
    with pytest.raises(TypeError, match=r"\(a\(\) & b\(\)\) >> pool"):
        add(1) & 3  # what `a() & b() >> pool` becomes once b() has run


def test_group_has_no_broadcast_or_future_form() -> None:
    group = add(1) & add(2)
    with pytest.raises(TypeError, match="cannot be broadcast"):
        group @ sky  # noqa: B018
    with pytest.raises(TypeError, match="no `>`"):
        group > sky  # noqa: B018


def test_operators_outside_a_pool_say_no_active_pool() -> None:
    # A fresh interpreter: in this one the e2e suite's shared pool may be open, and
    # `>> sky` rightly falls back to the only open pool.
    script = (
        "import skyward as sky\n"
        "f = sky.function(lambda x: x)\n"
        "for dispatch in (lambda: f(1) >> sky, lambda: f(1) @ sky, lambda: f(1) > sky):\n"
        "    try:\n"
        "        dispatch()\n"
        "    except sky.NoActivePoolError as error:\n"
        "        print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("No active pool") for line in lines), lines


def test_misuse_of_the_left_side() -> None:
    with pytest.raises(TypeError, match=r"call it first: `add\(...\) >> pool`"):
        add >> sky
    with pytest.raises(TypeError, match="pending call"):
        5 >> sky  # noqa: B018
    with pytest.raises(TypeError, match="right side of `>>`"):
        add(1) >> 42
    with pytest.raises(TypeError, match="right side of `@`"):
        add(1) @ sky.Pool  # the class, not an open pool
    with pytest.raises(TypeError, match="has not run"):
        bool(add(1))
