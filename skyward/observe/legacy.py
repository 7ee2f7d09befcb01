"""The older reference's events, mapped from the current ones so a callback written for
it still receives them: ``InfraCreating``, ``InfraCreated``, ``InstanceLaunching``,
``BootstrapStarting``, ``BootstrapProgress``, ``BootstrapCompleted``, ``Metrics``,
``LogLine``, ``InstanceStopping`` and ``PoolStopping`` (``InstanceProvisioned``,
``CostUpdate``, ``CostFinal`` and ``Error`` are the same classes in both).

They are delivered to handlers subscribed to one of these classes (``pool.on(sky.LogLine,
...)``), to the older constructor's ``ComputePool(on_event=...)`` and to
``sky.use_callback`` callbacks; a handler of ``sky.Event`` on the current API does not
get them twice over. ``InstanceStopping`` and ``PoolStopping`` arrive when the node or the
pool is down (the current events they map from); ``InfraCreated.region`` is "" (the
pool's events do not carry it), and so is ``BootstrapProgress.instance_id`` for a phase
of the whole pool that ran before the nodes were known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skyward.observe.events import (
    BootstrapPhase,
    ClusterDestroyed,
    ClusterProvisioned,
    ClusterRequested,
    Event,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstanceProvisioned,
    Log,
    Metric,
    _now,
)


@dataclass(frozen=True, slots=True)
class LegacyEvent(Event):
    """Base of the older reference's events."""


@dataclass(frozen=True, slots=True)
class InfraCreating(LegacyEvent):
    """The pool asked its provider for machines."""


@dataclass(frozen=True, slots=True)
class InfraCreated(LegacyEvent):
    """The provider has the machines."""

    region: str = ""


@dataclass(frozen=True, slots=True)
class InstanceLaunching(LegacyEvent):
    """``count`` machines are being started."""

    count: int
    instance_type: str
    provider: str


@dataclass(frozen=True, slots=True)
class BootstrapStarting(LegacyEvent):
    instance_id: str


@dataclass(frozen=True, slots=True)
class BootstrapProgress(LegacyEvent):
    instance_id: str
    step: str


@dataclass(frozen=True, slots=True)
class BootstrapCompleted(LegacyEvent):
    instance_id: str


@dataclass(frozen=True, slots=True)
class Metrics(LegacyEvent):
    """One node's latest samples, sent with each CPU sample (None: not sampled)."""

    instance_id: str
    node: int
    cpu_percent: float
    memory_percent: float
    memory_used_mb: float
    memory_total_mb: float
    gpu_utilization: float | None = None
    gpu_memory_used_mb: float | None = None
    gpu_memory_total_mb: float | None = None
    gpu_temperature: float | None = None


@dataclass(frozen=True, slots=True)
class LogLine(LegacyEvent):
    node: int
    instance_id: str
    line: str
    timestamp: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True)
class InstanceStopping(LegacyEvent):
    instance_id: str


@dataclass(frozen=True, slots=True)
class PoolStopping(LegacyEvent):
    """The pool is going away."""


class Translator:
    """Turns one pool's current events into the older ones (remembers each node's
    instance id and latest samples)."""

    def __init__(self) -> None:
        self._ids: dict[int, str] = {}
        self._samples: dict[int, dict[str, float]] = {}

    def translate(self, event: Event) -> list[LegacyEvent]:
        if isinstance(event, ClusterRequested):
            return [InfraCreating(), InstanceLaunching(event.nodes, "", event.provider)]
        if isinstance(event, ClusterProvisioned):
            return [InfraCreated("")]
        if isinstance(event, InstanceProvisioned):
            self._ids[event.node] = event.instance_id
            return [BootstrapStarting(event.instance_id)]
        if isinstance(event, BootstrapPhase):
            if event.node is None:  # a phase of the whole pool
                return [BootstrapProgress(self._ids.get(node, ""), event.phase) for node in sorted(self._ids) or [-1]]
            return [BootstrapProgress(self._id(event.node), event.phase)]
        if isinstance(event, InstanceBootstrapped):
            return [BootstrapCompleted(event.instance_id)]
        if isinstance(event, Log):
            return [LogLine(event.node, self._id(event.node), event.line, event.timestamp)]
        if isinstance(event, Metric):
            return self._metric(event)
        if isinstance(event, InstanceDestroyed):
            return [InstanceStopping(event.instance_id)]
        if isinstance(event, ClusterDestroyed):
            return [PoolStopping()]
        return []

    def _id(self, node: int) -> str:
        return self._ids.get(node, f"node-{node}")

    def _metric(self, event: Metric) -> list[LegacyEvent]:
        samples = self._samples.setdefault(event.node, {})
        samples[event.name] = event.value
        if event.name != "cpu":
            return []
        total = samples.get("gpu_memory_total")
        used = samples.get("gpu_memory")
        return [Metrics(
            self._id(event.node), event.node, samples["cpu"], samples.get("memory", 0.0),
            samples.get("memory_used", 0.0), samples.get("memory_total", 0.0), samples.get("gpu"),
            used * total / 100 if used is not None and total is not None else None, total, samples.get("gpu_temp"),
        )]
