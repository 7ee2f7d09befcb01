"""``pool.map(..., progress=True)``: a progress bar with the rate and the time left, drawn
from the map's ``Progress`` events.

Where it is drawn: in a terminal (standard error is one), a rich bar on standard error;
in a Jupyter notebook, an HTML ``<progress>`` element updated in place (no widget
library needed); in a pipe or a log file, nothing. While the pool's live console panel
is up it already draws the map's bar, and this draws none."""

from __future__ import annotations

import contextlib
import html
import sys
import threading
import time
from collections.abc import Iterator
from typing import Protocol

from skyward.observe.bus import EventBus
from skyward.observe.describe import rate as describe_rate
from skyward.observe.events import Progress

NOTEBOOK_EVERY = 0.25
"""Seconds between a notebook bar's redraws (the last one is always drawn)."""


class _Bar(Protocol):
    def show(self, event: Progress) -> None: ...

    def close(self) -> None: ...


@contextlib.contextmanager
def progress_bar(bus: EventBus, kind: str, name: str, wanted: bool) -> Iterator[None]:
    """Draw the progress of the batch ``kind`` of ``name`` that starts in the block (the
    first one), when ``wanted`` and there is somewhere to draw it (see the module)."""
    bar = _bar(name) if wanted else None
    if bar is None:
        yield
        return
    lock = threading.Lock()
    batch: list[str] = []

    def shown(event: Progress) -> None:
        with lock:
            if not batch and event.kind == kind and event.name == name:
                batch.append(event.batch_id)
            if batch and event.batch_id == batch[0]:
                bar.show(event)

    unsubscribe = bus.on(Progress, shown)
    try:
        yield
    finally:
        unsubscribe()
        with lock:
            bar.close()


def _bar(name: str) -> _Bar | None:
    """A bar for where this process draws (None: nowhere, or the live panel draws it)."""
    from skyward.observe import rich_console

    if _in_notebook():
        return _NotebookBar(name)
    if rich_console.in_use() or not sys.stderr.isatty():
        return None
    return _TerminalBar(name)


def _in_notebook() -> bool:
    """True in a Jupyter kernel's shell: ipykernel's ``ZMQInteractiveShell`` or a shell
    built on it (Google Colab's ``google.colab._shell.Shell``, VS Code's and JupyterLab's
    kernels); False in a terminal IPython."""
    shell = sys.modules.get("IPython")
    if shell is None or "ipykernel" not in sys.modules:
        return False
    found = getattr(shell, "get_ipython", lambda: None)()
    return any(kind.__name__ == "ZMQInteractiveShell" for kind in type(found).__mro__)


class _TerminalBar:
    """A rich bar on standard error: name, bar, done of total, items per second, time left."""

    def __init__(self, name: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
            console=Console(stderr=True), transient=False,
        )
        self._task = self._progress.add_task(name, total=None, rate="")
        self._started = time.monotonic()
        self._progress.start()

    def show(self, event: Progress) -> None:
        elapsed = time.monotonic() - self._started
        speed = describe_rate(event.done / elapsed) if elapsed > 0 and event.done else ""
        self._progress.update(self._task, completed=event.done, total=event.total, rate=speed)

    def close(self) -> None:
        self._progress.stop()


class _NotebookBar:
    """An HTML ``<progress>`` element in the cell's output, updated in place."""

    def __init__(self, name: str) -> None:
        from IPython.display import HTML, display

        self._name = name
        self._html = HTML
        self._handle = display(HTML(self._render(0, 0, 0.0, 0)), display_id=True)
        self._started = time.monotonic()
        self._drawn = 0.0
        self._last: Progress | None = None

    def show(self, event: Progress) -> None:
        self._last = event
        now = time.monotonic()
        if event.finished or now - self._drawn >= NOTEBOOK_EVERY:
            self._draw(event, now)

    def close(self) -> None:
        if self._last is not None:
            self._draw(self._last, time.monotonic())

    def _draw(self, event: Progress, now: float) -> None:
        self._drawn = now
        if self._handle is not None:
            self._handle.update(self._html(self._render(event.done, event.total, now - self._started, event.failed)))

    def _render(self, done: int, total: int, elapsed: float, failed: int) -> str:
        speed = done / elapsed if elapsed > 0 and done else 0.0
        left = f", {max(0.0, (total - done) / speed):.0f}s left" if speed and total > done else ""
        failures = f", {failed} failed" if failed else ""
        line = f"{done}/{total}" + (f" ({describe_rate(speed)}{left})" if speed else "") + failures
        return (
            f'<div><code>{html.escape(self._name)}</code> <progress value="{done}" max="{max(total, 1)}" '
            f'style="width: 40%"></progress> {html.escape(line)}</div>'
        )
