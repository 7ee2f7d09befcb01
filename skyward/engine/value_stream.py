"""The client's end of a generator call (see engine/streams.py): ``ValueStream`` yields
the values in order as they arrive, then raises the generator's error if it failed.

A result waits until its task's events are delivered, so by the time the count of
values arrives every value is in (bounded; a shortfall is an error). Closing a stream
before its end (``close()``, ``break`` out of a ``for`` loop, or dropping it) asks the
node that runs the generator to stop it before its next value; a stream closed before
any value came does not know that node yet, so it asks when the next value comes.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future

from msgspec import Struct

from skyward.core.codec import load_payload
from skyward.core.function import PendingFunction
from skyward.engine.streams import Generate, Yielded

LATE_VALUES_WAIT = 10.0
"""How long a stream waits for values still on their way once the task has ended."""
POLL = 0.5
"""The longest one wait for the next value lasts (the task's timeout bounds the whole)."""

Subscribe = Callable[[type[Yielded], Callable[[Yielded], None]], Callable[[], None]]
"""``subscribe(Yielded, handler)``: hand every ``Yielded`` event to ``handler``; returns
what undoes it."""
Submit = Callable[[PendingFunction[int]], "Future[int]"]
"""Start a call on the pool: here a ``Generate``, which returns how many values it yielded."""
Stop = Callable[[str, int], None]
"""``stop(stream, node)``: ask ``node`` to stop the generator of ``stream``."""


class StreamRouter:
    """Hands each ``Yielded`` event to its stream (one subscription for all); ``stop``
    asks a node to stop a stream's generator."""

    def __init__(self, subscribe: Subscribe, stop: Stop) -> None:
        self._subscribe = subscribe
        self.stop = stop
        self._sinks: dict[str, Callable[[Yielded], None]] = {}
        self._subscribed = False
        self._lock = threading.Lock()

    def open(self, stream: str) -> Route:
        """The route of ``stream``, whose queue receives its values from now on."""
        with self._lock:
            if not self._subscribed:
                self._subscribe(Yielded, self._route)
                self._subscribed = True
            arrived: queue.SimpleQueue[Yielded | None] = queue.SimpleQueue()
            self._sinks[stream] = arrived.put
            return Route(stream, arrived, self)

    def close(self, stream: str, on_next: Callable[[int], None] | None = None) -> None:
        """Drop the values of ``stream`` from now on; ``on_next(node)`` is called once, with
        the node of the next value that comes, unless ``close(stream)`` comes first."""
        if on_next is None:
            self._sinks.pop(stream, None)
            return

        def once(event: Yielded) -> None:
            if self._sinks.pop(stream, None) is not None:
                on_next(event.node)

        self._sinks[stream] = once

    def _route(self, event: Yielded) -> None:
        sink = self._sinks.get(event.stream)
        if sink is not None:
            sink(event)


class Route(Struct, frozen=True):
    """One stream's way from the router: the queue its values arrive on (then None once
    its task has ended), and the calls that close it and stop its generator."""

    stream: str
    arrived: queue.SimpleQueue[Yielded | None]
    router: StreamRouter

    def close(self, on_next: Callable[[int], None] | None = None) -> None:
        """As ``StreamRouter.close`` for this stream."""
        self.router.close(self.stream, on_next)

    def stop(self, node: int) -> None:
        """Ask ``node`` to stop this stream's generator."""
        self.router.stop(self.stream, node)


def start(pending: PendingFunction[object], router: StreamRouter, submit: Submit, node: int | None) -> ValueStream:
    """Start ``pending`` (a generator function's call) with ``submit`` and return its stream;
    ``node``: the node it is pinned to, if any."""
    route = router.open(uuid.uuid4().hex)
    try:
        call = Generate(pending.callable, route.stream)
        future = submit(PendingFunction(call, pending.args, pending.kwargs, pending.timeout))
    except BaseException:
        route.close()
        raise
    future.add_done_callback(lambda _: route.arrived.put(None))
    return ValueStream(pending.name, route, future, node)


class ValueStream(Iterator[object]):
    """The values one generator call yields, in order, as its node produces them; after
    them, the generator's own error if it raised one (noted with its node)."""

    def __init__(self, name: str, route: Route, future: Future[int], node: int | None) -> None:
        self.name = name
        self._route = route
        self._future = future
        self._node = node
        self._received = 0
        self._expected: int | None = None
        self._closed = False

    def __next__(self) -> object:
        while not self._closed:
            if self._expected is None:
                event = self._take(POLL)
                if event is None:
                    self._expected = self._outcome()
                if not isinstance(event, Yielded):
                    continue
            elif self._received < self._expected:
                event = self._take(LATE_VALUES_WAIT)
                if not isinstance(event, Yielded):
                    self.close()
                    raise RuntimeError(
                        f"{self.name} yielded {self._expected} values but {self._received} reached "
                        f"the client (the rest did not arrive within {LATE_VALUES_WAIT:g}s: dropped or lost)"
                    )
            else:
                self.close()
                break
            self._received += 1
            self._node = event.node
            return load_payload(event.value)
        raise StopIteration

    def close(self) -> None:
        """Stop reading; a generator still running is stopped on its node before its next
        value (its ``finally`` blocks run there). Closing twice does nothing."""
        if self._closed:
            return
        self._closed = True
        route = self._route
        if self._future.done():
            route.close()
        elif self._node is not None:
            route.close()
            self._future.cancel()
            route.stop(self._node)
        else:  # the call may be running already: stop it once it shows where
            route.close(route.stop)
            self._future.add_done_callback(lambda _: route.close())

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a dropped stream must not raise at collection
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<ValueStream of {self.name}: {self._received} values read, {state}>"

    def _take(self, wait: float) -> Yielded | None | bool:
        """The next event, None once the task has ended, or False after ``wait`` seconds."""
        try:
            return self._route.arrived.get(timeout=wait)
        except queue.Empty:
            return False

    def _outcome(self) -> int:
        """How many values the generator yielded; its error if it failed."""
        try:
            return self._future.result()
        except BaseException:
            self.close()
            raise
