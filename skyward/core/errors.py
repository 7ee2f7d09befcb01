"""Exceptions skyward raises on the client."""

from __future__ import annotations

import linecache
import re

_FRAME = re.compile(r'^  File "(?P<path>.+)", line (?P<line>\d+), in .+$')


class SkywardError(Exception):
    """Base class of skyward's own errors."""


class NoActivePoolError(SkywardError, RuntimeError):
    """Raised when ``>> sky`` or ``sky.dict(...)`` is used with no pool open."""


class NodeCrashedError(SkywardError, RuntimeError):
    """The process running a task died (os._exit, a signal, a segfault, out of memory).

    The node's agent is replaced and the pool keeps working. A task whose own process
    ended it (os._exit, a crash, running out of memory) is not retried; a task whose
    node was lost to the infrastructure is retried (``Options.retry_on_interruption``)
    and raises ``PreemptedError`` when every attempt was lost.
    """

    def __init__(self, message: str, node: int, item: int | None = None) -> None:
        super().__init__(message)
        self.node = node
        self.item = item
        """For a map: the index of the item that was running (the first unfinished one of
        its chunk when the agent process itself died), else None."""


class PreemptedError(NodeCrashedError):
    """A task's node was lost to the infrastructure (a spot interruption, a machine or
    agent process gone) on every one of its attempts: ``attempts`` runs, that is
    ``Options.retry_on_interruption`` retries, all ended that way. Catch it to handle
    lost capacity; it is a ``NodeCrashedError`` too."""

    def __init__(self, message: str, node: int, item: int | None = None, attempts: int = 1) -> None:
        super().__init__(message, node, item)
        self.attempts = attempts


class NodeRemovedError(SkywardError, RuntimeError):
    """Work pinned to a node (``pool.run(..., target=i)``) cannot run: the pool no longer
    has that node (it scaled down or was resized below it)."""


class WakeError(SkywardError, RuntimeError):
    """A pool with no node (``Nodes(min=0)`` idled down, or ``desired=0``) could not
    start one for the work waiting; the message names the node and the cause. The pool
    stays open and the next task tries again."""


class RemoteError(SkywardError):
    """Stands in for a remote exception that could not be sent back as itself."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.remote_message = message


class TaskExitError(RemoteError):
    """A task raised ``SystemExit`` (``sys.exit()``), ``KeyboardInterrupt`` or
    ``GeneratorExit``: on the client that is a failure of the task, never an exit of the
    client itself. ``exit_code`` is ``SystemExit.code`` (None for the others)."""

    def __init__(self, type_name: str, message: str, exit_code: object = None) -> None:
        super().__init__(type_name, message)
        self.exit_code = exit_code
        if type_name == "SystemExit":
            self.args = (f"the task called sys.exit({exit_code!r}) (SystemExit, exit code {exit_code!r})",)
        else:
            self.args = (f"the task raised {type_name}{': ' + message if message else ''}",)


class RemoteTraceback(Exception):
    """Carries the remote traceback text; set as ``__cause__`` of a re-raised remote error.

    A frame whose source line the node could not show (code shipped from the client, whose
    file exists only here) gets the line from the local file when there is one."""

    def __init__(self, text: str) -> None:
        text = with_local_source(text)
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"\n\n[remote traceback]\n{self.text}"


class PoolClosedError(SkywardError, RuntimeError):
    """Raised when work is dispatched to a pool that was closed or never opened."""


class CollectionUnavailableError(RuntimeError):
    """The actor holding a collection is gone (the pool closed, or the actor crashed)."""


class CollectionClosedError(PoolClosedError, CollectionUnavailableError):
    """A collection is used after its pool closed: its contents are gone. Both a
    ``PoolClosedError`` and a ``CollectionUnavailableError``, so code catching either
    handles it."""


class AllProvidersFailedError(SkywardError, RuntimeError):
    """Every Spec of a pool failed to provision; the notes give each one's reason."""


class NoAvailableProviderError(SkywardError, RuntimeError):
    """No provider has a machine that satisfies the Spec (within its price cap, in its
    region); the message (and, for several Specs, the notes) say what was found."""


def with_local_source(text: str) -> str:
    """``text`` (a formatted traceback) with the missing source line of each frame filled
    in from the file of that name on this machine, where it exists."""
    lines = text.splitlines(keepends=True)
    filled: list[str] = []
    for index, line in enumerate(lines):
        filled.append(line)
        frame = _FRAME.match(line.rstrip("\n"))
        following = lines[index + 1] if index + 1 < len(lines) else ""
        if frame is None or following.startswith("    "):
            continue
        source = linecache.getline(frame["path"], int(frame["line"])).strip()
        if source:
            filled.append(f"    {source}\n")
    return "".join(filled)
