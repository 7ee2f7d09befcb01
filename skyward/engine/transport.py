"""The seam between the one dispatch engine and the nodes: a ``Transport`` carries an
encoded request to a node agent and brings back its encoded reply, shares one payload
with many calls (a broadcast), and feeds the nodes' event batches to an ``EventSink`` (a pool's ``EventFeed``).

Transports never look inside payloads: a request is bytes (plus out-of-band buffers)
from ``wire.encode``, a reply is what the agent's ``execute`` returned. What goes wrong
on the way is one of the typed ``TransportError``s below, which the driver turns into the
error a user sees.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, TypeVar

from msgspec import Struct

from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventSink


class TransportError(Exception):
    """A request did not get an answer from its node agent."""

    def __init__(self, node: int, detail: str) -> None:
        super().__init__(detail)
        self.node = node
        self.detail = detail


class NodeLost(TransportError):
    """The node's agent process died (or its connection broke, or the node left the pool)
    after the request was sent. ``by_task``: the task itself ended the process (a
    recorded ``os._exit``, a crash, the kernel's OOM killer: see ``engine.death``), so the
    request must not run again; otherwise the infrastructure failed and it may."""

    def __init__(self, node: int, detail: str, by_task: bool = False) -> None:
        super().__init__(node, detail)
        self.by_task = by_task


class NoReply(TransportError):
    """No answer came within the time the driver allowed."""


class Refused(TransportError):
    """The agent received the request but could not handle it at all."""


class Disconnected(TransportError):
    """The way to every node is gone (a remote pool's connection to its head broke)."""


class Shared(Struct, frozen=True):
    """A payload stored once for several calls (``Transport.share``)."""

    key: int
    handle: object


Agent = TypeVar("Agent", contravariant=True)
"""What a transport reaches a node's agent by (a Ray actor and its lane, a relay's agent
setup, an in-process runner)."""


class Transport(Protocol[Agent]):
    """How the driver reaches the node agents, by rank. Its provider attaches the agent
    of a node that joins; the engine detaches a node that left."""

    def attach(self, node: int, agent: Agent) -> None:
        """Node ``node`` joins with ``agent``; returns once calls can reach it. Raises,
        naming the node, when it cannot be reached."""

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventSink) -> None:
        """Start: async calls run on ``loop``; node event batches go to ``feed``."""

    @property
    def can_call_now(self) -> bool:
        """Whether ``call_now`` may be used (the transport can wait on any thread)."""

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        """The reply, waited for on the calling thread. Raises ``TransportError``."""

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        """The reply of ``node``'s agent to ``payload``. Raises ``TransportError``."""

    async def share(self, payload: Payload | bytearray) -> Shared:
        """Store ``payload`` once for several ``call``s (a bytearray: a pickle as a head
        relay received it over its upload lane, ``transports.upload_lane``)."""

    def unshare(self, shared: Shared) -> None:
        """Forget a payload stored by ``share``."""

    def detach(self, node: int, reason: str) -> None:
        """Node ``node`` left the pool: calls in flight to it fail at once with
        ``NodeLost`` (an interruption, ``reason`` in its detail), later calls too, and
        its events are no longer polled. Idempotent."""

    def close(self) -> None:
        """Stop the event feed's sources and release what ``open`` started (bounded)."""
