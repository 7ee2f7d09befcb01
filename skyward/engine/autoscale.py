"""The autoscaling policy: how many nodes an elastic pool wants, from the work waiting
and the nodes sitting idle. Pure: the reconciler feeds it a ``Load`` and acts on the
target it returns.

- **Up**: requests wait for a slot on any node (``pressure``) beyond what nodes already
  joining will take: the target grows by enough nodes to serve them, up to the
  ceiling.
- **Down**: the highest-ranked node has been idle for ``idle_timeout`` seconds and
  nothing waits: it is released, then the next highest, down to the floor (ranks stay
  dense, so a busy high node holds the lower idle ones).
- **Cooldown**: no scaling down within ``cooldown`` seconds of scaling up, and no
  scaling up within ``cooldown`` seconds of scaling down, so a steady load does not
  make nodes come and go; a pool with no node at all wakes at once.
"""

from __future__ import annotations

import math

from msgspec import Struct

from skyward.model.spec import Nodes


class Load(Struct, frozen=True):
    """What the pool looks like now: ``members`` nodes (ready or being replaced),
    ``joining`` more on their way, ``pressure`` requests waiting for any node,
    ``slots`` per node, and when each ready node became idle (None: busy), by rank."""

    now: float
    members: int
    joining: int
    pressure: int
    slots: int
    idle_since: dict[int, float | None]


class Decision(Struct, frozen=True):
    """The new target and, when it changed, why."""

    target: int
    reason: str | None = None


class Autoscaler:
    """Keeps the target node count within the floor and ceiling of ``nodes``."""

    def __init__(self, nodes: Nodes, cooldown: float, idle_timeout: float) -> None:
        self.nodes = nodes
        self.target = nodes.desired
        self._cooldown = cooldown
        self._idle_timeout = idle_timeout
        self._last_up = -math.inf
        self._last_down = -math.inf

    def resize(self, nodes: Nodes) -> None:
        """New bounds (``pool.resize``): the target becomes ``nodes.desired``."""
        self.nodes = nodes
        self.target = nodes.desired

    def decide(self, load: Load) -> Decision:
        """The target for ``load`` (the same one when nothing calls for a change)."""
        floor, ceiling = self.nodes.floor, self.nodes.ceiling
        if load.pressure > 0:
            return self._grow(load, ceiling)
        return self._shrink(load, floor)

    def _grow(self, load: Load, ceiling: int) -> Decision:
        waking = load.members + load.joining == 0  # no node at all: waiting work wakes the pool
        if self.target >= ceiling or (load.now - self._last_down < self._cooldown and not waking):
            return Decision(self.target)
        served_soon = load.joining * load.slots
        extra = math.ceil(max(0, load.pressure - served_soon) / load.slots)
        wanted = min(ceiling, max(self.target, load.members + load.joining + extra))
        if wanted <= self.target:
            return Decision(self.target)
        self.target, self._last_up = wanted, load.now
        return Decision(wanted, f"{'waking: ' if waking else ''}{load.pressure} tasks waiting")

    def settle(self) -> None:
        """A pool with no node could not start one: the target falls back to the floor,
        so nothing starts until work waits again."""
        self.target = self.nodes.floor

    def _shrink(self, load: Load, floor: int) -> Decision:
        if self.target <= floor or load.now - self._last_up < self._cooldown or load.joining:
            return Decision(self.target)
        wanted = self.target
        for node in sorted(load.idle_since, reverse=True):
            if node >= wanted:
                continue  # above the target already: leaving
            if node != wanted - 1 or wanted <= floor:
                break
            since = load.idle_since[node]
            if since is None or load.now - since < self._idle_timeout:
                break
            wanted = node
        if wanted >= self.target:
            return Decision(self.target)
        released = self.target - wanted
        self.target, self._last_down = wanted, load.now
        what = "1 node" if released == 1 else f"{released} nodes"
        return Decision(wanted, f"{what} idle for {self._idle_timeout:g}s")
