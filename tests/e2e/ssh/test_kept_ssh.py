"""A kept pool on 3 SSH hosts (``Options(keep_alive=...)``): the same script run again
adopts the same node processes on the hosts through the pool daemon, without Ray in the
script, with the pool's collections as the last run left them and the locks the last
script held freed; idle past
``keep_alive`` it is torn down and leaves nothing on the hosts or on this machine."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path

from conftest import pool_traces, wait_for
from hosts import HostLab
from sandbox import wait_for_no_processes

from skyward.providers import daemon_client

SCRIPT = """
import os, socket, sys, time
import skyward as sky

@sky.function
def where():
    return socket.gethostname(), os.getpid()

provider = sky.SSH(hosts={hosts!r}, key_path={key!r}, known_hosts={known!r})
with sky.Compute(provider=provider, nodes=3, keep_alive={keep_alive}, console=False, logging=False) as pool:
    runs = pool.counter("runs")
    runs.increment()
    print("NODES", sorted(where() @ pool), flush=True)
    print("RUNS", runs.value, flush=True)
    print("RAY", "ray" in sys.modules, flush=True)
    print("LOCKED", pool.lock("left-held").acquire(timeout=10), flush=True)  # never released
print("AFTER", flush=True)
"""




def run(sandbox: dict, script: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(script)], cwd=script.parent, env=sandbox["env"], capture_output=True, text=True, timeout=400
    )
    found: dict[str, object] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key in ("NODES", "RUNS", "RAY", "LOCKED"):
            found[key] = ast.literal_eval(value)
    assert done.returncode == 0 and "AFTER" in done.stdout, (done.stdout + done.stderr)[-3000:]
    return found


def test_a_script_run_again_adopts_the_kept_ssh_pool_and_it_ends_after_keep_alive(
    lab: HostLab, sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts, keep_alive=8))
    first = run(sandbox, script)
    assert first["RUNS"] == 1 and first["RAY"] is False
    kept = daemon_client.kept_pools()
    assert [(pool.nodes, pool.holder) for pool in kept] == [(3, 0)], kept
    pool_id = kept[0].pool_id
    assert pool_traces(lab, pool_id)["processes"], "the kept pool runs nothing on the hosts"

    started = time.monotonic()
    second = run(sandbox, script)
    took = time.monotonic() - started
    assert second["NODES"] == first["NODES"], "the second run did not adopt the same node processes"
    assert second["RUNS"] == 2 and second["RAY"] is False
    assert first["LOCKED"] is True and second["LOCKED"] is True, "the first script's lock outlived it"
    assert took < 60, f"adopting took {took:.1f}s"  # a fresh 3-host open takes longer; the benchmark measures it

    # idle for keep_alive=8 s: torn down on the hosts, and the daemon leaves too
    gone = wait_for(lambda: not any(pool_traces(lab, pool_id).values()), timeout=90)
    assert gone, f"left on the hosts after keep_alive: {pool_traces(lab, pool_id)}"
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert daemon_client.kept_pools() == []
