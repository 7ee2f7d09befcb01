"""Writing a pool's events into the log file, through the ``skyward.events`` and
``skyward.task`` loggers.

Lifecycle, finished batches and cost at INFO, preemptions and replacements at
WARNING, errors at ERROR, task output (``[node N] line``) at INFO on ``skyward.task``.
Task starts and ends are logged only at DEBUG and metrics only at TRACE: below those
levels their events are not even subscribed to, so dispatch does not build them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from skyward.observe.bus import Subscribe
from skyward.observe.describe import describe
from skyward.observe.events import (
    BootstrapPhase,
    ClusterDestroyed,
    ClusterProvisioned,
    ClusterReady,
    ClusterRequested,
    CostFinal,
    CostUpdate,
    Error,
    Event,
    InstanceBootstrapped,
    InstanceDestroyed,
    InstancePreempted,
    InstanceProvisioned,
    InstanceReplaced,
    Log,
    Metric,
    Progress,
    TaskCompleted,
    TaskStarted,
)

TRACE = 5
EVENTS_LOGGER = "skyward.events"
TASK_LOGGER = "skyward.task"
_LEVELS: dict[type[Event], int] = {
    ClusterRequested: logging.INFO, ClusterProvisioned: logging.INFO, BootstrapPhase: logging.INFO,
    ClusterReady: logging.INFO, ClusterDestroyed: logging.INFO, InstanceProvisioned: logging.INFO,
    InstanceBootstrapped: logging.INFO, InstanceDestroyed: logging.INFO, CostUpdate: logging.INFO,
    CostFinal: logging.INFO, InstancePreempted: logging.WARNING, InstanceReplaced: logging.WARNING,
    Error: logging.ERROR, Progress: logging.INFO, TaskStarted: logging.DEBUG,
    TaskCompleted: logging.DEBUG, Metric: TRACE,
}


class EventLog:
    """Subscribes to the events worth logging at ``level``; ``close()`` unsubscribes."""

    def __init__(self, subscribe: Subscribe, level: int, pool_id: str | None = None) -> None:
        self._extra = {"skyward_pool": pool_id}
        self._events = logging.getLogger(EVENTS_LOGGER)
        self._tasks = logging.getLogger(TASK_LOGGER)
        self._unsubscribe: list[Callable[[], None]] = [subscribe(Log, self._task_output)]
        for kind, kind_level in _LEVELS.items():
            if kind_level >= level:
                self._unsubscribe.append(subscribe(kind, self._event))

    def _event(self, event: Event) -> None:
        level = _LEVELS[type(event)]
        if isinstance(event, Progress) and not event.finished:
            return
        if isinstance(event, TaskCompleted) and event.error is not None:
            level = logging.WARNING
        self._events.log(level, describe(event), extra=self._extra)

    def _task_output(self, event: Log) -> None:
        where = f"node {event.node}" + (" stderr" if event.stream == "stderr" else "")
        self._tasks.info("[%s] %s", where, event.line, extra=self._extra)

    def close(self) -> None:
        """Stop logging events."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
