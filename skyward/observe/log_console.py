"""The "log" console: append-only ``HH:MM:SS`` lines, no escape codes, for pipes, files
and agents that poll a log.

Lifecycle, errors, task failures, progress (every ``PROGRESS_EVERY`` s while a batch
runs, and once when it ends), node load (every ``LOAD_EVERY`` s) and the final
summary go to stderr; task output goes to the stream it was written to on the node,
as ``HH:MM:SS [node N] line``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO, get_args

from skyward.observe import events
from skyward.observe.bus import Subscribe
from skyward.observe.describe import describe, progress_line
from skyward.observe.view import PoolView

PROGRESS_EVERY = 2.0
LOAD_EVERY = 15.0
_Line = (
    events.ClusterRequested | events.ClusterProvisioned | events.BootstrapPhase | events.ClusterReady
    | events.InstanceBootstrapped | events.InstancePreempted | events.InstanceReplaced
    | events.ClusterResized | events.Error | events.CostUpdate | events.CostFinal
)
"""The events written as they come, one ``describe`` line each."""
_LINES: tuple[type[_Line], ...] = get_args(_Line)


def stamp(timestamp: float | None = None) -> str:
    """``HH:MM:SS`` in local time."""
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


class LogConsole:
    """Writes a pool's events as plain lines; ``close()`` unsubscribes."""

    def __init__(self, subscribe: Subscribe) -> None:
        self.view = PoolView()
        self._lock = threading.Lock()
        self._progress: dict[str, tuple[float, float]] = {}
        self._load_at = time.monotonic()
        self._unsubscribe: list[Callable[[], None]] = [subscribe(kind, self._line) for kind in _LINES]
        self._unsubscribe += [
            subscribe(events.Log, self._task_output),
            subscribe(events.TaskCompleted, self._task_completed),
            subscribe(events.Progress, self._progress_event),
            subscribe(events.Metric, self._metric),
            subscribe(events.ClusterDestroyed, self._destroyed),
        ]

    def close(self) -> None:
        """Stop writing."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []

    def _write(self, text: str, stream: TextIO | None = None, timestamp: float | None = None) -> None:
        with self._lock:
            out = stream or sys.stderr
            out.write(f"{stamp(timestamp)} {text}\n")
            out.flush()

    def _line(self, event: _Line) -> None:
        self.view.apply(event)
        self._write(describe(event), timestamp=event.timestamp)

    def _task_output(self, event: events.Log) -> None:
        stream = sys.stderr if event.stream == "stderr" else sys.stdout
        self._write(f"[node {event.node}] {event.line}", stream, event.timestamp)

    def _task_completed(self, event: events.TaskCompleted) -> None:
        self.view.apply(event)
        if event.error is not None:
            self._write(describe(event), timestamp=event.timestamp)

    def _progress_event(self, event: events.Progress) -> None:
        self.view.apply(event)
        now = time.monotonic()
        first, last = self._progress.setdefault(event.batch_id, (now, now))
        if event.finished:
            del self._progress[event.batch_id]
        elif now - last < PROGRESS_EVERY:
            return
        else:
            self._progress[event.batch_id] = (first, now)
        elapsed = now - first
        per_second = event.done / elapsed if elapsed > 0 and event.done else None
        self._write(progress_line(event, per_second), timestamp=event.timestamp)

    def _metric(self, event: events.Metric) -> None:
        self.view.apply(event)
        now = time.monotonic()
        if now - self._load_at < LOAD_EVERY:
            return
        self._load_at = now
        with self.view.lock:
            lines = [_load(index, state.metrics) for index, state in sorted(self.view.nodes.items())]
        for line in lines:
            self._write(line)

    def _destroyed(self, event: events.ClusterDestroyed) -> None:
        self.view.apply(event)
        self._write(describe(event), timestamp=event.timestamp)
        self._write(self.view.summary())


def _load(node: int, metrics: dict[str, float]) -> str:
    shown = [f"{name} {metrics[name]:.0f}%" for name in ("cpu", "memory", "gpu", "gpu_memory") if name in metrics]
    return f"node {node}: " + (", ".join(shown) if shown else "no metrics")
