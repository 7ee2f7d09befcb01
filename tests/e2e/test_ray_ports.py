"""No port of Ray's is named before the process that owns it has bound it, so another user
of the machine, who reads every command line in /proc, cannot bind one first and receive
the pool's Ray token from the processes that connect to it (docs/security.md).

The squatter (tests/stranger.py, run as the unprivileged ``skyward-probe`` account)
watches every command line that mentions Ray while a pool starts, binds every port number
it finds there before its owner can and answers as an HTTP/2 server, so a gRPC client
sends its headers (Ray's token among them). Checked here on a local pool (in-process
``ray.init``) and on a kept pool, whose pool daemon starts Ray with ``ray start``; the SSH
pools' case is tests/e2e/ssh/test_ssh_ray_ports.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sandbox import wait_for_no_processes
from stranger import Probe, assert_nothing_leaked, on_command_lines, ray_tokens

import skyward as sky
from skyward.providers.local.ray_instance import LocalRay

SCRIPT = """
import skyward as sky

@sky.function
def two():
    return 2

with sky.Compute(nodes=2, keep_alive=600, console=False, logging=False) as pool:
    print("RESULT", two() @ pool, flush=True)
"""
SKY = str(Path(sys.executable).parent / "sky")


@sky.function
def three() -> int:
    return 3


def test_a_local_pool_names_no_port_a_squatter_can_take(probe: Probe) -> None:
    with probe.squatting() as squat:
        with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False)) as pool:
            assert (three() @ pool) == [3, 3]
            tokens = ray_tokens() | {LocalRay.token()}
            assert on_command_lines(tokens) == []
    assert_nothing_leaked(squat, tokens)


def test_the_pool_daemons_ray_names_no_port_a_squatter_can_take(
    sandbox: dict, home: Path, tmp_path: Path, probe: Probe
) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    try:
        with probe.squatting() as squat:
            done = subprocess.run(
                [sys.executable, "script.py"], cwd=tmp_path, env=sandbox["env"], capture_output=True, text=True,
                timeout=300, check=False,
            )
            tokens = ray_tokens()
            assert on_command_lines(tokens) == []
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "RESULT [2, 2]" in done.stdout
        assert_nothing_leaked(squat, tokens)
    finally:
        subprocess.run([SKY, "down", "--all"], env=sandbox["env"], capture_output=True, timeout=180, check=False)
    assert wait_for_no_processes(sandbox["base"], within=60) == []
