"""What travels between the client and a node agent: a ``TaskRequest`` and its outcome.

An outcome is ``(True, value)`` or ``(False, TaskFailure)``. A failure carries the
exception pickled (when it can be) and the remote traceback as text, so the client
re-raises the remote exception as its own type with the traceback attached.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from skyward.errors import RemoteError, RemoteTraceback

CALL = "call"
MAP = "map"


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """One unit of work: ``fn(*args, **kwargs)``, or for ``MAP`` ``[fn(x) for x in args[0]]``.

    ``timeout`` is per call (per item for ``MAP``), counted from when it starts running.
    """

    task_id: str
    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    kind: str = CALL


@dataclass(frozen=True, slots=True)
class TaskFailure:
    """Why a task failed, in a form that always pickles."""

    type_name: str
    message: str
    traceback: str
    node: int
    exception: bytes | None = None
    item: int | None = None
    timed_out: bool = False
    crashed: bool = False

    @classmethod
    def from_exception(cls, exc: BaseException, node: int, item: int | None = None) -> TaskFailure:
        """Capture ``exc`` (with its traceback) raised while running a task on ``node``."""
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        try:
            payload: bytes | None = cloudpickle.dumps(exc)
            cloudpickle.loads(payload)
        except Exception:
            payload = None
        return cls(type(exc).__qualname__, str(exc), text, node, payload, item)

    def to_exception(self, task_name: str) -> BaseException:
        """The exception to raise on the client, with the remote traceback as its cause."""
        exc: BaseException | None = None
        if self.exception is not None:
            try:
                exc = cloudpickle.loads(self.exception)
            except Exception:
                exc = None
        if exc is None:
            exc = RemoteError(self.type_name, self.message)
        where = f"on node {self.node}" + (f" (item {self.item})" if self.item is not None else "")
        exc.__cause__ = RemoteTraceback(self.traceback)
        exc.add_note(f"raised {where} while running {task_name}")
        return exc


Outcome = tuple[bool, Any]


def describe_unpicklable(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> TypeError | None:
    """Find which part of a call cannot be pickled and say so; None if all of it can."""
    parts: list[tuple[str, Any]] = [("the function", fn)]
    parts += [(f"argument {i}", value) for i, value in enumerate(args)]
    parts += [(f"keyword argument {key!r}", value) for key, value in kwargs.items()]
    for label, value in parts:
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            shown = repr(value)
            shown = shown if len(shown) <= 120 else shown[:117] + "..."
            return TypeError(
                f"Cannot send {name} to the pool: {label} ({shown}) cannot be pickled: {exc}. "
                "Pass something picklable, or create the object inside the function."
            )
    return None
