"""One kept pool in the pool daemon (``daemon.kept_pools`` keeps them): what every kept
pool has (``KeptPool``: its cluster, its relay's socket, who holds it), and the two
kinds, told apart by type. A ``LocalKeptPool``'s agents are detached actors of the
daemon's Ray instance, which the relay reaches directly (``RayAgentsBackend``); a
``RemoteKeptPool``'s nodes are SSH hosts or cloud machines, which the daemon reaches as
the pool's client through its stream to the head relay (``KeptRemoteBackend``).
"""

from __future__ import annotations

import contextlib
import pickle
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from skyward.core.instance import InstanceInfo
from skyward.daemon import dashboard_feed
from skyward.daemon.pool_log import PoolLog
from skyward.daemon.remote_backend import EventForwarder, KeptRemoteBackend
from skyward.engine.death import Death, cause_of_death
from skyward.engine.membership import Loss, Membership
from skyward.engine.relay_server import RelayBackend, Sink
from skyward.engine.transports.lane import lane_path
from skyward.engine.transports.relay import RelayTransport
from skyward.model.nodes import NodeHandle
from skyward.observe.dashboard.board import Board
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster
from skyward.providers.local.ray_instance import LocalRay
from skyward.providers.ray.agents import AgentMembership
from skyward.providers.ssh.head_relay import RayAgentsBackend

if TYPE_CHECKING:
    import asyncio

    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent


@dataclass(eq=False)
class KeptPool(ABC):
    """What every kept pool has: its cluster (started here), its relay's socket and who
    holds it. ``backend`` serves the script holding it; the subclasses say how."""

    name: str
    fingerprint: str
    keep_alive: float
    pool_id: str
    cluster: LaunchedCluster
    socket: Path
    holder: int = 0
    """The pid of the client holding it (0: nobody)."""
    secret: bytes = b""
    """What the holder proves at the relay."""
    hold_deadline: float = 0.0
    session: asyncio.StreamWriter | None = None
    idle_since: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.time)
    server: asyncio.AbstractServer | None = None
    log: PoolLog | None = None
    """Its own log (``daemon.pool_log``), among the pools' logs."""
    definition: bytes = b""
    """The pickled (Spec, Options) it was opened with."""
    resized: Callable[[], None] = lambda: None
    """Told when a node joined or left (the daemon writes down what it keeps)."""
    members_lock: threading.Lock = field(default_factory=threading.Lock)
    """Held while its nodes change (``_members``)."""
    board: Board = field(default_factory=Board)
    """What the daemon's dashboard shows of it (``daemon.dashboard_feed``)."""
    priced: bool = False
    """Its nodes cost what their handles say (its provider has prices)."""

    @abstractmethod
    def backend(self, client: str, sink: Sink) -> RelayBackend:
        """The relay backend serving it to ``client``, its events to ``sink``."""

    def idle_for(self, now: float) -> float:
        """Seconds since its last client left (0 while held)."""
        return 0.0 if self.holder else now - self.idle_since

    def _members(self, node: int, joined: tuple[NodeHandle, InstanceInfo] | None) -> None:
        """Rank ``node`` of the pool's nodes is ``joined`` from now on (None: it left); the
        daemon is told."""
        with self.members_lock:
            members = {info.node: (handle, info) for handle, info in zip(self.cluster.nodes, self.cluster.infos)}
            if joined is None:
                gone = members.pop(node, None)
                if gone is not None:
                    dashboard_feed.left(self.board, node, gone[0].id)
            else:
                members[node] = joined
                dashboard_feed.joined(self.board, self.board.view.provider, self.priced, node, joined[0])
            ranks = sorted(members)
            self.cluster = replace(
                self.cluster, nodes=tuple(members[r][0] for r in ranks), infos=tuple(members[r][1] for r in ranks),
            )
            # sky ssh and sky ls read the nodes from the registry: a replaced node's login is the new one's
            registry.renew_nodes(self.pool_id, [registry.NodeRecord.of(handle) for handle in self.cluster.nodes])
        self.resized()


