"""``HealthTracker``: when each node's health check is due, and which nodes failed it
too often (``sky.HealthChecker``: ``failures`` failures in a row, checks starting
``warmup`` seconds after a node joined, one every ``interval`` seconds); ``check_once``,
one check of one node; ``warmed``, the warming gate (``HealthChecker.gate``)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

from msgspec import Struct

from skyward.core.function import PendingFunction
from skyward.core.health import HealthChecker
from skyward.engine.driver import PoolDriver

GATE_EVERY = 1.0
"""Seconds between a warming gate's checks of a node that has not passed yet."""


async def check_once(driver: PoolDriver, checker: HealthChecker, node: int) -> str | None:
    """Run ``checker``'s check on ``node`` once: None when it passed, else why not."""
    try:
        answer = await driver.probe(PendingFunction(checker.probe()).with_timeout(checker.timeout), node)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return checker.failure(answer)


async def warmed(driver: PoolDriver, checker: HealthChecker, nodes: Sequence[int]) -> None:
    """Return once each of ``nodes`` has passed one check (all checked at once, again
    every ``GATE_EVERY`` seconds); TimeoutError naming each node that has not, with its
    last failure, after ``checker.warmup`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + checker.warmup
    failing = {node: "not checked" for node in nodes}
    while True:
        outcomes = await asyncio.gather(*(check_once(driver, checker, node) for node in failing))
        failing = {node: error for node, error in zip(failing, outcomes) if error is not None}
        left = deadline - loop.time()
        if not failing:
            return
        if left <= 0:
            named = "; ".join(f"node {node}: {error}" for node, error in sorted(failing.items()))
            raise TimeoutError(
                f"the pool's warming gate: {len(failing)} of {len(nodes)} nodes did not pass the health check "
                f"{checker.name} within {checker.warmup:g}s (HealthChecker.warmup) ({named})"
            )
        await asyncio.sleep(min(GATE_EVERY, left))


class _Record(Struct):
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
