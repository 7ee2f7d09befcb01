"""Delivering events to handlers: per pool (``pool.on``) and global (``sky.use_callback``).

A handler that raises is reported once (per handler) as an ``Error`` event (or on stderr
and in the log when nobody listens for errors), then kept; it never breaks the pool.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from skyward.observe.events import Error, Event

if TYPE_CHECKING:
    from skyward.observe.legacy import Translator

E = TypeVar("E", bound=Event)
Callback = Callable[[Event], Event | None]


class Subscribe(Protocol):
    """``subscribe(event_type, handler)`` (``pool.on``): call ``handler`` with every event
    of ``event_type``; returns a function that unsubscribes it."""

    def __call__(self, event_type: type[E], handler: Callable[[E], object], /) -> Callable[[], None]: ...


class _Delivery(Protocol):
    @property
    def event_type(self) -> type[Event]: ...

    @property
    def legacy(self) -> bool: ...

    def deliver(self, event: Event, reported: set[int]) -> str | None: ...


class _Subscription(Generic[E]):
    """One ``on(event_type, handler)``: ``handler`` takes only ``event_type``'s events."""

    __slots__ = ("event_type", "handler", "legacy")

    def __init__(self, event_type: type[E], handler: Callable[[E], object], legacy: bool) -> None:
        self.event_type = event_type
        self.handler = handler
        self.legacy = legacy

    def deliver(self, event: Event, reported: set[int]) -> str | None:
        """Run the handler (see ``_call``) if ``event`` is of its type."""
        if not isinstance(event, self.event_type):
            return None
        return _call(self.handler, event, reported)

_log = logging.getLogger("skyward")
_global_lock = threading.Lock()
_global_callbacks: list[Callback] = []
_global_reported: set[int] = set()


class EventBus:
    """Handlers by event type, safe to call from any thread. The older reference's events
    (``observe.legacy``) are made from the current ones for those who listen for them."""

    def __init__(self) -> None:
        self._handlers: list[_Delivery] = []
        self._lock = threading.Lock()
        self._reported: set[int] = set()
        self._types: frozenset[type[Event]] = frozenset()
        self._wanted: dict[type, bool] = {}
        """``wants``'s answer for each class asked about since the last change."""
        self._routes: dict[type, tuple[_Delivery, ...]] = {}
        """The handlers of each event class emitted so far, worked out on its first emit
        after a change (a pool emits thousands of metric events a second)."""
        self._legacy_wanted = False
        self._translator: Translator | None = None
        """Made when an older event is first wanted (``observe.legacy`` is imported then)."""

    def on(self, event_type: type[E], handler: Callable[[E], object], *, legacy: bool = False) -> Callable[[], None]:
        """Call ``handler(event)`` for every event of ``event_type`` (or a subclass); with
        ``legacy`` also the older reference's events (``ComputePool(on_event=...)``).
        Returns a function that unsubscribes it."""
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            raise TypeError(f"pool.on() takes an event class such as sky.TaskCompleted, got {event_type!r}")
        if not callable(handler):
            raise TypeError(f"pool.on() needs a callable handler, got {handler!r}")
        entry = _Subscription(event_type, handler, legacy or _is_legacy(event_type))
        with self._lock:
            self._handlers.append(entry)
            self._refresh()

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._handlers:
                    self._handlers.remove(entry)
                self._refresh()

        return unsubscribe

    def _refresh(self) -> None:
        self._types = frozenset(entry.event_type for entry in self._handlers)
        self._wanted = {}  # after the types: an answer kept in the new one is of the new types
        self._routes = {}
        self._legacy_wanted = any(entry.legacy for entry in self._handlers)

    def wants(self, event_type: type) -> bool:
        """True when someone listens for ``event_type`` (lets hot paths skip building events)."""
        if _global_callbacks or self._legacy_wanted:
            return True
        known = self._wanted
        wanted = known.get(event_type)
        if wanted is None:
            wanted = known[event_type] = any(issubclass(event_type, t) for t in self._types)
        return wanted

    def emit(self, event: Event) -> None:
        """Deliver ``event`` to matching handlers, then to the callbacks; then its older
        counterparts to those who take them."""
        kind = type(event)
        legacy = _is_legacy(kind)
        with self._lock:
            entries = self._routes.get(kind)
            if entries is None:
                entries = tuple(e for e in self._handlers if issubclass(kind, e.event_type) and (e.legacy or not legacy))
                self._routes[kind] = entries
        for entry in entries:
            self._reported_error(entry.deliver(event, self._reported))
        with _global_lock:
            callbacks = list(_global_callbacks)
        for callback in callbacks:
            self._reported_error(_call(callback, event, self._reported))
        if not legacy and (self._legacy_wanted or callbacks):
            for old in self._older(event):
                self.emit(old)

    def _older(self, event: Event) -> list[Event]:
        """``event`` as the older reference's events (none, or one or more)."""
        if self._translator is None:
            from skyward.observe.legacy import Translator

            self._translator = Translator()
        return list(self._translator.translate(event))

    def _reported_error(self, message: str | None) -> None:
        """Report a handler's failure (``_call``'s message, if any)."""
        if message is None:
            return
        if self.wants(Error):
            self.emit(Error(message))
        else:
            _report(message)


