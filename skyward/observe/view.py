"""``PoolView``: what the consoles show about a pool, kept up to date from its events."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from msgspec import Struct, field

from skyward.observe import events
from skyward.observe.describe import cost_line, plural

KEPT_BATCHES = 3


class NodeState(Struct):
    """One node as the console shows it."""

    node: int
    state: str = "starting"
    metrics: dict[str, float] = field(default_factory=dict)
    running: dict[str, str] = field(default_factory=dict)
    done: int = 0
    failed: int = 0

    @property
    def status(self) -> str:
        """starting, idle, busy, replaced, preempted or stopped."""
        if self.state == "ready":
            return "busy" if self.running else "idle"
        return self.state


TROUBLE = ("preempted", "replaced")
"""The states of a node in trouble (a summary shows it before the others)."""


def shown_nodes(nodes: list[NodeState], limit: int) -> list[NodeState]:
    """The nodes a summary of a big pool shows, by rank: all of them up to ``limit``;
    past it, those in trouble (a failed task, preempted, replaced) first, then the
    busiest (running tasks, then CPU)."""
    if len(nodes) <= limit:
        return sorted(nodes, key=lambda node: node.node)

    def first(node: NodeState) -> tuple[int, int, float, int]:
        trouble = 0 if node.failed or node.status in TROUBLE else 1
        return trouble, -len(node.running), -node.metrics.get("cpu", 0.0), node.node

    return sorted(sorted(nodes, key=first)[:limit], key=lambda node: node.node)


def counted_states(nodes: list[NodeState]) -> str:
    """``nodes`` counted by status, the most common first ("970 busy · 25 idle · 5 replaced")."""
    counts = collections.Counter(node.status for node in nodes)
    return " · ".join(f"{count} {status}" for status, count in counts.most_common())


class PoolView:
    """Thread-safe: ``apply`` from any thread; read the fields while holding ``lock``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.pool = ""
        self.provider = ""
        self.wanted = 0
        self.status = "new"
        self.started_at = time.time()
        self.wall: float | None = None
        self.nodes: dict[int, NodeState] = {}
        self.batches: dict[str, events.Progress] = {}
        self.tasks = 0
        self.failures = 0
        self.cancelled = 0
        self.mapped = 0
        self.cost: events.CostUpdate | events.CostFinal | None = None

    def apply(self, event: object) -> None:
        """Fold one event into the view (other objects are ignored)."""
        with self.lock:
            fold = _FOLDS.get(type(event))
            if fold is not None:
                fold.fold(self, event)

    def node(self, index: int) -> NodeState:
        """The node's state, created on first mention."""
        if index not in self.nodes:
            self.nodes[index] = NodeState(index)
        return self.nodes[index]

    def elapsed(self) -> float:
        """Seconds since the pool was requested (its wall time once stopped)."""
        return self.wall if self.wall is not None else time.time() - self.started_at

    def summary(self) -> str:
        """``pool p: 4 nodes, 12 tasks (1 failed), 10000 items mapped, wall 8.3s, cost ...``."""
        with self.lock:
            tasks = plural(self.tasks, "task")
            parts = [plural(len(self.nodes) or self.wanted, "node")]
            counts = [f"{self.failures} failed"] * bool(self.failures) + [f"{self.cancelled} cancelled"] * bool(self.cancelled)
            parts.append(f"{tasks} ({', '.join(counts)})" if counts else tasks)
            if self.mapped:
                parts.append(f"{self.mapped} items mapped")
            parts.append(f"wall {self.elapsed():.1f}s")
            if isinstance(self.cost, events.CostFinal):
                parts.append(f"cost {cost_line(self.cost, self.provider)}")
            return f"pool {self.pool}: " + ", ".join(parts)

    def _requested(self, event: events.ClusterRequested) -> None:
        self.pool, self.provider, self.wanted = event.pool, event.provider, event.nodes
        self.status, self.started_at = "starting", event.timestamp

    def _ready(self, event: events.ClusterReady) -> None:
        self.status = "ready"
        for state in self.nodes.values():
            if state.state == "starting":
                state.state = "ready"

    def _resized(self, event: events.ClusterResized) -> None:
        self.wanted = event.target

    def _destroyed(self, event: events.ClusterDestroyed) -> None:
        self.status, self.wall = "stopped", event.duration

    def _set_state(self, event: _NodeEvent, state: str) -> None:
        self.node(event.node).state = state

    def _started(self, event: events.TaskStarted) -> None:
        node = self.node(event.node)
        node.running[event.task_id] = event.name
        if node.state in ("replaced", "preempted"):
            node.state = "ready"

    def _completed(self, event: events.TaskCompleted) -> None:
        node = self.node(event.node)
        node.running.pop(event.task_id, None)
        self.tasks += 1
        node.done += 1
        if event.cancelled:
            self.cancelled += 1
        elif event.error is not None:
            self.failures += 1
            node.failed += 1

    def _metric(self, event: events.Metric) -> None:
        self.node(event.node).metrics[event.name] = event.value

    def _progress(self, event: events.Progress) -> None:
        self.batches.pop(event.batch_id, None)
        self.batches[event.batch_id] = event
        if event.finished and event.kind == "map":
            self.mapped += event.done
        finished = [key for key, batch in self.batches.items() if batch.finished]
        for key in finished[: max(0, len(self.batches) - KEPT_BATCHES)]:
            del self.batches[key]

    def _cost(self, event: events.CostUpdate | events.CostFinal) -> None:
        self.cost = event


_NodeEvent = (
    events.InstanceProvisioned | events.InstanceBootstrapped | events.InstancePreempted
    | events.InstanceReplaced | events.InstanceDestroyed
)
E = TypeVar("E", bound=events.Event)


class _Folding(Protocol):
    @property
    def kind(self) -> type[events.Event]: ...

    def fold(self, view: PoolView, event: object) -> None: ...


class _Fold(Generic[E]):
    """How the view takes in the events of class ``kind``."""

    __slots__ = ("_apply", "kind")

    def __init__(self, kind: type[E], apply: Callable[[PoolView, E], None]) -> None:
        self.kind = kind
        self._apply = apply

    def fold(self, view: PoolView, event: object) -> None:
        if isinstance(event, self.kind):
            self._apply(view, event)


_FOLDING = (
    _Fold(events.ClusterRequested, PoolView._requested),
    _Fold(events.ClusterReady, PoolView._ready),
    _Fold(events.ClusterDestroyed, PoolView._destroyed),
    _Fold(events.ClusterResized, PoolView._resized),
    _Fold(events.InstanceProvisioned, lambda view, e: view._set_state(e, "starting")),
    _Fold(events.InstanceBootstrapped, lambda view, e: view._set_state(e, "ready")),
    _Fold(events.InstancePreempted, lambda view, e: view._set_state(e, "preempted")),
    _Fold(events.InstanceReplaced, lambda view, e: view._set_state(e, "replaced")),
    _Fold(events.InstanceDestroyed, lambda view, e: view._set_state(e, "stopped")),
    _Fold(events.TaskStarted, PoolView._started),
    _Fold(events.TaskCompleted, PoolView._completed),
    _Fold(events.Metric, PoolView._metric),
    _Fold(events.Progress, PoolView._progress),
    _Fold(events.CostUpdate, PoolView._cost),
    _Fold(events.CostFinal, PoolView._cost),
)
_FOLDS: dict[type, _Folding] = {fold.kind: fold for fold in _FOLDING}
EVENTS: tuple[type, ...] = tuple(_FOLDS)
"""The events a ``PoolView`` takes in."""
