"""The host process of one remote kept pool (SSH hosts, cloud machines), which the pool
daemon starts with the environment and working directory of the client that opened the
pool (``daemon.remote_kept_pool``): the provider's code, boto3 and asyncssh read that
client's credentials, SSH agent and relative paths here as they would in the client, and
the daemon's own environment never changes. ``python -m skyward.daemon.pool_host FD``,
FD its end of the daemon's socket pair (``daemon.host_channel``).

It launches the pool (``OpenRemote``) or takes over a dead daemon's (``TakeOverRemote``),
and holds it from then on: the transport to its head relay, its membership (adding and
removing nodes for the script holding it, and every ``CHECK_EVERY`` seconds asking its
provider for hosts it took back) and each relay session the daemon hands it
(``ServeSession``: the connection itself, whose peer the daemon checked), served by the
same ``RelayServer`` and ``KeptRemoteBackend`` as a pool's own head relay serves. It
tells the daemon its nodes (``Members``, with the ``Handover`` a successor needs), when
a session ends, and what the script is sent (for the pool's log and dashboard).

``Close`` tears the pool down. When the daemon dies its end of the pair closes, and the
host exits without stopping the pool, once the daemon said it wrote the pool down
(``Recorded``; a pool taken over was written down already): its nodes wait ``Spec.ttl``
for a successor daemon, which takes the pool over in a host of its own. A pool the
daemon died before writing down would be found by nobody, so the host tears it down.
What the host prints goes to the daemon's log file (its stdout and stderr, inherited).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import sys
import threading
from collections.abc import Callable
from typing import cast

from msgspec import structs

from skyward.core import messages
from skyward.core.codec import MalformedFrame, load_payload
from skyward.core.instance import InstanceInfo
from skyward.daemon.dashboard_feed import Watched
from skyward.daemon.host_channel import HostChannel
from skyward.daemon.remote_backend import EventForwarder, KeptRemoteBackend
from skyward.engine.membership import Loss, Membership, with_member
from skyward.engine.relay_server import RelayBackend, RelayServer, Sink
from skyward.engine.transports.relay import RelayTransport
from skyward.model.nodes import NodeHandle
from skyward.providers.base import LaunchedCluster
from skyward.providers.kept.state import opened_with
from skyward.providers.ssh.handover import Handover
from skyward.providers.ssh.launch import take_over
from skyward.providers.ssh.loop import LoopThread

CHECK_EVERY = 5.0
"""Seconds between asking the pool's provider for hosts it took back."""
CLOSE_SESSIONS_WAIT = 10.0
"""Seconds the relay sessions in progress get to end when the pool is torn down."""


