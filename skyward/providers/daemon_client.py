"""The client's side of the pool daemon (``daemon.process``): find this user's daemon for
this interpreter, start it when none runs, and ask it to keep, adopt, list and end pools.

The daemon listens on a Unix socket in ``$SKYWARD_HOME/daemon/<key>/`` (the directory is
the user's alone, mode 0700; each end also checks the other runs as the same user, the
client before it sends anything), one daemon per interpreter and skyward version
(``key``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from skyward.core import messages
from skyward.core.codec import MalformedFrame, frame, read_frame
from skyward.core.paths import runtime_dir, skyward_dir, skyward_home
from skyward.core.peers import ForeignPeer, require_same_user
from skyward.core.private_dir import open_private, private_directory
from skyward.core.version import VERSION
from skyward.providers.kept import state as kept_state

if TYPE_CHECKING:  # the definitions arrive pickled: `sky ls` need not import what they are
    from skyward.model.spec import Options, Spec

START_TIMEOUT = 90.0
TAKE_OVER_TIMEOUT = 90.0
"""Seconds more a new daemon may take to answer for each remote kept pool of a dead one
it takes over first (``ssh.launch.take_over``: reconnect, rejoin, reach the relay)."""
"""Seconds a new daemon has to start Ray and listen."""
ANSWER_TIMEOUT = 30.0
"""Seconds to wait for the daemon's answer to one request."""
SOCKET = "sock"
PID_FILE = "pid"
LOG_FILE = "daemon.log"
LIFE_LOCK = "daemon.lock"
"""The file a daemon holds locked (``flock``) from before it binds its socket until it exits."""
"""What the daemon prints (``daemon.process`` rotates it: ``daemon.log.1`` holds the last part)."""
API_FILE = "api.json"
"""The daemon's HTTP API (``daemon.http_api``): ``{"url": ..., "pid": ...}``."""
API_TOKEN_FILE = "api.token"
"""The HTTP API's bearer token (hex, mode 0600)."""
A = TypeVar("A", bound=messages.Message)


class DaemonGone(RuntimeError):
    """The daemon closed the connection without answering (it is exiting: its last
    kept pool ended, or it was told to stop)."""


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    """What a running daemon says of itself."""

    pid: int
    address: str
    """Its Ray instance's address."""
    directory: str


def daemon_dir() -> Path:
    """This interpreter's daemon directory (private to the user)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    identity = f"{os.path.realpath(sys.executable)}\0{package}\0{VERSION}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    directory = skyward_dir("daemon") / key
    private_directory(str(directory))
    return directory


def socket_path(directory: Path) -> Path:
    """Where the daemon of ``directory`` listens: in its short runtime directory
    (``paths.runtime_dir``), whatever the length of the home it keeps its files in."""
    return runtime_dir(directory) / SOCKET


class KeptPoolState(messages.KeptPoolRow, frozen=True):
    """A kept pool (``daemon.kept_pools``) as its daemon reports it, and that daemon's pid."""

    daemon_pid: int = 0


def keep_pool(
    name: str, fingerprint: str, keep_alive: float, request: Callable[[], bytes], timeout: float
) -> messages.PoolHeld:
    """Open a kept pool on this user's daemon (starting the daemon when none runs),
    held for this process; waits up to ``timeout`` seconds for its agents. Each attempt
    sends a ``request()`` of its own, with a pool id of its own: a daemon that went away
    may have begun opening the last one, and what it started there must not be taken
    for the new pool's. RuntimeError with the daemon's reason when it cannot."""
    directory = daemon_dir()
    for attempt in range(2):  # a daemon found exiting (its last kept pool just ended): start another
        with _spawn_lock(directory):
            connection = _connect(directory) or _start(directory)
        with connection:
            connection.settimeout(timeout + ANSWER_TIMEOUT)
            try:
                return _ask(connection, messages.KeepPool(name, fingerprint, keep_alive, request()), messages.PoolHeld)
            except DaemonGone:
                if attempt:
                    raise
                _wait_gone(directory)
            except RuntimeError as exc:
                log = directory / LOG_FILE
                raise RuntimeError(f"the pool daemon could not open the kept pool {name!r}: {exc} (its log: {log})") from None
    raise AssertionError("unreachable")


def _wait_gone(directory: Path, timeout: float = START_TIMEOUT) -> None:
    """Wait until the exiting daemon of ``directory`` has exited (its ``LIFE_LOCK`` is
    free), or ``timeout`` seconds."""
    held = lock_within(directory / LIFE_LOCK, timeout)
    if held is not None:
        os.close(held)  # lets go at once: the successor takes it


