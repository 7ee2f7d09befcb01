"""``sky cp``, ``sky ssh`` (OpenSSH through a PTY, the host key checked against the pool's
known_hosts) and ``sky logs --export`` on a kept pool of 3 SSH hosts: the same checks as
on a local pool (tests/node_access.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hosts import HostLab
from node_access import check_copy, check_export, check_shell, sky

OPENS = """
import skyward as sky

@sky.function
def hello():
    print("hello | <b> from a task", flush=True)

provider = sky.SSH(hosts={hosts!r}, key_path={key!r}, known_hosts={known!r})
with sky.Compute(name="hosts", provider=provider, nodes=3, keep_alive=300, console=False) as pool:
    hello() @ pool
"""


def test_copy_shell_and_log_export_on_a_kept_ssh_pool(lab: HostLab, sandbox: dict, home: Path, tmp_path: Path) -> None:
    env = sandbox["env"]
    script = tmp_path / "opens.py"
    script.write_text(OPENS.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400)
    try:
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        check_copy(env, "hosts", 3, tmp_path, "/tmp/skyward-cp-test")
        check_shell(env, "hosts", 2)
        reached = sky(env, "ssh", "hosts", "--node", "2", "echo", "$SSH_CONNECTION").split()
        assert reached[2] in {host.address for host in lab.hosts}, reached
        check_export(env, "hosts", tmp_path, "hello | <b> from a task")
        for node in range(3):
            sky(env, "ssh", "hosts", "--node", str(node), "rm", "-rf", "/tmp/skyward-cp-test")
    finally:
        sky(env, "down", "--all")
