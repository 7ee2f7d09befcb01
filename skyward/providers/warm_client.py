"""The client's side of the warm engine (``warm_engine``): find this user's engine for
this interpreter, start it when none runs, and lease spare agents from it for a pool.

The engine listens on a Unix socket in ``$SKYWARD_HOME/engine/<key>/`` (the directory is
the user's alone, mode 0700; each end also checks the other runs as the same user, the
client before it sends anything), one engine per interpreter and skyward version
(``key``). A lease holds its connection open while the pool lives: the engine knows the
pool is alive as long as it is, and kills the spares it leased once it closes, however
the client ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import psutil

from skyward.core.codec import MalformedFrame, frame, load_payload, read_frame
from skyward.core.messages import (
    AdoptPool,
    AskStatus,
    EndPool,
    EngineState,
    KeepPool,
    Leased,
    LeaseSpares,
    ListPools,
    Message,
    NotKept,
    PoolHeld,
    PoolsEnded,
    PoolsKept,
    Refusal,
    StopEngine,
    Stopping,
    ToEngine,
)
from skyward.core.paths import skyward_dir, skyward_home
from skyward.core.peers import ForeignPeer, require_same_user
from skyward.model.spec import Options, Spec
from skyward.providers.kept.state import kept_by_a_dead_daemon

START_TIMEOUT = 90.0
"""Seconds a new engine has to start Ray and listen."""
ANSWER_TIMEOUT = 30.0
"""Seconds to wait for the engine's answer to one request."""
SOCKET = "sock"
PID_FILE = "pid"
API_FILE = "api.json"
"""The daemon's HTTP API (``kept.http``): ``{"url": ..., "pid": ...}``."""
API_TOKEN_FILE = "api.token"
"""The HTTP API's bearer token (hex, mode 0600)."""
A = TypeVar("A", bound=Message)


class EngineGone(RuntimeError):
    """The engine closed the connection without answering (it is exiting: its last
    kept pool ended, or it was told to stop)."""


@dataclass(frozen=True, slots=True)
class EngineStatus:
    """What a running engine says of itself."""

    pid: int
    address: str
    spares: int
    pools: int
    keep_warm: float
    directory: str


class Lease:
    """Spare agents leased from the engine for one pool (``spares``: their actor names),
    with what a client needs to join the engine's Ray instance. ``close`` ends the lease:
    the engine kills whatever of the spares is still alive."""

    def __init__(self, connection: socket.socket, answer: Leased) -> None:
        self._connection = connection
        self.address = answer.address
        self.token = answer.token
        self.temp_dir = answer.temp_dir
        self.spares = answer.spares
        self.engine_pid = answer.pid

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._connection.close()


