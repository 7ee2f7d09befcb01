"""The warm engine: a per-user process that keeps a local Ray instance and spare node
agents between scripts, so a local pool opens in a fraction of a second
(``sky.Local(keep_warm=seconds)``; ``python -m skyward.providers.warm_engine DIR``).

Started by the first pool that asks for it (``warm_client``), in its own session, on a
private Ray instance that outlives it (``local.detached_ray``: token auth, a private
dir, and a reaper that ends it if this process dies, once the kept pools a successor
could adopt have had their ``keep_alive``; a successor finds the instance and the
pools in ``kept.state``). It listens on ``DIR/sock`` (Unix socket; the directory is
mode 0700 and a peer of another uid is refused) for one typed request per connection
(``core.messages``): a lease (take up to ``count`` ready spares; the connection then
stays open while the pool lives, and when it closes the engine kills what is left of
those spares), its status, "stop", and the kept pools' requests. Spares are agents that imported skyward and wait for a pool's
setup (``NodeAgent.configure``); after each lease the engine starts new ones, as many as
the largest pool asked for. With no pool open for ``keep_warm`` seconds (the latest
lease's value) or on "down", it stops its spares and Ray, removes its socket and exits.
It also keeps pools (``kept.daemon``) and serves their HTTP API (``kept.http``), which
keep it up while they are in use.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import ray

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
    PoolsEnded,
    PoolsKept,
    Refusal,
    StopEngine,
    Stopping,
)
from skyward.core.peers import ForeignPeer, peer_pid, require_same_user
from skyward.node.agent import start_spares
from skyward.providers.kept import state as kept_state
from skyward.providers.kept.daemon import KeptPools
from skyward.providers.kept.http import KeptApi
from skyward.providers.kept.request import KeptRequest
from skyward.providers.local import detached_ray
from skyward.providers.local.detached_ray import DetachedRay
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.local.reaper import Reaper, claim, linger_until
from skyward.providers.warm_client import PID_FILE, SOCKET

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent

TICK = 0.2
"""Seconds between looks at the idle time."""
SPARE_READY_TIMEOUT = 120.0
FIRST_LEASE_WAIT = 30.0
"""Seconds a new engine waits for the lease of the client that started it."""
MAX_SPARES = 64


class WarmEngine:
    """The engine of one directory (see the module)."""

    def __init__(self, directory: Path, first_wait: float = FIRST_LEASE_WAIT) -> None:
        self.directory = directory
        self._lock = threading.Lock()
        self._ready: list[tuple[str, ActorHandle[NodeAgent]]] = []  # (name, handle) of spares that answer
        self._starting = 0
        self._target = 0
        self._pools = 0
        self._keep_warm = first_wait  # until the first lease says how long to stay
        self._idle_since = time.monotonic()
        self._down = threading.Event()
        self._wanted = threading.Event()
        self._setups = directory / "setups"
        self._kept = KeptPools(directory)
        self._found = kept_state.load(directory)
        """What a dead predecessor kept, to adopt (None: nothing)."""
        self._reaper: Reaper | None = None
        self._api = KeptApi(directory, self._kept)
        self._leased = False
        self._kept_requests = 0
        """Requests about kept pools being served (the engine stays until each is answered)."""

    def run(self) -> None:
        """Serve until idle for ``keep_warm`` seconds or told "down"; then clean up."""
        self._setups.mkdir(mode=0o700, exist_ok=True)
        instance = self._join_ray()
        self.address = ray.get_runtime_context().gcs_address
        for line in self._kept.resume(instance, self._found):
            print(f"warm engine: {line}", flush=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = self.directory / SOCKET
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        try:  # before the socket: a client that reached the engine finds api.json
            print(f"warm engine {os.getpid()}: HTTP API at {self._api.start()}", flush=True)
        except Exception as exc:  # noqa: BLE001 - logged; the engine serves scripts without it
            print(f"warm engine: the HTTP API did not start: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        try:
            server.bind(str(path))
            os.chmod(path, 0o600)
            server.listen(16)
            threading.Thread(target=self._accept, args=(server,), name="engine-accept", daemon=True).start()
            threading.Thread(target=self._replenish, name="engine-spares", daemon=True).start()
            threading.Thread(target=self._clean_up, name="engine-cleanup", daemon=True).start()
            print(f"warm engine {os.getpid()} serving {path} (Ray at {self.address})", flush=True)
            while not self._down.wait(TICK):
                self._kept.sweep()
                with self._lock:
                    idle = (
                        self._pools == 0 and self._kept_requests == 0
                        and time.monotonic() - self._idle_since > self._keep_warm
                    )
                if idle and not self._kept and not self._api.busy():
                    break
        finally:
            self._down.set()
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            server.close()
            self._api.stop()
            self._kept.close()
            self._stop_spares()
            LocalRay.release()
            linger_until(instance.temp_dir, 0.0)
            kept_state.forget(self.directory)
            instance.stop()
            if self._reaper is not None:
                self._reaper.stop()
            shutil.rmtree(self._setups, ignore_errors=True)
            print(f"warm engine {os.getpid()} stopped", flush=True)

    def _join_ray(self) -> DetachedRay:
        """The Ray instance a dead predecessor left with kept pools (``kept.state``), or
        a new one: detached from this process (``local.detached_ray``) and joined,
        claimed from the predecessor's reaper."""
        found = self._found
        if found is not None and not found.ray.alive():
            found.ray.stop()  # what is left of it
            self._found = found = None
        instance = found.ray if found is not None else detached_ray.start()
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

    @staticmethod
    def _clean_up() -> None:
        """What a dead predecessor's kept pools left (``KeptPools.clean_up_after_a_dead_daemon``)."""
        for line in KeptPools.clean_up_after_a_dead_daemon():
            print(f"warm engine: {line}", flush=True)

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), name="engine-client", daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            try:
                require_same_user(connection, "a client of the warm engine")
            except ForeignPeer as refused:
                _answer(connection, Refusal(str(refused)))
                return
            try:
                request = read_frame(connection)
            except (MalformedFrame, OSError) as exc:
                _answer(connection, Refusal(f"not a request: {exc}"))
                return
            match request:
                case AskStatus():
                    with self._lock:
                        _answer(connection, EngineState(
                            os.getpid(), self.address, len(self._ready), self._pools, self._keep_warm,
                        ))
                case StopEngine():
                    _answer(connection, Stopping(os.getpid()))
                    self._down.set()
                case LeaseSpares(count, keep_warm) if count >= 0 and keep_warm >= 0:
                    self._lease(connection, count, float(keep_warm))
                case KeepPool() | AdoptPool() | ListPools() | EndPool():
                    self._kept_request(connection, request)
                case _:
                    _answer(connection, Refusal(f"not a request of the warm engine: {type(request).__name__}"))

    def _kept_request(self, connection: socket.socket, request: KeepPool | AdoptPool | ListPools | EndPool) -> None:
        """Serve a request about kept pools (``kept.daemon``)."""
        with self._lock:
            if not self._leased:  # an engine only kept pools use leaves with the last of them
                self._keep_warm = 0.0
            self._kept_requests += 1
        try:
            match request:
                case KeepPool(name, fingerprint, keep_alive, body) if keep_alive > 0:
                    kept: KeptRequest = load_payload(body)  # from a process of this user (checked above)
                    _answer(connection, self._kept.keep(name, fingerprint, keep_alive, kept, peer_pid(connection)))
                case AdoptPool(name, fingerprint):
                    _answer(connection, self._kept.adopt(name, fingerprint, peer_pid(connection)))
                case ListPools():
                    _answer(connection, PoolsKept(tuple(self._kept.states())))
                case EndPool(name):
                    _answer(connection, PoolsEnded(self._kept.end(name)))
                case _:
                    _answer(connection, Refusal(f"not a valid request: {request!r}"))
        except LookupError as exc:
            _answer(connection, NotKept(str(exc.args[0]) if exc.args else str(exc)))
        except Exception as exc:  # the client gets the reason; the engine serves on
            _answer(connection, Refusal(f"{type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self._kept_requests -= 1
                self._idle_since = time.monotonic()

    def _lease(self, connection: socket.socket, count: int, keep_warm: float) -> None:
        with self._lock:
            self._leased = True
            taken, self._ready = self._ready[:count], self._ready[count:]
            self._pools += 1
            self._keep_warm = keep_warm
            self._target = min(max(self._target, count), MAX_SPARES)
        self._wanted.set()
        try:
            _answer(connection, Leased(
                os.getpid(), self.address, LocalRay.token(), LocalRay.temp_dir() or "", tuple(name for name, _ in taken),
            ))
            connection.settimeout(None)
            while connection.recv(65536):  # held open while the pool lives
                pass
        except OSError:
            pass
        finally:
            for name, handle in taken:
                with contextlib.suppress(Exception):
                    ray.kill(handle, no_restart=True)
                with contextlib.suppress(FileNotFoundError):
                    (self._setups / name).unlink()
            with self._lock:
                self._pools -= 1
                self._idle_since = time.monotonic()

    def _replenish(self) -> None:
        """Keep ``target`` spares ready (started in the background after each lease)."""
        while not self._down.is_set():
            self._wanted.wait(1.0)
            self._wanted.clear()
            with self._lock:
                missing = self._target - len(self._ready) - self._starting
                self._starting += max(0, missing)
            if missing <= 0:
                continue
            names = [f"skyward-spare-{uuid.uuid4().hex[:12]}" for _ in range(missing)]
            spares: list[ActorHandle[NodeAgent]] = []
            try:
                spares = start_spares(names, [str(self._setups / name) for name in names])
                ray.get([spare.ready.remote() for spare in spares], timeout=SPARE_READY_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - logged; pools start their own agents meanwhile
                if not self._down.is_set():
                    print(f"warm engine: spares did not start: {exc}", file=sys.stderr, flush=True)
                for spare in spares:
                    with contextlib.suppress(Exception):
                        ray.kill(spare, no_restart=True)
                spares = []
            with self._lock:
                self._starting -= len(names)
                self._ready.extend(zip(names, spares))

    def _stop_spares(self) -> None:
        with self._lock:
            ready, self._ready = self._ready, []
        for _, handle in ready:
            with contextlib.suppress(Exception):
                ray.kill(handle, no_restart=True)


def _answer(connection: socket.socket, answer: Message) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(frame(answer))


def main(directory: Path) -> None:
    """Detach (fork; the parent returns at once, so the engine is no child of the client
    that started it and a tool that reaps the client's children leaves it alone), then
    serve."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    (directory / PID_FILE).write_text(str(os.getpid()))
    WarmEngine(directory).run()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
