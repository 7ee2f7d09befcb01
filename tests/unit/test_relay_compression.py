"""Compression of relay frames (``codec.relay_frame``, ``shrink``, ``expand``): a large
message is sent compressed only when that pays, its flag tells the receiver, a plain frame
is byte for byte a protocol-1 frame, and a compressed frame that would expand beyond the
limit, or is not what it says, is refused (``MalformedFrame``) without expanding it."""

from __future__ import annotations

import asyncio
import os
import struct

import lz4.frame
import pytest
from fake_cluster import FakeProvider
from hypothesis import given, settings
from hypothesis import strategies as st

import skyward as sky
from skyward.core import codec
from skyward.core.codec import (
    COMPRESS_FROM,
    COMPRESSED,
    FRAME_HEADER,
    WORTH,
    MalformedFrame,
    encode_message,
    expand,
    frame_header,
    relay_frame,
    shrink,
)
from skyward.core.messages import Call, Reply
from skyward.engine import relay_server, resumable
from skyward.engine.relay_server import read_message

MIB = 1 << 20


def _body(parts: tuple[bytes, ...]) -> bytes:
    return b"".join(parts[1:])


def _compressed(data: bytes) -> bytes:
    """The body of a COMPRESSED frame of ``data``."""
    parts = relay_frame(data, compress=True)
    assert frame_header(parts[0])[0] == COMPRESSED
    return _body(parts)


def test_a_plain_frame_is_a_protocol_1_frame() -> None:
    data = encode_message(Call(1, 0, b"x" * 100, None))
    assert relay_frame(data) == (FRAME_HEADER.pack(len(data)), data)
    assert relay_frame(data, compress=True) == (FRAME_HEADER.pack(len(data)), data)  # small: never compressed
    assert frame_header(relay_frame(data)[0]) == (0, len(data))


def test_a_large_compressible_message_is_sent_compressed_and_comes_back_whole() -> None:
    data = encode_message(Reply(7, b"\0" * (8 * MIB)))
    parts = relay_frame(data, compress=True)
    flags, size = frame_header(parts[0])
    assert flags == COMPRESSED and size == len(_body(parts)) < WORTH * len(data)
    assert expand(_body(parts)) == data
    assert relay_frame(data, compress=False) == (FRAME_HEADER.pack(len(data)), data)  # a local stream's


def test_what_does_not_pay_travels_plain() -> None:
    assert shrink(b"\0" * (COMPRESS_FROM - 1)) is None  # too small to bother
    assert shrink(os.urandom(4 * MIB)) is None  # incompressible: the samples say so
    assert shrink(b"\0" * COMPRESS_FROM) is not None


def test_a_payload_compressible_in_parts_is_compressed() -> None:
    data = os.urandom(2 * MIB) + b"\0" * (2 * MIB)
    packed = shrink(data)
    assert packed is not None and len(packed) <= WORTH * len(data)


def test_the_whole_must_pay_not_only_the_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    # samples of zeros at the 4 places shrink looks, random bytes everywhere else
    size = 4 * MIB
    data = bytearray(os.urandom(size))
    step = (size - (64 << 10)) // 3
    for i in range(4):
        data[i * step:i * step + (64 << 10)] = bytes(64 << 10)
    assert shrink(bytes(data)) is None


def test_an_unknown_flag_is_refused() -> None:
    with pytest.raises(MalformedFrame, match="flags"):
        frame_header(struct.pack("!Q", (0x02 << 56) | 10))


def test_expanding_is_bounded_by_the_limit_before_any_work() -> None:
    body = _compressed(b"\0" * (4 * MIB))
    assert expand(body, limit=4 * MIB) == b"\0" * (4 * MIB)
    with pytest.raises(MalformedFrame, match="over the limit"):
        expand(body, limit=4 * MIB - 1)


def test_a_frame_claiming_more_than_lz4_can_make_is_refused() -> None:
    packed = lz4.frame.compress(b"abc")
    with pytest.raises(MalformedFrame, match="cannot expand"):
        expand(struct.pack("!Q", 1 << 31) + packed)  # a small frame claiming 2 GiB


@pytest.mark.parametrize("change", ["shorter", "longer", "truncated", "trailing", "garbage", "headless"])
def test_a_frame_that_is_not_what_it_says_is_refused(change: str) -> None:
    data = b"skyward " * (MIB // 8)
    body = _compressed(data)
    size, packed = struct.unpack_from("!Q", body)[0], body[8:]
    bad = {
        "shorter": struct.pack("!Q", size - 1) + packed,  # expands to more than it says
        "longer": struct.pack("!Q", size + 1) + packed,  # to less
        "truncated": body[: len(body) // 2],
        "trailing": body + b"tail",
        "garbage": struct.pack("!Q", size) + os.urandom(len(packed)),
        "headless": body[:5],
    }[change]
    with pytest.raises(MalformedFrame):
        expand(bad)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=256))
def test_random_bodies_only_ever_raise_malformed_frame(body: bytes) -> None:
    try:
        expanded = expand(body, limit=1 << 20)
    except MalformedFrame:
        return
    assert len(expanded) <= 1 << 20  # what expands stays within the limit


def _read(frame: bytes, limit: int = codec.EXPANDED_LIMIT) -> object:
    async def read() -> object:
        reader = asyncio.StreamReader()
        reader.feed_data(frame)
        reader.feed_eof()
        return await read_message(reader, limit)

    return asyncio.run(read())


def test_read_message_expands_a_compressed_frame_within_its_limit() -> None:
    message = Reply(3, b"\0" * (2 * MIB))
    frame = b"".join(relay_frame(encode_message(message), compress=True))
    assert len(frame) < MIB
    assert _read(frame) == message
    with pytest.raises(MalformedFrame, match="over the limit"):
        _read(frame, limit=MIB)


class _Spy:
    """Counts the relay frames sent compressed and the ones expanded (both ends run here)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.compressed = 0
        self.expanded = 0
        frame, grow = resumable.relay_frame, relay_server.expand

        def counting_frame(data: bytes, compress: bool = False) -> tuple[bytes, ...]:
            parts = frame(data, compress)
            self.compressed += len(parts) == 3
            return parts

        def counting_expand(body: bytes, limit: int = codec.EXPANDED_LIMIT) -> bytes:
            self.expanded += 1
            return grow(body, limit)

        monkeypatch.setattr(resumable, "relay_frame", counting_frame)  # both ends frame what they send there
        monkeypatch.setattr(relay_server, "expand", counting_expand)


def test_large_payloads_cross_a_compressing_relay_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _Spy(monkeypatch)
    echo = sky.function(lambda data: (len(data), data))
    with sky.Compute(provider=FakeProvider(relayed=True), nodes=2) as pool:  # compresses, as a remote pool's
        compressible = b"skyward " * MIB  # 8 MiB
        assert echo(compressible) >> pool == (len(compressible), compressible)
        assert (spy.compressed, spy.expanded) == (2, 2)  # the call and its reply
        incompressible = os.urandom(8 * MIB)
        assert echo(incompressible) >> pool == (len(incompressible), incompressible)
        assert (spy.compressed, spy.expanded) == (2, 2)  # neither
