"""What another unprivileged user of this machine can do to an open local pool: nothing.

Runs as root: it makes an account of its own (``skyward-probe``) and runs a stdlib-only
probe script as that account (``setpriv``) against a 2-node local pool of this process:
(a) it cannot list or enter the pool's private directory, nor create a file or bind a
socket in any directory under it; (b) it cannot connect to any Unix socket the pool's
processes hold (its nodes' lanes, its collection hosts' lanes, Ray's); (c) a pickle
that would run ``touch MARKER``, sent in every framing a server might read (raw,
length-prefixed, tagged, a JSON line, HTTP/1.1, gRPC over HTTP/2) to every TCP port
the client, its children and the pool's Ray processes listen on, runs nothing and
leaves the pool working; (d) a bare connect-and-close to each of those ports changes
nothing. And (e): after a local pool closes, a plain ``ray.init()`` works, in a
fresh process (nothing of the pool's Ray settings is left in the environment or in
``~/.ray``) and in the same one, with a temp dir of its own or not; and a local pool
opened after the user's own ``ray.shutdown()`` works too.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from stranger import FRAMINGS, PROBE_USER, Probe, touching

import skyward as sky
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.local.reaper import KEEP_ENVIRONMENT, MARKER, live_marked

SETTLE = 2.0
"""Seconds to wait after the last probe before looking for markers."""


@pytest.fixture(scope="module")
def pool() -> Iterator[sky.Pool]:
    with sky.Compute(nodes=2, options=sky.Options(console=False, logging=False)) as pool:
        if LocalRay.temp_dir() is None:
            pytest.skip("the local Ray instance is not skyward's own (a Ray the user started)")
        yield pool


@sky.function
def echo(value: int) -> int:
    return value


def _assert_working(pool: sky.Pool) -> None:
    assert (echo(7) >> pool) == 7
    assert (echo(8) @ pool) == [8, 8]


def _private() -> str:
    private = LocalRay.temp_dir()
    assert private is not None
    return private


def _processes(private: str) -> list[psutil.Process]:
    """The client (this process) and every process of the pool's Ray instance: those that
    carry its mark in their environment, and whatever they started. Not the client's
    other children: the session's fixtures start servers of their own, which come and go."""
    client = psutil.Process()
    found = {client.pid: client}
    for pid in live_marked(private):
        try:
            process = psutil.Process(pid)
            found[pid] = process
            found.update((child.pid, child) for child in process.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return list(found.values())


TRANSIENT = ("ray::IDLE", "ray::CollectionHosts")
"""Prefixes of the names of Ray processes that come and go on their own while the instance
is shared: idle workers Ray reaps, and the collection hosts of other pools of this process
(the session's shared pools use the same local Ray instance). Ray retitles an actor's
process while a method runs (``ray::CollectionHosts.poll``), hence prefixes."""


@dataclass(frozen=True)
class Listener:
    """The process that holds a listening TCP socket: its name, pid and start time."""

    name: str
    pid: int
    started: float


def _lasting(listeners: dict[tuple[str, int], Listener]) -> dict[tuple[str, int], Listener]:
    """``listeners`` less those of ``TRANSIENT`` processes: what must still listen after
    the probes (the pool still answering checks the rest)."""
    return {where: listener for where, listener in listeners.items() if not listener.name.startswith(TRANSIENT)}


def _assert_still_listening(listeners: dict[tuple[str, int], Listener], private: str, within: float = 30.0) -> None:
    """Every lasting one of ``listeners`` is held again by the same process within
    ``within`` seconds; a process the probes killed, or whose listener they closed, stays
    missing, and the failure says which it was. (CI saw a RuntimeEnvAgent go missing
    twice, the pool still working: likely the agent of another test's ``ray start``
    cluster, which inherited the pool's mark while the mark stayed in the client's
    environment, ended by that test's teardown, not by a probe.)"""
    lasting = _lasting(listeners)
    deadline = time.monotonic() + within
    while not lasting.items() <= (found := _tcp_listeners(private)).items() and time.monotonic() < deadline:
        time.sleep(0.5)
    missing = [_missing(host, port, listener) for (host, port), listener in lasting.items() if found.get((host, port)) != listener]
    assert not missing, "no longer listening: " + "; ".join(missing)


def _missing(host: str, port: int, listener: Listener) -> str:
    """What became of ``listener``'s process and of its port, for a failure's message."""
    try:
        process = psutil.Process(listener.pid)
        alive = process.create_time() == listener.started and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        alive = False
    try:
        socket.create_connection((host, port), timeout=5).close()
        port_answers = "a connect is accepted"
    except OSError as error:
        port_answers = f"a connect fails ({errno.errorcode.get(error.errno or 0, type(error).__name__)})"
    held = "its process still runs" if alive else "its process is gone"
    return f"{host}:{port} ({listener.name}, pid {listener.pid}): {held}, {port_answers}"


def _lasting_failures(
    listeners: dict[tuple[str, int], Listener], sends: list[tuple[str, int, str]], answer: list[dict[str, Any]],
    failed: Callable[[dict[str, Any]], bool],
) -> dict[str, dict[str, Any]]:
    """The probe's results (``answer``, one per send) that ``failed`` on a lasting one of
    ``listeners``, by "address:port (process)". A ``TRANSIENT`` process's port is left
    out: Ray may have reaped the idle worker by the time the probe connects."""
    lasting = _lasting(listeners)
    return {
        f"{host}:{port} ({listeners[host, port].name})": result
        for (host, port, _), result in zip(sends, answer) if (host, port) in lasting and failed(result)
    }


def _tcp_listeners(private: str) -> dict[tuple[str, int], Listener]:
    """Every TCP port those processes listen on: (address to reach it at, port) -> its
    process (a wildcard address is reached at 127.0.0.1)."""
    found: dict[tuple[str, int], Listener] = {}
    for process in _processes(private):
        try:
            connections = process.net_connections(kind="tcp")
            listener = Listener(process.name(), process.pid, process.create_time())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for connection in connections:
            if connection.status == psutil.CONN_LISTEN:
                host = connection.laddr.ip
                found["127.0.0.1" if host in ("0.0.0.0", "::") else host, connection.laddr.port] = listener
    return found


def _unix_sockets(private: str) -> set[str]:
    """Every Unix socket those processes hold that has a name (a path, or an abstract
    name as ``@name``), and every socket file under the private directory."""
    found: set[str] = set()
    for process in _processes(private):
        try:
            found.update(c.laddr for c in process.net_connections(kind="unix") if c.laddr)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    for directory, _, files in os.walk(private):
        found.update(
            os.path.join(directory, name) for name in files
            if stat.S_ISSOCK(os.lstat(os.path.join(directory, name)).st_mode)
        )
    return found


def test_another_user_cannot_enter_the_pools_directories_nor_create_anything_in_them(
    pool: sky.Pool, probe: Probe
) -> None:
    private = _private()
    directories = [directory for directory, _, _ in os.walk(private)]
    assert len(directories) > 5, directories  # Ray's temp dir and its session are in there
    answer = probe.run({"op": "directories", "paths": directories})
    assert answer[private]["list"] == answer[private]["enter"] == "EACCES", answer[private]
    allowed = {path: tries for path, tries in answer.items() if "EACCES" not in (tries["create"], tries["bind"])}
    assert allowed == {}, f"{PROBE_USER} may create files or sockets there"
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o700
    _assert_working(pool)


def test_another_user_cannot_connect_to_the_pools_unix_sockets(pool: sky.Pool, probe: Probe) -> None:
    private = _private()
    pool.counter("probed", consistency="strong").increment()  # its collection host listens on its lane
    sockets = _unix_sockets(private)
    assert any("/lane-" in path for path in sockets) and any(path.endswith("/raylet") for path in sockets), sockets
    assert any("/host-" in path for path in sockets), sockets
    answer = probe.run({"op": "unix", "paths": sorted(sockets)})
    assert {path: result for path, result in answer.items() if result != "EACCES"} == {}
    _assert_working(pool)


def test_the_marker_pickle_runs_its_command_when_loaded(marks: Path) -> None:
    """The control: loading the probes' pickle does create its marker."""
    marker = marks / "control"
    loader = "import pickle, sys; pickle.loads(bytes.fromhex(sys.argv[1]))"
    subprocess.run([sys.executable, "-c", loader, touching(marker).hex()], check=True, timeout=60)
    assert marker.exists()


def test_a_pickle_sent_to_any_tcp_port_of_the_pool_runs_nothing(pool: sky.Pool, probe: Probe, marks: Path) -> None:
    private = _private()
    listeners = _tcp_listeners(private)
    assert {"gcs_server", "raylet"} <= {listener.name for listener in listeners.values()}, listeners
    sends = [
        (host, port, framing(touching(marks / f"{port}-{name}")).hex())
        for host, port in sorted(listeners) for name, framing in FRAMINGS.items()
    ]
    answer = probe.run({"op": "tcp", "sends": sends, "wait": 1.0})
    unreached = _lasting_failures(listeners, sends, answer, lambda result: not result["connected"])
    assert unreached == {}, "the probe must reach every lasting port for the test to mean anything"
    time.sleep(SETTLE)
    assert sorted(path.name for path in marks.iterdir()) == []
    _assert_working(pool)
    _assert_still_listening(listeners, private)


def test_a_bare_connect_and_close_to_any_tcp_port_of_the_pool_changes_nothing(pool: sky.Pool, probe: Probe) -> None:
    private = _private()
    listeners = _tcp_listeners(private)
    sends = [(host, port, "") for host, port in sorted(listeners)]
    answer = probe.run({"op": "tcp", "sends": sends, "wait": 0.0})
    failed = _lasting_failures(listeners, sends, answer, lambda result: not result["connected"] or bool(result["error"]))
    assert failed == {}
    time.sleep(SETTLE)
    _assert_working(pool)
    _assert_still_listening(listeners, private)


def _ray_settings() -> dict[str, str]:
    """The environment variables that configure Ray (its auth mode and token among them)
    or mark a local pool's processes."""
    return {
        key: value for key, value in os.environ.items()
        if key.startswith("RAY_") or key in (MARKER, KEEP_ENVIRONMENT, "PYTHONBREAKPOINT")
    }


def _ray_files(home: Path) -> list[str]:
    """What Ray keeps in ``home`` (its ``~/.ray``: a token file there turns token auth on
    for every plain ``ray start`` and ``ray.init``)."""
    return sorted(str(path) for path in (home / ".ray").rglob("*"))


RAY_INIT = """
import ray
ray.init()

@ray.remote
def two():
    return 2

print(ray.get(two.remote()))
ray.shutdown()
"""


@pytest.mark.own_ray
def test_after_a_pool_closes_a_plain_ray_init_in_a_fresh_process_works(sandbox: dict[str, str]) -> None:
    if LocalRay.in_use():
        pytest.fail("another pool of this process holds the local Ray instance, so its settings are in the "
                    "environment; the own_ray marker runs this test before any shared pool")
    ray_settings, ray_files = _ray_settings(), _ray_files(Path.home())
    with sky.Compute(nodes=1, options=sky.Options(console=False, logging=False)) as pool:
        assert (echo(1) >> pool) == 1
    assert _ray_settings() == ray_settings
    assert _ray_files(Path.home()) == ray_files
    # this environment, with a HOME and TMPDIR of its own: a plain ray.init() writes
    # ~/.ray/auth_token and /tmp/ray
    done = subprocess.run(
        [sys.executable, "-c", RAY_INIT], env={**os.environ, "HOME": sandbox["home"], "TMPDIR": sandbox["tmp"]},
        capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == ["2"], done.stdout + done.stderr[-3000:]


SAME_PROCESS = """
import sys, tempfile
import ray
import skyward as sky

@sky.function
def one():
    return 1

@ray.remote
def two():
    return 2

def users_own(**options):
    ray.init(**options)
    print("RAY", ray.get(two.remote()), flush=True)
    ray.shutdown()

quiet = dict(console=False, logging=False)
if sys.argv[1] == "pool-first":
    with sky.Compute(nodes=1, **quiet) as pool:
        print("POOL", one() >> pool, flush=True)
    users_own()
    users_own(_temp_dir=tempfile.mkdtemp())
    with sky.Compute(nodes=1, **quiet) as pool:
        print("POOL", one() >> pool, flush=True)
else:
    users_own()
    with sky.Compute(nodes=1, **quiet) as pool:
        print("POOL", one() >> pool, flush=True)
"""


@pytest.mark.parametrize("order", ["pool-first", "ray-first"])
def test_the_users_own_ray_and_a_local_pool_take_turns_in_one_process(sandbox: dict[str, str], order: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SAME_PROCESS, order], env={**sandbox["env"], "SKYWARD_HOME": sandbox["home"]},
        capture_output=True, text=True, timeout=300, check=False,
    )
    expected = ["POOL 1", "RAY 2", "RAY 2", "POOL 1"] if order == "pool-first" else ["RAY 2", "POOL 1"]
    assert done.returncode == 0 and done.stdout.split("\n")[:-1] == expected, done.stdout + done.stderr[-3000:]
