"""One kept pool in the pool daemon (``daemon.kept_pools`` keeps them): what every kept
pool has (``KeptPool``: its nodes, its relay's socket, who holds it), and the local kind
(``LocalKeptPool``), whose agents are detached actors of the daemon's Ray instance,
which the daemon's relay reaches directly (``RayAgentsBackend``). The remote kind,
whose nodes are SSH hosts or cloud machines held by a process of their own, is
``daemon.remote_kept_pool.RemoteKeptPool``; the daemon tells the two apart by type.
"""

from __future__ import annotations

import asyncio
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from skyward.core.instance import InstanceInfo
from skyward.daemon import dashboard_feed
from skyward.daemon.pool_log import PoolLog
from skyward.engine.death import Death, cause_of_death
from skyward.engine.membership import with_member
from skyward.engine.relay_server import RelayBackend, Sink
from skyward.model.nodes import NodeHandle
from skyward.observe.dashboard.board import Board
from skyward.providers import registry
from skyward.providers.base import LaunchedCluster
from skyward.providers.local.launch import agent_lane
from skyward.providers.ray.agents import AgentMembership
from skyward.providers.ssh.head_relay import RayAgentsBackend

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent


@dataclass(eq=False)
class KeptPool(ABC):
    """What every kept pool has: its nodes, its relay's socket and who holds it. How it
    is served and torn down is the subclasses'."""

    name: str
    fingerprint: str
    keep_alive: float
    pool_id: str
    nodes: tuple[NodeHandle, ...]
    infos: tuple[InstanceInfo, ...]
    socket: Path
    holder: int = 0
    """The pid of the client holding it (0: nobody)."""
    secret: bytes = b""
    """What the holder proves at the relay."""
    hold_deadline: float = 0.0
    session: asyncio.StreamWriter | int | None = None
    """The relay session being served: its stream here, or its number in the pool's host
    process (a remote pool's); None while none is."""
    idle_since: float = field(default_factory=time.monotonic)
    opened: float = field(default_factory=time.time)
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
    def handover(self) -> bytes:
        """What a successor daemon takes it over with (``ssh.handover``); empty when it
        needs none (a local pool rejoins its agents) or cannot be."""

    @abstractmethod
    def tear_down(self) -> None:
        """Stop everything it holds (after its relay stopped listening); raises what
        could not be confirmed gone."""

    def idle_for(self, now: float) -> float:
        """Seconds since its last client left (0 while held)."""
        return 0.0 if self.holder else now - self.idle_since

    def _renew(self, nodes: tuple[NodeHandle, ...], infos: tuple[InstanceInfo, ...]) -> None:
        """Its nodes are ``nodes`` (``infos`` theirs) from now on, with ``members_lock``
        held: the dashboard is told who joined and who left, the registry the nodes."""
        before = {info.node: handle for handle, info in zip(self.nodes, self.infos)}
        after = {info.node: handle for handle, info in zip(nodes, infos)}
        for rank in sorted(before):
            if rank not in after or after[rank].id != before[rank].id:
                dashboard_feed.left(self.board, rank, before[rank].id)
        for rank in sorted(after):
            if rank not in before or after[rank].id != before[rank].id:
                dashboard_feed.joined(self.board, self.board.view.provider, self.priced, rank, after[rank])
        self.nodes, self.infos = nodes, infos
        # sky ssh and sky ls read the nodes from the registry: a replaced node's login is the new one's
        registry.renew_nodes(self.pool_id, [registry.NodeRecord.of(handle) for handle in nodes])


@dataclass(eq=False, kw_only=True)
class LocalKeptPool(KeptPool):
    """A kept pool of local agents on the daemon's Ray: its relay serves their actors and
    lanes (it is the ``RelayedAgents`` of ``RayAgentsBackend``), on the daemon's loop."""

    cluster: LaunchedCluster
    """As ``local.launch.start`` or ``rejoin`` gave it (its nodes as they were then)."""
    notes: str
    """Where its agents leave post-mortem notes ("": nowhere)."""
    agents: dict[int, ActorHandle[NodeAgent]] = field(default_factory=dict)
    lanes: dict[int, str] = field(default_factory=dict)
    lane_secret: bytes = b""
    ends_with_client: bool = False
    server: asyncio.AbstractServer | None = None

    @property
    def membership(self) -> AgentMembership:
        """Places its agents as its first ones were placed (``KeptPools`` opens a local
        pool only on a cluster of agents)."""
        membership = self.cluster.membership
        if not isinstance(membership, AgentMembership):
            raise TypeError(f"a local pool's cluster has its agents' membership, not {membership!r}")
        return membership

    def backend(self, client: str, sink: Sink) -> RelayBackend:
        """The relay backend serving it to ``client``, its events to ``sink``."""
        return RayAgentsBackend(self, client, sink)

    def handover(self) -> bytes:
        return b""

    def tear_down(self) -> None:
        try:
            self.cluster.transport.close()
        finally:
            self.cluster.end()

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
        if path := agent_lane(self.pool_id, node):
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

    def _members(self, node: int, joined: tuple[NodeHandle, InstanceInfo] | None) -> None:
        """Rank ``node`` is ``joined`` from now on (None: it left); the daemon is told."""
        with self.members_lock:
            self._renew(*with_member(self.nodes, self.infos, node, joined))
        self.resized()