class PoolHost:
    """One remote kept pool, held for the daemon at the other end of ``channel`` (see the
    module). ``run`` is the process's life."""

    def __init__(self, channel: HostChannel) -> None:
        self._channel = channel
        self._loop = LoopThread("skyward-pool-host")
        self._forwarder = EventForwarder()
        self._following = Following()
        self._members = threading.Lock()
        """Held while the pool's nodes change."""
        self._cluster: LaunchedCluster | None = None
        self._sessions: dict[int, asyncio.StreamWriter] = {}
        self._closing = threading.Event()
        self._recorded = False
        """The daemon wrote the pool down: losing the daemon leaves it up from now on."""

    def run(self) -> int | None:
        """Open the pool the daemon's first message asks for, then do what it says until
        ``Close`` (the pool torn down: 0). 1 when the pool could not be opened (``Refusal``
        says why); None when the daemon went away after writing the pool down (the pool is
        left up; before, it is torn down: 0)."""
        received = self._receive()
        if received is None:
            return None
        self._recorded = isinstance(received[0], messages.TakeOverRemote)
        try:
            self._cluster = self._open(received[0])
        except Exception as exc:  # noqa: BLE001 - the daemon is told, and tells the client
            self._tell(messages.Refusal(f"{type(exc).__name__}: {exc}"))
            return 1
        self._tell_members()
        threading.Thread(target=self._check_hosts, name="skyward-check-hosts", daemon=True).start()
        while (received := self._receive()) is not None:
            message, connection = received
            if connection is not None and not isinstance(message, messages.ServeSession):
                connection.close()
            match message:
                case messages.ServeSession(session, secret, client) if connection is not None:
                    asyncio.run_coroutine_threadsafe(self._serve(session, secret, client, connection), self._loop.loop)
                case messages.Recorded():
                    self._recorded = True
                case messages.Metrics(on):
                    self._following.set(on)
                case messages.Close():
                    self._close()
                    return 0
                case _:
                    _say(f"{type(message).__name__} is not for a pool host; ignored")
        if not self._recorded:
            _say("the daemon went away before it wrote the pool down, where a successor would find it: tearing it down")
            self._close()
            return 0
        return None

    def _receive(self) -> tuple[messages.Message, socket.socket | None] | None:
        """The daemon's next message; None once it went away (or sent what is not one)."""
        try:
            return self._channel.receive()
        except (MalformedFrame, OSError) as exc:
            _say(f"the daemon's channel broke: {exc}")
            return None

    def _open(self, message: messages.Message) -> LaunchedCluster:
        """The pool ``message`` asks for, running, its transport open and its membership
        watched; raises why not (what was started of it stopped)."""
        match message:
            case messages.OpenRemote(definition, pool_id, sys_path):
                sys.path[:0] = [path for path in sys_path if path not in sys.path]
                spec, options = opened_with(definition)  # from the daemon, over the pair it made
                cluster = spec.provider.launch(spec, options, pool_id)
                try:
                    cluster.transport.open(self._loop.loop, self._forwarder)
                except BaseException:
                    cluster.stop()
                    raise
            case messages.TakeOverRemote(definition, handover):
                spec, options = opened_with(definition)  # from the daemon, over the pair it made
                written: Handover = load_payload(handover)  # the daemon's kept.state, in its private directory
                cluster = take_over(written, spec, options, self._loop.loop, self._forwarder)
            case _:
                raise TypeError(f"a pool host opens its pool first, and was sent {type(message).__name__}")
        if cluster.membership is not None:
            cluster.membership.watch(self.lost)
        return cluster

    @property
    def cluster(self) -> LaunchedCluster:
        if self._cluster is None:
            raise RuntimeError("the pool host has no pool yet")
        return self._cluster

    def _tell_members(self) -> None:
        """Tell the daemon the pool's nodes and how a successor takes them over."""
        with self._members:
            cluster = self.cluster
            handover = cluster.handover(cluster.nodes) if cluster.handover is not None else b""
            members = messages.Members(pickle.dumps(cluster.nodes), pickle.dumps(cluster.infos), handover)
        self._tell(members)

    def add_node(self, node: int) -> bytes:
        """Add node ``node`` as the pool's membership places it (its provider's machines);
        its pickled ``(NodeHandle, InstanceInfo)``. NotImplementedError for a pool taken
        over from a daemon that died: its size is fixed."""
        membership = self._membership(node, "join")
        with self._members:
            present = [(h, i) for h, i in zip(self.cluster.nodes, self.cluster.infos) if i.node == node]
        if present:  # the script asked again after giving up waiting: it has joined meanwhile
            return pickle.dumps(present[0])
        joined = membership.add(node)
        self._changed(node, (joined.handle, joined.info))
        return pickle.dumps((joined.handle, joined.info))

    def remove_node(self, node: int) -> None:
        """Remove node ``node`` (stopped on its host, its machine released);
        NotImplementedError as for ``add_node``."""
        self._membership(node, "leave").remove(node)
        self._changed(node, None)

    def lost(self, loss: Loss) -> None:
        """A host was lost (its watchdog's stream ended, or its provider took it back): it
        leaves the pool (its machine released), then the script holding the pool, if
        any, is told, and its autoscaler replaces it (``Lost``)."""
        try:
            self.remove_node(loss.node)
        except Exception as exc:  # noqa: BLE001 - logged; the script is told all the same
            _say(f"node {loss.node} could not be removed: {type(exc).__name__}: {exc}")
        self._forwarder.lost(loss)

    def _membership(self, node: int, what: str) -> Membership:
        membership = self.cluster.membership
        if membership is None:
            raise NotImplementedError(
                f"node {node} cannot {what} this kept pool: it was taken over from a pool daemon that died and "
                "keeps its size until it ends"
            )
        return membership

    def _changed(self, node: int, joined: tuple[NodeHandle, InstanceInfo] | None) -> None:
        """Rank ``node`` is ``joined`` from now on (None: it left); the daemon is told."""
        with self._members:
            cluster = self.cluster
            nodes, infos = with_member(cluster.nodes, cluster.infos, node, joined)
            self._cluster = structs.replace(cluster, nodes=nodes, infos=infos)
        self._tell_members()

    def _check_hosts(self) -> None:
        """Until the pool closes, every ``CHECK_EVERY`` seconds, the hosts its provider
        took back (a spot machine reclaimed: ``Membership.check``) leave it as a lost one
        does (``lost``); a thread's life."""
        while not self._closing.wait(CHECK_EVERY):
            membership = self.cluster.membership
            if membership is None:
                return
            try:
                losses = membership.check()
            except Exception as exc:  # noqa: BLE001 - asked again next time
                _say(f"could not check the hosts: {type(exc).__name__}: {exc}")
                continue
            for loss in losses:
                self.lost(loss)

    async def _serve(self, session: int, secret: bytes, client: str, connection: socket.socket) -> None:
        """Serve relay session ``session`` on ``connection`` (its client proves ``secret``);
        the daemon is told when it ends."""
        served = False
        try:
            reader, writer = await asyncio.open_unix_connection(sock=connection)
            self._sessions[session] = writer
            server = RelayServer(secret, lambda sink: self._backend(client, sink), observed=self._observed)
            try:
                await server.handle(reader, writer)
            finally:
                self._sessions.pop(session, None)
                served = server.finished.is_set()
        except Exception as exc:  # noqa: BLE001 - logged; the session ends unserved
            _say(f"session {session} failed: {type(exc).__name__}: {exc}")
            connection.close()
        finally:
            self._tell(messages.SessionEnded(session, served))

    def _backend(self, client: str, sink: Sink) -> RelayBackend:
        """What serves the script ``client``: the pool through its transport, its events
        to ``sink`` and to the daemon, its metrics sampled while a page follows it too."""
        transport = cast(RelayTransport, self.cluster.transport)  # a remote pool's (ssh.launch)
        return Watched(KeptRemoteBackend(transport, self._forwarder, Teed(sink, self._channel), self), self._following)

    def _observed(self, batch: bytes) -> None:
        self._tell(messages.Observed(batch))

    def _tell(self, message: messages.Message) -> None:
        """Send the daemon ``message``; nothing when it is gone (``run`` finds out)."""
        with contextlib.suppress(OSError):
            self._channel.send(message)

    def _close(self) -> None:
        """Tear the pool down: its sessions, its transport, its collections, its nodes;
        ``Closed`` when all is confirmed gone, else ``Refusal`` saying what is not."""
        self._closing.set()

        async def end_sessions() -> None:
            for writer in list(self._sessions.values()):
                writer.close()

        with contextlib.suppress(Exception):
            self._loop.run(end_sessions(), CLOSE_SESSIONS_WAIT)
        cluster = self.cluster
        try:
            try:
                cluster.transport.close()
            finally:
                cluster.end()
        except Exception as exc:  # noqa: BLE001 - the daemon is told, and tells who ended the pool
            self._tell(messages.Refusal(f"{type(exc).__name__}: {exc}"))
            return
        finally:
            self._loop.stop()
        self._tell(messages.Closed())


