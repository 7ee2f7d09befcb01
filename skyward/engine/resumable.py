"""One end of a relay session that may outlive its stream: what it sent and has not
heard acknowledged, kept to send again over the next stream.

Each end numbers the messages of ``core.messages`` it sends (``Resume`` and ``Ack``
aside: they belong to one stream) from 1, and counts those it receives, in order: the
stream is ordered, so a count is all either needs. Every ``ACK_EVERY`` seconds an end
that received something tells the other with ``Ack(received)``, and the other stops
keeping those. When a stream breaks, the client opens another and both exchange
``Resume(session, received)``; each then sends again, in order, what the other lacks,
and goes on. So no message is lost and none arrives twice: a call runs once however many
streams it took.
"""

from __future__ import annotations

import asyncio
from collections import deque

from skyward.core import messages
from skyward.core.codec import encode_message, relay_frame
from skyward.core.handshake import StreamOut

ACK_EVERY = 1.0
"""Seconds between an end's acknowledgements while it receives messages."""


class Resumable:
    """The messages this end sends in one session, written to the stream it has now
    (``attach``) and kept until the other end acknowledges them. ``compress``: large
    messages go compressed where that pays (``codec.relay_frame``)."""

    def __init__(self, compress: bool = False) -> None:
        self._compress = compress
        self._writer: StreamOut | None = None
        self._kept: deque[tuple[int, tuple[bytes, ...]]] = deque()
        self.sent = 0
        """The number of the last message sent."""
        self.received = 0
        """How many of the other end's numbered messages this end has received."""
        self._acked = 0

    @property
    def writer(self) -> StreamOut | None:
        """The stream messages go to now; None between streams."""
        return self._writer

    def put(self, message: messages.Message) -> None:
        """Number ``message``, keep it, and write it if there is a stream (on its loop;
        frames never interleave). A stream that fails the write is let go: the message
        waits for the next one."""
        self.sent += 1
        parts = relay_frame(encode_message(message), self._compress)
        self._kept.append((self.sent, parts))
        if self._writer is not None:
            self._write(parts)

    def put_control(self, message: messages.Resume | messages.Ack) -> None:
        """Write ``message`` to this stream only, unnumbered and not kept."""
        if self._writer is not None:
            self._write(relay_frame(encode_message(message)))

    async def drain(self) -> None:
        """Wait while the stream's buffer is full (nothing between streams)."""
        if self._writer is not None:
            await self._writer.drain()

    def acknowledged(self, received: int) -> None:
        """The other end has the first ``received`` messages: stop keeping them."""
        while self._kept and self._kept[0][0] <= received:
            self._kept.popleft()

    def attach(self, writer: StreamOut, received: int) -> None:
        """Go on over ``writer``, whose other end has the first ``received`` messages:
        send the rest again, in order. ``ValueError`` when the other end claims more than
        were sent or fewer than it acknowledged (then it is not this session's peer)."""
        first = self._kept[0][0] if self._kept else self.sent + 1
        if received > self.sent or received < first - 1:
            raise ValueError(f"the other end has {received} of this session's messages; {self.sent} were sent, "
                             f"{first - 1} acknowledged")
        self.acknowledged(received)
        self._writer = writer
        for _, parts in list(self._kept):
            if self._writer is None:
                break
            self._write(parts)

    def detach(self) -> None:
        """The stream is gone: keep what is sent until the next."""
        self._writer = None

    def count_received(self) -> None:
        """One more numbered message came from the other end."""
        self.received += 1

    def ack_due(self) -> messages.Ack | None:
        """The ``Ack`` to send now, if anything came since the last."""
        if self.received == self._acked:
            return None
        self._acked = self.received
        return messages.Ack(self.received)

    def _write(self, parts: tuple[bytes, ...]) -> None:
        assert self._writer is not None
        try:
            for part in parts:
                self._writer.write(part)
        except Exception:  # noqa: BLE001 - an OSError, or the SSH library's errors of a lost channel
            self._writer = None


async def acknowledge(out: Resumable, stream: StreamOut, always: bool = False) -> None:
    """Send ``Ack`` every ``ACK_EVERY`` seconds that something came (``always``: every
    ``ACK_EVERY`` seconds: the client's heartbeat, which the relay answers), while
    ``stream`` is ``out``'s (run as a task; cancel it with the stream)."""
    while out.writer is stream:
        await asyncio.sleep(ACK_EVERY)
        ack = messages.Ack(out.received) if always else out.ack_due()
        if ack is not None and out.writer is stream:
            out.put_control(ack)
