"""A relay session's sending end (``engine.resumable``): numbered, kept until
acknowledged, sent again in order on the next stream."""

from __future__ import annotations

import pytest

from skyward.core.codec import FRAME_HEADER, decode_message
from skyward.core.messages import Ack, Report
from skyward.engine.resumable import Resumable


class Stream:
    """A stream that records what is written (or refuses, once ``broken``)."""

    def __init__(self) -> None:
        self.data = b""
        self.broken = False

    def write(self, data: bytes) -> None:
        if self.broken:
            raise ConnectionResetError("reset")
        self.data += data

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass

    def messages(self) -> list[object]:
        found, data = [], self.data
        while data:
            size = FRAME_HEADER.unpack(data[:8])[0]
            found.append(decode_message(data[8:8 + size]))
            data = data[8 + size:]
        return found


def test_what_the_other_end_lacks_is_sent_again_in_order_and_nothing_twice() -> None:
    out = Resumable()
    first = Stream()
    out.attach(first, 0)
    for n in range(1, 4):
        out.put(Report(str(n)))
    assert first.messages() == [Report("1"), Report("2"), Report("3")]
    out.acknowledged(1)
    first.broken = True
    out.put(Report("4"))  # the stream fails the write: let go, the message kept
    assert out.writer is None
    out.put(Report("5"))  # between streams: kept
    second = Stream()
    out.attach(second, 2)  # the other end got 1 and 2 of the first stream
    assert second.messages() == [Report("3"), Report("4"), Report("5")]
    out.put_control(Ack(7))
    out.put(Report("6"))
    assert second.messages()[3:] == [Ack(7), Report("6")]
    assert out.sent == 6


def test_a_peer_that_claims_what_was_never_sent_or_was_acknowledged_is_refused() -> None:
    out = Resumable()
    out.put(Report("1"))
    out.put(Report("2"))
    out.acknowledged(1)
    with pytest.raises(ValueError, match="has 3 of this session's messages; 2 were sent"):
        out.attach(Stream(), 3)
    with pytest.raises(ValueError, match="1 acknowledged"):
        out.attach(Stream(), 0)


def test_an_ack_is_due_only_when_something_came() -> None:
    out = Resumable()
    assert out.ack_due() is None
    out.count_received()
    out.count_received()
    assert out.ack_due() == Ack(2)
    assert out.ack_due() is None
