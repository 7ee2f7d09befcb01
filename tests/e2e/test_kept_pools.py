"""Kept pools (``Options(keep_alive=seconds)``): the same script run again adopts the
same node processes through the pool daemon, without Ray in the client, with the pool's
collections as the last run left them and the script's edits to its own modules taking
effect; one script at a time holds a kept pool; a pool idle past ``keep_alive`` is torn
down and leaves nothing; ``sky ls``/``sky down NAME`` see and end kept pools; another
user cannot reach a kept pool's socket."""

from __future__ import annotations

import ast
import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sandbox import daemon_logs, lines_of, wait_for_no_processes

import skyward as sky
from skyward.providers import daemon_client, registry
from skyward.providers.local.launch import _client_env
from skyward.providers.local.reaper import KEEP_ENVIRONMENT, MARKER

SCRIPT = """
import os, sys, time
import skyward as sky
import helper

@sky.function
def where():
    return os.getpid(), helper.VERSION

name = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
with sky.Compute(name=name, nodes=2, keep_alive=float(sys.argv[1]), console=False, logging=False) as pool:
    runs = pool.counter("runs")
    runs.increment()
    print("NODES", sorted(where() @ pool), flush=True)
    print("RUNS", runs.value, flush=True)
    print("RAY", "ray" in sys.modules, flush=True)
    if len(sys.argv) > 3:
        time.sleep(600)
print("AFTER", flush=True)
"""
KEYS = ("NODES", "RUNS", "RAY")
BY_NAME = """
import sys
import skyward as sky
with sky.Compute(name=sys.argv[1], console=False, logging=False) as pool:
    print("RAN", sky.function(lambda: 1)() >> pool, flush=True)
"""
SKY = os.path.join(os.path.dirname(sys.executable), "sky")




def run(sandbox: dict, workdir: Path, *args: str, version: int = 1) -> subprocess.Popen[str]:
    workdir.mkdir(exist_ok=True)
    (workdir / "script.py").write_text(SCRIPT)
    (workdir / "helper.py").write_text(f"VERSION = {version}\n")
    return subprocess.Popen(
        [sys.executable, "script.py", *args], cwd=workdir, env=sandbox["env"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )




def sky_cli(sandbox: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SKY, *args], env=sandbox["env"], capture_output=True, text=True, timeout=180)


