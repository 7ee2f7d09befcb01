"""What the engine asks of a provider to grow and shrink a running pool: a
``Membership`` adds and removes nodes and reports the ones lost (``Joined``, ``Loss``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from msgspec import Struct

from skyward.core.instance import InstanceInfo
from skyward.model.nodes import NodeHandle


class Floor(Struct, frozen=True):
    """The fewest nodes a running cluster can shrink to, and ``why`` not fewer (with what
    to do instead; empty when ``nodes`` is 0)."""

    nodes: int
    why: str = ""


NO_FLOOR = Floor(0)
"""Every node, node 0's included, can leave."""


class Joined(Struct, frozen=True):
    """A node a provider added to a running cluster: its handle and its ``InstanceInfo``
    (whose ``peers`` name at least the node itself; the engine fills in the others)."""

    handle: NodeHandle
    info: InstanceInfo


class Loss(Struct, frozen=True):
    """A node its provider found gone: ``preempted`` when the provider took it back (a
    spot interruption), else it failed (its machine or host vanished)."""

    node: int
    reason: str
    preempted: bool = False


class Membership(Protocol):
    """How a running cluster grows and shrinks, each provider its own way (local: more
    agents on the same Ray; SSH: the hosts beyond those in use; clouds: more machines
    through the same remote path; ``sky.Ray``: more nodes of the cluster). The engine
    calls ``add`` and ``remove`` from worker threads, one rank at a time per call,
    several at once."""

    def capacity(self) -> int | None:
        """The most nodes the cluster can have at once (None: no limit known)."""

    def lowest(self) -> Floor:
        """The fewest nodes the cluster can shrink to while it runs (1 where node 0 holds
        what the others need and never leaves), and why."""

    def add(self, node: int) -> Joined:
        """Start a node at rank ``node`` with its agent, attach the agent to the
        cluster's transport and return once it answers. Raises (naming the node and the
        cause) when it cannot; whatever was started for it is stopped again."""

    def remove(self, node: int) -> None:
        """Detach rank ``node`` from the transport, stop its agent and release its
        machine (a node already gone is fine). Raises ``TeardownError`` when something
        could not be confirmed gone."""

    def watch(self, lost: Callable[[Loss], None]) -> None:
        """Report nodes found gone to ``lost`` as soon as the provider notices (from
        any thread); ``check`` finds the rest."""

    def check(self) -> list[Loss]:
        """Ask the provider which nodes are gone (every reconcile tick; bounded)."""


def with_member(
    nodes: tuple[NodeHandle, ...], infos: tuple[InstanceInfo, ...], rank: int,
    joined: tuple[NodeHandle, InstanceInfo] | None,
) -> tuple[tuple[NodeHandle, ...], tuple[InstanceInfo, ...]]:
    """A pool's ``nodes`` (``infos`` theirs) with rank ``rank`` as ``joined`` from now on
    (None: without it), in rank order."""
    members = {info.node: (handle, info) for handle, info in zip(nodes, infos)}
    if joined is None:
        members.pop(rank, None)
    else:
        members[rank] = joined
    ranks = sorted(members)
    return tuple(members[r][0] for r in ranks), tuple(members[r][1] for r in ranks)
