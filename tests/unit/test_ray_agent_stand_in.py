"""The stand-in for Ray's agents (skyward/providers/ray_agent_stand_in.py). For the
dashboard agent it reports every port as not in use where the raylet reads them; for the
runtime-env agent it reports a port of its own and starts Ray's agent only when something
connects, passing the connection's bytes both ways. Either lives exactly as long as its
raylet: until the raylet's pipe on its stdin closes, or, without one, until its parent
is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skyward.providers import ray_agent_stand_in
from skyward.providers.ray_start import STAND_IN

NODE = "ab" * 28
LIMIT = 10.0


DASHBOARD = ray_agent_stand_in.DASHBOARD
RUNTIME_ENV = ray_agent_stand_in.RUNTIME_ENV
FAKE_AGENT = """
import os, socket, sys, time
arguments = dict(arg[2:].split("=", 1) for arg in sys.argv[1:])
open(os.path.join(arguments["session-dir"], "started"), "w").write(str(os.getpid()))
server = socket.socket()
server.bind(("127.0.0.1", int(arguments["runtime-env-agent-port"])))
path = os.path.join(arguments["session-dir"], "runtime_env_agent_port_" + arguments["node-id"])
open(path + ".new", "w").write(str(server.getsockname()[1]))
os.replace(path + ".new", path)
time.sleep(0.5)
server.listen()
while True:
    connection, _ = server.accept()
    with connection:
        connection.sendall(b"agent " + os.environ["RAY_RAYLET_PID"].encode() + b": " + connection.recv(100).upper())
"""
"""Stands for Ray's runtime-env agent: reports its port as Ray's does, overwriting the
stand-in's file, and, as Ray's does (``runtime_env/agent/main.py`` writes the port once
bound; aiohttp listens later), refuses connections for a while after that. Then it
answers each connection's first bytes upper-cased, naming the pid it takes for its
raylet's."""


def _arguments(session: Path, script: str = "/ray/dashboard/agent.py", port: int = 0) -> list[str]:
    """What the raylet passes (Ray's agent script first, as ``lean`` leaves it)."""
    return [
        script, f"--node-id={NODE}", "--node-ip-address=127.0.0.1", f"--session-dir={session}",
        f"--runtime-env-agent-port={port}",
    ]


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not check():
        assert time.monotonic() < deadline, f"not within {LIMIT:g}s: {what}"
        time.sleep(0.02)


def test_it_reports_no_service_on_each_port_and_ends_when_the_raylets_pipe_closes(tmp_path: Path) -> None:
    env = {**os.environ, ray_agent_stand_in.PIPE_CHECK: "1", "RAY_RAYLET_PID": str(os.getpid())}
    agent = subprocess.Popen(
        [sys.executable, "-S", STAND_IN, DASHBOARD, *_arguments(tmp_path)], stdin=subprocess.PIPE, env=env
    )
    try:
        files = [tmp_path / f"{port}_{NODE}" for port in ray_agent_stand_in.PORTS]
        _wait_for(lambda: all(file.exists() for file in files), "the port files")
        assert [file.read_text() for file in files] == ["-1"] * 3
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f.name for f in files)  # no partial file left
        time.sleep(ray_agent_stand_in.POLL * 1.5)
        assert agent.poll() is None, "it ended while its raylet lives: the raylet would end with it"
        assert agent.stdin is not None
        agent.stdin.close()
        assert agent.wait(timeout=LIMIT) == 0
    finally:
        agent.kill()


