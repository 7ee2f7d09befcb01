"""What a provider hands back to the pool: a running cluster of node agents."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skyward.runtime import InstanceInfo


@dataclass
class LaunchedCluster:
    """Agents (one per node, in node order), the nodes' ``InstanceInfo`` and how to take
    it all down."""

    agents: list[Any]
    infos: list[InstanceInfo]
    teardown: Callable[[], None]
    hourly_rate: float = 0.0
    extras: dict[str, Any] = field(default_factory=dict)
