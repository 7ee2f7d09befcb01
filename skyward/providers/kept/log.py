"""A kept pool's own log in the pool daemon: every event and output line of the scripts
that use it, as they pass through the daemon's relay, appended to one file that
``sky logs NAME [-f]`` reads (the pool's registry record names it)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from skyward.core.private_dir import open_private
from skyward.engine.events import EventBatch
from skyward.engine.relay_server import Sink
from skyward.observe.describe import describe
from skyward.observe.events import Log


class LoggedSink:
    """``sink``, with each event batch and report also written to ``path``."""

    def __init__(self, sink: Sink, path: Path, lock: threading.Lock) -> None:
        self._sink = sink
        self._path = path
        self._lock = lock

    def events(self, node: int, batch: bytes) -> None:
        self._sink.events(node, batch)
        try:
            events = EventBatch.decode(batch).events  # the pool's own agents' bytes
        except Exception as exc:  # noqa: BLE001 - the line says so; the script got the batch
            self._write([f"events of node {node} could not be read: {type(exc).__name__}: {exc}"])
            return
        self._write([_line(event) for event in events])

    def report(self, message: str) -> None:
        self._sink.report(message)
        self._write([f"error: {message}"])

    def lost(self, node: int, reason: str, preempted: bool) -> None:
        self._sink.lost(node, reason, preempted)
        self._write([f"node {node} was {'preempted' if preempted else 'lost'}: {reason}"])

    def _write(self, lines: list[str]) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = "".join(f"{stamp} {line}\n" for line in lines if line)
        if text:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            with self._lock, os.fdopen(open_private(str(self._path), flags), "a", encoding="utf-8") as log:
                log.write(text)


def _line(event: object) -> str:
    """A task's output as ``[node N] line``; any other event as the console words it."""
    if isinstance(event, Log):
        return f"[node {event.node}] {event.line}"
    return describe(event)
