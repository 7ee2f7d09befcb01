"""Generator functions stream: ``for x in gen(...) >> pool`` yields each value on the
client as the node produces it.

The call is sent as an ordinary task whose function is ``Generate(fn, stream)``: on
the node it runs ``fn``, publishes every value it yields as a ``Yielded`` event through
the node's outbox (the road the task's printed output takes), and returns how many it
yielded. On the client ``stream_call`` subscribes to that stream's events and returns
an iterator over the values. A result waits until its task's events are delivered, so
by the time the count arrives every value is in (bounded; a shortfall is an error).
An error the generator raises is raised by the iterator after the values before it.
"""

from __future__ import annotations

import inspect
import queue
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import cloudpickle

from skyward.api.function import PendingFunction, SkywardFunction
from skyward.core.codec import load_payload
from skyward.node.publish import publish
from skyward.observe.events import Event

LATE_VALUES_WAIT = 10.0
"""How long the iterator waits for values still on their way once the task has ended."""
POLL = 0.5


@dataclass(frozen=True, slots=True)
class Yielded(Event):
    """Value number ``index`` a streaming task of ``stream`` yielded (pickled)."""

    stream: str
    index: int
    value: bytes


def is_generator(pending: PendingFunction[Any]) -> bool:
    """True when ``pending`` calls a generator function."""
    fn = pending.fn.local if isinstance(pending.fn, SkywardFunction) else pending.fn
    return inspect.isgeneratorfunction(fn)


class Generate:
    """Runs a generator function on the node, publishing its values (see module docstring)."""

    def __init__(self, fn: Callable[..., Any], stream: str) -> None:
        self.fn = fn
        self.stream = stream
        self.__qualname__ = getattr(fn, "__qualname__", repr(fn))

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        fn = self.fn.local if isinstance(self.fn, SkywardFunction) else self.fn
        count = 0
        for value in fn(*args, **kwargs):
            publish(Yielded(self.stream, count, cloudpickle.dumps(value)))
            count += 1
        return count


def stream_call(
    pending: PendingFunction[Any],
    subscribe: Callable[[type, Callable[[Any], None]], Callable[[], None]],
    submit: Callable[[PendingFunction[Any]], Any],
) -> Iterator[Any]:
    """Start ``pending`` (a generator function's call) with ``submit`` (which returns a
    Future) and return an iterator over its values, in order."""
    stream = uuid.uuid4().hex
    arrived: queue.SimpleQueue[Yielded | None] = queue.SimpleQueue()
    unsubscribe = subscribe(Yielded, lambda event: arrived.put(event) if event.stream == stream else None)
    try:
        future = submit(replace(pending, fn=Generate(pending.callable, stream), source=None))
    except BaseException:
        unsubscribe()
        raise
    future.add_done_callback(lambda _: arrived.put(None))
    return _values(arrived, future, unsubscribe, pending.name)


def _values(
    arrived: queue.SimpleQueue[Yielded | None], future: Any, unsubscribe: Callable[[], None], name: str
) -> Iterator[Any]:
    received = 0
    try:
        while True:
            try:
                event = arrived.get(timeout=POLL)
            except queue.Empty:
                continue
            if event is None:
                break
            received += 1
            yield load_payload(event.value)
        expected = future.result()  # the generator's own error, raised after its values
        while received < expected:
            try:
                event = arrived.get(timeout=LATE_VALUES_WAIT)
            except queue.Empty:
                raise RuntimeError(
                    f"{name} yielded {expected} values but {received} reached the client "
                    f"(the rest did not arrive within {LATE_VALUES_WAIT:g}s: dropped or lost)"
                ) from None
            if event is not None:
                received += 1
                yield load_payload(event.value)
    finally:
        unsubscribe()
        future.cancel()
