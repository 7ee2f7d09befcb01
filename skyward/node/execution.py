"""Running one ``TaskRequest`` in the current thread; shared by both executors."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from skyward.core.function import SkywardFunction
from skyward.engine.wire import CALL, Outcome, TaskFailure, TaskRequest
from skyward.plugins.node import decorated


def plain_callable(fn: Callable[..., object]) -> Callable[..., object]:
    """The function to call: a decorated function's original, or ``fn`` itself."""
    return fn.local if isinstance(fn, SkywardFunction) else fn


def execute(request: TaskRequest, node: int, on_item: Callable[[int], None] | None = None) -> Outcome:
    """Run ``request`` and return its outcome; never raises (a failure is an outcome).

    For a map chunk, ``on_item(i)`` is called before item ``i`` starts so the caller can
    time each item separately.
    """
    try:
        fn = decorated(plain_callable(request.fn))
        if request.kind == CALL:
            return True, _not_generator(fn(*request.args, **request.kwargs), request.name)
        results: list[object] = []
        for index, item in enumerate(request.chunk):
            if on_item is not None:
                on_item(index)
            try:
                results.append(_not_generator(fn(item), request.name))
            except BaseException as exc:  # noqa: BLE001 - reported to the client
                return False, TaskFailure.from_exception(exc, node, item=index)
        return True, results
    except BaseException as exc:  # noqa: BLE001 - reported to the client
        return False, TaskFailure.from_exception(exc, node)


def _not_generator(value: object, name: str) -> object:
    """``value``; TypeError when it is a generator, which cannot travel back (the client
    streams the values of a generator function's calls, so only a plain function that
    returns a generator, or a map over a generator function, gets here)."""
    if inspect.isgenerator(value):
        raise TypeError(
            f"{name} returned a generator, which cannot be sent back: make {name} itself a "
            f"generator function (one that uses `yield`) and iterate its values with "
            f"`for value in {name}(...) >> pool`; pool.map needs a plain function"
        )
    return value
