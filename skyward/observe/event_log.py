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

from skyward.observe import events
from skyward.observe.bus import Subscribe
from skyward.observe.describe import describe
from skyward.observe.log_names import EVENTS_LOGGER, TASK_LOGGER, TRACE
_LEVELS: dict[type[events.Event], int] = {
    events.ClusterRequested: logging.INFO,
    events.ClusterProvisioned: logging.INFO,
    events.BootstrapPhase: logging.INFO,
    events.ClusterReady: logging.INFO,
    events.ClusterDestroyed: logging.INFO,
    events.InstanceProvisioned: logging.INFO,
    events.InstanceBootstrapped: logging.INFO,
    events.InstanceDestroyed: logging.INFO,
    events.CostUpdate: logging.INFO,
    events.CostFinal: logging.INFO,
    events.InstancePreempted: logging.WARNING,
    events.InstanceReplaced: logging.WARNING,
    events.Error: logging.ERROR,
    events.Progress: logging.INFO,
    events.TaskStarted: logging.DEBUG,
    events.TaskCompleted: logging.DEBUG,
    events.Metric: TRACE,
}


class EventLog:
    """Subscribes to the events worth logging at ``level``; ``close()`` unsubscribes."""

    def __init__(self, subscribe: Subscribe, level: int, pool_id: str | None = None) -> None:
        self._extra = {"skyward_pool": pool_id}
        self._events = logging.getLogger(EVENTS_LOGGER)
        self._tasks = logging.getLogger(TASK_LOGGER)
        self._unsubscribe: list[Callable[[], None]] = [subscribe(events.Log, self._task_output)]
        for kind, kind_level in _LEVELS.items():
            if kind_level >= level:
                self._unsubscribe.append(subscribe(kind, self._event))

    def _event(self, event: events.Event) -> None:
        level = _LEVELS[type(event)]
        if isinstance(event, events.Progress) and not event.finished:
            return
        if isinstance(event, events.TaskCompleted) and event.error is not None:
            level = logging.WARNING
        self._events.log(level, describe(event), extra=self._extra)

    def _task_output(self, event: events.Log) -> None:
        where = f"node {event.node}" + (" stderr" if event.stream == "stderr" else "")
        self._tasks.info("[%s] %s", where, event.line, extra=self._extra)

    def close(self) -> None:
        """Stop logging events."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
