"""The seam between the one dispatch engine and the nodes: a ``Transport`` carries an
encoded request to a node agent and brings back its encoded reply, shares one payload
with many calls (a broadcast), and feeds the nodes' event batches to an ``EventFeed``.

Transports never look inside payloads: a request is bytes (plus out-of-band buffers)
from ``wire.encode``, a reply is what the agent's ``execute`` returned. What goes wrong
on the way is one of the typed ``TransportError``s below, which the driver turns into the
error a user sees.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from skyward.engine.wire import Payload

if TYPE_CHECKING:
    from skyward.engine.events import EventFeed


class TransportError(Exception):
    """A request did not get an answer from its node agent."""

    def __init__(self, node: int, detail: str) -> None:
        super().__init__(detail)
        self.node = node
        self.detail = detail


class NodeLost(TransportError):
    """The node's agent process died (or its connection broke) after the request was sent."""


class NoReply(TransportError):
    """No answer came within the time the driver allowed."""


class Refused(TransportError):
    """The agent received the request but could not handle it at all."""


class Disconnected(TransportError):
    """The way to every node is gone (a remote pool's connection to its head broke)."""


@dataclass(frozen=True, slots=True)
class Shared:
    """A payload stored once for several calls (``Transport.share``)."""

    key: int
    handle: object


class Transport(Protocol):
    """How the driver reaches node agents ``0..nodes-1``."""

    @property
    def nodes(self) -> int: ...

    def open(self, loop: asyncio.AbstractEventLoop, feed: EventFeed) -> None:
        """Start: async calls run on ``loop``; node event batches go to ``feed``."""

    @property
    def can_call_now(self) -> bool:
        """Whether ``call_now`` may be used (the transport can wait on any thread)."""

    def call_now(self, node: int, payload: Payload, timeout: float | None) -> Payload:
        """The reply, waited for on the calling thread. Raises ``TransportError``."""

    async def call(self, node: int, payload: Payload | Shared, timeout: float | None) -> Payload:
        """The reply of ``node``'s agent to ``payload``. Raises ``TransportError``."""

    async def share(self, payload: Payload) -> Shared:
        """Store ``payload`` once for several ``call``s."""

    def unshare(self, shared: Shared) -> None:
        """Forget a payload stored by ``share``."""

    def close(self) -> None:
        """Stop the event feed's sources and release what ``open`` started (bounded)."""
