"""``ray_start.lean`` changes Ray's start only while the start runs, and puts every part
back when it fails; ``quiet`` changes only the error listener (skyward/providers/ray_start.py)."""

from __future__ import annotations

import sys

import pytest
from ray._private import node, ray_constants, services, worker

from skyward.providers import ray_start


def _parts() -> tuple[object, ...]:
    return (
        worker.listen_error_messages, node.Node.start_api_server, node.Node.start_monitor,
        node.Node.start_log_monitor, services.get_node, services._build_python_executable_command_memory_profileable,
    )


def test_lean_changes_ray_s_start_only_while_it_runs_and_puts_it_back_when_it_fails() -> None:
    before = _parts()
    during: list[tuple[object, ...]] = []

    def failing_start() -> None:
        during.append(_parts())
        raise RuntimeError("the start failed")

    with pytest.raises(RuntimeError, match="the start failed"):
        ray_start.lean(failing_start)
    assert [a is b for a, b in zip(during[0], before, strict=True)] == [False] * len(before)
    assert [a is b for a, b in zip(_parts(), before, strict=True)] == [True] * len(before)


def test_quiet_changes_only_the_error_listener_and_only_while_init_runs() -> None:
    before = _parts()
    during: list[tuple[object, ...]] = []
    ray_start.quiet(lambda: during.append(_parts()))
    assert [a is b for a, b in zip(during[0], before, strict=True)] == [False, True, True, True, True, True]
    assert [a is b for a, b in zip(_parts(), before, strict=True)] == [True] * len(before)


def test_lean_starts_the_stand_in_where_ray_would_start_either_agent_and_nothing_else() -> None:
    built: dict[str, list[str]] = {}

    def start() -> None:
        for component in (*ray_start.AGENTS, "raylet"):
            built[component] = services._build_python_executable_command_memory_profileable(component, "/session")

    ray_start.lean(start)
    assert ray_start.DASHBOARD_AGENT == ray_constants.PROCESS_TYPE_DASHBOARD_AGENT
    assert ray_start.RUNTIME_ENV_AGENT == ray_constants.PROCESS_TYPE_RUNTIME_ENV_AGENT
    for agent in ray_start.AGENTS:
        assert built[agent] == [sys.executable, "-S", ray_start.STAND_IN, agent]
    assert built["raylet"] == [sys.executable, "-u"]
