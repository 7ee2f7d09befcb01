"""Generator functions stream: a call's values reach the client as the node yields them.

The call is sent as an ordinary task whose function is ``Generate(fn, stream)``: on the
node it runs ``fn``, publishes every value it yields as a ``Yielded`` event through the
node's outbox (the road the task's printed output takes), and returns how many it
yielded. The client reads them with a ``ValueStream`` (engine/value_stream.py). Before
each value the generator checks whether its client closed the stream (see
engine/stream_stop.py) and, if so, is closed on the node (its ``finally`` blocks run).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass

import cloudpickle

from skyward.core.function import PendingFunction, SkywardFunction
from skyward.core.instance import instance_info
from skyward.engine import stream_stop
from skyward.engine.publish import publish
from skyward.observe.events import Event


@dataclass(frozen=True, slots=True)
class Yielded(Event):
    """Value number ``index`` (pickled) that the generator of ``stream`` yielded on ``node``."""

    stream: str
    index: int
    value: bytes
    node: int


def is_generator(pending: PendingFunction[object]) -> bool:
    """True when ``pending`` calls a generator function."""
    fn = pending.fn.local if isinstance(pending.fn, SkywardFunction) else pending.fn
    return inspect.isgeneratorfunction(fn)


class Generate:
    """Runs a generator function on the node, publishing its values (see module docstring)."""

    def __init__(self, fn: Callable[..., object], stream: str) -> None:
        self.fn = fn
        self.stream = stream
        self.__qualname__ = getattr(fn, "__qualname__", repr(fn))

    def __call__(self, *args: object, **kwargs: object) -> int:
        fn = self.fn.local if isinstance(self.fn, SkywardFunction) else self.fn
        info = instance_info()
        node = info.node if info is not None else -1
        stop = stream_stop.marker(self.stream)
        values = fn(*args, **kwargs)
        if not isinstance(values, Generator):  # the client sends only generator functions here
            raise TypeError(f"{self.__qualname__} returned {type(values).__name__}, not a generator")
        count = 0
        try:
            while not stream_stop.requested(stop):
                try:
                    value = next(values)
                except StopIteration:
                    break
                publish(Yielded(self.stream, count, cloudpickle.dumps(value), node))
                count += 1
        finally:
            values.close()
            stream_stop.forget(stop)
        return count
