"""``AgentMembership``: adding and removing nodes of a cluster whose nodes are agents on
a Ray this client drives (``sky.Local()``: agents on this machine; ``sky.Ray``: agents
pinned to nodes of the user's cluster).

A node joins when its agent answers and is attached to the cluster's ``RayTransport``;
it leaves when the transport forgets it and its agent is killed. An agent that dies is
restarted in place by Ray, so a dead agent is not a lost node here; ``check`` asks the
provider (``sky.Ray``: is the agent's Ray node still alive?).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from msgspec import Struct, field

from skyward.engine.membership import NO_FLOOR, Floor, Joined, Loss
from skyward.engine.transports.ray_actors import RayAgent, RayTransport
from skyward.model.nodes import NodeHandle
from skyward.node.agent import AgentSetup, start_agents, stop_agents, wait_ready

if TYPE_CHECKING:
    from ray.actor import ActorHandle

    from skyward.node.agent import NodeAgent


class Placement(Struct, frozen=True):
    """Where and how rank ``setup.info.node``'s agent starts: its setup, the Ray actor
    options that pin it (``options``), its lane path ("" for none) and its handle."""

    setup: AgentSetup
    handle: NodeHandle
    options: dict[str, object] = field(default_factory=dict)
    lane: str = ""


class AgentMembership:
    """See the module. ``place(rank)`` says where a new agent goes (raising when there
    is no room); ``lost(agents)`` lists the ranks whose node the provider knows is gone;
    ``released(rank)`` is told when a rank's agent was stopped."""

    def __init__(
        self,
        transport: RayTransport,
        agents: dict[int, ActorHandle[NodeAgent]],
        place: Callable[[int], Placement],
        ready_timeout: float,
        where: str,
        capacity: Callable[[], int | None] = lambda: None,
        lost: Callable[[dict[int, ActorHandle[NodeAgent]]], list[Loss]] = lambda agents: [],
        released: Callable[[int], None] = lambda node: None,
    ) -> None:
        self.agents = agents
        self._transport = transport
        self._place = place
        self._ready_timeout = ready_timeout
        self._where = where
        self._capacity = capacity
        self._lost = lost
        self._released = released
        self._lock = threading.Lock()
        self._closed = False

    def capacity(self) -> int | None:
        return self._capacity()

    def add(self, node: int) -> Joined:
        placement = self._place(node)
        agents = start_agents([placement.setup], [placement.options])
        try:
            wait_ready(agents, self._ready_timeout, self._where, "raise Options.provision_timeout")
        except BaseException:
            stop_agents(agents)
            raise
        with self._lock:
            if self._closed:
                stop_agents(agents)
                raise RuntimeError(f"node {node} started as the pool closed; it was stopped again")
            self.agents[node] = agents[0]
        self._transport.attach(node, RayAgent(agents[0], placement.lane))
        return Joined(placement.handle, placement.setup.info)

    def lowest(self) -> Floor:
        """None: every agent, node 0's included, can leave."""
        return NO_FLOOR

    def remove(self, node: int) -> None:
        self._transport.detach(node, f"node {node} was removed from the pool")
        with self._lock:
            agent = self.agents.pop(node, None)
        if agent is not None:
            stop_agents([agent])
        self._released(node)

    def watch(self, lost: Callable[[Loss], None]) -> None:
        """Nothing to watch: Ray restarts a dead agent in place; ``check`` asks."""

    def check(self) -> list[Loss]:
        with self._lock:
            agents = dict(self.agents)
        return self._lost(agents)

    def close(self) -> list[ActorHandle[NodeAgent]]:
        """The pool is closing: no node joins any more. Returns every agent to stop."""
        with self._lock:
            self._closed = True
            agents, self.agents = list(self.agents.values()), {}
        return agents
