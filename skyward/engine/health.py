"""``HealthTracker``: when each node's health check is due, and which nodes failed it
too often (``sky.HealthChecker``: ``failures`` failures in a row, checks starting
``warmup`` seconds after a node joined, one every ``interval`` seconds)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from skyward.core.health import HealthChecker


@dataclass
class _Record:
    due: float
    failures: int = 0
    running: bool = False


class HealthTracker:
    """Per node: the next check time and the failures in a row (used on the pool's loop)."""

    def __init__(self, checker: HealthChecker) -> None:
        self.checker = checker
        self._nodes: dict[int, _Record] = {}

    def joined(self, node: int, now: float) -> None:
        """Node ``node`` (or its replacement) joined: its first check is after the warmup."""
        self._nodes[node] = _Record(now + self.checker.warmup)

    def forget(self, node: int) -> None:
        """Node ``node`` left or is being replaced: no more checks of it."""
        self._nodes.pop(node, None)

    def next_due(self) -> float:
        """When the next check is due (``time.monotonic``; infinity: none is)."""
        return min((record.due for record in self._nodes.values() if not record.running), default=math.inf)

    def due(self, now: float) -> list[int]:
        """Nodes whose check is due now and not running; they are marked running."""
        found = [node for node, record in self._nodes.items() if not record.running and record.due <= now]
        for node in found:
            self._nodes[node].running = True
        return sorted(found)

    def record(self, node: int, now: float, error: str | None) -> str | None:
        """The outcome of ``node``'s check (``error`` None: healthy). Returns why the
        node must be replaced when it has now failed ``failures`` times in a row."""
        record = self._nodes.get(node)
        if record is None:
            return None
        record.running = False
        record.due = now + self.checker.interval
        if error is None:
            record.failures = 0
            return None
        record.failures += 1
        if record.failures < self.checker.failures:
            return None
        times = "once" if record.failures == 1 else f"{record.failures} times in a row"
        return f"it failed its health check {self.checker.name} {times} (last: {error})"