_legacy_base: type | None = None
"""``observe.legacy.LegacyEvent`` once that module is imported (``_is_legacy``)."""


def _is_legacy(event_type: type) -> bool:
    """Whether ``event_type`` is one of the older reference's events. None exists before
    ``observe.legacy`` is imported (by ``sky.LogLine`` and the like, or a translation),
    which a pool that nobody asks them of never does (about 10 ms); the class is kept
    from then on (this runs for every event emitted)."""
    global _legacy_base
    if _legacy_base is None:
        base = getattr(sys.modules.get("skyward.observe.legacy"), "LegacyEvent", None)  # None while it imports
        if base is None:
            return False
        _legacy_base = base
    return issubclass(event_type, _legacy_base)


def _call(handler: Callable[[E], object], event: E, reported: set[int]) -> str | None:
    """Run one handler, swallowing what it raises; returns a message the first time a
    given handler raises, None otherwise."""
    try:
        handler(event)
    except Exception as exc:  # noqa: BLE001 - a handler must not break the pool
        key = id(handler)
        if key not in reported:
            reported.add(key)
            name = getattr(handler, "__qualname__", repr(handler))
            return f"event handler {name} raised {type(exc).__name__}: {exc} (reported once)"
    return None


def _report(message: str) -> None:
    _log.error(message)
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} skyward: {message}\n")
    sys.stderr.flush()


def compose(*callbacks: Callback) -> Callback:
    """One callback that calls each of ``callbacks`` in order. Every one is called even if
    an earlier one raises; the first exception is raised after the last call."""
    for callback in callbacks:
        if not callable(callback):
            raise TypeError(f"sky.compose() takes callables, got {callback!r}")

    def composed(event: Event) -> None:
        first: Exception | None = None
        for callback in callbacks:
            try:
                callback(event)
            except Exception as exc:  # noqa: BLE001 - re-raised below
                first = first or exc
        if first is not None:
            raise first

    return composed


@contextlib.contextmanager
def use_callback(callback: Callback) -> Iterator[None]:
    """Send every pool's events (and ``sky.emit`` calls) to ``callback`` while the block runs."""
    if not callable(callback):
        raise TypeError(f"sky.use_callback() needs a callable, got {callback!r}")
    with _global_lock:
        _global_callbacks.append(callback)
    try:
        yield
    finally:
        with _global_lock:
            _global_callbacks.remove(callback)


def emit(event: Event) -> None:
    """Send ``event`` to the callbacks registered with ``use_callback``; a callback that
    raises is reported once, like a pool's handlers."""
    if not isinstance(event, Event):
        raise TypeError(f"sky.emit() takes an event such as sky.Metric(...), got {event!r}")
    with _global_lock:
        callbacks = list(_global_callbacks)
    for callback in callbacks:
        message = _call(callback, event, _global_reported)
        if message is not None:
            _report(message)
