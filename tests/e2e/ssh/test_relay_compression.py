"""Large payloads through a real SSH pool's relay: the stream between the client and the
head relay compresses a large compressible argument and result (lz4, both ways) and
leaves an incompressible one plain; both arrive whole (docs/compression.md)."""

from __future__ import annotations

import hashlib
import os

import pytest

import skyward as sky
from skyward.core import codec
from skyward.engine import relay_server, resumable


@sky.function
def digest_and_echo(data: bytes) -> tuple[str, bytes]:
    """What the node received (its sha256), and the same bytes back as the result."""
    import hashlib

    return hashlib.sha256(data).hexdigest(), data


@pytest.mark.parametrize("kind", ["compressible", "incompressible"])
def test_a_large_payload_round_trips_through_the_relay(
    ssh_pool: sky.Pool, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    sent: list[bool] = []  # the client's frames: compressed or not
    expanded: list[int] = []  # the relay's compressed frames the client expanded
    frame, grow = resumable.relay_frame, relay_server.expand

    def counting_frame(data: bytes, compress: bool = False) -> tuple[bytes, ...]:
        parts = frame(data, compress)
        if len(data) >= codec.COMPRESS_FROM:
            sent.append(len(parts) == 3)
        return parts

    def counting_expand(body: bytes, limit: int = codec.EXPANDED_LIMIT) -> bytes:
        data = grow(body, limit)
        expanded.append(len(data))
        return data

    monkeypatch.setattr(resumable, "relay_frame", counting_frame)  # where each end frames what it sends
    monkeypatch.setattr(relay_server, "expand", counting_expand)
    data = b"skyward " * (2 << 20) if kind == "compressible" else os.urandom(16 << 20)  # 16 MiB
    digest, back = digest_and_echo(data) >> ssh_pool
    assert digest == hashlib.sha256(data).hexdigest()  # the argument arrived whole
    assert back == data  # and the result came back whole
    if kind == "compressible":
        assert sent == [True] and len(expanded) == 1 and expanded[0] > len(data)
    else:
        assert sent == [False] and expanded == []
