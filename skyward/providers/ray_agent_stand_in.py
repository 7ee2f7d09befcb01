"""Takes the place of Ray's two node agents on a node skyward starts (``ray_start.lean``).

Run by the raylet as ``python -S ray_agent_stand_in.py ROLE ARGS``: ROLE is the agent it
stands in for (Ray's process type), ARGS Ray's agent script and its arguments. It imports
the standard library only (``-S`` leaves site-packages, skyward included, off the path),
so it is ready in tens of milliseconds, where each of Ray's agents boots Ray in Python
first (0.4-0.7 s of CPU on a start's busiest moment), and the raylet registers with the
GCS only once both have reported their ports. Either role lives as long as the raylet
(which ends itself when an agent ends).

- ``dashboard_agent`` does what Ray's minimal dashboard agent does for a node that runs
  no dashboard: it reports "no service" (-1) for the metrics agent, metrics export and
  HTTP ports.
- ``runtime_env_agent`` binds the agent's port and reports it, and starts Ray's own
  runtime-env agent (on a port it binds itself) only when something connects,
  forwarding each connection to it as it is (the raylet's token goes along and is
  checked by Ray's agent). It ends when Ray's agent fails, so the raylet does, as it
  would with its own agent. A pool asks for a
  runtime env only when an agent starts in another interpreter (an Image's environment
  or a plugin's launcher), so most pools never start it.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

DASHBOARD = "dashboard_agent"
RUNTIME_ENV = "runtime_env_agent"
"""The roles, as Ray names the agents' process types (``ray_constants.PROCESS_TYPE_*``)."""
PORTS = ("metrics_agent_port", "metrics_export_port", "dashboard_agent_listen_port")
"""The ports Ray's dashboard agent reports (``ray._raylet``'s ``*_PORT_NAME``)."""
RUNTIME_ENV_PORT = "runtime_env_agent_port"
"""The port Ray's runtime-env agent reports (``ray._raylet.RUNTIME_ENV_AGENT_PORT_NAME``)."""
NO_SERVICE = "-1"
"""What a port file holds for a service that does not run (Ray's minimal agent writes it)."""
PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"
"""Set by the raylet when it holds the write end of a pipe on the agent's stdin."""
POLL = 1.0
"""Seconds between checks that the raylet lives, when it does not hold a pipe."""
AGENT_START = 60.0
"""Seconds Ray's runtime-env agent has to report its port once started (the stand-in,
and so the raylet, ends after that)."""
CHUNK = 65536


def option(name: str, argv: list[str]) -> str:
    """The value of ``--name=VALUE`` in ``argv``; SystemExit naming it when absent."""
    prefix = f"--{name}="
    for arg in argv:
        if arg.startswith(prefix):
            return arg[len(prefix):]
    raise SystemExit(f"skyward's Ray agent stand-in: no --{name}= among its arguments")


def report(session_dir: str, node_id: str, port: str, value: str) -> None:
    """Write ``value`` as port ``port``, as Ray's port files are named and read."""
    path = port_file(session_dir, node_id, port)
    partial = f"{path}.{os.getpid()}"
    with open(partial, "w", encoding="ascii") as file:
        file.write(value)
    os.replace(partial, path)


def port_file(session_dir: str, node_id: str, port: str) -> str:
    return os.path.join(session_dir, f"{port}_{node_id}")


def wait_for_raylet_end(raylet: int) -> None:
    """Return once the raylet (pid ``raylet``, this process's parent) has ended."""
    if os.environ.get(PIPE_CHECK, "").lower() in ("1", "true") and _piped():
        while os.read(0, 4096):  # the raylet writes nothing; end of file: it is gone
            pass
        return
    while os.getppid() == raylet:
        time.sleep(POLL)


def _piped() -> bool:
    """Whether stdin is a pipe (not /dev/null, a file or closed)."""
    try:
        return stat.S_ISFIFO(os.fstat(0).st_mode)
    except OSError:
        return False


