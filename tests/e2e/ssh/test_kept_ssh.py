"""A kept pool on 3 SSH hosts (``Options(keep_alive=...)``): the same script run again
adopts the same node processes on the hosts through the pool daemon, without Ray in the
script, with the pool's collections as the last run left them and the locks the last
script held freed; idle past ``keep_alive`` it is torn down and leaves nothing on the
hosts or on this machine. When the daemon is killed, the next command's daemon takes the
pool over from what its predecessor wrote down, and it still runs tasks; when the process
holding the pool (``daemon.pool_host``, with the opening script's environment) is killed,
the daemon takes it over again."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from conftest import pool_traces, wait_for
from hosts import HostLab
from node_access import SKY
from sandbox import daemon_logs, wait_for_no_processes

from skyward.providers import daemon_client

SCRIPT = """
import os, socket, sys, time
import skyward as sky

@sky.function
def where():
    print("ran on", socket.gethostname(), flush=True)
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


@contextlib.contextmanager
def ended_after(lab: HostLab, sandbox: dict, name: str, pool_id: str) -> Iterator[None]:
    """Run the block, then `sky down --all` whatever it did; once the block passed, the
    kept pool ``name`` must have been ended by it and left nothing on the hosts or in
    the sandbox."""
    try:
        yield
    finally:
        down = subprocess.run(
            [SKY, "down", "--all"], env=sandbox["env"], capture_output=True, text=True, timeout=180, check=False
        )
    assert down.returncode == 0 and name in down.stdout, down.stdout + down.stderr
    gone = wait_for(lambda: not any(pool_traces(lab, pool_id).values()), timeout=60)
    assert gone, f"left on the hosts after `sky down`: {pool_traces(lab, pool_id)}"
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_script_run_again_adopts_the_kept_ssh_pool_and_it_ends_after_keep_alive(
    lab: HostLab, sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts, keep_alive=8))
    started = time.monotonic()
    first = run(sandbox, script)
    opening = time.monotonic() - started
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
    # the same script with a fresh 3-host open in it, on this machine now: adopting must
    # save most of it (R-kept in the benchmarks measures the adoption itself)
    assert took < opening / 2, f"adopting took {took:.1f}s, the first run with its open {opening:.1f}s"
    # what the tasks printed and what the daemon did reach the pool's log through its host
    name = kept[0].name
    logs = subprocess.run([SKY, "logs", name], env=sandbox["env"], capture_output=True, text=True, timeout=60,
                          check=True).stdout
    printed = sorted(line.split(" skyward.task: ")[-1] for line in logs.splitlines() if " ran on " in line)
    assert [line.split(" ran on ")[0] for line in printed] == [f"[node {rank}]" for rank in (0, 0, 1, 1, 2, 2)], logs
    events = subprocess.run([SKY, "events", name], env=sandbox["env"], capture_output=True, text=True, timeout=60,
                            check=True)
    assert "adopted by pid" in events.stdout and "idle (pid" in events.stdout, events.stdout

    # idle for keep_alive=8 s: torn down on the hosts, and the daemon leaves too
    gone = wait_for(lambda: not any(pool_traces(lab, pool_id).values()), timeout=90)
    assert gone, f"left on the hosts after keep_alive: {pool_traces(lab, pool_id)}"
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert daemon_client.kept_pools() == []


def test_a_killed_daemons_kept_ssh_pool_is_taken_over_by_the_next_command_and_still_runs_tasks(
    lab: HostLab, sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.py"
    script.write_text(SCRIPT.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts, keep_alive=600))
    first = run(sandbox, script)
    [kept] = daemon_client.kept_pools()
    [daemon] = daemon_client.status()
    os.kill(daemon.pid, signal.SIGKILL)  # its SSH connections close: the hosts count Spec.ttl down
    assert wait_for(lambda: not psutil.pid_exists(daemon.pid), timeout=10)
    with ended_after(lab, sandbox, kept.name, kept.pool_id):
        listed = subprocess.run([SKY, "ls", "--json"], env=sandbox["env"], capture_output=True, text=True, timeout=180)
        logs = daemon_logs(home)
        assert listed.returncode == 0, listed.stdout + listed.stderr + logs
        found = {p["name"]: p["state"] for p in json.loads(listed.stdout) if p["keep_alive"]}
        assert found == {kept.name: "kept, idle"}, listed.stdout + logs
        assert "adopted (3 nodes)" in logs, logs

        second = run(sandbox, script)
        assert second["NODES"] == first["NODES"], "the new daemon did not take over the same node processes"
        assert second["RUNS"] == 2 and second["RAY"] is False and second["LOCKED"] is True, second

        # the process holding the pool killed: the daemon takes the pool over again in a new
        # one, and a script that asks meanwhile waits for it
        [host] = pool_hosts()
        host.kill()
        assert wait_for(lambda: [h.pid for h in pool_hosts()] not in ([], [host.pid]), timeout=60), daemon_logs(home)
        third = run(sandbox, script)
        assert third["NODES"] == first["NODES"], "the pool was not taken over again with its node processes"
        assert third["RUNS"] == 3 and third["LOCKED"] is True, third
        events = subprocess.run([SKY, "events", kept.name], env=sandbox["env"], capture_output=True, text=True,
                                timeout=60, check=True).stdout
        assert "its host process ended" in events and events.count("taken over by pool daemon") == 2, events


