"""A pool's Ray starts lean (skyward/providers/ray_start.py): neither a local pool's Ray
(``ray.init``) nor the pool daemon's (``python -m skyward.providers.ray_start start``)
runs Ray's API server, autoscaler monitor or log monitor, a stand-in runs where each of
Ray's two agents would (Ray's runtime-env agent only once a runtime env is asked for), and the raylet's registration is asked for every few
milliseconds, not once a second, as a raylet's connection to its object store is; and neither the client nor a worker imports the
libraries Ray's serialization addons are for (skyward/providers/ray_worker.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
import ray
from sandbox import marked_under, runs_agent_stand_in

import skyward as sky
from skyward.providers import ray_start
from skyward.providers.local import detached_ray
from skyward.providers.local.ray_instance import LocalRay

UNUSED = ("dashboard/dashboard.py", "autoscaler/v2/monitor.py", "autoscaler/_private/monitor.py", "log_monitor.py")
"""The scripts of the three Ray daemons a pool never uses, as their command lines name them."""
AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")
"""Ray's agents as they title themselves: the stand-ins run in their place."""
QUIET = sky.Options(console=False, logging=False)


@sky.function
def one() -> int:
    return 1


def _raylet_environments(prefix: str) -> list[dict[str, str]]:
    """The environments of the raylets of the Ray instance whose temp dir lies under ``prefix``."""
    from skyward.providers.local.reaper import MARKER

    found = []
    for process in psutil.process_iter(["environ", "name"]):
        environment = process.info["environ"] or {}
        if process.info["name"] == "raylet" and environment.get(MARKER, "").startswith(prefix):
            found.append(environment)
    return found


def _unused(running: list[str]) -> list[str]:
    """The lines of ``running`` that run a daemon a pool never uses, Ray's agents among
    them, once it is sure that a stand-in runs in each agent's place."""
    assert any("raylet" in line for line in running), f"no raylet among {running}: the check would pass for any start"
    for role in ray_start.AGENTS:
        stand_ins = [line for line in running if runs_agent_stand_in(line.split(" "), role)]
        assert len(stand_ins) == 1, f"no stand-in for Ray's {role} among {running}"
    return [line for line in running if any(daemon in line for daemon in (*UNUSED, *AGENTS))]


@pytest.mark.own_ray  # on an instance other pools share, an earlier test may have asked for a runtime env
def test_a_local_pools_ray_runs_no_daemon_a_pool_never_uses() -> None:
    assert not LocalRay.in_use(), "another pool of this process holds the local Ray instance: run this test first"
    with sky.Compute(nodes=2, options=QUIET) as pool:
        assert (one() @ pool) == [1, 1]
        temp_dir = LocalRay.temp_dir()
        assert temp_dir is not None
        assert _unused(marked_under(temp_dir)) == []
        assert _raylet_environments(temp_dir), "no raylet found: the check below would pass for any start"
        for environment in _raylet_environments(temp_dir):  # its object store's connection is tried every 10 ms
            assert {name: environment.get(name) for name in ray_start.CONNECT} == ray_start.CONNECT
        context = ray.get_runtime_context()
        gcs = context.gcs_address
        node = context.get_node_id()
        assert ray_start.wait_registered(gcs, node, timeout=5.0)
        assert not ray_start.wait_registered(gcs, "ab" * 28, timeout=0.2)
        assert ray.cluster_resources().get("GPU", 0) == 0  # local nodes use no GPU: Ray was told, not left to look


def test_the_pool_daemons_ray_runs_no_daemon_a_pool_never_uses() -> None:
    instance = detached_ray.start()
    try:
        assert _unused(marked_under(instance.temp_dir)) == []
    finally:
        instance.stop()


def test_neither_the_client_nor_a_worker_imports_what_it_never_uses(tmp_path: Path) -> None:
    """Ray imports pydantic, starlette and pyarrow, where installed, in each process as it
    connects, for serializers a skyward process never uses, and ``requests`` for calls a
    pool's Ray never makes (providers/ray_import.py); a local pool's client and its agents
    import none of them (starlette and requests are always installed: skyward depends on
    the one and Ray on the other, so this fails whenever they do). Nor does the client look
    for GPUs through NVML as the local Ray starts (local nodes use none; Ray imports its
    NVML binding on any machine when it looks)."""
    script = textwrap.dedent(f"""
        import json, sys
        import skyward as sky
        from skyward.providers.ray_worker import ADDONS

        NVML = "ray._private.thirdparty.pynvml"
        UNUSED = (*ADDONS, "requests", "urllib3")

        @sky.function
        def loaded():
            import sys
            return [name for name in UNUSED if name in sys.modules]

        with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False)) as pool:
            workers = loaded() @ pool
        print(json.dumps({{"client": [name for name in (*UNUSED, NVML) if name in sys.modules], "workers": workers}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"client": [], "workers": [[], []]}
