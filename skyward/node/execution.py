"""Running one ``TaskRequest`` in the current thread; shared by both executors."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterator
from types import GeneratorType

from skyward.core.function import SkywardFunction
from skyward.engine.wire import CALL, Outcome, TaskFailure, TaskRequest
from skyward.plugins.node import decorated


def plain_callable(fn: Callable[..., object]) -> Callable[..., object]:
    """The function to call: a decorated function's original, or ``fn`` itself."""
    return fn.local if isinstance(fn, SkywardFunction) else fn


class MapCursor:
    """Runs a map chunk's items one after another and tells, from any thread, which one
    runs (``index``): the items' iterator knows how many it has handed out, so the
    chunk's loop pays nothing per item for being watched."""

    def __init__(self) -> None:
        self._items: list[object] = []
        self._left: Iterator[object] = iter(self._items)

    def run(self, fn: Callable[[object], object], items: list[object]) -> list[object]:
        """``[fn(item) for item in items]``; what ``fn`` raises is raised (``index``
        then names its item)."""
        self._left = iter(items)  # before the list: a look in between sees no item started
        self._items = items
        return list(map(fn, self._left))

    def index(self) -> int:
        """The index of the item running, or of the last one run; -1 before the first
        starts (so a watcher sees item 0 begin)."""
        return max(-1, len(self._items) - operator.length_hint(self._left) - 1)


class ItemClock:
    """Times a map chunk's items from another thread or process, which looks at the item
    running now and then: an item is counted from the first look that saw it, and looks
    come every ``LOOKS`` th of the timeout, so an item fails never early and at most that
    share late. The wait for the first item (a worker process starting, the request's
    unpickling, a free thread) is not an item's time: it may last ``START_ALLOWANCE``
    seconds beyond the timeout, so a chunk stuck before its first item still fails
    (naming item 0) before the client's own wait for it ends."""

    LOOKS = 4
    START_ALLOWANCE = 30.0

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._item, self._seen = -1, time.monotonic()

    def look(self, running: int) -> float | None:
        """Seconds until the next look, given the item ``running`` now (-1: none has
        started); None once that item has run ``timeout`` seconds (or, before the first
        item, ``timeout + START_ALLOWANCE``)."""
        now = time.monotonic()
        if running != self._item:
            self._item, self._seen = running, now
        deadline = self._seen + self._timeout + (self.START_ALLOWANCE if running < 0 else 0.0)
        if now >= deadline:
            return None
        return min(deadline, now + self._timeout / self.LOOKS) - now

    @property
    def item(self) -> int:
        """The index of the item last looked at (0 when none had started)."""
        return max(0, self._item)


def execute(
    request: TaskRequest, node: int, on_item: Callable[[int], None] | None = None, cursor: MapCursor | None = None
) -> Outcome:
    """Run ``request`` and return its outcome; never raises (a failure is an outcome).

    A map chunk runs in ``cursor`` (a fresh one when None), which another thread may ask
    which item runs; or, with ``on_item``, item by item, ``on_item(i)`` called before
    item ``i`` starts (for a caller in another process, which cannot ask).
    """
    try:
        fn = decorated(plain_callable(request.fn))
        if request.kind == CALL:
            return True, _not_generator(fn(*request.args, **request.kwargs), request.name)
        if on_item is not None:
            return _each(fn, request, node, on_item)
        cursor = cursor or MapCursor()
        try:
            results = cursor.run(fn, request.chunk)
        except BaseException as exc:  # noqa: BLE001 - reported to the client
            return False, TaskFailure.from_exception(exc, node, item=max(0, cursor.index()))
        if GeneratorType in map(type, results):  # checked once, after the loop: it costs the loop nothing
            index = next(i for i, value in enumerate(results) if isinstance(value, GeneratorType))
            try:
                _not_generator(results[index], request.name)
            except TypeError as exc:
                return False, TaskFailure.from_exception(exc, node, item=index)
        return True, results
    except BaseException as exc:  # noqa: BLE001 - reported to the client
        return False, TaskFailure.from_exception(exc, node)


def _each(fn: Callable[[object], object], request: TaskRequest, node: int, on_item: Callable[[int], None]) -> Outcome:
    """A map chunk's outcome, ``on_item(i)`` called before item ``i`` starts."""
    results: list[object] = []
    for index, item in enumerate(request.chunk):
        on_item(index)
        try:
            results.append(_not_generator(fn(item), request.name))
        except BaseException as exc:  # noqa: BLE001 - reported to the client
            return False, TaskFailure.from_exception(exc, node, item=index)
    return True, results


def _not_generator(value: object, name: str) -> object:
    """``value``; TypeError when it is a generator, which cannot travel back (the client
    streams the values of a generator function's calls, so only a plain function that
    returns a generator, or a map over a generator function, gets here)."""
    if isinstance(value, GeneratorType):  # not inspect.isgenerator: Ray (_raylet) replaces it with a slower one
        raise TypeError(
            f"{name} returned a generator, which cannot be sent back: make {name} itself a "
            f"generator function (one that uses `yield`) and iterate its values with "
            f"`for value in {name}(...) >> pool`; pool.map needs a plain function"
        )
    return value
