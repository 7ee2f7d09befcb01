"""Picking what a pool prints, from ``Options.console``.

- True or "rich": a live panel (``rich_console``) when stderr is a terminal; otherwise,
  while another pool's panel is live, or when ``SKYWARD_PLAIN_CONSOLE=1`` (``sky run``
  sets it), the "log" console.
- "log": append-only ``HH:MM:SS`` lines (``log_console``).
- "minimal": only task output (``[node N] line``, on the stream it was written to) and
  errors.
- False or "silent": nothing; subscribe to ``sky.Log`` and friends instead.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Protocol, TextIO

from skyward.observe.bus import Subscribe
from skyward.observe.describe import describe
from skyward.observe.events import Error, Log
from skyward.observe.log_console import LogConsole, stamp


class Console(Protocol):
    """What the pool holds: something to close when it stops."""

    def close(self) -> None: ...


def resolve_mode(console: bool | str, stderr_tty: bool | None = None) -> str:
    """The concrete mode for an ``Options.console`` value: "rich" needs a terminal on
    stderr (``stderr_tty``, default: ask ``sys.stderr``), else it becomes "log"."""
    if console is False:
        return "silent"
    if console is True or console == "rich":
        tty = _isatty(sys.stderr) if stderr_tty is None else stderr_tty
        return "rich" if tty and os.environ.get("SKYWARD_PLAIN_CONSOLE") != "1" else "log"
    return str(console)


def open_console(console: bool | str, subscribe: Subscribe) -> Console:
    """Start the console ``Options.console`` asks for, subscribed through ``subscribe``
    (``pool.on``)."""
    mode = resolve_mode(console)
    if mode == "rich":
        from skyward.observe import rich_console  # rich (about 45 ms to import) only for a panel

        if not rich_console.in_use():
            return rich_console.RichConsole(subscribe)
    if mode in ("rich", "log"):
        return LogConsole(subscribe)
    if mode == "minimal":
        return MinimalConsole(subscribe)
    return SilentConsole()


class SilentConsole:
    """Prints nothing."""

    def close(self) -> None:
        """Nothing to stop."""


class MinimalConsole:
    """Task output with a node prefix, and errors on stderr."""

    def __init__(self, subscribe: Subscribe) -> None:
        self._lock = threading.Lock()
        self._unsubscribe: list[Callable[[], None]] = [
            subscribe(Log, self._task_line),
            subscribe(Error, self._error),
        ]

    def _task_line(self, event: Log) -> None:
        self._write(sys.stderr if event.stream == "stderr" else sys.stdout, f"[node {event.node}] {event.line}")

    def _error(self, event: Error) -> None:
        self._write(sys.stderr, f"{stamp(event.timestamp)} {describe(event)}")

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            stream.write(text + "\n")
            stream.flush()

    def close(self) -> None:
        """Stop printing."""
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False
