"""What a pool prints: task output with a node prefix, and its lifecycle in "log" lines.

Modes (``Options.console``): "log" appends ``HH:MM:SS`` lines to stderr; "minimal"
prints only task output; "silent" prints nothing (subscribe to ``sky.Log`` instead).
True picks "log". Task output always goes to the client's own stdout/stderr, the
stream it was written to on the node.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from skyward.observe.bus import EventBus
from skyward.observe.events import (
    ClusterDestroyed,
    ClusterReady,
    ClusterRequested,
    Error,
    InstanceReplaced,
    Log,
)


def resolve_mode(console: bool | str) -> str:
    """The concrete console mode for an ``Options.console`` value."""
    if console is False:
        return "silent"
    if console is True or console == "rich":
        return "log"
    return str(console)


class Console:
    """Subscribes to a pool's events and writes them out."""

    def __init__(self, mode: str, bus: EventBus) -> None:
        self.mode = mode
        self._lock = threading.Lock()
        self._unsubscribe: list[Any] = []
        if mode == "silent":
            return
        self._unsubscribe.append(bus.on(Log, self._task_line))
        if mode == "log":
            for event_type in (ClusterRequested, ClusterReady, ClusterDestroyed, InstanceReplaced, Error):
                self._unsubscribe.append(bus.on(event_type, self._lifecycle))

    def _task_line(self, event: Log) -> None:
        stream = sys.stderr if event.stream == "stderr" else sys.stdout
        with self._lock:
            stream.write(f"[node {event.node}] {event.line}\n")
            stream.flush()

    def _lifecycle(self, event: Any) -> None:
        text = describe(event)
        if text:
            with self._lock:
                sys.stderr.write(f"{time.strftime('%H:%M:%S', time.localtime(event.timestamp))} {text}\n")
                sys.stderr.flush()

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()


def describe(event: Any) -> str:
    """One human line for a lifecycle event."""
    if isinstance(event, ClusterRequested):
        return f"pool {event.pool}: starting {event.nodes} node(s) on {event.provider}"
    if isinstance(event, ClusterReady):
        return f"pool {event.pool}: ready, {event.nodes} node(s) in {event.duration:.1f}s"
    if isinstance(event, ClusterDestroyed):
        return f"pool {event.pool}: stopped after {event.duration:.1f}s"
    if isinstance(event, InstanceReplaced):
        return f"node {event.node}: agent replaced ({event.reason})"
    if isinstance(event, Error):
        where = f"node {event.node}: " if event.node is not None else ""
        return f"{where}error: {event.message}"
    return ""