def lock_within(path: Path, timeout: float) -> int | None:
    """A descriptor of the private file ``path`` holding its exclusive ``flock`` (closing
    it lets go), taken within ``timeout`` seconds; None when another holds it that long."""
    held = open_private(str(path), os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return held
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(held)
                return None
            time.sleep(0.05)


def adopt_pool(name: str, fingerprint: str) -> messages.PoolHeld | None:
    """The kept pool named ``name`` (empty: any defined as ``fingerprint``), held for
    this process; None when no daemon runs or it keeps no such pool. RuntimeError (the
    daemon's reason) when it is held by another client or defined otherwise."""
    connection = _reach(daemon_dir())
    if connection is None:
        return None
    with connection:
        try:
            answer = _ask(connection, messages.AdoptPool(name, fingerprint), (messages.PoolHeld, messages.NotKept))
        except DaemonGone:  # exiting: it keeps nothing
            return None
    return answer if isinstance(answer, messages.PoolHeld) else None


def kept_pools() -> list[KeptPoolState]:
    """The kept pools of every daemon of this user that answers."""
    return [
        KeptPoolState(pool.name, pool.pool_id, pool.nodes, pool.keep_alive, pool.holder, pool.idle, pool.opened,
                      pool.definition, daemon.pid)
        for daemon in status()
        for pool in _kept_of(_connect(Path(daemon.directory)))
    ]


def kept_definition(name: str) -> tuple[Spec, Options] | None:
    """The Spec and Options the kept pool ``name`` was opened with (None: not kept).
    Where a dead daemon wrote ``name`` down among its kept pools, asking starts its
    successor, which adopts them (RuntimeError when it cannot start)."""
    directory = daemon_dir()
    connection = _connect(directory)
    if connection is None and name in kept_state.kept_names(directory):
        connection = _reach(directory)
    for pool in _kept_of(connection):
        if pool.name == name:
            return kept_state.opened_with(pool.definition)  # from this user's daemon (peer checked)
    return None


def end_pools(name: str, timeout: float = 300.0) -> list[str]:
    """Tear down the kept pool ``name`` (empty: every kept pool) on the daemons that
    keep it, confirmed; the names ended."""
    ended: list[str] = []
    for daemon in status():
        connection = _connect(Path(daemon.directory))
        if connection is None:
            continue
        with connection:
            connection.settimeout(timeout)
            try:
                answer = _ask(connection, messages.EndPool(name), (messages.PoolsEnded, messages.NotKept))
            except DaemonGone:  # exiting: it keeps nothing
                continue
        if isinstance(answer, messages.PoolsEnded):
            ended += answer.names
    return ended


def _kept_of(connection: socket.socket | None) -> tuple[messages.KeptPoolRow, ...]:
    """What the daemon at the other end of ``connection`` keeps (``PoolsKept.pools``);
    nothing when there is none (None) or it is exiting."""
    if connection is None:
        return ()
    with connection:
        try:
            return _ask(connection, messages.ListPools(), messages.PoolsKept).pools
        except DaemonGone:
            return ()


@dataclass(frozen=True, slots=True)
class ApiEndpoint:
    """Where this user's pool daemon serves its HTTP API, and the file holding its token."""

    url: str
    token_file: str
    pid: int


def api_endpoint() -> ApiEndpoint:
    """This interpreter's pool daemon's HTTP API, starting the daemon when none runs.
    RuntimeError when the daemon runs without it (its daemon.log says why)."""
    directory = daemon_dir()
    with _spawn_lock(directory):
        connection = _connect(directory) or _start(directory)
    with connection:
        state = _ask(connection, messages.AskStatus(), messages.DaemonRunning)
    try:  # written before the daemon listens on its socket
        found = json.loads((directory / API_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        found = {}
    if found.get("pid") != state.pid:
        raise RuntimeError(
            f"the pool daemon (pid {state.pid}) serves no HTTP API; see {directory / LOG_FILE}, and restart "
            "it with `sky down` once no kept pool is needed"
        )
    return ApiEndpoint(str(found["url"]), str(directory / API_TOKEN_FILE), state.pid)


def status() -> list[DaemonStatus]:
    """The daemons of this user that answer (every interpreter's; a dead one that kept
    pools is started again, and adopts them)."""
    found = []
    daemons = skyward_home() / "daemon"
    for directory in sorted(daemons.iterdir()) if daemons.is_dir() else ():
        connection = _reach(directory)
        if connection is None:
            continue
        with connection:
            try:
                state = _ask(connection, messages.AskStatus(), messages.DaemonRunning)
            except DaemonGone:  # exiting as we asked: not running
                continue
        found.append(DaemonStatus(state.pid, state.address, str(directory)))
    return found


def stop_all(timeout: float = 60.0) -> list[DaemonStatus]:
    """Stop every daemon of this user, which ends the pools they keep; returns those
    that were asked. Raises TimeoutError naming a daemon that is
    still running after ``timeout`` seconds."""
    stopped = status()
    for daemon in stopped:
        connection = _connect(Path(daemon.directory))
        if connection is None:
            continue
        with connection, contextlib.suppress(DaemonGone):  # gone already: exiting on its own
            _ask(connection, messages.StopDaemon(), messages.Stopping)
    deadline = time.monotonic() + timeout
    for daemon in stopped:
        while _alive(daemon.pid):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the pool daemon (pid {daemon.pid}) did not stop within {timeout:g}s; kill {daemon.pid}")
            time.sleep(0.1)
    return stopped


def _connect(directory: Path) -> socket.socket | None:
    """A connection to the daemon of ``directory``; None when none listens there.
    ForeignPeer (nothing sent) when what listens there runs as another user."""
    path = socket_path(directory)
    if not path.exists():
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_TIMEOUT)
    try:
        connection.connect(str(path))
    except OSError:  # a dead daemon's socket file (its successor replaces it)
        connection.close()
        return None
    try:
        require_same_user(connection, "the pool daemon")
    except ForeignPeer:
        connection.close()
        raise
    return connection


def _reach(directory: Path) -> socket.socket | None:
    """A connection to the daemon of ``directory``: the one running, or, where a dead one
    left kept pools written down (``kept.state``), a new one, which adopts them; None
    when neither."""
    connection = _connect(directory)
    if connection is not None or not kept_state.kept_by_a_dead_daemon(directory):
        return connection
    with _spawn_lock(directory):
        return _connect(directory) or _start(directory)


def _start(directory: Path) -> socket.socket:
    """Start the daemon of ``directory`` and connect to it."""
    log = directory / LOG_FILE
    pid_file = directory / PID_FILE
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    with os.fdopen(open_private(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND), "ab") as output:
        subprocess.run(  # returns once the daemon forked itself away
            [sys.executable, "-m", "skyward.daemon", str(directory)],
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=str(directory), timeout=START_TIMEOUT, check=True,
        )
    waiting = START_TIMEOUT + TAKE_OVER_TIMEOUT * kept_state.remote_pools(directory)
    deadline = time.monotonic() + waiting
    pid = 0
    while time.monotonic() < deadline:
        connection = _connect(directory)
        if connection is not None:
            return connection
        if not pid and pid_file.exists():
            pid = int(pid_file.read_text() or 0)
        if pid and not _alive(pid):
            break
        time.sleep(0.05)
    if pid and _alive(pid):
        os.kill(pid, signal.SIGKILL)
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(
        f"the pool daemon did not start within {waiting:g}s; its log, {log}, ends with:\n{tail}\n"
        "open the pool without Options.keep_alive (and sky.Local() without keep_warm) to run it without the daemon"
    )


def _ask(connection: socket.socket, request: messages.ToDaemon, expected: type[A] | tuple[type[A], ...]) -> A:
    """Send one request, read its one answer (RuntimeError if the daemon refused, or
    answered something else)."""
    try:
        connection.sendall(frame(request))
        answer = read_frame(connection)
    except MalformedFrame as exc:
        raise RuntimeError(f"the pool daemon answered something that is not a message: {exc}") from None
    except (ConnectionResetError, BrokenPipeError) as exc:
        raise DaemonGone(f"the pool daemon closed the connection without answering ({exc}); see its daemon.log") from None
    if answer is None:
        raise DaemonGone("the pool daemon closed the connection without answering; see its daemon.log")
    if isinstance(answer, messages.Refusal):
        raise RuntimeError(f"the pool daemon refused the request: {answer.error}")
    if not isinstance(answer, expected):
        raise RuntimeError(f"the pool daemon answered {type(answer).__name__} to {type(request).__name__}")
    return answer


@contextlib.contextmanager
def _spawn_lock(directory: Path) -> Iterator[None]:
    """Held while finding or starting the daemon, so two clients never start two."""
    with os.fdopen(open_private(str(directory / "spawn.lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    import psutil  # on first use: ``sky ls`` of a live daemon never needs it

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
