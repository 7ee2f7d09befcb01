"""No Ray port is named on an SSH host before its owner binds it (tests/e2e/test_ray_ports.py
has the local and kept pools): a squatter of another account, on the client machine and
inside every test host's network namespace, binds each port number it reads on a Ray
command line in /proc and answers as an HTTP/2 server, while a 2-host elastic SSH pool
opens and a third host joins it. None of them may receive the pool's Ray token, and the
pool must work throughout."""

from __future__ import annotations

import contextlib
import time

import psutil
import pytest
from conftest import QUIET, make_image, ssh_provider
from hosts import HostLab
from sandbox import runs_agent_stand_in
from stranger import Probe, Squat, assert_nothing_leaked, on_command_lines, ray_tokens

import skyward as sky

pytestmark = pytest.mark.slow


@sky.function
def four() -> int:
    return 4


def _command_lines(pids: list[int]) -> list[list[str]]:
    """The command lines of ``pids`` that still run."""
    lines = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            lines.append(psutil.Process(pid).cmdline())
    return lines


def test_an_ssh_pool_and_a_node_joining_it_name_no_port_a_squatter_can_take(
    lab: HostLab, index: str, probe: Probe
) -> None:
    squats: list[Squat] = []
    with contextlib.ExitStack() as stack:
        for netns in (None, *(host.netns for host in lab.hosts)):
            squats.append(stack.enter_context(probe.squatting(netns)))
        nodes = sky.Nodes(desired=2, min=2, max=3)
        with sky.Compute(provider=ssh_provider(lab), nodes=nodes, image=make_image(index), options=QUIET) as pool:
            assert (four() @ pool) == [4, 4]
            pool.resize(3)
            deadline = time.monotonic() + 240
            while pool.current_nodes() < 3:
                assert time.monotonic() < deadline, "the third host never joined"
                time.sleep(0.2)
            assert (four() @ pool) == [4, 4, 4]
            # every host's `ray start` is lean (skyward/providers/ray_start.py): no API server,
            # and a stand-in where Ray's dashboard agent would run, which binds no port. Only
            # each host's own processes are read: another suite's Ray cluster may run beside
            # (an earlier pool's Ray may also still be ending on a host)
            for host in lab.hosts:
                lines = _command_lines(host.pids())
                agents = [line for line in lines if "ray::DashboardAgent" in " ".join(line)]
                api_servers = [line for line in lines if any("dashboard/dashboard.py" in part for part in line)]
                assert any(runs_agent_stand_in(line) for line in lines) and agents == api_servers == [], lines
            tokens = ray_tokens()
            assert on_command_lines(tokens) == []
    for squat in squats:
        assert_nothing_leaked(squat, tokens)
