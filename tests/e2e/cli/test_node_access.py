"""``sky cp``, ``sky ssh`` and ``sky logs --export`` on a kept local pool of 2 nodes
(tests/node_access.py says what each checks; the SSH hosts' test runs the same). A local
node's shell is in the node's working directory with the node's environment, not the
caller's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from node_access import SKY, check_copy, check_export, check_shell, sky

PRINTS = """
import skyward as sky

@sky.function
def hello():
    print("hello | <b> from a task", flush=True)

with sky.Compute(name="access", console=False) as pool:
    hello() @ pool
"""


def test_copy_shell_and_log_export_on_a_kept_local_pool(sandbox: dict, home: Path, tmp_path: Path) -> None:
    env = sandbox["env"]
    started_in = tmp_path / "started-here"
    started_in.mkdir()
    up = subprocess.run([SKY, "up", "access", "--nodes", "2", "--keep-alive", "300"], cwd=started_in,
                        env={**env, "NODE_MARK": "set-where-the-pool-started"}, capture_output=True, text=True, timeout=300)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        check_copy(env, "access", 2, tmp_path, str(tmp_path / "on-nodes"))
        check_shell(env, "access", 1)
        there = subprocess.run([SKY, "ssh", "access", "--node", "1", "--", "pwd; echo mark=$NODE_MARK"], cwd="/",
                               env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert there.returncode == 0, there.stdout + there.stderr
        assert there.stdout.split() == [str(started_in), "mark=set-where-the-pool-started"], there.stdout
        (tmp_path / "prints.py").write_text(PRINTS)
        done = subprocess.run([sys.executable, "prints.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        check_export(env, "access", tmp_path, "hello | <b> from a task")
    finally:
        sky(env, "down", "--all")
