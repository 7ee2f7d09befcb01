"""What travels between the client and a node agent: a ``TaskRequest`` and its outcome.

Both are cloudpickled (protocol 5) by skyward itself, so Ray carries plain bytes. Buffers
of 1 MiB or more (large numpy arrays, ...) travel out of band: Ray stores them once in
its shared-memory object store and the receiver reads them without copying (read-only,
as with Ray's own arguments). An outcome is ``(True, value)`` or ``(False, TaskFailure)``;
a failure carries the exception pickled (when it can be) and the remote traceback as
text, so the client re-raises the remote exception as its own type.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from skyward.errors import RemoteError, RemoteTraceback

CALL = "call"
MAP = "map"
OUT_OF_BAND_BYTES = 1 << 20
Payload = bytes | tuple[bytes, list[Any]]


def encode(obj: Any) -> Payload:
    """Pickle ``obj``; big buffers stay out of band (see the module docstring)."""
    buffers: list[Any] = []

    def keep_in_band(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < OUT_OF_BAND_BYTES:
            return True
        buffers.append(buffer)
        return False

    header = cloudpickle.dumps(obj, protocol=5, buffer_callback=keep_in_band)
    return (header, buffers) if buffers else header


def decode(payload: Payload) -> Any:
    """The object ``encode`` packed."""
    if isinstance(payload, bytes):
        return cloudpickle.loads(payload)
    header, buffers = payload
    return cloudpickle.loads(header, buffers=buffers)


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
        return cls(type(exc).__qualname__, str(exc), text, node, _pickle_exception(exc), item)

    def to_exception(self, task_name: str) -> BaseException:
        """The exception to raise on the client, with the remote traceback as its cause."""
        exc = _unpickle_exception(self.exception, self.type_name, self.message)
        where = f"on node {self.node}" + (f" (item {self.item})" if self.item is not None else "")
        exc.__cause__ = RemoteTraceback(self.traceback)
        exc.add_note(f"raised {where} while running {task_name}")
        return exc


Outcome = tuple[bool, Any]


@dataclass(frozen=True, slots=True)
class RaisedError:
    """An exception raised for a request on a head agent, in a form that always pickles
    (its own type when it can be rebuilt, its notes and remote traceback kept)."""

    type_name: str
    message: str
    exception: bytes | None
    remote_traceback: str | None

    @classmethod
    def from_exception(cls, exc: BaseException) -> RaisedError:
        """Capture ``exc`` as the client should see it."""
        cause = exc.__cause__
        text = cause.text if isinstance(cause, RemoteTraceback) else None
        return cls(type(exc).__qualname__, str(exc), _pickle_exception(exc), text)

    def to_exception(self) -> BaseException:
        """The exception to raise on the client."""
        exc = _unpickle_exception(self.exception, self.type_name, self.message)
        if self.remote_traceback is not None:
            exc.__cause__ = RemoteTraceback(self.remote_traceback)
        return exc


def _unpickle_exception(payload: bytes | None, type_name: str, message: str) -> BaseException:
    """The exception ``_pickle_exception`` captured, or a ``RemoteError`` naming its type
    and message when it cannot be loaded here."""
    if payload is not None:
        try:
            loaded = cloudpickle.loads(payload)
            return loaded.rebuild() if isinstance(loaded, _ExceptionState) else loaded
        except Exception:
            pass
    return RemoteError(type_name, message)


def _pickle_exception(exc: BaseException) -> bytes | None:
    """Pickle ``exc`` so it loads back as its own type, or None if it cannot be.

    Exceptions whose ``__init__`` takes other arguments than ``args`` do not survive a
    plain pickle round trip; those are rebuilt from class, args and ``__dict__``.
    """
    for candidate in (exc, _ExceptionState(type(exc), exc.args, dict(vars(exc)))):
        try:
            payload = cloudpickle.dumps(candidate)
            cloudpickle.loads(payload)
            return payload
        except Exception:
            continue
    return None


@dataclass(frozen=True, slots=True)
class _ExceptionState:
    cls: type[BaseException]
    args: tuple[Any, ...]
    state: dict[str, Any]

    def rebuild(self) -> BaseException:
        exc = self.cls.__new__(self.cls)
        exc.args = self.args
        exc.__dict__.update(self.state)
        return exc


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
