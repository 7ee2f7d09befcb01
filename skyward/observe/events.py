"""Events a pool emits, as frozen dataclasses. Subscribe with ``pool.on(Type, handler)``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def _now() -> float:
    return time.time()


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every skyward event."""


@dataclass(frozen=True, slots=True)
class ClusterRequested(Event):
    """A pool asked its provider for nodes (``kept``: the pool daemon, which keeps the
    pool, for an idle kept pool or a new one)."""

    pool: str
    provider: str
    nodes: int
    timestamp: float = field(default_factory=_now)
    kept: bool = False


@dataclass(frozen=True, slots=True)
class ClusterProvisioned(Event):
    """The provider has the machines (for Local: the engine is running). ``kept``: "" for
    a pool of its own, "kept" for one the pool daemon opened and keeps, "adopted" for a
    kept pool taken up again."""

    pool: str
    nodes: int
    duration: float
    timestamp: float = field(default_factory=_now)
    kept: str = ""


@dataclass(frozen=True, slots=True)
class BootstrapPhase(Event):
    """One phase of bringing nodes up finished (``node`` None: the whole cluster).

    Local pools report "engine" (the Ray instance) and "agents" (node agents answering);
    remote providers add their own phases (apt, pip, skyward, ...). A pool with
    ``Spec.volumes`` reports "volumes" (mounting them: once for a local pool, per node
    for a remote one)."""

    phase: str
    duration: float
    node: int | None = None
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class ClusterReady(Event):
    """Every node's agent answered; work can start."""

    pool: str
    nodes: int
    duration: float
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class ClusterDestroyed(Event):
    """The pool is torn down; ``kept``: this script let go of a kept pool, which the pool
    daemon keeps."""

    pool: str
    duration: float
    timestamp: float = field(default_factory=_now)
    kept: bool = False


@dataclass(frozen=True, slots=True)
class InstanceProvisioned(Event):
    """A node exists: which provider made it, what it is and what it costs per hour
    (``price_spot`` for a spot node, ``price_on_demand`` what it costs, or would, on
    demand; None where the provider has no prices)."""

    node: int
    instance_id: str
    ip: str | None = None
    spot: bool = False
    provider: str = ""
    instance_type: str = ""
    price_on_demand: float | None = None
    price_spot: float | None = None
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class InstanceBootstrapped(Event):
    """A node's agent is running and answered."""

    node: int
    instance_id: str
    duration: float
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class InstancePreempted(Event):
    """A node was reclaimed by its provider (a spot interruption) or its machine
    vanished; a replacement takes its rank when the pool still wants it."""

    node: int
    instance_id: str
    reason: str = ""
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class InstanceReplaced(Event):
    """A node's agent (or its whole machine) was replaced: it died, was lost, or failed
    its health checks; the new one has the same rank."""

    node: int
    reason: str
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class InstanceDestroyed(Event):
    """A node was stopped."""

    node: int
    instance_id: str
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class TaskStarted(Event):
    """A task was sent to a node; a map chunk is one task of ``items`` items (None: not
    reported by the dispatcher)."""

    task_id: str
    name: str
    node: int
    items: int | None = None
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class TaskCompleted(Event):
    """A task finished; ``error`` is None on success. ``items`` as in ``TaskStarted``;
    ``cancelled``: it did not fail but was stopped (Ctrl-C, a cancelled future, the pool
    closing), ``error`` saying how."""

    task_id: str
    name: str
    node: int
    duration: float
    error: str | None = None
    items: int | None = None
    cancelled: bool = False
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class Progress(Event):
    """How far a ``pool.map``, a broadcast or a gather has come: ``done`` of ``total``
    items, ``failed`` of them with an error; the last one of a batch has ``finished``,
    and ``cancelled`` when the batch was stopped (Ctrl-C) rather than failed."""

    batch_id: str
    kind: str
    name: str
    done: int
    total: int
    failed: int = 0
    finished: bool = False
    cancelled: bool = False
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class Log(Event):
    """One line a task printed."""

    node: int
    line: str
    stream: str = "stdout"
    task_id: str | None = None
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class Metric(Event):
    """One sampled value on a node (see ``sky.metrics`` for names and units)."""

    node: int
    name: str
    value: float
    unit: str = ""
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class Error(Event):
    """Something went wrong outside a task's own code."""

    message: str
    node: int | None = None
    instance_id: str | None = None
    """The machine it concerns, where one does (the older reference's field)."""
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class CostUpdate(Event):
    """Running cost so far."""

    elapsed_seconds: float
    accumulated_cost: float
    hourly_rate: float
    spot_count: int = 0
    ondemand_count: int = 0
    savings_vs_ondemand: float = 0.0
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class CostFinal(Event):
    """Total cost of the pool, emitted once at teardown."""

    total_cost: float
    total_seconds: float
    hourly_rate: float
    spot_count: int = 0
    ondemand_count: int = 0
    savings_vs_ondemand: float = 0.0
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class BroadcastStarted(Event):
    """A broadcast went out to ``nodes``: the nodes present when it started (a node that
    joins later does not run it)."""

    task_id: str
    name: str
    nodes: tuple[int, ...]
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class ClusterResized(Event):
    """An elastic pool changed: ``nodes`` are ready now and ``target`` are wanted;
    ``reason`` says why (tasks waiting, idle nodes, ``pool.resize``, a node lost)."""

    pool: str
    nodes: int
    target: int
    reason: str
    timestamp: float = field(default_factory=_now)