def engine_dir() -> Path:
    """This interpreter's engine directory (private to the user)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    identity = f"{os.path.realpath(sys.executable)}\0{package}\0{importlib.metadata.version('skyward')}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    directory = skyward_dir("engine") / key
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def lease(count: int, keep_warm: float) -> Lease:
    """Up to ``count`` spare agents from this user's engine, which then stays up
    ``keep_warm`` seconds after its last pool closed. Starts the engine when none runs.
    Raises RuntimeError (with the engine's log) when it cannot start."""
    directory = engine_dir()
    with _spawn_lock(directory):
        connection = _connect(directory)
        if connection is None:
            connection = _start(directory)
    try:
        answer = _ask(connection, LeaseSpares(count, keep_warm), Leased)
    except BaseException:
        connection.close()
        raise
    return Lease(connection, answer)


@dataclass(frozen=True, slots=True)
class KeptPoolState:
    """A kept pool (``kept.daemon``) as its engine reports it: ``holder`` is the pid of
    the client using it (0: none), ``idle`` the seconds since the last one left."""

    name: str
    pool_id: str
    nodes: int
    keep_alive: float
    holder: int
    idle: float
    opened: float
    definition: bytes
    """The pickled (Spec, Options) the pool was opened with."""
    engine_pid: int


def keep_pool(name: str, fingerprint: str, keep_alive: float, request: bytes, timeout: float) -> PoolHeld:
    """Open a kept pool on this user's engine (starting the engine when none runs),
    held for this process; waits up to ``timeout`` seconds for its agents. RuntimeError
    with the engine's reason when it cannot."""
    directory = engine_dir()
    for attempt in range(2):  # an engine found exiting (its last kept pool just ended): start another
        with _spawn_lock(directory):
            connection = _connect(directory) or _start(directory)
        with connection:
            connection.settimeout(timeout + ANSWER_TIMEOUT)
            try:
                return _ask(connection, KeepPool(name, fingerprint, keep_alive, request), PoolHeld)
            except EngineGone:
                if attempt:
                    raise
                _wait_gone(directory)
            except RuntimeError as exc:
                log = directory / "engine.log"
                raise RuntimeError(f"the pool daemon could not open the kept pool {name!r}: {exc} (its log: {log})") from None
    raise AssertionError("unreachable")


def _wait_gone(directory: Path, timeout: float = START_TIMEOUT) -> None:
    """Wait until the exiting engine of ``directory`` has removed its socket."""
    deadline = time.monotonic() + timeout
    while (directory / SOCKET).exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def adopt_pool(name: str, fingerprint: str) -> PoolHeld | None:
    """The kept pool named ``name`` (empty: any defined as ``fingerprint``), held for
    this process; None when no engine runs or it keeps no such pool. RuntimeError (the
    engine's reason) when it is held by another client or defined otherwise."""
    connection = _reach(engine_dir())
    if connection is None:
        return None
    with connection:
        try:
            answer = _ask(connection, AdoptPool(name, fingerprint), (PoolHeld, NotKept))
        except EngineGone:  # exiting: it keeps nothing
            return None
    return answer if isinstance(answer, PoolHeld) else None


def kept_pools() -> list[KeptPoolState]:
    """The kept pools of every engine of this user that answers."""
    return [
        KeptPoolState(*pool, engine_pid=engine.pid)
        for engine in status()
        for pool in _kept_of(Path(engine.directory))
    ]


def kept_definition(name: str) -> tuple[Spec, Options] | None:
    """The Spec and Options the kept pool ``name`` was opened with (None: not kept)."""
    for pool in _kept_of(engine_dir()):
        if pool[0] == name:
            spec, options = load_payload(pool[7])  # from this user's engine (peer checked)
            return spec, options
    return None


def end_pools(name: str, timeout: float = 300.0) -> list[str]:
    """Tear down the kept pool ``name`` (empty: every kept pool) on the engines that
    keep it, confirmed; the names ended."""
    ended: list[str] = []
    for engine in status():
        connection = _connect(Path(engine.directory))
        if connection is None:
            continue
        with connection:
            connection.settimeout(timeout)
            try:
                answer = _ask(connection, EndPool(name), (PoolsEnded, NotKept))
            except EngineGone:  # exiting: it keeps nothing
                continue
        if isinstance(answer, PoolsEnded):
            ended += answer.names
    return ended


def _kept_of(directory: Path) -> tuple[tuple[str, str, int, float, int, float, float, bytes], ...]:
    """What the engine of ``directory`` keeps (``PoolsKept.pools``); nothing when none
    runs there or it is exiting."""
    connection = _connect(directory)
    if connection is None:
        return ()
    with connection:
        try:
            return _ask(connection, ListPools(), PoolsKept).pools
        except EngineGone:
            return ()


@dataclass(frozen=True, slots=True)
class ApiEndpoint:
    """Where this user's pool daemon serves its HTTP API, and the file holding its token."""

    url: str
    token_file: str
    pid: int


def api_endpoint() -> ApiEndpoint:
    """This interpreter's pool daemon's HTTP API, starting the daemon when none runs.
    RuntimeError when the daemon runs without it (its engine.log says why)."""
    directory = engine_dir()
    with _spawn_lock(directory):
        connection = _connect(directory) or _start(directory)
    with connection:
        state = _ask(connection, AskStatus(), EngineState)
    try:  # written before the daemon listens on its socket
        found = json.loads((directory / API_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        found = {}
    if found.get("pid") != state.pid:
        raise RuntimeError(
            f"the pool daemon (pid {state.pid}) serves no HTTP API; see {directory / 'engine.log'}, and restart "
            "it with `sky down` once no kept pool is needed"
        )
    return ApiEndpoint(str(found["url"]), str(directory / API_TOKEN_FILE), state.pid)


def status() -> list[EngineStatus]:
    """The engines of this user that answer (every interpreter's; a dead one that kept
    pools is started again, and adopts them)."""
    found = []
    engines = skyward_home() / "engine"
    for directory in sorted(engines.iterdir()) if engines.is_dir() else ():
        connection = _reach(directory)
        if connection is None:
            continue
        with connection:
            try:
                state = _ask(connection, AskStatus(), EngineState)
            except EngineGone:  # exiting as we asked: not running
                continue
        found.append(EngineStatus(state.pid, state.address, state.spares, state.pools, state.keep_warm, str(directory)))
    return found


def stop_all(timeout: float = 60.0) -> list[EngineStatus]:
    """Stop every engine of this user (its open pools keep their agents until they
    close); returns those that were asked. Raises TimeoutError naming an engine that is
    still running after ``timeout`` seconds."""
    stopped = status()
    for engine in stopped:
        connection = _connect(Path(engine.directory))
        if connection is None:
            continue
        with connection, contextlib.suppress(EngineGone):  # gone already: exiting on its own
            _ask(connection, StopEngine(), Stopping)
    deadline = time.monotonic() + timeout
    for engine in stopped:
        while _alive(engine.pid):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the warm engine (pid {engine.pid}) did not stop within {timeout:g}s; kill {engine.pid}")
            time.sleep(0.1)
    return stopped


def _connect(directory: Path) -> socket.socket | None:
    """A connection to the engine of ``directory``; None when none listens there.
    ForeignPeer (nothing sent) when what listens there runs as another user."""
    path = directory / SOCKET
    if not path.exists():
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.settimeout(ANSWER_TIMEOUT)
    try:
        connection.connect(str(path))
    except OSError:  # a dead engine's socket file
        connection.close()
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    try:
        require_same_user(connection, "the warm engine")
    except ForeignPeer:
        connection.close()
        raise
    return connection


def _reach(directory: Path) -> socket.socket | None:
    """A connection to the engine of ``directory``: the one running, or, where a dead one
    left kept pools written down (``kept.state``), a new one, which adopts them; None
    when neither."""
    connection = _connect(directory)
    if connection is not None or not kept_by_a_dead_daemon(directory):
        return connection
    with _spawn_lock(directory):
        return _connect(directory) or _start(directory)


def _start(directory: Path) -> socket.socket:
    """Start the engine of ``directory`` and connect to it."""
    log = directory / "engine.log"
    pid_file = directory / PID_FILE
    with contextlib.suppress(FileNotFoundError):
        pid_file.unlink()
    with open(log, "ab") as output:
        subprocess.run(  # returns once the engine forked itself away
            [sys.executable, "-m", "skyward.providers.warm_engine", str(directory)],
            stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=str(directory), timeout=START_TIMEOUT, check=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
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
        f"the warm engine (sky.Local(keep_warm=...)) did not start within {START_TIMEOUT:g}s; its log, {log}, "
        f"ends with:\n{tail}\nuse sky.Local() without keep_warm to open pools without it"
    )


def _ask(connection: socket.socket, request: ToEngine, expected: type[A] | tuple[type[A], ...]) -> A:
    """Send one request, read its one answer (RuntimeError if the engine refused, or
    answered something else)."""
    try:
        connection.sendall(frame(request))
        answer = read_frame(connection)
    except MalformedFrame as exc:
        raise RuntimeError(f"the warm engine answered something that is not a message: {exc}") from None
    except (ConnectionResetError, BrokenPipeError) as exc:
        raise EngineGone(f"the warm engine closed the connection without answering ({exc}); see its engine.log") from None
    if answer is None:
        raise EngineGone("the warm engine closed the connection without answering; see its engine.log")
    if isinstance(answer, Refusal):
        raise RuntimeError(f"the warm engine refused the request: {answer.error}")
    if not isinstance(answer, expected):
        raise RuntimeError(f"the warm engine answered {type(answer).__name__} to {type(request).__name__}")
    return answer


@contextlib.contextmanager
def _spawn_lock(directory: Path) -> Iterator[None]:
    """Held while finding or starting the engine, so two clients never start two."""
    with open(directory / "spawn.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
