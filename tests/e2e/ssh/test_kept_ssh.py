"""A kept pool on 3 SSH hosts (``Options(keep_alive=...)``): the same script run again
adopts the same node processes on the hosts through the pool daemon, without Ray in the
script, with the pool's collections as the last run left them and the locks the last
script held freed; idle past ``keep_alive`` it is torn down and leaves nothing on the
hosts or on this machine. When the daemon is killed, the next command's daemon takes the
pool over from what its predecessor wrote down, and it still runs tasks; when the process
holding the pool (``daemon.pool_host``, with the opening script's environment) is killed,
the daemon takes it over again. A pool whose daemon died before writing it down is torn
down by that process."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
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
        [host] = pool_hosts(home)
        host.kill()
        assert wait_for(lambda: [h.pid for h in pool_hosts(home)] not in ([], [host.pid]), timeout=60), daemon_logs(home)
        third = run(sandbox, script)
        assert third["NODES"] == first["NODES"], "the pool was not taken over again with its node processes"
        assert third["RUNS"] == 3 and third["LOCKED"] is True, third
        events = subprocess.run([SKY, "events", kept.name], env=sandbox["env"], capture_output=True, text=True,
                                timeout=60, check=True).stdout
        assert "its host process ended" in events and events.count("taken over by pool daemon") == 2, events


def test_a_pool_whose_daemon_dies_while_it_opens_is_torn_down_by_its_host(
    lab: HostLab, sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "script.py"
    text = SCRIPT.format(hosts=lab.strings(), key=lab.client_key, known=lab.known_hosts, keep_alive=600)
    # each host's bootstrap waits 8 s once the pool's directory is there: the daemon is
    # killed inside that, before the pool opened (and so before it could be written down)
    slowed = text.replace("nodes=3,", 'nodes=3, image=sky.Image(shell_vars={"HELD": "sleep 8; echo held"}),')
    assert slowed != text
    script.write_text(slowed)
    before = pool_dirs(lab)  # what the module's earlier pools left there, if anything
    opening = subprocess.Popen(
        [sys.executable, str(script)], cwd=tmp_path, env=sandbox["env"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )
    try:
        # the daemon dies while the pool's host launches it (its directories appear on the hosts)
        assert wait_for(lambda: pool_hosts(home) and set(pool_dirs(lab)) - set(before), timeout=120), daemon_logs(home)
        hosts, opened = pool_hosts(home), {d: i for d, i in pool_dirs(lab).items() if d not in before}
        assert len(hosts) == 1 and len(set(opened.values())) == 1, f"{hosts} {opened} {before}\n{daemon_logs(home)}"
        [first_host], [first] = hosts, set(opened.values())  # the pool's host process and its id's start
        daemons = daemon_client.status()
        assert len(daemons) == 1, daemons
        [daemon] = daemons
        os.kill(daemon.pid, signal.SIGKILL)
        said, _ = opening.communicate(timeout=400)
    finally:
        if opening.poll() is None:
            opening.kill()
    # its client asked a new daemon once more, for a pool with an id of its own: it opened
    # on the same hosts beside the first (sharing the id, it took the first's directories)
    assert opening.returncode == 0 and "AFTER" in said, f"{said[-3000:]}\n{daemon_logs(home)[-6000:]}"
    ids = set(pool_dirs(lab).values()) - set(before.values()) - {first}
    assert len(ids) == 1, f"{pool_dirs(lab)} {before}\n{daemon_logs(home)[-6000:]}"
    try:
        # no daemon wrote the first pool down: its host tore it down (not left for Spec.ttl)
        assert wait_for(lambda: not first_host.is_running(), timeout=300), daemon_logs(home)
        left = wait_for(lambda: not any(pool_traces(lab, first).values()), timeout=60)
        assert left, f"{pool_traces(lab, first)}\n{said[-3000:]}\n{daemon_logs(home)[-6000:]}"
    finally:
        down = subprocess.run(
            [SKY, "down", "--all"], env=sandbox["env"], capture_output=True, text=True, timeout=300, check=False
        )
    assert down.returncode == 0, down.stdout + down.stderr
    [second] = ids
    gone = wait_for(lambda: not any(pool_traces(lab, second).values()) and set(pool_dirs(lab)) <= set(before), 60)
    assert gone, f"{pool_traces(lab, second)} {pool_dirs(lab)} {before}"
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def pool_hosts(home: Path) -> list[psutil.Process]:
    """The processes holding remote kept pools (``daemon.pool_host``) of the skyward home
    ``home`` (not another test's or another stream's)."""
    found = [p for p in psutil.process_iter(["cmdline"]) if "skyward.daemon.pool_host" in (p.info["cmdline"] or [])]
    with_home = []
    for process in found:
        with contextlib.suppress(psutil.Error):
            if process.environ().get("SKYWARD_HOME") == str(home):
                with_home.append(process)
    return with_home


def pool_dirs(lab: HostLab) -> dict[str, str]:
    """The pools' directories on the lab's hosts (``host:name``), each with the start of
    its pool's id (``/tmp/skyward-<12 of the id>-n<serial>``); other ``skyward-`` names
    there (a per-user runtime directory, say) are not a pool's."""
    found = {}
    for place in pool_traces(lab, "")["dirs"]:
        matched = re.fullmatch(r"skyward-([0-9a-f]{12})-n\d+", str(place).split(":", 1)[1])
        if matched:
            found[str(place)] = matched.group(1)
    return found


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
    [host] = pool_hosts(home)
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
