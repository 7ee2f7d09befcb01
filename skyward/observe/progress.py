"""How far a ``pool.map``, a broadcast or a gather has come, as ``Progress`` events.

Nothing is counted, and no task event is built, unless someone listens for
``Progress``. A map or broadcast is counted from its tasks' ``TaskStarted`` and
``TaskCompleted`` events (matched by function name); a map chunk counts its ``items``
(one when the dispatcher does not report them). A gather is counted from its futures.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from msgspec import Struct, field

from skyward.observe.bus import EventBus
from skyward.observe.events import Progress, TaskCompleted, TaskStarted

T = TypeVar("T")
SENDING_WAIT = 2.0
"""Seconds a gather's reader waits for an event a future's thread is delivering."""


class _Batch(Struct):
    batch_id: str
    kind: str
    name: str
    total: int
    done: int = 0
    failed: int = 0
    started: int = 0
    sizes: dict[tuple[str, int], int] = field(default_factory=dict)
    closed: bool = False
    """Its finished event is sent: later counts are dropped."""
    sending: int = 0
    """Its events being delivered by a future's thread right now."""

    def event(self, finished: bool = False, cancelled: bool = False) -> Progress:
        return Progress(self.batch_id, self.kind, self.name, self.done, self.total, self.failed, finished, cancelled)


class ProgressTracker:
    """Emits ``Progress`` events on ``bus`` for the batches a pool runs."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._sent = threading.Condition(self._lock)
        self._open: list[_Batch] = []
        self._unsubscribe: list[Callable[[], None]] = []

    @contextlib.contextmanager
    def tasks(self, kind: str, name: str, total: int) -> Iterator[None]:
        """Count the tasks named ``name`` that start while the block runs, up to ``total``
        items; the last event has ``finished``."""
        if total <= 0 or not self._bus.wants(Progress):
            yield
            return
        batch = _Batch(f"b{next(self._ids)}", kind, name, total)
        with self._lock:
            if not self._open:
                self._unsubscribe = [
                    self._bus.on(TaskStarted, self._task_started),
                    self._bus.on(TaskCompleted, self._task_completed),
                ]
            self._open.append(batch)
        self._bus.emit(batch.event())
        failed = cancelled = False
        try:
            yield
        except BaseException as exc:
            failed = True
            cancelled = isinstance(exc, (KeyboardInterrupt, concurrent.futures.CancelledError))
            raise
        finally:
            with self._lock:
                self._open.remove(batch)
                if not self._open:
                    for unsubscribe in self._unsubscribe:
                        unsubscribe()
                    self._unsubscribe = []
                if failed and not cancelled:
                    batch.failed = max(batch.failed, 1)
                elif not failed:
                    batch.done, batch.failed = batch.total, 0
                final = batch.event(finished=True, cancelled=cancelled)
            self._bus.emit(final)

    def futures(self, kind: str, name: str, futures: list[concurrent.futures.Future[T]]) -> Callable[[], None]:
        """Count ``futures`` as they finish (a cancelled or failed one counts as failed).
        Returns what sends the finished event at once, counted from the futures' states:
        call it once the caller has read them (their own last event may come later, from
        the thread that finished them) or stopped reading (those not done count as
        cancelled)."""
        if not futures or not self._bus.wants(Progress):
            return _nothing
        batch = _Batch(f"b{next(self._ids)}", kind, name, len(futures))
        self._bus.emit(batch.event())
        for future in futures:
            future.add_done_callback(lambda f: self._future_done(batch, f))
        return lambda: self._futures_read(batch, futures)

    def _future_done(self, batch: _Batch, future: concurrent.futures.Future[T]) -> None:
        with self._lock:
            if batch.closed:
                return
            if future.cancelled() or future.exception() is not None:
                batch.failed += 1
            else:
                batch.done += 1
            batch.closed = batch.done + batch.failed >= batch.total
            event = batch.event(finished=batch.closed)
            batch.sending += 1
        try:
            self._bus.emit(event)
        finally:
            with self._lock:
                batch.sending -= 1
                self._sent.notify_all()

    def _futures_read(self, batch: _Batch, futures: list[concurrent.futures.Future[T]]) -> None:
        with self._lock:
            # a future's own last event may be on its way: the reader's bar waits for it
            self._sent.wait_for(lambda: not batch.sending, timeout=SENDING_WAIT)
            if batch.closed:
                return
            batch.closed = True
            finished = [future for future in futures if future.done()]
            batch.failed = sum(1 for future in finished if future.cancelled() or future.exception() is not None)
            batch.done = len(finished) - batch.failed
            event = batch.event(finished=True, cancelled=len(finished) < batch.total)
        self._bus.emit(event)

    def _task_started(self, event: TaskStarted) -> None:
        with self._lock:
            for batch in self._open:
                if batch.name == event.name and batch.started < batch.total:
                    size = event.items or 1
                    batch.sizes[(event.task_id, event.node)] = size
                    batch.started += size
                    return

    def _task_completed(self, event: TaskCompleted) -> None:
        with self._lock:
            for batch in self._open:
                size = batch.sizes.pop((event.task_id, event.node), None)
                if size is not None:
                    size = event.items or size
                    if event.error is None:
                        batch.done = min(batch.total, batch.done + size)
                    elif not event.cancelled:
                        batch.failed += size
                    progress = batch.event()
                    break
            else:
                return
        self._bus.emit(progress)


def _nothing() -> None:
    """What ``futures`` returns when nothing is counted."""
