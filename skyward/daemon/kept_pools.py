"""Kept pools, in the pool daemon (the process of ``daemon.process``): local pools that
outlive the script that opened them (``Options(keep_alive=seconds)``).

A kept pool is started here, on the daemon's Ray instance, for the client that asked
(``KeepPool``: its Spec, Options, working directory, import path and environment), and
served to one client at a time through a relay on a Unix socket of the daemon's private
directory: the same ``RelayServer`` and ``RayAgentsBackend`` a remote pool's head relay runs,
so a client reaches a kept pool exactly as it reaches a remote one, with no Ray of its
own. A client holds the pool from ``KeepPool``/``AdoptPool`` until its relay session
ends (or, if it never connects, ``HOLD_TIMEOUT``); each hold has its own secret, which
the client proves before its first frame is read, and the peer must run as this user.
A pool nobody held for ``keep_alive`` seconds is torn down as a pool's close tears it
down; ``EndPool`` ends one (or all) at once. The pool's collections keep their contents
between clients; on a local pool each client's locks and leases are freed when it
leaves. A client may add and remove nodes, asked through its relay: the daemon places
a local pool's as it placed the first ones (``LocalKeptPool.start_agent``/``stop_agent``).
A remote pool (``daemon.remote_kept_pool``) is held by a host process of its own, started
with the environment and working directory of the client that opened it: the host
launched it, adds and removes its hosts, and serves each connection the daemon accepted
for it; the daemon's own environment never changes.

Kept pools outlive the daemon, which writes down what it keeps (``kept.state``) each
time that changes. A local pool's agents are detached actors of the daemon's detached
Ray instance (``local.detached_ray``): if the daemon dies, its reaper keeps the instance
up to the pools' ``keep_alive`` for a successor. A remote pool's nodes wait ``Spec.ttl``
for one (their watchdogs count it down once the host's SSH connections closed, and
their head relays serve the next client that proves the pool's secret). The successor's
``resume`` adopts every pool whose agents still answer, taking the remote ones over in a
host of its own (``ssh.launch.take_over``), and ends the others, removing what they hold
in a cloud;
what is left of a pool it did not find written down is removed
(``clean_up_after_a_dead_daemon``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import socket
import threading
import time
from pathlib import Path

import ray

from skyward.collections.installed import release as release_collections
from skyward.core import handshake
from skyward.core.codec import load_payload
from skyward.core.messages import KeptPoolRow, OpenRemote, PoolHeld, TakeOverRemote
from skyward.core.paths import in_home, runtime_dir
from skyward.core.peers import ForeignPeer, peer_pid, require_same_user
from skyward.core.private_dir import private_directories
from skyward.core.unix_listener import listening_at
from skyward.daemon import dashboard_feed
from skyward.daemon.kept_pool import KeptPool, LocalKeptPool
from skyward.daemon.pool_log import PoolLog
from skyward.daemon.remote_kept_pool import HostRefused, RemoteKeptPool
from skyward.engine.relay_server import RelayBackend, RelayServer, Sink
from skyward.model.spec import Options, Spec
from skyward.observe.dashboard.board import Board
from skyward.observe.log_config import LogConfig
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster, runs_here
from skyward.providers.kept import state as kept_state
from skyward.providers.kept.request import KeptRequest
from skyward.providers.leftovers import remove_leftovers
from skyward.providers.local import reaper
from skyward.providers.local.detached_ray import DetachedRay
from skyward.providers.local.launch import agent_lane, collections_config, kept_agent_name, notes_dir, rejoin, start
from skyward.providers.ray.agents import AgentMembership
from skyward.providers.ssh.handover import Handover
from skyward.providers.ssh.handover import release as release_handover
from skyward.providers.ssh.loop import LoopThread

HOLD_TIMEOUT = 30.0
"""Seconds a client that was given a pool has to open its relay session."""
OWN_RELEASE_WAIT = 5.0
"""Seconds ``adopt`` waits for a pool held by the asking client itself to be let go: its
relay session ends here a moment after the client was told it closed."""
OWN_RELEASE_POLL = 0.02
RETAKE_WAIT = 120.0
"""Seconds ``adopt`` waits for a remote pool whose host died to be taken over again."""
SILENCE_MARGIN = 15.0
"""Seconds a dead daemon's silence may overstate how long ago it died (it marks itself
alive every few seconds)."""


class KeptPools:
    """The daemon's kept pools (see the module); ``directory`` is the daemon's private one."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._ray: DetachedRay | None = None
        """The daemon's Ray instance, once ``resume`` was told it (then what is kept is written down)."""
        self._lock = threading.Lock()
        self._pools: dict[str, KeptPool] = {}
        self._opening: set[str] = set()
        self._loop = LoopThread("skyward-kept-pools")
        """Where the local pools' relays run."""
        self._writing = threading.Lock()
        """Held while what is kept is written down."""
        self._sessions = itertools.count(1)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._pools or self._opening)

    def keep(self, name: str, fingerprint: str, keep_alive: float, request: KeptRequest, pid: int) -> PoolHeld:
        """Open the pool ``name`` for client ``pid`` and hold it for it. ValueError when
        a pool of that name is kept already (naming what to do)."""
        with self._lock:
            if name in self._pools or name in self._opening:
                raise ValueError(
                    f"a pool named {name!r} is kept already; define it the same way to adopt it, give this pool "
                    f"another name, or end it with `sky down {name}`"
                )
            self._opening.add(name)
        definition = kept_state.pool_definition(request.spec, request.options)
        try:
            pool = self._open(name, fingerprint, keep_alive, request, definition)
        except BaseException:
            with self._lock:
                self._opening.discard(name)
            raise
        try:
            pool.definition = definition
            _show(pool, request.spec)
            pool.log = PoolLog(_log_path(request.pool_id), pool.board)
            pool.log.note(
                f"pool {name}: kept, {len(pool.nodes)} nodes on {request.spec.provider.name}, idle for at most "
                f"{keep_alive:g}s; opened for pid {pid}"
            )
            self._listen(pool)
            _register(pool, request.spec)
        except BaseException:
            with self._lock:
                self._opening.discard(name)
            with contextlib.suppress(Exception):  # what is raised is why it could not be kept
                self._stop(pool)
            raise
        with self._lock:
            self._opening.discard(name)
            gone = pool if isinstance(pool, RemoteKeptPool) and pool.gone else None
            if gone is None:
                self._pools[name] = pool
                held = self._hold(pool, pid, adopted=False)
        if gone is not None:  # its host died as it opened (RemoteKeptPool.ended found it not kept yet)
            self._forget(gone, release=True)
            raise HostRefused(f"the host process of the pool {name} ended as the pool opened; see the daemon's log")
        self._write_down()
        if isinstance(pool, RemoteKeptPool):
            pool.recorded()
        return held

    def resume(self, ray: DetachedRay, state: kept_state.DaemonState | None, silent: float) -> list[str]:
        """Work on ``ray`` from now on (writing down what is kept), adopting the kept pools
        a dead predecessor, last seen ``silent`` seconds ago, wrote in ``state`` whose
        agents still answer and ending the others; what was done, one line each."""
        self._ray = ray
        done = []
        for record in state.pools if state is not None else ():
            definition: tuple[Spec, Options] | None = None
            try:
                definition = kept_state.opened_with(record.definition)
                spec, options = definition
                if record.handover:
                    pool = self._take_over(record, spec, options, silent)
                else:
                    pool = self._rejoin(record, spec, options)
            except Exception as exc:  # noqa: BLE001 - reported; what is left of it is ended
                if not record.handover:  # a remote pool closed itself (or is left to clean_up_after_a_dead_daemon)
                    _discard(record, definition)
                    registry.unregister(record.pool_id)
                done.append(
                    f"kept pool {record.name} of a dead daemon could not be adopted and was ended: "
                    f"{type(exc).__name__}: {exc}"
                )
                continue
            with self._lock:
                gone = pool if isinstance(pool, RemoteKeptPool) and pool.gone else None
                if gone is None:
                    self._pools[pool.name] = pool
            if gone is not None:  # its host died as it took the pool over (RemoteKeptPool.ended found it not kept yet)
                self._forget(gone, release=True)
                done.append(f"kept pool {record.name} of a dead daemon could not be adopted: its host process ended")
                continue
            done.append(f"kept pool {record.name} of a dead daemon adopted ({record.nodes} nodes)")
        self._write_down()
        return done

    def _rejoin(self, record: kept_state.KeptRecord, spec: Spec, options: Options) -> KeptPool:
        """The running local pool ``record`` found again, listening on its socket and registered."""
        cluster = rejoin(spec, options, record.pool_id, record.nodes, HOLD_TIMEOUT)
        pool = self._local_pool(record.name, record.fingerprint, record.keep_alive, record.pool_id, cluster)
        return self._resumed(pool, record, spec)

    def _take_over(self, record: kept_state.KeptRecord, spec: Spec, options: Options, silent: float) -> KeptPool:
        """The remote pool ``record`` taken over (``ssh.launch.take_over``), listening on
        its socket and registered; raises why not, after closing it (without trying when
        its nodes' ``Spec.ttl`` ran out ``silent`` seconds after the daemon died)."""
        handover: Handover = load_payload(record.handover)  # written by this user's daemon (kept.state)
        if silent > handover.ttl + SILENCE_MARGIN:
            threading.Thread(target=_release_quietly, args=(handover,), name="skyward-release", daemon=False).start()
            raise TimeoutError(
                f"its daemon died about {silent:.0f}s ago and its nodes stop their pool {handover.ttl}s after "
                "that (Spec.ttl); what it holds in its cloud is being removed"
            )
        pool = RemoteKeptPool.start(
            TakeOverRemote(record.definition, record.handover), os.environ, os.getcwd(), name=record.name,
            fingerprint=record.fingerprint, keep_alive=record.keep_alive, pool_id=record.pool_id,
            socket_path=self._socket_path(record.pool_id), resized=self._write_down, session_ended=self._ended,
            ended=self._host_ended,
        )
        return self._resumed(pool, record, spec)

    def _resumed(self, pool: KeptPool, record: kept_state.KeptRecord, spec: Spec) -> KeptPool:
        """``pool``, found again from ``record``, listening on its socket and registered."""
        pool.opened, pool.definition = record.opened, record.definition
        _show(pool, spec)
        pool.log = PoolLog(_log_path(record.pool_id), pool.board)
        pool.log.note(f"pool {pool.name}: taken over by pool daemon {os.getpid()}")
        try:
            self._listen(pool)
            _register(pool, spec)
        except BaseException:
            self._stop(pool)
            raise
        return pool

    def _write_down(self) -> None:
        """Write down the kept pools a successor can adopt (``kept.state``), and tell the
        daemon's reaper to keep the local ones that long if the daemon dies; one writer
        at a time, each writing what is kept when it writes. A failure is logged (the
        pools run on; the next change writes again)."""
        if self._ray is None:
            return
        with self._writing:
            with self._lock:
                pools = [p for p in self._pools.values() if isinstance(p, LocalKeptPool) or p.handover()]
            local = [p for p in pools if isinstance(p, LocalKeptPool)]
            try:
                records = tuple(_record(p) for p in pools)
                kept_state.save(self._directory, kept_state.DaemonState(self._ray, records))
                longest = max((p.keep_alive for p in local), default=0.0)
                reaper.linger_until(self._ray.temp_dir, time.time() + longest if longest else 0.0)
            except Exception as exc:  # noqa: BLE001 - logged; nothing kept is lost by it
                print(f"pool daemon: could not write down the kept pools: {type(exc).__name__}: {exc}", flush=True)

    def _open(
        self, name: str, fingerprint: str, keep_alive: float, request: KeptRequest, definition: bytes,
    ) -> KeptPool:
        """Start the pool ``request`` defines (``definition`` its pickled Spec and
        Options): local agents on this daemon's Ray, or a remote pool by its provider, in
        a host process with the client's environment and working directory."""
        if not runs_here(request.spec.provider):
            context = request.context
            return RemoteKeptPool.start(
                OpenRemote(definition, request.pool_id, context.sys_path), context.environ, context.cwd, name=name,
                fingerprint=fingerprint, keep_alive=keep_alive, pool_id=request.pool_id,
                socket_path=self._socket_path(request.pool_id), resized=self._write_down, session_ended=self._ended,
                ended=self._host_ended,
            )
        cluster = start(request.spec, request.options, request.pool_id, context=request.context, detached=True)
        return self._local_pool(name, fingerprint, keep_alive, request.pool_id, cluster)

    def _local_pool(
        self, name: str, fingerprint: str, keep_alive: float, pool_id: str, cluster: LaunchedCluster,
    ) -> LocalKeptPool:
        """The kept pool of a local ``cluster`` on this daemon's Ray: its agents, lanes and
        post-mortem notes are the relay's. TypeError (the cluster stopped) when the
        cluster is not a local pool's."""
        membership = cluster.membership
        if not isinstance(membership, AgentMembership):
            cluster.end()
            raise TypeError(f"a local pool's cluster has its agents' membership, not {membership!r}")
        pool = LocalKeptPool(
            name, fingerprint, keep_alive, pool_id, cluster.nodes, cluster.infos, self._socket_path(pool_id),
            cluster=cluster, notes=notes_dir(pool_id), agents=dict(membership.agents), resized=self._write_down,
        )
        pool.lanes = {node: path for node in pool.agents if (path := agent_lane(pool_id, node))}
        return pool

    def _socket_path(self, pool_id: str) -> Path:
        return runtime_dir(self._directory) / f"pool-{pool_id[:12]}.sock"

    def adopt(self, name: str, fingerprint: str, pid: int) -> PoolHeld:
        """Hold a kept pool for client ``pid``: the one named ``name`` (whose definition
        must be ``fingerprint``), or with no name any idle one defined so. LookupError
        when there is none; ValueError naming the holder or the difference. A pool that
        ``pid`` itself holds is waited for up to ``OWN_RELEASE_WAIT`` seconds: that
        client has just closed it, and its session may not have ended here yet. A remote
        pool whose host died is waited for up to ``RETAKE_WAIT`` seconds, while it is
        taken over again (``_host_ended``)."""
        started = time.monotonic()
        while True:
            with self._lock:
                candidates = self._candidates(name, fingerprint)
                for pool in candidates:
                    if not pool.holder and not _host_died(pool):
                        return self._hold(pool, pid, adopted=True)
                waited = time.monotonic() - started
                retaking = [p.name for p in candidates if _host_died(p)]
                if (waited >= OWN_RELEASE_WAIT or all(pool.holder != pid for pool in candidates)) and (
                    waited >= RETAKE_WAIT or not retaking
                ):
                    if retaking:
                        raise ValueError(
                            f"the kept pool {retaking[0]} lost its host process and is still being taken over again; "
                            "try again in a moment, or end it with `sky down`"
                        )
                    holders = ", ".join(f"{p.name} (pid {p.holder})" for p in candidates)
                    raise ValueError(
                        f"the kept pool {holders} is in use by another script (one client at a time); wait for it "
                        "to finish, or give this pool another name to open a second one"
                    )
            time.sleep(OWN_RELEASE_POLL)

    def _candidates(self, name: str, fingerprint: str) -> list[KeptPool]:
        """The kept pools ``adopt`` may give (see there); LookupError or ValueError as it says."""
        if name:
            pool = self._pools.get(name)
            if pool is None:
                raise LookupError(f"no pool named {name!r} is kept")
            if fingerprint and pool.fingerprint != fingerprint:
                raise ValueError(
                    f"the kept pool {name!r} was defined otherwise (provider, nodes, Image, plugins, volumes, "
                    f"worker, working directory or interpreter differ); define it as it was, give this pool "
                    f"another name, or end the kept one with `sky down {name}`"
                )
            return [pool]
        candidates = [p for p in self._pools.values() if p.fingerprint == fingerprint]
        if not candidates:
            raise LookupError("no kept pool is defined as this one")
        return candidates

    def release(self, name: str, pid: int) -> None:
        """Free the hold ``pid`` has on the pool ``name`` before connecting to it (the
        pool stays kept, idle from now, for a script to adopt). LookupError when it is
        not kept; ValueError when ``pid`` does not hold it or is connected."""
        with self._lock:
            pool = self._pools.get(name)
            if pool is None:
                raise LookupError(f"no pool named {name!r} is kept")
            if pool.holder != pid or pool.session is not None:
                raise ValueError(f"the kept pool {name!r} is not held by pid {pid} before connecting (holder {pool.holder})")
            pool.holder, pool.secret, pool.idle_since = 0, b"", time.monotonic()

    def boards(self) -> list[Board]:
        """The kept pools as the daemon's dashboard shows them, each told who holds it,
        how long it has been idle and how long it is kept."""
        now = time.monotonic()
        with self._lock:
            pools = list(self._pools.values())
            for pool in pools:
                pool.board.extra = {
                    "kept": True, "holder": pool.holder or None, "idle": round(pool.idle_for(now), 1),
                    "keep_alive": pool.keep_alive, "opened": pool.opened,
                }
        return [pool.board for pool in pools]

    def states(self) -> list[KeptPoolRow]:
        """Each pool as ``PoolsKept`` carries it."""
        now = time.monotonic()
        with self._lock:
            return [
                KeptPoolRow(
                    p.name, p.pool_id, len(p.nodes), p.keep_alive, p.holder, p.idle_for(now), p.opened,
                    p.definition,
                )
                for p in self._pools.values()
            ]

    def end(self, name: str) -> tuple[str, ...]:
        """Tear down the pool ``name`` (empty: all of them) now, even if held; the names
        ended. LookupError when ``name`` is not kept."""
        with self._lock:
            if name and name not in self._pools:
                raise LookupError(f"no pool named {name!r} is kept")
            ended = [self._pools.pop(n) for n in ([name] if name else list(self._pools))]
        failures = self._stop_all(ended)
        if failures:
            raise RuntimeError("; ".join(failures))
        return tuple(pool.name for pool in ended)

    def _stop_all(self, pools: list[KeptPool]) -> list[str]:
        """Tear each of ``pools`` down (no longer kept), then write down what is kept;
        what could not be confirmed gone, one line a pool (each also logged)."""
        failures = []
        for pool in pools:
            try:
                self._stop(pool)
            except Exception as exc:  # noqa: BLE001 - said, and the other pools still end
                failures.append(f"the kept pool {pool.name} was not confirmed torn down: {type(exc).__name__}: {exc}")
                print(f"pool daemon: {failures[-1]}", flush=True)
        self._write_down()
        return failures

    def sweep(self) -> None:
        """End the pools idle past their ``keep_alive``; free holds whose client never came."""
        now = time.monotonic()
        with self._lock:
            for pool in self._pools.values():
                if pool.holder and pool.session is None and now > pool.hold_deadline:
                    pool.holder, pool.secret, pool.idle_since = 0, b"", now
            expired = [p for p in self._pools.values() if not p.holder and now - p.idle_since > p.keep_alive]
            for pool in expired:
                del self._pools[pool.name]
        for pool in expired:
            if pool.log is not None:
                pool.log.note(f"pool {pool.name}: idle past its keep_alive of {pool.keep_alive:g}s")
        if expired:  # on the daemon's main thread, which waits for it
            self._stop_all(expired)

    @staticmethod
    def clean_up_after_a_dead_daemon() -> list[str]:
        """Remove what the kept pools of a daemon that died (SIGKILL, a reboot) and that
        ``resume`` did not adopt left in their clouds, and their records and files (their remote
        nodes end by themselves after ``Spec.ttl``); what was done, one line each. A pool
        whose removal fails keeps its record, for ``sky down``."""
        done = []
        for record in registry.records():
            if record.keep_alive is None or registry.alive(record):
                continue
            try:
                removed = remove_leftovers(record.provider, record.region, record.pool_id)
            except Exception as exc:  # noqa: BLE001 - reported; `sky down NAME` retries
                done.append(f"kept pool {record.name}: could not remove what it left: {type(exc).__name__}: {exc}")
                continue
            registry.forget(record.pool_id)
            done.append(f"kept pool {record.name} of a dead daemon: removed {len(removed)} resources")
        return done

    def close(self) -> None:
        """End every pool and the relays' loop (the daemon exits); RuntimeError naming the
        pools not confirmed torn down."""
        try:
            self.end("")
        finally:
            self._loop.stop()

    def _hold(self, pool: KeptPool, pid: int, adopted: bool) -> PoolHeld:
        """Give ``pool`` to client ``pid`` (with the lock held)."""
        pool.holder, pool.secret = pid, handshake.new_secret()
        pool.hold_deadline = time.monotonic() + HOLD_TIMEOUT
        if adopted and pool.log is not None:
            pool.log.note(f"pool {pool.name}: adopted by pid {pid}")
        infos = pickle.dumps(tuple(pool.infos))
        nodes = pickle.dumps(tuple(pool.nodes))
        return PoolHeld(pool.name, pool.pool_id, str(pool.socket), pool.secret, infos, nodes, adopted)

    def _listen(self, pool: KeptPool) -> None:
        """Listen on ``pool``'s socket (mode 0600 in the private directory): a local pool's
        relay, on the daemon's loop; a remote pool's connections, handed to its host."""
        if isinstance(pool, RemoteKeptPool):
            pool.board.on_watch(pool.tell_watched)
            pool.listen(lambda connection: self._hand_over(pool, connection))
            return
        if not isinstance(pool, LocalKeptPool):
            raise TypeError(f"a kept pool is a LocalKeptPool or a RemoteKeptPool, not a {type(pool).__name__}")
        listener = listening_at(str(pool.socket))

        async def listen() -> asyncio.AbstractServer:
            return await asyncio.start_unix_server(lambda r, w: self._session(pool, r, w), sock=listener)

        try:
            pool.server = self._loop.run(listen(), 30)
        except BaseException:
            listener.close()
            raise

    async def _session(self, pool: LocalKeptPool, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve one connection to ``pool``'s relay: the holder's, proven by its secret."""
        sock = writer.get_extra_info("socket")
        try:
            require_same_user(sock, "a client of a kept pool")
        except ForeignPeer:
            writer.close()
            return
        with self._lock:
            ours = pool.holder != 0 and pool.session is None and peer_pid(sock) == pool.holder
            if ours:
                pool.session = writer
        if not ours:
            writer.close()
            return
        client = f"{pool.holder}-{next(self._sessions)}"
        server = RelayServer(pool.secret, lambda sink: self._backend(pool, client, sink), observed=pool.board.observed)
        try:
            await server.handle(reader, writer)
        finally:
            self._ended(pool, server.finished.is_set())

    def _hand_over(self, pool: RemoteKeptPool, connection: socket.socket) -> None:
        """Have ``pool``'s host serve ``connection``: the holder's (this user, its pid),
        whose secret the host checks; any other is closed."""
        try:
            require_same_user(connection, "a client of a kept pool")
        except (ForeignPeer, OSError):
            connection.close()
            return
        with self._lock:
            ours = pool.holder != 0 and pool.session is None and peer_pid(connection) == pool.holder
            if ours:
                session = next(self._sessions)
                pool.session, client = session, f"{pool.holder}-{session}"
        if not ours:
            connection.close()
            return
        try:
            pool.serve(session, client, connection)
        except OSError:  # its host is gone: the pool ends (RemoteKeptPool.ended)
            self._ended(pool, False)

    def _ended(self, pool: KeptPool, served: bool) -> None:
        """``pool``'s relay session ended; ``served``: its client closed it, and the pool
        is idle from now on."""
        with self._lock:
            pool.session = None
            if served:
                if pool.log is not None:
                    pool.log.note(f"pool {pool.name}: idle (pid {pool.holder} left), kept for {pool.keep_alive:g}s")
                pool.holder, pool.secret, pool.idle_since = 0, b"", time.monotonic()

    def _host_ended(self, pool: RemoteKeptPool) -> None:
        """``pool``'s host process died (the script holding it lost its session). Its
        nodes wait for a new client as for a successor daemon, so it is taken over again
        in a new host, under the daemon's environment; when it cannot be, it is no longer
        kept (``_forget``; its new host removed what it held). One not kept yet is left to
        ``keep`` or ``resume``, which find it ``gone``. On the dead host's thread."""
        with self._lock:
            if self._pools.get(pool.name) is not pool:
                return
        again = self._retake(pool) if pool.handed_over else None
        if again is not None and _host_died(again):  # its new host died too
            again = None
        with self._lock:
            kept = self._pools.get(pool.name) is pool
            if kept and again is None:
                del self._pools[pool.name]
            elif kept and again is not None:
                self._pools[pool.name] = again
        if not kept:  # ended meanwhile (`sky down`)
            if again is not None:
                self._stop_all([again])
            return
        if again is None:
            self._forget(pool, release=False)
        else:
            self._write_down()

    def _retake(self, pool: RemoteKeptPool) -> KeptPool | None:
        """``pool``, whose host died, taken over in a new host; None (noted in its log)
        when it cannot be."""
        try:
            spec, options = kept_state.opened_with(pool.definition)
            return self._take_over(_record(pool), spec, options, 0.0)
        except Exception as exc:  # noqa: BLE001 - noted; the pool is no longer kept
            if pool.log is not None:
                pool.log.note(f"pool {pool.name}: could not be taken over again: {type(exc).__name__}: {exc}", "ERROR")
            return None

    def _forget(self, pool: RemoteKeptPool, release: bool) -> None:
        """Forget ``pool``, whose host died; ``release``: remove what it held in its cloud
        (in a thread of its own; its nodes stop themselves after ``Spec.ttl``)."""
        with contextlib.suppress(FileNotFoundError):
            pool.socket.unlink()
        registry.unregister(pool.pool_id)
        if release and pool.handed_over:
            handover: Handover = load_payload(pool.handed_over)  # written by the pool's host
            threading.Thread(target=_release_quietly, args=(handover,), name="skyward-release", daemon=False).start()
        self._write_down()

    @staticmethod
    def _backend(pool: LocalKeptPool, client: str, sink: Sink) -> RelayBackend:
        if pool.log is not None:
            sink = pool.log.sink(sink)
        return dashboard_feed.Watched(pool.backend(client, sink), pool.board)

    def _stop(self, pool: KeptPool) -> None:
        """Tear ``pool`` down: its relay (ending a session in progress), then its nodes."""
        if isinstance(pool, LocalKeptPool) and pool.server is not None:
            server, session = pool.server, pool.session

            async def close() -> None:
                server.close()
                if isinstance(session, asyncio.StreamWriter):
                    session.close()

            with contextlib.suppress(Exception):
                self._loop.run(close(), 10)
        with contextlib.suppress(FileNotFoundError):
            pool.socket.unlink()
        if pool.log is not None:  # kept: `sky logs NAME` finds it after the pool
            pool.log.note(f"pool {pool.name}: torn down")
        try:
            pool.tear_down()
        finally:
            registry.unregister(pool.pool_id)


def _host_died(pool: KeptPool) -> bool:
    """Whether ``pool`` is a remote pool whose host process died (being taken over again)."""
    return isinstance(pool, RemoteKeptPool) and pool.gone


def _record(pool: KeptPool) -> kept_state.KeptRecord:
    """``pool`` as ``kept.state`` holds it (its nodes and handover of one moment)."""
    with pool.members_lock:
        return kept_state.KeptRecord(
            pool.name, pool.fingerprint, pool.keep_alive, pool.pool_id, len(pool.nodes), pool.opened,
            pool.definition, pool.handover(),
        )


def _log_path(pool_id: str) -> Path:
    """A kept pool's log: among the pools' own logs (``observe.log_setup``), where
    ``sky logs`` finds it by the pool's id or name, during its life and after."""
    directory = in_home(LogConfig().file).parent / "pools"
    private_directories(str(directory))
    return directory / f"{pool_id}.log"


def _show(pool: KeptPool, spec: Spec) -> None:
    """Put ``pool`` on its dashboard board (``daemon.dashboard_feed``)."""
    pool.priced = bool(getattr(spec.provider, "priced", False))
    with pool.members_lock:
        members = list(zip(pool.nodes, pool.infos))
    dashboard_feed.show(pool.board, pool.name, spec.provider.name, pool.priced, pool.opened, members)


def _register(pool: KeptPool, spec: Spec) -> None:
    """Record ``pool`` as this daemon's (``sky ls``, ``sky gc``)."""
    records = [registry.NodeRecord.of(node) for node in pool.nodes]
    region = spec.region or getattr(spec.provider, "region", None)
    registry.register(
        pool.pool_id, spec.provider.name, region, name=pool.name, nodes=records,
        log_file=str(pool.log.path) if pool.log is not None else None, keep_alive=pool.keep_alive,
    )


def _release_quietly(handover: Handover) -> None:
    """Remove what a remote pool past its ``Spec.ttl`` holds in its cloud; a failure is
    logged (``sky gc`` finds what is left)."""
    try:
        release_handover(handover)
    except Exception as exc:  # noqa: BLE001 - logged; nobody waits for this thread
        print(f"pool daemon: the pool {handover.pool_id[:12]} could not be removed: {type(exc).__name__}: {exc}",
              flush=True)


def _discard(record: kept_state.KeptRecord, definition: tuple[Spec, Options] | None) -> None:
    """End what is left of a dead daemon's kept pool that could not be adopted: its
    agents that still exist and, when its ``definition`` could be read, its collections
    (otherwise they end with the Ray instance)."""
    for node in range(record.nodes):
        with contextlib.suppress(Exception):
            ray.kill(ray.get_actor(kept_agent_name(record.pool_id, node), namespace="skyward"), no_restart=True)
    if definition is not None:
        spec, options = definition
        with contextlib.suppress(Exception):
            release_collections(collections_config(spec, options, record.pool_id))
