"""Per-task stdout/stderr: ``sky.stdout(only=...)``, ``sky.stderr(only=...)``, ``sky.silent``,
``sky.redirect_output(callback)``.

On a node, the agent replaces ``sys.stdout``/``sys.stderr`` with ``TaskStream``s that send
each task's lines to the client. Muting and redirection are per task (a context
variable), so concurrent tasks on one node do not affect each other.
"""

from __future__ import annotations

import contextlib
import functools
import io
import sys
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TextIO, TypeVar, cast

from skyward.core.function import SkywardFunction
from skyward.core.instance import InstanceInfo, current_task, instance_info

Only = str | Callable[[InstanceInfo], bool]
LineSink = Callable[[str, str], None]

Stream = TextIO | io.TextIOBase
"""Where a task's output may be sent: a file, or a stream of ours such as CallbackWriter."""

F = TypeVar("F", bound=Callable[..., object])
"""A function, or a ``SkywardFunction``, that an output decorator gives back wrapped."""

_overrides: ContextVar[dict[str, Stream] | None] = ContextVar("skyward_output_overrides", default=None)


class CallbackWriter(io.TextIOBase):
    """A text stream that calls ``callback`` once per complete line (without the newline)."""

    def __init__(self, callback: Callable[[str], object]) -> None:
        super().__init__()
        self._callback = callback
        self._partial = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            lines = (self._partial + text).split("\n")
            self._partial = lines.pop()
        for line in lines:
            self._callback(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            rest, self._partial = self._partial, ""
        if rest:
            self._callback(rest)


class TaskStream(io.TextIOBase):
    """Stands in for sys.stdout/sys.stderr on a node: task output goes to ``sink`` line by
    line; output outside tasks goes to the original stream."""

    def __init__(self, name: str, original: TextIO, sink: LineSink) -> None:
        super().__init__()
        self.name = name
        self.original = original
        self._sink = sink
        self._partial: dict[str, str] = {}
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.original.fileno()

    def write(self, text: str) -> int:
        overrides = _overrides.get()
        if overrides is not None and self.name in overrides:
            return overrides[self.name].write(text)
        task = current_task()
        if task is None:
            return self.original.write(text)
        with self._lock:
            lines = (self._partial.get(task.task_id, "") + text).split("\n")
            self._partial[task.task_id] = lines.pop()
        for line in lines:
            self._sink(self.name, line)
        return len(text)

    def flush_task(self, task_id: str) -> None:
        """Send a task's unterminated last line, if any (called when the task ends)."""
        if task_id not in self._partial:  # only the task's own thread, done now, adds it
            return
        with self._lock:
            rest = self._partial.pop(task_id, "")
        if rest:
            self._sink(self.name, rest)

    def flush(self) -> None:
        self.original.flush()


@contextlib.contextmanager
def _override(streams: dict[str, Stream]) -> Iterator[None]:
    """Send the named streams elsewhere for the current task (or, off a node, the process)."""
    if isinstance(sys.stdout, TaskStream) or isinstance(sys.stderr, TaskStream):
        current = dict(_overrides.get() or {})
        token = _overrides.set({**current, **streams})
        try:
            yield
        finally:
            _overrides.reset(token)
        return
    with contextlib.ExitStack() as stack:
        if "stdout" in streams:
            stack.enter_context(contextlib.redirect_stdout(streams["stdout"]))
        if "stderr" in streams:
            stack.enter_context(contextlib.redirect_stderr(streams["stderr"]))
        yield


@contextlib.contextmanager
def redirect_output(callback: Callable[[str], object]) -> Iterator[tuple[CallbackWriter, CallbackWriter]]:
    """Route stdout and stderr to ``callback(line)`` inside the block; yields the
    ``(stdout, stderr)`` CallbackWriter pair. Per task when used inside a task."""
    out, err = CallbackWriter(callback), CallbackWriter(callback)
    try:
        with _override({"stdout": out, "stderr": err}):
            yield out, err
    finally:
        out.flush()
        err.flush()


def _predicate(only: Only, decorator: str) -> Callable[[InstanceInfo], bool]:
    if only == "head":
        return lambda info: info.is_head
    if callable(only) and not isinstance(only, str):
        return only
    raise ValueError(
        f'sky.{decorator}(only={only!r}) is not valid: use only="head" or a function '
        "InstanceInfo -> bool"
    )


def _mute_unless(streams: tuple[str, ...], allowed: Callable[[InstanceInfo], bool] | None) -> Callable[[F], F]:
    def decorate(target: F) -> F:
        fn: Callable[..., object] = target.local if isinstance(target, SkywardFunction) else target
        if not callable(fn):
            raise TypeError(f"output decorators wrap functions, got {type(target).__name__}")

        @functools.wraps(fn)
        def wrapper(*args: object, **kwargs: object) -> object:
            if allowed is not None:
                info = instance_info()
                if info is None or allowed(info):
                    return fn(*args, **kwargs)
            sink = io.StringIO()
            with _override({name: sink for name in streams}):
                return fn(*args, **kwargs)

        wrapped: Callable[..., object] = (
            SkywardFunction(wrapper, target.timeout) if isinstance(target, SkywardFunction) else wrapper
        )
        # the same kind of callable as ``target``, taking and returning what it does
        return cast(F, wrapped)

    return decorate


def stdout(only: Only) -> Callable[[F], F]:
    """Decorator factory: keep a task's stdout only where ``only`` holds
    (``"head"`` or a predicate on ``InstanceInfo``); elsewhere it is discarded."""
    return _mute_unless(("stdout",), _predicate(only, "stdout"))


def stderr(only: Only) -> Callable[[F], F]:
    """Decorator factory: like ``stdout`` for stderr."""
    return _mute_unless(("stderr",), _predicate(only, "stderr"))


def silent(fn: F) -> F:
    """Bare decorator: discard both stdout and stderr of the task on every node."""
    return _mute_unless(("stdout", "stderr"), None)(fn)
