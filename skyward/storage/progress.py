"""Transfer progress: a typed seam between Storage transfers and whoever shows them.

A transfer sends ``TransferUpdate``s to the sink of its context: the one set with
``use_progress(sink)``, else a rich progress bar on stderr when stderr is a terminal,
else nothing. The pool's event console can install its own sink the same way."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final, Literal, Protocol

from msgspec import Struct

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

Direction = Literal["upload", "download"]


class TransferUpdate(Struct, frozen=True):
    """Where one transfer stands: ``done`` of ``total`` bytes; ``finished`` on its last
    update, sent whether it succeeded or failed."""

    direction: Direction
    bucket: str
    key: str
    done: int
    total: int
    finished: bool = False


class TransferProgress(Protocol):
    """Receives the updates of transfers; called from transfer threads, one call at a time
    per transfer."""

    def __call__(self, update: TransferUpdate) -> None: ...


class _Automatic:
    """The default: a terminal bar when stderr is a terminal, else nothing."""


_AUTOMATIC: Final = _Automatic()
_sink: ContextVar[TransferProgress | None | _Automatic] = ContextVar(
    "skyward_transfer_progress", default=_AUTOMATIC
)


@contextmanager
def use_progress(sink: TransferProgress | None) -> Iterator[None]:
    """Send the transfer updates of this context to ``sink`` (None: show nothing)."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def current_progress() -> TransferProgress | None:
    """The sink transfers started now report to."""
    sink = _sink.get()
    if isinstance(sink, _Automatic):
        return _terminal_bar() if sys.stderr.isatty() else None
    return sink


class TransferTracker:
    """Adapts boto3's per-chunk byte callbacks (from several threads) into cumulative
    ``TransferUpdate``s for one transfer."""

    def __init__(
        self, sink: TransferProgress, direction: Direction, bucket: str, key: str, total: int
    ) -> None:
        self._sink = sink
        self._direction: Direction = direction
        self._bucket = bucket
        self._key = key
        self._total = total
        self._done = 0
        self._lock = threading.Lock()
        self._emit(finished=False)

    def __call__(self, nbytes: int) -> None:
        with self._lock:
            self._done += nbytes
            self._emit(finished=False)

    def finish(self) -> None:
        """Send the last update."""
        with self._lock:
            self._emit(finished=True)

    def _emit(self, *, finished: bool) -> None:
        self._sink(
            TransferUpdate(
                self._direction, self._bucket, self._key, self._done, self._total, finished
            )
        )


class RichTransferBar:
    """A rich progress bar per running transfer, shown while any runs."""

    def __init__(self, console: Console | None = None) -> None:
        self._console = console
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._tasks: dict[tuple[str, str, str], TaskID] = {}

    def __call__(self, update: TransferUpdate) -> None:
        name = (update.direction, update.bucket, update.key)
        with self._lock:
            progress = self._progress or self._start()
            task = self._tasks.get(name)
            if task is None:
                verb = "upload" if update.direction == "upload" else "download"
                task = progress.add_task(
                    f"{verb} s3://{update.bucket}/{update.key}", total=update.total
                )
                self._tasks[name] = task
            progress.update(task, completed=update.done)
            if update.finished:
                progress.remove_task(self._tasks.pop(name))
                if not self._tasks:
                    progress.stop()
                    self._progress = None

    def _start(self) -> Progress:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self._console or Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        return self._progress


_bar: RichTransferBar | None = None
_bar_lock = threading.Lock()


def _terminal_bar() -> RichTransferBar:
    global _bar
    with _bar_lock:
        if _bar is None:
            _bar = RichTransferBar()
        return _bar
