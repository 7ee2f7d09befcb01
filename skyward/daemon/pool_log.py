"""A kept pool's own log in the pool daemon: what the daemon did with the pool (opened,
adopted by which script, left idle, resized, torn down) and every event and output line
of the scripts that use it, as they pass through the daemon's relay, appended to one
file in the lines of a pool's own log (``observe.log_setup``), so ``sky logs NAME [-f]``
and ``sky events NAME`` read it as they read any pool's, during its life and after
(the pool's registry record names it; once the pool is gone, its name finds it).
Metric samples are left out: ``sky events`` is for what happened, and a pool taken up
again would dump every sample its nodes took while idle.

What is written is also told to the pool's dashboard board (``observe.dashboard``), when
it has one: the daemon's notes as event lines, and every event (metric samples too)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from skyward.core.private_dir import open_private
from skyward.engine.events import EventBatch
from skyward.engine.relay_server import Sink
from skyward.observe.dashboard.board import Board
from skyward.observe.describe import describe
from skyward.observe.log_names import EVENTS_LOGGER, TASK_LOGGER
from skyward.observe.events import Log, Metric


class PoolLog:
    """The file ``path``, written by one thread at a time; ``board``: the pool's
    dashboard board, told too (see the module)."""

    def __init__(self, path: Path, board: Board | None = None) -> None:
        self.path = path
        self.board = board
        self._lock = threading.Lock()

    def note(self, message: str, level: str = "INFO") -> None:
        """An event line of the daemon's own: ``pool NAME: what it did``."""
        self.write_lines([f"{level} {EVENTS_LOGGER}: {message}"])
        if self.board is not None:
            self.board.note(message, level.lower())

    def sink(self, sink: Sink | None) -> LoggedSink:
        """``sink``, with what passes through it written here too (None: only here; what
        a remote pool's host process passed to its script)."""
        return LoggedSink(sink, self)

    def write_lines(self, lines: list[str]) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        text = "".join(f"{stamp} {line}\n" for line in lines if line)
        if text:
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
            with self._lock, os.fdopen(open_private(str(self.path), flags), "a", encoding="utf-8") as log:
                log.write(text)


class LoggedSink:
    """``sink`` (None: none), with each event batch and report also written to ``log``."""

    def __init__(self, sink: Sink | None, log: PoolLog) -> None:
        self._sink = sink
        self._log = log

    def events(self, node: int, batch: bytes) -> None:
        if self._sink is not None:
            self._sink.events(node, batch)
        try:
            events = EventBatch.decode(batch).events  # the pool's own agents' bytes
        except Exception as exc:  # noqa: BLE001 - the line says so; the script got the batch
            self._log.note(f"events of node {node} could not be read: {type(exc).__name__}: {exc}")
            return
        self._log.write_lines([_line(event) for event in events if not isinstance(event, Metric)])
        if self._log.board is not None:
            self._log.board.apply_all(events)

    def report(self, message: str) -> None:
        if self._sink is not None:
            self._sink.report(message)
        self._log.write_lines([f"ERROR {EVENTS_LOGGER}: {message}"])
        if self._log.board is not None:
            self._log.board.note(message, "error")

    def lost(self, node: int, reason: str, preempted: bool) -> None:
        if self._sink is not None:
            self._sink.lost(node, reason, preempted)
        self._log.note(f"node {node} was {'preempted' if preempted else 'lost'}: {reason}", "WARNING")


def _line(event: object) -> str:
    """A task's output as ``[node N] line``; any other event as the console words it."""
    if isinstance(event, Log):
        return f"INFO {TASK_LOGGER}: [node {event.node}] {event.line}"
    return f"INFO {EVENTS_LOGGER}: {describe(event)}"
