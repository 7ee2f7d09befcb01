"""The pool daemon: a per-user process that keeps pools between scripts (``daemon.kept_pools``,
docs/kept-pools.md: ``Options(keep_alive=...)``, ``sky.Local(keep_warm=...)``) and serves
their HTTP API (``daemon.http_api``); ``python -m skyward.daemon DIR``.

Started by the first pool that asks for it (``daemon_client``), in its own session, on a
private Ray instance that outlives it (``local.detached_ray``: token auth, a private
dir, and a reaper that ends it if this process dies, once the kept pools a successor
could adopt have had their ``keep_alive``; a successor finds the instance and the
pools in ``kept.state``). It listens on ``DIR/sock`` (Unix socket; the directory is
mode 0700 and a peer of another uid is refused) for one typed request per connection
(``core.messages``): its status, "stop", and the kept pools' requests. Once it keeps no
pool, serves no request and its HTTP API is idle, or on "down", it stops Ray, removes
its socket and exits.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from pathlib import Path

import ray

from skyward.core import messages
from skyward.core.accepting import accepted
from skyward.core.codec import MalformedFrame, frame, load_payload, read_frame
from skyward.core.peers import ForeignPeer, peer_pid, require_same_user
from skyward.core.private_dir import open_private, replace_private
from skyward.core.unix_listener import listening_at
from skyward.daemon.http_api import KeptApi
from skyward.daemon.kept_pools import KeptPools
from skyward.daemon.remote_kept_pool import HostRefused
from skyward.providers.daemon_client import LIFE_LOCK, LOG_FILE, PID_FILE, lock_within, socket_path
from skyward.providers.kept import state as kept_state
from skyward.providers.kept.request import KeptRequest
from skyward.providers.local import detached_ray
from skyward.providers.local.detached_ray import DetachedRay
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.local.reaper import Reaper, claim, linger_until

TICK = 0.2
"""Seconds between looks at the idle time."""
ALIVE_EVERY = 5.0
"""Seconds between marks that the daemon runs (``kept.state.mark_alive``)."""
FIRST_REQUEST_WAIT = 30.0
"""Seconds a new daemon waits for the first request of the client that started it."""
HANDOVER_TIMEOUT = 60.0
"""Seconds a new daemon waits for a predecessor that is still cleaning up to exit."""
LOG_LIMIT = 10 * 1024 * 1024
"""Bytes of ``daemon.log`` past which it is rotated (the part before kept as ``daemon.log.1``)."""


class PoolDaemon:
    """The daemon of one directory (see the module)."""

    def __init__(self, directory: Path, first_wait: float = FIRST_REQUEST_WAIT) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._linger = first_wait  # until the first request: then the daemon lives while it keeps pools
        self._idle_since = time.monotonic()
        self._down = threading.Event()
        self._kept = KeptPools(directory)
        self._found = kept_state.load(directory)
        """What a dead predecessor kept, to adopt (None: nothing)."""
        self._silent = kept_state.silent_for(directory)
        """Seconds since that predecessor last ran."""
        self._reaper: Reaper | None = None
        self._api = KeptApi(directory, self._kept)
        self._kept_requests = 0
        """Requests about kept pools being served (the daemon stays until each is answered)."""

    def run(self) -> None:
        """Serve until no pool is kept and no request is being served, or told "down";
        then clean up."""
        instance = self._join_ray()
        self.address = ray.get_runtime_context().gcs_address
        threading.Thread(target=self._mark_alive, name="daemon-alive", daemon=True).start()
        for line in self._kept.resume(instance, self._found, self._silent):
            print(f"pool daemon: {line}", flush=True)
        path = socket_path(self.directory)
        server: socket.socket | None = None
        try:  # before the socket: a client that reached the daemon finds api.json
            print(f"pool daemon {os.getpid()}: HTTP API at {self._api.start()}", flush=True)
        except Exception as exc:  # noqa: BLE001 - logged; the daemon serves scripts without it
            print(f"pool daemon: the HTTP API did not start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        try:
            server = listening_at(str(path))
            threading.Thread(target=self._accept, args=(server,), name="daemon-accept", daemon=True).start()
            threading.Thread(target=self._clean_up, name="daemon-cleanup", daemon=True).start()
            print(f"pool daemon {os.getpid()} serving {path} (Ray at {self.address})", flush=True)
            while not self._down.wait(TICK):
                rotate_log(self.directory / LOG_FILE)
                self._kept.sweep()
                with self._lock:
                    idle = (
                        self._kept_requests == 0 and time.monotonic() - self._idle_since > self._linger
                    )
                if idle and not self._kept and not self._api.busy():
                    break
        finally:
            self._down.set()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            if server is not None:
                with contextlib.suppress(OSError):  # wakes the accepting thread
                    server.shutdown(socket.SHUT_RDWR)
                server.close()
            with contextlib.suppress(OSError):  # the runtime directory, once empty
                path.parent.rmdir()
            self._api.stop()
            self._kept.close()
            LocalRay.release()
            linger_until(instance.temp_dir, 0.0)
            kept_state.forget(self.directory)
            instance.stop()
            if self._reaper is not None:
                self._reaper.stop()
            print(f"pool daemon {os.getpid()} stopped", flush=True)

    def _join_ray(self) -> DetachedRay:
        """The Ray instance a dead predecessor left with kept pools (``kept.state``), or
        a new one: detached from this process (``local.detached_ray``) and joined,
        claimed from the predecessor's reaper."""
        found = self._found
        if found is not None and found.ray is not None and not found.ray.alive():
            found.ray.stop()  # what is left of it; its local pools are gone with it
            self._found = found = found.without_ray()
        instance = found.ray if found is not None and found.ray is not None else detached_ray.start()
        claim(instance.temp_dir)
        self._reaper = Reaper.start(instance.temp_dir, linger=True)  # ends it if this process dies from now on
        try:
            LocalRay.acquire(instance)
        except BaseException:
            instance.stop()
            kept_state.forget(self.directory)
            self._reaper.stop()
            raise
        return instance

    def _mark_alive(self) -> None:
        """Mark the daemon alive every ``ALIVE_EVERY`` seconds until it stops (a successor
        reads how long ago it died: ``kept.state.silent_for``)."""
        while True:
            kept_state.mark_alive(self.directory)
            if self._down.wait(ALIVE_EVERY):
                return

    @staticmethod
    def _clean_up() -> None:
        """What a dead predecessor's kept pools left (``KeptPools.clean_up_after_a_dead_daemon``)."""
        for line in KeptPools.clean_up_after_a_dead_daemon():
            print(f"pool daemon: {line}", flush=True)

    def _accept(self, server: socket.socket) -> None:
        for connection in accepted(server, lambda warning: print(f"pool daemon: {warning}", flush=True)):
            threading.Thread(target=self._serve, args=(connection,), name="daemon-client", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                require_same_user(connection, "a client of the pool daemon")
            except ForeignPeer as refused:
                _answer(connection, messages.Refusal(str(refused)))
                return
            try:
                request = read_frame(connection)
            except (MalformedFrame, OSError) as exc:
                _answer(connection, messages.Refusal(f"not a request: {exc}"))
                return
            match request:
                case messages.AskStatus():
                    _answer(connection, messages.DaemonRunning(os.getpid(), self.address))
                case messages.StopDaemon():
                    _answer(connection, messages.Stopping(os.getpid()))
                    self._down.set()
                case messages.KeepPool() | messages.AdoptPool() | messages.ListPools() | messages.EndPool():
                    self._kept_request(connection, request)
                case _:
                    _answer(connection, messages.Refusal(f"not a request of the pool daemon: {type(request).__name__}"))

    def _kept_request(self, connection: socket.socket, request: messages.AboutKeptPools) -> None:
        """Serve a request about kept pools (``daemon.kept_pools``)."""
        with self._lock:
            self._linger = 0.0  # from now on the daemon leaves with the last kept pool
            self._kept_requests += 1
        try:
            match request:
                case messages.KeepPool(name, fingerprint, keep_alive, body) if keep_alive > 0:
                    kept: KeptRequest = load_payload(body)  # from a process of this user (checked above)
                    _answer(connection, self._kept.keep(name, fingerprint, keep_alive, kept, peer_pid(connection)))
                case messages.AdoptPool(name, fingerprint):
                    _answer(connection, self._kept.adopt(name, fingerprint, peer_pid(connection)))
                case messages.ListPools():
                    _answer(connection, messages.PoolsKept(tuple(self._kept.states())))
                case messages.EndPool(name):
                    _answer(connection, messages.PoolsEnded(self._kept.end(name)))
                case _:
                    _answer(connection, messages.Refusal(f"not a valid request: {request!r}"))
        except LookupError as exc:
            _answer(connection, messages.NotKept(str(exc.args[0]) if exc.args else str(exc)))
        except HostRefused as exc:  # says what its host raised, and its type
            _answer(connection, messages.Refusal(str(exc)))
        except Exception as exc:  # the client gets the reason; the daemon serves on
            _answer(connection, messages.Refusal(f"{type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self._kept_requests -= 1
                self._idle_since = time.monotonic()


def rotate_log(log: Path, limit: int = LOG_LIMIT) -> None:
    """When what this process prints (its stdout and stderr: ``log``, as the client that
    started it opened it) has grown past ``limit`` bytes, move it to ``log.1`` (replacing
    the one before) and print to a fresh ``log`` (mode 0600) from now on."""
    try:
        if os.fstat(1).st_size <= limit:
            return
        os.replace(log, log.with_name(log.name + ".1"))
        fresh = open_private(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except OSError:
        return  # printed to something else (a terminal), or the directory is gone
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fresh, 1)
    os.dup2(fresh, 2)
    os.close(fresh)


def _answer(connection: socket.socket, answer: messages.Message) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(frame(answer))


def main(directory: Path) -> None:
    """Detach (fork; the parent returns at once, so the daemon is no child of the client
    that started it and a tool that reaps the client's children leaves it alone), then
    serve."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    _hold_life_lock(directory)
    replace_private(str(directory / PID_FILE), str(os.getpid()))
    PoolDaemon(directory).run()


def _hold_life_lock(directory: Path) -> None:
    """Lock ``LIFE_LOCK`` for the rest of this process's life (the kernel lets go when it
    exits, however it exits). A predecessor that stopped serving may still be cleaning up,
    and its cleanup removes the socket at the daemon's path: a successor that bound its
    own socket there meanwhile lost it. Waiting here for the predecessor to exit means
    one daemon at a time owns the path. Exits (status 1, naming the lock) when the
    predecessor has not gone after ``HANDOVER_TIMEOUT`` seconds."""
    if lock_within(directory / LIFE_LOCK, HANDOVER_TIMEOUT) is None:
        print(
            f"pool daemon {os.getpid()}: another daemon of {directory} still holds {LIFE_LOCK} after "
            f"{HANDOVER_TIMEOUT:g}s; stop it with `sky down`",
            file=sys.stderr, flush=True,
        )
        os._exit(1)

