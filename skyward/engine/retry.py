"""What the driver retries: a request whose node was lost to the infrastructure.

A ``NodeLost`` that is not the task's own doing (``by_task`` False: the machine or its
agent went away, a spot interruption, the node left the pool) interrupts the request;
the driver runs it again, up to ``Options.retry_on_interruption`` times, on another
node (or on the replacement of its node when it is pinned). A task's own exception, a
timeout, or a death the task caused (a recorded ``os._exit``, a crash, an OOM kill) is
never retried: running it again could repeat its side effects or its crash.
"""

from __future__ import annotations

from skyward.core.errors import PreemptedError


class Interrupted(Exception):
    """Internal: ``node`` was lost under a request (``detail`` says how); the driver
    decides whether to run it again."""

    def __init__(self, node: int, detail: str, item: int | None) -> None:
        super().__init__(detail)
        self.node = node
        self.detail = detail
        self.item = item


def exhausted(interrupted: Interrupted, name: str, attempts: int, where: str) -> PreemptedError:
    """The error for a request lost on each of its ``attempts`` (``where``: which part of
    a map was running, or "")."""
    tries = "its only attempt" if attempts == 1 else f"all {attempts} attempts"
    message = (
        f"{name} was interrupted on {tries}: node {interrupted.node} was lost while running it{where} "
        f"({interrupted.detail}). Raise Options.retry_on_interruption to retry more often"
    )
    error = PreemptedError(message, interrupted.node, interrupted.item, attempts)
    error.failed_item = interrupted.item  # type: ignore[attr-defined]
    return error