def test_without_a_pipe_it_ends_once_its_parent_has(tmp_path: Path) -> None:
    """A parent that starts the stand-in (stdin from /dev/null) and exits 0.5 s later."""
    pid_file = tmp_path / "pid"
    parent = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-S', {STAND_IN!r}, {DASHBOARD!r}, *sys.argv[1:]], stdin=subprocess.DEVNULL)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(0.5)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in (ray_agent_stand_in.PIPE_CHECK, "RAY_RAYLET_PID")}
    subprocess.run([sys.executable, "-c", parent, *_arguments(tmp_path)], env=env, check=True, timeout=LIMIT)
    child = int(pid_file.read_text())
    assert (tmp_path / f"metrics_agent_port_{NODE}").read_text() == "-1"
    _wait_for(lambda: not _alive(child), "the stand-in's end after its parent's")


def test_it_names_a_missing_argument_or_role() -> None:
    for role, missing in ((DASHBOARD, "--session-dir="), ("dashboard", RUNTIME_ENV)):
        done = subprocess.run(
            [sys.executable, "-S", STAND_IN, role, f"--node-id={NODE}"],
            capture_output=True, text=True, timeout=LIMIT, check=False,
        )
        assert done.returncode != 0 and missing in done.stderr, done.stderr


@pytest.mark.parametrize("named", [False, True], ids=["port 0", "a port named"])
def test_for_the_runtime_env_agent_it_starts_rays_agent_on_the_first_connection_and_forwards(
    tmp_path: Path, named: bool
) -> None:
    """On the port it was given (0: one of its own), while Ray's agent binds one of its own."""
    script = tmp_path / "agent.py"
    script.write_text(FAKE_AGENT)
    session = tmp_path / "session"
    session.mkdir()
    env = {**os.environ, ray_agent_stand_in.PIPE_CHECK: "1", "RAY_RAYLET_PID": str(os.getpid())}
    given = _free_port() if named else 0
    stand_in = subprocess.Popen(
        [sys.executable, "-S", STAND_IN, RUNTIME_ENV, *_arguments(session, str(script), given)],
        stdin=subprocess.PIPE, env=env,
    )
    try:
        port_file = session / f"{ray_agent_stand_in.RUNTIME_ENV_PORT}_{NODE}"
        _wait_for(port_file.exists, "the port file")
        port = int(port_file.read_text())
        assert port == given or not named
        time.sleep(0.3)
        assert not (session / "started").exists(), "Ray's agent started before anything asked for it"
        for word in (b"first", b"second"):  # the agent starts once, and each connection reaches it
            with socket.create_connection(("127.0.0.1", port), timeout=LIMIT) as connection:
                connection.sendall(word)
                assert connection.recv(100) == b"agent %d: %s" % (stand_in.pid, word.upper())
        agent = int((session / "started").read_text())
        assert int(port_file.read_text()) != port  # Ray's agent reported its own port, which the stand-in forwards to
        assert stand_in.stdin is not None
        stand_in.stdin.close()
        assert stand_in.wait(timeout=LIMIT) == 0
        assert not _alive(agent), "Ray's agent outlived the stand-in"
    finally:
        stand_in.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, reparented to init and not reaped yet, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_it_ends_when_rays_runtime_env_agent_fails_so_the_raylet_does(tmp_path: Path) -> None:
    """As the raylet ends when an agent of Ray's fails: here Ray's agent exits at once."""
    script = tmp_path / "agent.py"
    script.write_text("raise SystemExit(3)\n")
    env = {**os.environ, ray_agent_stand_in.PIPE_CHECK: "1", "RAY_RAYLET_PID": str(os.getpid())}
    stand_in = subprocess.Popen(
        [sys.executable, "-S", STAND_IN, RUNTIME_ENV, *_arguments(tmp_path, str(script))],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    try:
        port_file = tmp_path / f"{ray_agent_stand_in.RUNTIME_ENV_PORT}_{NODE}"
        _wait_for(port_file.exists, "the port file")
        with socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=LIMIT) as connection:
            assert connection.recv(100) == b""  # closed, unanswered
        assert stand_in.wait(timeout=LIMIT) == 1
        assert stand_in.stderr is not None
        assert "exit status 3" in stand_in.stderr.read().decode()
    finally:
        stand_in.kill()
