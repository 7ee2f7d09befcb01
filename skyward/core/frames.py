"""Tracebacks as a user reads them: the frames of skyward's own code left out, so an
error ends with the user's line that caused it and the message that says what to do.
``SKYWARD_TRACEBACK=full`` keeps every frame (for a bug report about skyward itself).

Two places use it: the public calls that run work or open a pool (``shows_users_frames``
on ``>>``, ``@``, ``pool.run``, ``pool.map``, ``with sky.Compute(...)``...), which re-raise
what failed with the user's frames only, and the nodes, which send a task's traceback
without the frames of the agent that ran it (``users_traceback``).
"""

from __future__ import annotations

import functools
import os
import sysconfig
import traceback
import types
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from skyward.core.errors import RemoteTraceback, SkywardError

FULL_ENV = "SKYWARD_TRACEBACK"
"""Set to ``full``: keep skyward's frames in every traceback."""
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""Files under this directory are skyward's."""
PLUMBING = (
    *(os.path.join(sysconfig.get_paths()["stdlib"], part) + os.sep for part in ("concurrent", "asyncio")),
    os.path.join(sysconfig.get_paths()["stdlib"], "threading.py"),
)
"""The standard library's futures, event loop and thread primitives, which carry a
result from skyward's threads to the caller (a Ctrl-C lands in their waits): beneath a
public call, their frames are skyward's too."""

INTERRUPTED = "interrupted (Ctrl-C): the pool cancels its work and stops what it started"
"""What a Ctrl-C that ends a public call says (SIGTERM's names the signal)."""

P = ParamSpec("P")
R = TypeVar("R")


def full() -> bool:
    """True when ``SKYWARD_TRACEBACK=full`` asks for every frame."""
    return os.environ.get(FULL_ENV, "").strip().lower() == "full"


def ours(filename: str) -> bool:
    """True for a file of the skyward package, or of the futures and event loop it
    hands results through."""
    return filename.startswith(PACKAGE) or filename.startswith(PLUMBING)


def without_ours(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The chain ``tb`` with skyward's frames left out (None when only those were in it)."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not ours(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    chain: types.TracebackType | None = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


def users_traceback(exc: BaseException) -> str:
    """``exc`` formatted as Python prints it, its chained exceptions included, without
    skyward's frames (with them under ``SKYWARD_TRACEBACK=full``)."""
    shown = traceback.TracebackException.from_exception(exc)
    if not full():
        seen: set[int] = set()
        pending: list[traceback.TracebackException | None] = [shown]
        while pending:
            current = pending.pop()
            if current is None or id(current) in seen:
                continue
            seen.add(id(current))
            current.stack = traceback.StackSummary.from_list([f for f in current.stack if not ours(f.filename)])
            pending += [current.__cause__, current.__context__]
    return "".join(shown.format())


def shows_users_frames(call: Callable[P, R]) -> Callable[P, R]:
    """``call``, whose exceptions are re-raised with skyward's frames left out. A skyward
    error whose message names the cause and the fix loses its chained cause too (a
    library's frames that led to it), but not a task's remote traceback; a Ctrl-C
    (KeyboardInterrupt) loses what it interrupted and says ``INTERRUPTED``."""

    @functools.wraps(call)
    def calling(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return call(*args, **kwargs)
        except (Exception, KeyboardInterrupt) as exc:
            if full():
                raise
            _trim(exc)
            users_frames = without_ours(exc.__traceback__)
            raise exc.with_traceback(users_frames)  # SKYWARD_TRACEBACK=full shows skyward's frames too

    return calling


def _trim(exc: BaseException) -> None:
    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C: the user's line, then one line saying so
        exc.__suppress_context__ = True
        if not exc.args:
            exc.args = (INTERRUPTED,)
        return
    if isinstance(exc, SkywardError) and not isinstance(exc.__cause__, RemoteTraceback):
        exc.__cause__ = None
        exc.__suppress_context__ = True