class LazyAgent:
    """Ray's runtime-env agent (``command``), started on the first ``connect``. It reports
    its own port in the port file the stand-in wrote (``reported``: the stand-in's), and
    lives as long as this process: its stdin is a pipe held here, and it takes this
    process for its raylet. This process ends in turn when the agent ends unasked (or
    reports no port within ``AGENT_START`` seconds), so the raylet ends with it, as it
    does with an agent of Ray's that fails."""

    def __init__(self, command: list[str], path: str, reported: str) -> None:
        self._command = command
        self._path = path
        self._reported = reported
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._deadline = 0.0
        self._stopping = False

    def connect(self, host: str) -> socket.socket:
        """A connection to the agent, started once and waited for (see the class). Ray's
        agent writes its port once bound and listens a moment later, so a refused
        connection is tried again until the agent's ``AGENT_START`` seconds are up;
        OSError when it cannot be reached by then."""
        with self._lock:
            if self._port is None:
                self._deadline = time.monotonic() + AGENT_START
                self._port = self._start()
        while True:
            try:
                return socket.create_connection((host, self._port))
            except ConnectionRefusedError:
                if time.monotonic() > self._deadline:
                    raise
                time.sleep(0.01)

    def _start(self) -> int:
        env = {**os.environ, "RAY_RAYLET_PID": str(os.getpid())}
        process = self._process = subprocess.Popen(self._command, stdin=subprocess.PIPE, env=env)
        threading.Thread(target=self._end_with, args=(process,), daemon=True).start()
        while time.monotonic() < self._deadline:
            try:
                with open(self._path, encoding="ascii") as file:
                    written = file.read().strip()
            except OSError:
                written = ""
            if written.isdigit() and written != self._reported:
                return int(written)
            time.sleep(0.01)
        _say(f"Ray's runtime-env agent reported no port within {AGENT_START:g}s: {self._command}")
        os._exit(1)

    def _end_with(self, process: subprocess.Popen[bytes]) -> None:
        status = process.wait()
        if not self._stopping:
            _say(f"Ray's runtime-env agent ended (exit status {status}); the stand-in ends with it")
            os._exit(1)

    def stop(self) -> None:
        """End the agent, if it was started (it also ends by itself once this process has)."""
        self._stopping = True
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()


def _say(line: str) -> None:
    print(f"skyward's Ray agent stand-in: {line}", file=sys.stderr, flush=True)


def forward(client: socket.socket, agent: LazyAgent, host: str) -> None:
    """Pass ``client``'s bytes to the agent and the agent's back, until both ends are done."""
    try:
        upstream = agent.connect(host)
    except OSError as error:
        _say(f"no connection to Ray's runtime-env agent: {error}")
        client.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until ``source`` ends, then end ``sink``'s writing."""
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def stand_in_for_runtime_env_agent(argv: list[str]) -> None:
    """Serve the runtime-env agent's port as the module says, until the raylet ends."""
    session_dir, node_id = option("session-dir", argv), option("node-id", argv)
    host = option("node-ip-address", argv)
    listener = socket.create_server((host, int(option("runtime-env-agent-port", argv) or 0)), backlog=64)
    port = str(listener.getsockname()[1])
    own_port = [arg if not arg.startswith("--runtime-env-agent-port=") else "--runtime-env-agent-port=0" for arg in argv]
    agent = LazyAgent([sys.executable, *own_port], port_file(session_dir, node_id, RUNTIME_ENV_PORT), port)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    report(session_dir, node_id, RUNTIME_ENV_PORT, port)

    def accept() -> None:
        while True:
            client, _ = listener.accept()
            threading.Thread(target=forward, args=(client, agent, host), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        wait_for_raylet_end(int(os.environ.get("RAY_RAYLET_PID", os.getppid())))
    finally:
        agent.stop()


def main(argv: list[str]) -> None:
    role, arguments = (argv[0], argv[1:]) if argv else ("", [])
    if role == RUNTIME_ENV:
        stand_in_for_runtime_env_agent(arguments)
    elif role == DASHBOARD:
        session_dir, node_id = option("session-dir", arguments), option("node-id", arguments)
        for port in PORTS:
            report(session_dir, node_id, port, NO_SERVICE)
        wait_for_raylet_end(int(os.environ.get("RAY_RAYLET_PID", os.getppid())))
    else:
        raise SystemExit(f"skyward's Ray agent stand-in: its first argument is {DASHBOARD} or {RUNTIME_ENV}, not {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
