"""Running one ``TaskRequest`` in the current thread; shared by both executors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from skyward.api.function import SkywardFunction
from skyward.engine.wire import CALL, Outcome, TaskFailure, TaskRequest


def plain_callable(fn: Any) -> Callable[..., Any]:
    """The function to call: a decorated function's original, or ``fn`` itself."""
    return fn.local if isinstance(fn, SkywardFunction) else fn


def execute(request: TaskRequest, node: int, on_item: Callable[[int], None] | None = None) -> Outcome:
    """Run ``request`` and return its outcome; never raises (a failure is an outcome).

    For a map chunk, ``on_item(i)`` is called before item ``i`` starts so the caller can
    time each item separately.
    """
    try:
        fn = plain_callable(request.fn)
        if request.kind == CALL:
            return True, fn(*request.args, **request.kwargs)
        results = []
        for index, item in enumerate(request.args[0]):
            if on_item is not None:
                on_item(index)
            try:
                results.append(fn(item))
            except BaseException as exc:  # noqa: BLE001 - reported to the client
                return False, TaskFailure.from_exception(exc, node, item=index)
        return True, results
    except BaseException as exc:  # noqa: BLE001 - reported to the client
        return False, TaskFailure.from_exception(exc, node)
