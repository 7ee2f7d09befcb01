"""Events a running task sends to the client through its node's outbox (a generator's
values): the agent installs where they go, and so does each executor child (over its
pipe to the agent)."""

from __future__ import annotations

from collections.abc import Callable

from skyward.observe.events import Event

_sink: Callable[[Event], None] | None = None


def install(sink: Callable[[Event], None]) -> None:
    """Send what tasks publish in this process to ``sink`` (called by the agent or child)."""
    global _sink
    _sink = sink


def publish(event: Event) -> None:
    """Send ``event`` to the client, after what the task printed so far; RuntimeError
    outside a node process."""
    if _sink is None:
        raise RuntimeError("publish() works only inside a task running on a pool's node")
    _sink(event)
