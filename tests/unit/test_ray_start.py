"""``ray_start.lean`` changes Ray's start only while the start runs, and puts every part
back when it fails; ``quiet`` changes only the error listener and the serialization
addons (skyward/providers/ray_start.py, skyward/providers/ray_worker.py)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import ray
from ray._private import node, ray_constants, services, worker
from ray.util import serialization_addons

from skyward.providers import ray_start, ray_worker


def _parts() -> tuple[object, ...]:
    return (
        worker.listen_error_messages, node.Node.start_api_server, node.Node.start_monitor,
        node.Node.start_log_monitor, services.get_node, services._build_python_executable_command_memory_profileable,
        services.start_raylet, serialization_addons.apply,
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
    assert [a is b for a, b in zip(during[0], before, strict=True)] == [False, True, True, True, True, True, True, False]
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


def test_lean_runs_skyward_s_worker_script_where_ray_would_run_its_own() -> None:
    """The raylet ``lean`` starts is given ``ray_worker`` as its workers' script, with
    every other argument as Ray passed it."""
    signature = inspect.signature(services.start_raylet)
    given: dict[str, object] = {}

    def start_raylet(*args: object, **options: object) -> str:
        given.update(signature.bind(*args, **options).arguments)
        return "started"

    start_raylet.__signature__ = signature  # type: ignore[attr-defined]  # Ray's, as inspect reads it

    arguments = {name: f"<{name}>" for name, parameter in signature.parameters.items()
                 if parameter.default is inspect.Parameter.empty}
    ray_worker_path = str(Path(ray.__file__).parent / "_private" / "workers" / "default_worker.py")
    assert Path(ray_worker_path).is_file(), "Ray's worker script moved: ray_start would leave it in place"
    arguments["worker_path"] = ray_worker_path
    assert ray_start._our_worker(start_raylet)(**arguments) == "started"
    assert given == {**arguments, "worker_path": ray_start.WORKER}
    given.clear()
    arguments["worker_path"] = "/elsewhere/default_worker.py"  # a script of that name, not Ray's
    ray_start._our_worker(start_raylet)(**arguments)
    assert given["worker_path"] == "/elsewhere/default_worker.py"


@pytest.mark.parametrize("through_a_link", [False, True])
def test_the_worker_script_runs_ray_s_own_and_never_skyward_s_provider_as_ray(
    tmp_path: Path, through_a_link: bool
) -> None:
    """Run as a script, ``ray_worker`` is first on ``sys.path`` with the folder of
    skyward's ``ray`` provider, also when reached through a symbolic link (Python puts the
    link's target there): it must find Ray's worker script all the same and run it (its
    ``--help`` answers and exits 0)."""
    script = Path(ray_start.WORKER)
    if through_a_link:
        (tmp_path / "providers").symlink_to(script.parent, target_is_directory=True)
        script = tmp_path / "providers" / script.name
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--node-ip-address" in done.stdout, done.stdout


def test_the_addons_are_registered_only_in_a_process_that_imported_a_library_they_are_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    applied: list[object] = []
    when = ray_worker.when_imported(applied.append)
    for name in ray_worker.ADDONS:
        monkeypatch.delitem(sys.modules, name, raising=False)
    when("context")
    assert applied == []
    for name in ray_worker.ADDONS:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, name, types.ModuleType(name))
            when(name)
    assert applied == list(ray_worker.ADDONS)


def test_lean_paces_ray_s_connections_for_its_start_only_and_keeps_a_user_s_own_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The processes a start runs try a connection to their raylet or object store every
    10 ms (``ray_start.CONNECT``); the client's environment is as it was afterwards, and a
    setting the user made stays as they made it."""
    first, second = ray_start.CONNECT
    monkeypatch.delenv(first, raising=False)
    monkeypatch.setenv(second, "7")
    seen: list[tuple[str | None, str | None]] = []
    ray_start.lean(lambda: seen.append((os.environ.get(first), os.environ.get(second))))
    assert seen == [(ray_start.CONNECT[first], "7")]
    assert first not in os.environ and os.environ[second] == "7"
