"""``sky.HealthChecker``: a check run on every node, and replacing the nodes that keep
failing it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skyward.api.validation import check_number, fail


@dataclass(frozen=True, slots=True)
class HealthChecker:
    """Runs ``check()`` on each node every ``interval`` seconds, beside its tasks (a
    check takes no task slot). A check fails when it raises, returns a false value, or
    gives no answer within ``timeout`` seconds; a node whose checks fail ``failures``
    times in a row is replaced (an ``InstanceReplaced`` event names the last failure).
    Checks of a node start ``warmup`` seconds after it joined. ``check`` must be
    picklable (defined at module level, or a lambda cloudpickle can send)."""

    check: Callable[[], Any]
    interval: float = 30.0
    failures: int = 3
    warmup: float = 60.0
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise fail("HealthChecker", "check", self.check, "give a function taking no arguments")
        check_number("HealthChecker", "interval", self.interval, strictly_positive=True, finite=True)
        check_number("HealthChecker", "failures", self.failures, minimum=1, integer=True)
        check_number("HealthChecker", "warmup", self.warmup, minimum=0, finite=True)
        check_number("HealthChecker", "timeout", self.timeout, strictly_positive=True, finite=True)

    @property
    def name(self) -> str:
        """The check's name as events and errors show it."""
        return getattr(self.check, "__qualname__", None) or repr(self.check)