class Following:
    """Whether a page of the daemon's dashboard follows the pool, as the daemon says
    (``Metrics``): the ``Followed`` of ``dashboard_feed.Watched``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._on = False
        self._listeners: list[Callable[[bool], None]] = []

    @property
    def watched(self) -> bool:
        with self._lock:
            return self._on

    def on_watch(self, listener: Callable[[bool], None]) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def forget() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return forget

    def set(self, on: bool) -> None:
        with self._lock:
            changed, self._on = self._on != on, on
            listeners = list(self._listeners)
        if changed:
            for listener in listeners:
                listener(on)


class Teed:
    """A session's sink, whose events, reports and losses go to the daemon too (for the
    pool's log and dashboard)."""

    def __init__(self, sink: Sink, channel: HostChannel) -> None:
        self._sink = sink
        self._channel = channel

    def events(self, node: int, batch: bytes) -> None:
        self._sink.events(node, batch)
        self._tell(messages.Events(node, batch))

    def report(self, message: str) -> None:
        self._sink.report(message)
        self._tell(messages.Report(message))

    def lost(self, node: int, reason: str, preempted: bool) -> None:
        self._sink.lost(node, reason, preempted)
        self._tell(messages.Lost(node, reason, preempted))

    def _tell(self, message: messages.Message) -> None:
        with contextlib.suppress(OSError):  # the daemon is gone; the script still got it
            self._channel.send(message)


def _say(text: str) -> None:
    """A line for the daemon's log (this process's stdout), naming this process."""
    with contextlib.suppress(OSError):
        print(f"pool host {os.getpid()}: {text}", flush=True)


def main(argv: list[str]) -> None:
    """Hold the pool of the daemon at the other end of the descriptor ``argv[1]``."""
    descriptor = int(argv[1])
    os.set_inheritable(descriptor, False)  # a process the provider starts must not hold the daemon's channel
    channel = HostChannel(socket.socket(fileno=descriptor))
    code = PoolHost(channel).run()
    if code is None:  # the daemon died: leave the pool up for its successor, as it did
        with contextlib.suppress(OSError):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(0)
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv)