@dataclass(eq=False, kw_only=True)
class LocalKeptPool(KeptPool):
    """A kept pool of local agents on the daemon's Ray: its relay serves their actors and
    lanes (it is the ``RelayedAgents`` of ``RayAgentsBackend``)."""

    notes: str
    """Where its agents leave post-mortem notes ("": nowhere)."""
    agents: dict[int, ActorHandle[NodeAgent]] = field(default_factory=dict)
    lanes: dict[int, str] = field(default_factory=dict)
    lane_secret: bytes = b""
    ends_with_client: bool = False

    @property
    def membership(self) -> AgentMembership:
        """Places its agents as its first ones were placed (``KeptPools`` opens a local
        pool only on a cluster of agents)."""
        membership = self.cluster.membership
        if not isinstance(membership, AgentMembership):
            raise TypeError(f"a local pool's cluster has its agents' membership, not {membership!r}")
        return membership

    def backend(self, client: str, sink: Sink) -> RelayBackend:
        return RayAgentsBackend(self, client, sink)

    def postmortem(self, node: int) -> Death | None:
        """Why node ``node``'s agent died, from the note it left."""
        return cause_of_death(self.notes, node) if self.notes else None

    def start_agent(self, node: int, serial: int, setup: bytes) -> ActorHandle[NodeAgent]:
        """Start node ``node``'s agent, placed as its first nodes were (the client's
        ``serial`` and ``setup`` are not used: the daemon places its nodes) and detached
        like them; returns it once it answers."""
        joined = self.membership.add(node)
        agent = self.membership.agents[node]
        self.agents[node] = agent
        if path := lane_path(LocalRay.temp_dir() or "", self.pool_id, node):
            self.lanes[node] = path
        self._members(node, (joined.handle, joined.info))
        return agent

    def stop_agent(self, node: int) -> None:
        """Stop node ``node``'s agent (the client's pool let it go). ValueError for node 0,
        whose agent serves the collections."""
        if node == 0:
            raise ValueError("node 0 of a kept pool serves its collections: it never leaves")
        self.membership.remove(node)
        self.agents.pop(node, None)
        self.lanes.pop(node, None)
        self._members(node, None)


@dataclass(eq=False, kw_only=True)
class RemoteKeptPool(KeptPool):
    """A kept pool of SSH hosts or cloud machines: the daemon is its client, through its
    transport to the head relay, whose events ``forwarder`` hands to the script holding it."""

    forwarder: EventForwarder
    placing: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    """Held while a node is added or removed (the client's environment: credentials,
    SSH agent)."""

    def backend(self, client: str, sink: Sink) -> RelayBackend:
        return KeptRemoteBackend(cast(RelayTransport, self.cluster.transport), self.forwarder, sink, self)

    def add_node(self, node: int) -> bytes:
        """Add node ``node`` as its membership places it (its provider's machines, under
        the environment of the client that opened it); its pickled ``(NodeHandle,
        InstanceInfo)``. NotImplementedError for a pool taken over from a daemon that
        died: its size is fixed."""
        membership = self._membership(node, "join")
        with self.members_lock:
            present = [(h, i) for h, i in zip(self.cluster.nodes, self.cluster.infos) if i.node == node]
        if present:  # the script asked again after giving up waiting: it has joined meanwhile
            return pickle.dumps(present[0])
        with self.placing():
            joined = membership.add(node)
        self._members(node, (joined.handle, joined.info))
        return pickle.dumps((joined.handle, joined.info))

    def remove_node(self, node: int) -> None:
        """Remove node ``node`` (stopped on its host, its machine released);
        NotImplementedError as for ``add_node``."""
        membership = self._membership(node, "leave")
        with self.placing():
            membership.remove(node)
        self._members(node, None)

    def lost(self, loss: Loss) -> None:
        """A host was lost (its watchdog's stream ended): it leaves the pool (its machine
        released), then the script holding the pool, if any, is told, and its autoscaler
        replaces it (``Lost``)."""
        try:
            self.remove_node(loss.node)
        except Exception as exc:  # noqa: BLE001 - logged; the script is told all the same
            print(f"pool daemon: node {loss.node} of {self.name} could not be removed: {type(exc).__name__}: {exc}",
                  flush=True)
        self.forwarder.lost(loss)

    def _membership(self, node: int, what: str) -> Membership:
        membership = self.cluster.membership
        if membership is None:
            raise NotImplementedError(
                f"node {node} cannot {what} the kept pool {self.name}: it was taken over from a pool daemon that "
                "died and keeps its size until it ends"
            )
        return membership