def test_a_script_run_again_adopts_the_same_nodes_without_ray_and_the_pool_ends_after_keep_alive(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    first = run(sandbox, tmp_path, "3")
    seen = lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    assert seen["RUNS"] == 1 and seen["RAY"] is False
    pids = [pid for pid, _ in seen["NODES"]]  # type: ignore[union-attr]
    assert [version for _, version in seen["NODES"]] == [1, 1]  # type: ignore[union-attr]

    second = run(sandbox, tmp_path, "3", version=2)  # the script's own module was edited
    again = lines_of(second, "AFTER", KEYS)
    assert second.wait(30) == 0
    assert [pid for pid, _ in again["NODES"]] == pids  # type: ignore[union-attr]
    assert [version for _, version in again["NODES"]] == [2, 2], "the edit did not reach the kept nodes"  # type: ignore[union-attr]
    assert again["RUNS"] == 2 and again["RAY"] is False

    # idle for keep_alive=3 s: torn down, and the daemon, kept only for it, leaves too
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    assert not any(psutil.pid_exists(pid) for pid in pids)
    assert daemon_client.kept_pools() == []


def test_one_script_at_a_time_holds_a_kept_pool_and_sky_down_ends_it(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    holder = run(sandbox, tmp_path / "a", "600", "shared", "hold")
    held = lines_of(holder, "RAY", KEYS)
    pids = [pid for pid, _ in held["NODES"]]  # type: ignore[union-attr]
    try:
        second = run(sandbox, tmp_path / "a", "600", "shared")
        out, _ = second.communicate(timeout=120)
        assert second.returncode != 0
        assert "in use by another script" in out and f"pid {holder.pid}" in out, out[-2000:]

        listed = sky_cli(sandbox, "ls", "--json")
        assert listed.returncode == 0, listed.stderr
        kept = [p for p in json.loads(listed.stdout) if p["keep_alive"]]
        assert [(p["name"], p["state"], len(p["nodes"])) for p in kept] == [
            ("shared", f"kept, in use by {holder.pid}", 2)
        ]

        down = sky_cli(sandbox, "down", "shared")
        assert down.returncode == 0 and "kept pool ended" in down.stdout, down.stdout + down.stderr
        deadline = time.monotonic() + 30
        while any(psutil.pid_exists(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [pid for pid in pids if psutil.pid_exists(pid)], "sky down left the kept pool's agents"
        assert daemon_client.kept_pools() == []
    finally:
        holder.kill()
        holder.wait(30)
    assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_kept_pool_held_by_its_next_script_idles(sandbox: dict, home: Path, tmp_path: Path) -> None:
    """The first script's leaving woke the agents' event polls; the next script's polls
    wait for events again (they used to return at once: about two cores busy while the
    pool sat idle, and everything else on the machine slowed down)."""
    first = run(sandbox, tmp_path, "600", "idle")
    lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    holder = run(sandbox, tmp_path, "600", "idle", "hold")
    held = lines_of(holder, "RAY", KEYS)
    try:
        pids = [pid for pid, _ in held["NODES"]] + [daemon.pid for daemon in daemon_client.status()]  # type: ignore[union-attr]
        processes = [psutil.Process(pid) for pid in pids]

        def cpu_seconds() -> float:
            return sum(sum(process.cpu_times()[:2]) for process in processes)

        time.sleep(1)
        before = cpu_seconds()
        time.sleep(3)
        used = cpu_seconds() - before
        assert used < 0.75, f"the idle kept pool's daemon and agents used {used:.2f} s of CPU in 3 s"
    finally:
        holder.kill()
        holder.wait(30)
    assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_kept_pool_of_that_name_defined_otherwise_is_refused_naming_the_way_out(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    first = run(sandbox, tmp_path / "a", "600", "named")
    lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    other = run(sandbox, tmp_path / "b", "600", "named")  # another working directory: another definition
    out, _ = other.communicate(timeout=120)
    assert other.returncode != 0 and "was defined otherwise" in out and "sky down named" in out, out[-2000:]
    assert [pool.name for pool in daemon_client.kept_pools()] == ["named"]
    down = sky_cli(sandbox, "down", "--all")
    assert down.returncode == 0 and "named" in down.stdout, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_another_user_cannot_reach_a_kept_pools_socket(
    sandbox: dict, home: Path, tmp_path: Path, probe: object
) -> None:
    first = run(sandbox, tmp_path, "600")
    lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    try:
        sockets = sorted(str(path) for path in daemon_client.socket_path(daemon_client.daemon_dir()).parent.glob("*"))
        assert len(sockets) == 2 and all(path.endswith(("/sock", ".sock")) for path in sockets), sockets
        answer = probe.run({"op": "unix", "paths": sockets})  # type: ignore[attr-defined]
        assert {path: result for path, result in answer.items() if result != "EACCES"} == {}
        for path in sockets:
            assert os.stat(path).st_mode & 0o777 == 0o600
        [state] = home.glob("daemon/*/kept.json")  # the daemon's Ray token is in it
        assert os.stat(state).st_mode & 0o777 == 0o600
        assert probe.run({"op": "read", "paths": [str(state)]}) == {str(state): "EACCES"}  # type: ignore[attr-defined]
    finally:
        assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_killed_daemons_kept_pools_are_adopted_by_the_next_command_and_still_run_tasks(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    seen = {}
    for name in ("one", "two"):
        script = run(sandbox, tmp_path / name, "600", name)
        seen[name] = lines_of(script, "AFTER", KEYS)
        assert script.wait(30) == 0
    [daemon] = daemon_client.status()
    os.kill(daemon.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(daemon.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:  # a script naming the pool, no definition of its own: starts a new daemon, which adopts them
        by_name = subprocess.run([sys.executable, "-c", BY_NAME, "one"], cwd=tmp_path / "one", env=sandbox["env"],
                                 capture_output=True, text=True, timeout=180)
        assert by_name.returncode == 0 and "RAN 1" in by_name.stdout, by_name.stdout + by_name.stderr
        listed = sky_cli(sandbox, "ls", "--json")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        kept = {p["name"]: p["state"] for p in json.loads(listed.stdout) if p["keep_alive"]}
        logs = daemon_logs(home)
        assert kept == {"one": "kept, idle", "two": "kept, idle"}, listed.stdout + logs
        [successor] = daemon_client.status()
        assert successor.pid != daemon.pid
        for name in ("one", "two"):
            again = run(sandbox, tmp_path / name, "600", name)
            found = lines_of(again, "AFTER", KEYS)
            assert again.wait(30) == 0
            assert found["NODES"] == seen[name]["NODES"], "not the same node processes"
            assert found["RUNS"] == 2 and found["RAY"] is False, found
    finally:
        down = sky_cli(sandbox, "down", "--all")
    assert down.returncode == 0 and "one" in down.stdout and "two" in down.stdout, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_killed_daemons_kept_pool_ends_after_keep_alive_when_no_daemon_comes_back(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    script = run(sandbox, tmp_path, "3", "brief")
    lines_of(script, "AFTER", KEYS)
    assert script.wait(30) == 0
    [daemon] = daemon_client.status()
    os.kill(daemon.pid, signal.SIGKILL)
    assert wait_for_no_processes(sandbox["base"], within=60) == []  # the daemon's reaper ended them
    listed = sky_cli(sandbox, "ls", "--json")
    assert listed.returncode == 0 and not [p for p in json.loads(listed.stdout) if p["keep_alive"]], listed.stdout
    assert wait_for_no_processes(sandbox["base"], within=60) == []


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: sky.Options(keep_alive=0), "keep_alive"),
        (lambda: sky.Options(keep_alive=float("inf")), "keep_alive"),
        (lambda: sky.Compute(provider=sky.Ray(), keep_alive=60), "keep_alive"),
        (lambda: sky.Compute(nodes=sky.Nodes(desired=1, min=0, max=3), keep_alive=60), "nodes.*node 0"),
        (lambda: sky.Compute(provider=sky.SSH(hosts=["10.0.0.1", "10.0.0.2"]), nodes=sky.Nodes(desired=1, min=0, max=2), keep_alive=60), "nodes.*node 0"),
    ],
)
def test_what_a_kept_pool_cannot_be_is_refused_naming_the_field(make: object, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        make()  # type: ignore[operator]


def test_a_kept_pools_agents_take_the_clients_environment_less_ray_s_and_a_local_pools_mark() -> None:
    """What the daemon's agents set from a client's environment: neither Ray's variables
    nor the mark of a local pool the client may run in (its sweep would take them)."""
    environ = {"PATH": "/bin", "OWN": "1", "RAY_ADDRESS": "127.0.0.1:1", MARKER: "/tmp/sky-x", KEEP_ENVIRONMENT: "1"}
    assert _client_env(environ) == {"PATH": "/bin", "OWN": "1"}


ELASTIC_SCRIPT = """
import os, sys, time
import skyward as sky

@sky.function
def nap(seconds):
    time.sleep(seconds)
    return os.getpid()

def until(check, what):
    deadline = time.monotonic() + 90
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)

fast = dict(reconcile_tick_interval=0.2, autoscale_cooldown=0.5, autoscale_idle_timeout=float(sys.argv[2]))
with sky.Compute(nodes=sky.Nodes(desired=1, min=1, max=3), keep_alive=600, console=False, logging=False, **fast) as pool:
    print("START", pool.current_nodes(), flush=True)
    if sys.argv[1] == "grow":
        futures = [nap(0.2) > pool for _ in range(80)]
        until(lambda: pool.current_nodes() == 3, "growing to 3 under the queue")
        assert len([future.result(90) for future in futures]) == 80
        print("PIDS", sorted(nap(0) @ pool), flush=True)
    else:
        print("PIDS", sorted(nap(0) @ pool), flush=True)
        until(lambda: pool.current_nodes() == 1, "shrinking to 1 once idle")
    print("NOW", (pool.current_nodes(), "ray" in sys.modules), flush=True)
print("AFTER", flush=True)
"""


def test_an_elastic_local_kept_pool_grows_and_shrinks_and_is_adopted_at_its_size(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    (tmp_path / "script.py").write_text(ELASTIC_SCRIPT)

    def elastic(*args: str) -> dict[str, object]:
        script = subprocess.Popen(
            [sys.executable, "script.py", *args], cwd=tmp_path, env=sandbox["env"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        found = lines_of(script, "AFTER", ("START", "PIDS", "NOW"), timeout=240)
        assert script.wait(30) == 0
        return found

    grown = elastic("grow", "600")  # leaves before it would shrink: the pool is kept with 3 nodes
    assert grown["START"] == 1 and grown["NOW"] == (3, False)
    [kept] = daemon_client.kept_pools()
    assert kept.nodes == 3
    assert len(registry.find(kept.name).nodes) == 3  # type: ignore[union-attr]  (sky ssh --node reads them)
    adopted = elastic("shrink", "1")  # adopts all 3, then goes back to min=1 once idle
    assert adopted["START"] == 3 and adopted["PIDS"] == grown["PIDS"], "not the same 3 node processes"
    assert adopted["NOW"] == (1, False)
    [kept] = daemon_client.kept_pools()
    assert kept.nodes == 1
    assert len(registry.find(kept.name).nodes) == 1  # type: ignore[union-attr]
    deadline = time.monotonic() + 30
    while [psutil.pid_exists(pid) for pid in grown["PIDS"]].count(True) > 1 and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.2)
    assert [psutil.pid_exists(pid) for pid in grown["PIDS"]].count(True) == 1, "the 2 nodes that left still run"  # type: ignore[union-attr]
    assert daemon_client.end_pools("") == [kept.name]
    assert wait_for_no_processes(sandbox["base"], within=60) == []


RUN_SCRIPT = """
import os, sys
import skyward as sky

@sky.function
def pid():
    print("hello from", os.getpid())
    return os.getpid()

with sky.Compute(nodes=5) as pool:  # under `sky run NAME` the pool is the kept one
    print("RUN", sorted(pid() @ pool), "ray" in sys.modules, flush=True)
"""


def test_sky_up_run_attach_and_down_drive_a_kept_pool_from_the_command_line(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    up = sky_cli(sandbox, "up", "exp", "--nodes", "2", "--keep-alive", "120", "--json")
    assert up.returncode == 0, up.stdout + up.stderr
    assert json.loads(up.stdout)["state"] == "kept"
    [kept] = daemon_client.kept_pools()
    assert (kept.name, kept.nodes, kept.holder) == ("exp", 2, 0)

    script = tmp_path / "work.py"
    script.write_text(RUN_SCRIPT)
    ran = subprocess.run([SKY, "run", "exp", str(script)], env=sandbox["env"], capture_output=True, text=True,
                         timeout=180, cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [line] = [line for line in ran.stdout.splitlines() if line.startswith("RUN")]
    pids, ray = ast.literal_eval(line.split(" ", 1)[1].rsplit(" ", 1)[0]), line.endswith("True")
    assert len(pids) == 2 and not ray, line  # the kept pool's 2 nodes, not the script's 5
    logs = sky_cli(sandbox, "logs", "exp")  # the daemon's log of the pool
    assert logs.returncode == 0 and all(f"hello from {pid}" in logs.stdout for pid in pids), logs.stdout + logs.stderr
    assert " cpu " not in logs.stdout and "metric" not in logs.stdout.lower(), "metric samples are not log lines"
    events = sky_cli(sandbox, "events", "exp", "--json")
    said = [event["message"] for event in json.loads(events.stdout)]
    assert said and said[0].startswith("pool exp: kept, 2 nodes on local"), said
    assert any(line.startswith("pool exp: adopted by pid") for line in said), said
    assert any(line.startswith("pool exp: idle (pid") for line in said), said
    assert not any("hello from" in line for line in said), "task output is not an event"

    typed = (
        "import os\nprint('ATTACHED', sorted(function(os.getpid)() @ pool))\n"
        "@function\ndef mine(x):\n    return (x, os.getpid())\n\nprint('DEFINED', sorted(mine(3) @ pool))\n"
        "print('LAMBDA', function(lambda: 7)() >> pool)\n"
    )
    shell = subprocess.run([SKY, "attach", "exp"], input=typed, env=sandbox["env"], capture_output=True, text=True,
                           timeout=180)
    assert shell.returncode == 0 and f"ATTACHED {pids}" in shell.stdout, shell.stdout + shell.stderr
    assert f"DEFINED {[(3, pid) for pid in pids]}" in shell.stdout and "LAMBDA 7" in shell.stdout, shell.stdout + shell.stderr
    missing = sky_cli(sandbox, "attach", "nothing")
    assert missing.returncode != 0 and "no pool named 'nothing' is kept" in missing.stderr

    detached = sky_cli(sandbox, "up", "bg", "--nodes", "1", "--detach", "--json")
    assert detached.returncode == 0 and json.loads(detached.stdout)["state"] == "opening", detached.stdout
    deadline = time.monotonic() + 120
    while "bg" not in {pool.name for pool in daemon_client.kept_pools()} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert {pool.name for pool in daemon_client.kept_pools()} == {"exp", "bg"}

    down = sky_cli(sandbox, "down", "--all")
    assert down.returncode == 0 and "exp" in down.stdout and "bg" in down.stdout, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []
    after = sky_cli(sandbox, "logs", "exp")  # by its name, once the pool is gone
    assert after.returncode == 0 and "pool exp: torn down" in after.stdout, after.stdout + after.stderr
    assert all(f"hello from {pid}" in after.stdout for pid in pids)


def test_a_kept_pool_works_with_a_120_character_home(sandbox: dict, tmp_path: Path) -> None:
    """The daemon's and the kept pools' sockets live in a short runtime directory, not in
    the home: with a HOME of 120 characters (CI runners, pytest's tmp paths), binding one
    there failed with "AF_UNIX path too long"."""
    home = Path(sandbox["base"]) / "h"
    home = home.with_name("h" * (120 - len(str(home.parent)) - 1))
    home.mkdir()
    assert len(str(home)) == 120
    env = {key: value for key, value in sandbox["env"].items() if key != "SKYWARD_HOME"}
    env["HOME"] = str(home)
    workdir = tmp_path / "long"
    workdir.mkdir()
    (workdir / "script.py").write_text(SCRIPT)
    (workdir / "helper.py").write_text("VERSION = 1\n")
    try:
        done = subprocess.run(
            [sys.executable, "script.py", "600"], cwd=workdir, env=env, capture_output=True, text=True, timeout=180,
        )
        assert done.returncode == 0 and "AFTER" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
        assert "RUNS 1" in done.stdout
    finally:
        down = subprocess.run([SKY, "down", "--all"], env=env, capture_output=True, text=True, timeout=180)
    assert down.returncode == 0, down.stdout + down.stderr
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_the_daemon_keeps_serving_after_a_storm_of_failed_accepts(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    """With its open-file limit lowered to what it holds, every accept on the daemon's
    socket fails (EMFILE); its accept loop waits and goes on instead of ending for good
    (then ``sky ls`` timed out and no script could keep or adopt a pool)."""
    first = run(sandbox, tmp_path, "600")
    seen = lines_of(first, "AFTER", KEYS)
    assert first.wait(30) == 0
    try:
        [daemon] = daemon_client.status()
        process = psutil.Process(daemon.pid)
        soft, hard = process.rlimit(psutil.RLIMIT_NOFILE)
        process.rlimit(psutil.RLIMIT_NOFILE, (process.num_fds(), hard))
        callers = []
        try:
            for _ in range(12):  # within the socket's backlog: each waits for an accept that fails
                caller = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                caller.settimeout(2)
                with contextlib.suppress(OSError):
                    caller.connect(str(daemon_client.socket_path(daemon_client.daemon_dir())))
                callers.append(caller)
            time.sleep(2.0)
        finally:
            for caller in callers:
                caller.close()
            process.rlimit(psutil.RLIMIT_NOFILE, (soft, hard))
        listed = sky_cli(sandbox, "ls", "--json")
        assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, listed.stdout + listed.stderr
        again = run(sandbox, tmp_path, "600")
        adopted = lines_of(again, "AFTER", KEYS)
        assert again.wait(30) == 0 and adopted["NODES"] == seen["NODES"] and adopted["RUNS"] == 2, adopted
        log = (daemon_client.daemon_dir() / daemon_client.LOG_FILE).read_text()
        assert "Too many open files" in log and "trying again" in log, log[-2000:]
    finally:
        assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert wait_for_no_processes(sandbox["base"], within=60) == []


CONSOLE_SCRIPT = """
import skyward as sky

@sky.function
def one():
    return 1

with sky.Compute(name="told", nodes=2, keep_alive=600, logging=False) as pool:  # the console, plain in a pipe
    assert (one() @ pool) == [1, 1]
"""


def test_the_console_tells_a_kept_pool_as_kept_then_adopted_and_let_go(sandbox: dict, home: Path, tmp_path: Path) -> None:
    (tmp_path / "told.py").write_text(CONSOLE_SCRIPT)

    def told() -> str:
        done = subprocess.run([sys.executable, "told.py"], cwd=tmp_path, env=sandbox["env"], capture_output=True,
                              text=True, timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stderr

    try:
        first, second = told(), told()
    finally:
        assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert "pool told: asking the pool daemon for a kept pool of 2 nodes on local" in first
    assert "pool told: 2 nodes provisioned in" in first and ", kept by the pool daemon" in first
    assert "pool told: adopted the kept pool's 2 nodes in" in second
    for said in (first, second):
        assert "pool told: let go after" in said and "stopped after" not in said and "starting 2 nodes" not in said
    assert wait_for_no_processes(sandbox["base"], within=60) == []


def test_a_daemon_started_while_its_predecessor_cleans_up_waits_and_keeps_its_socket(
    sandbox: dict, home: Path, tmp_path: Path
) -> None:
    """A predecessor that stopped serving but still cleans up holds the life lock and,
    in its cleanup, removes the socket at the daemon's path. The successor waits for it
    instead of binding there first and losing its socket to that cleanup."""
    directory = daemon_client.daemon_dir()
    directory.mkdir(parents=True, exist_ok=True)
    stale = daemon_client.socket_path(directory)
    with socket.socket(socket.AF_UNIX) as predecessor:  # bound, no longer listening
        predecessor.bind(str(stale))
        inode = stale.stat().st_ino
        held = os.open(directory / daemon_client.LIFE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(held, fcntl.LOCK_EX)
        script = run(sandbox, tmp_path, "1")
        try:
            time.sleep(5)
            assert script.poll() is None, script.communicate()[0][-2000:]
            assert stale.stat().st_ino == inode, "the successor took the path while its predecessor held the lock"
        finally:
            stale.unlink()  # the predecessor's cleanup, then its exit
            os.close(held)
        seen = lines_of(script, "AFTER", KEYS)
    assert script.wait(60) == 0
    assert seen["RUNS"] == 1
    assert sky_cli(sandbox, "down", "--all").returncode == 0
    assert wait_for_no_processes(sandbox["base"], within=60) == []