def pool_hosts() -> list[psutil.Process]:
    """The processes holding remote kept pools (``daemon.pool_host``)."""
    return [p for p in psutil.process_iter(["cmdline"]) if "skyward.daemon.pool_host" in (p.info["cmdline"] or [])]


ELASTIC_SCRIPT = """
import os, sys, time
import skyward as sky

@sky.function
def nap(seconds):
    time.sleep(seconds)
    return os.getpid()

def until(check, what):
    deadline = time.monotonic() + 240
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)

provider = sky.SSH(hosts={hosts!r}, key_path={key!r}, known_hosts={known!r})
fast = dict(reconcile_tick_interval=0.2, autoscale_cooldown=0.5, autoscale_idle_timeout=float(sys.argv[2]))
nodes = sky.Nodes(desired=1, min=1, max=3)
with sky.Compute(provider=provider, nodes=nodes, keep_alive=600, console=False, logging=False, **fast) as pool:
    print("START", pool.current_nodes(), flush=True)
    if sys.argv[1] == "grow":
        futures = [nap(0.5) > pool for _ in range(120)]
        until(lambda: pool.current_nodes() == 3, "growing to 3 under the queue")
        assert len([future.result(300) for future in futures]) == 120
    print("PIDS", sorted(nap(0) @ pool), flush=True)
    if sys.argv[1] == "shrink":
        until(lambda: pool.current_nodes() == 1, "shrinking to 1 once idle")
    print("NOW", (pool.current_nodes(), "ray" in sys.modules), flush=True)
print("AFTER", flush=True)
"""


def test_an_elastic_kept_ssh_pool_grows_and_shrinks_and_is_adopted_at_its_size(
    lab: HostLab, sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "elastic.py"
    script.write_text(ELASTIC_SCRIPT.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts))

    def elastic(*args: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, str(script), *args], cwd=tmp_path,
            env={**sandbox["env"], "SKYWARD_TEST_CLIENT": "elastic"}, capture_output=True, text=True, timeout=500,
        )
        assert done.returncode == 0 and "AFTER" in done.stdout, (done.stdout + done.stderr)[-3000:]
        return {
            key: ast.literal_eval(value)
            for key, _, value in (line.partition(" ") for line in done.stdout.splitlines())
            if key in ("START", "PIDS", "NOW")
        }

    # the daemon runs first, started elsewhere (`sky api`) without the script's environment
    subprocess.run([SKY, "api"], cwd=sandbox["base"], env=sandbox["env"], capture_output=True, timeout=120, check=True)
    grown = elastic("grow", "600")  # leaves before it would shrink: the pool is kept with 3 hosts
    assert grown["START"] == 1 and grown["NOW"] == (3, False), grown
    [kept] = daemon_client.kept_pools()
    assert kept.nodes == 3
    # it launched the pool and added its 2 hosts in a process of the pool's own, with the
    # environment and working directory of the script; the daemon's stay its own
    [host] = pool_hosts()
    assert host.environ().get("SKYWARD_TEST_CLIENT") == "elastic" and host.cwd() == str(tmp_path)
    daemon = host.parent()
    assert daemon is not None and "SKYWARD_TEST_CLIENT" not in daemon.environ() and daemon.cwd() != str(tmp_path)
    head = lab.hosts[0].name
    assert {d.split(":")[0] for d in pool_traces(lab, kept.pool_id)["dirs"]} == {h.name for h in lab.hosts}
    adopted = elastic("shrink", "1")  # adopts all 3, then goes back to min=1 once idle
    assert adopted["START"] == 3 and adopted["PIDS"] == grown["PIDS"], "not the same 3 node processes"
    assert adopted["NOW"] == (1, False), adopted
    assert wait_for(lambda: [pool.nodes for pool in daemon_client.kept_pools()] == [1], 60), daemon_client.kept_pools()
    left = wait_for(lambda: {d.split(":")[0] for d in pool_traces(lab, kept.pool_id)["dirs"]} == {head}, 60)
    assert left, f"the 2 hosts that left still hold the pool: {pool_traces(lab, kept.pool_id)}"
    assert daemon_client.end_pools("") == [kept.name]
    assert wait_for(lambda: not any(pool_traces(lab, kept.pool_id).values()), timeout=60)
    assert not host.is_running(), "the pool's host process outlived its pool"
    daemon_client.stop_all()  # `sky api` keeps the daemon up for its HTTP API
    assert wait_for_no_processes(sandbox["base"], within=60) == []
