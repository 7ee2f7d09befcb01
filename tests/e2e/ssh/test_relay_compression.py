"""Large payloads through a real SSH pool's relay: the stream between the client and the
head relay compresses a large compressible argument and result (lz4, both ways) and
leaves an incompressible one plain; both arrive whole (docs/compression.md). A large
incompressible argument, of a call or a broadcast, takes the relay's upload lane instead."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

import skyward as sky
from skyward.core import codec
from skyward.engine import relay_server, resumable
from skyward.engine.transports import upload_lane


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
    uploaded = counted_uploads(monkeypatch)
    data = b"skyward " * (2 << 20) if kind == "compressible" else os.urandom(16 << 20)  # 16 MiB
    digest, back = digest_and_echo(data) >> ssh_pool
    assert digest == hashlib.sha256(data).hexdigest()  # the argument arrived whole
    assert back == data  # and the result came back whole
    if kind == "compressible":
        assert sent == [True] and uploaded == [] and len(expanded) == 1 and expanded[0] > len(data)
    else:  # the argument over the upload lane, the result back plain
        assert sent == [] and uploaded == [True] and expanded == []


def counted_uploads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each upload the client makes over the relay's upload lane from now on arrived."""
    uploaded: list[bool] = []
    send = upload_lane.UploadLane.send

    def counting_send(self: upload_lane.UploadLane, payload: Any) -> bytes | None:
        ticket = send(self, payload)
        uploaded.append(ticket is not None)
        return ticket

    monkeypatch.setattr(upload_lane.UploadLane, "send", counting_send)
    return uploaded


@sky.function
def digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("kind", ["compressible", "incompressible"])
def test_a_large_broadcast_takes_the_upload_lane_unless_it_compresses(
    ssh_pool: sky.Pool, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """An incompressible broadcast argument goes to the head relay over its TLS upload lane
    (``upload_lane``), a compressible one over the SSH channel, compressed; every node
    gets it whole either way."""
    uploaded = counted_uploads(monkeypatch)
    data = b"skyward " * (2 << 20) if kind == "compressible" else os.urandom(16 << 20)  # 16 MiB
    assert digest(data) @ ssh_pool == [hashlib.sha256(data).hexdigest()] * 3
    assert uploaded == ([] if kind == "compressible" else [True])
