"""The upload lane between a remote pool's client and its head relay
(``engine.transports.upload_lane``), on loopback: what it carries arrives whole, and
nothing from a peer that did not prove itself is ever stored."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import socket
import ssl
import time
from collections.abc import Iterator

import pytest

from skyward.core import handshake
from skyward.core.codec import recv_exactly
from skyward.engine.transports import upload_lane
from skyward.engine.transports.upload_lane import (
    UPLOAD_FROM,
    Credentials,
    UploadLane,
    UploadListener,
    Uploads,
    new_credentials,
)

SECRET = handshake.new_secret()


@pytest.fixture(scope="module")
def credentials() -> Credentials:
    return new_credentials()


@pytest.fixture
def listener(credentials: Credentials) -> Iterator[tuple[UploadListener, Uploads]]:
    uploads = Uploads()
    listening = UploadListener("127.0.0.1", credentials, SECRET, uploads)
    try:
        yield listening, uploads
    finally:
        listening.close()


@contextlib.contextmanager
def started_lane(host: str, port: int, certificate: bytes, secret: bytes) -> Iterator[UploadLane]:
    """A client lane connecting in the background, closed after the block."""
    lane = UploadLane(host, port, certificate, secret)
    lane.start()
    try:
        yield lane
    finally:
        lane.close()


def connected(lane: UploadLane, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while not lane.connected and time.monotonic() < deadline:
        time.sleep(0.01)
    return lane.connected


def test_an_upload_arrives_whole_under_its_ticket(listener: tuple[UploadListener, Uploads], credentials: Credentials) -> None:
    server, uploads = listener
    with started_lane("127.0.0.1", server.port, credentials.certificate, SECRET) as lane:
        assert connected(lane)
        body = os.urandom(UPLOAD_FROM + 3)
        ticket = asyncio.run(lane.upload(body))
        assert ticket is not None and uploads.take(ticket) == body and uploads.take(ticket) is None
        buffer = os.urandom(UPLOAD_FROM)
        ticket = asyncio.run(lane.upload((b"header", [pickle.PickleBuffer(buffer)])))
        assert ticket is not None
        header, buffers = uploads.take(ticket)  # type: ignore[misc]
        assert header == b"header" and [bytes(b) for b in buffers] == [buffer]
        assert asyncio.run(lane.upload(b"small")) is None  # goes over the SSH channel
        assert asyncio.run(lane.upload(b"skyward " * UPLOAD_FROM)) is None  # the channel compresses it
        assert lane.uploaded == 2
    assert asyncio.run(lane.upload(os.urandom(UPLOAD_FROM))) is None  # closed: the channel takes it


def test_a_client_without_the_secret_gets_nothing_stored(
    listener: tuple[UploadListener, Uploads], credentials: Credentials
) -> None:
    server, uploads = listener
    with started_lane("127.0.0.1", server.port, credentials.certificate, handshake.new_secret()) as lane:
        assert not connected(lane, 2.0)
    # the same, by hand: a wrong proof, then an upload
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.check_hostname = False
    tls.load_verify_locations(cadata=credentials.certificate.decode())
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw, tls.wrap_socket(raw) as stranger:
        stranger.sendall(os.urandom(handshake.NONCE))
        assert len(recv_exactly(stranger, handshake.NONCE + handshake.PROOF) or b"") == handshake.NONCE + handshake.PROOF
        stranger.sendall(os.urandom(handshake.PROOF))
        with contextlib.suppress(OSError):
            stranger.sendall(b"\0" * 16 + (1).to_bytes(4, "big") + (4).to_bytes(8, "big") + b"evil")
            assert stranger.recv(1) == b""  # hung up on, never told "stored"
    assert uploads.take(b"\0" * 16) is None


def test_a_relay_with_another_certificate_is_not_trusted(
    listener: tuple[UploadListener, Uploads], credentials: Credentials
) -> None:
    server, _ = listener
    with started_lane("127.0.0.1", server.port, new_credentials().certificate, SECRET) as lane:
        assert not connected(lane, 2.0)  # what answers has not the certificate the client made


def test_a_plain_tcp_stranger_is_hung_up_on(listener: tuple[UploadListener, Uploads]) -> None:
    server, uploads = listener
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as stranger:
        stranger.sendall(b"\0" * 16 + (1).to_bytes(4, "big") + (4).to_bytes(8, "big") + b"evil")
        stranger.settimeout(5)
        try:
            while stranger.recv(4096):
                pass
        except OSError:
            pass  # reset: hung up on
    assert uploads.take(b"\0" * 16) is None


def test_a_lane_that_cannot_connect_leaves_uploads_to_the_channel(credentials: Credentials) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with started_lane("127.0.0.1", port, credentials.certificate, SECRET) as lane:
        assert not connected(lane, 0.5)
        assert asyncio.run(lane.upload(os.urandom(UPLOAD_FROM))) is None


def test_a_lane_that_broke_connects_again_in_the_background(
    listener: tuple[UploadListener, Uploads], credentials: Credentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, uploads = listener
    monkeypatch.setattr(upload_lane, "RECONNECT_AFTER", 0.0)
    with started_lane("127.0.0.1", server.port, credentials.certificate, SECRET) as lane:
        assert connected(lane)
        lane._connection.shutdown(socket.SHUT_RDWR)  # type: ignore[union-attr]  # the link breaks
        body = os.urandom(UPLOAD_FROM)
        assert asyncio.run(lane.upload(body)) is None  # this one goes over the channel
        assert not lane.takes(body)  # not connected: a connect begins in the background
        assert connected(lane)
        ticket = asyncio.run(lane.upload(body))
        assert ticket is not None and uploads.take(ticket) == body


def test_a_lane_stays_connected_while_the_client_is_idle(
    listener: tuple[UploadListener, Uploads], credentials: Credentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay bounds each read of an upload, not its wait for the next one."""
    server, uploads = listener
    monkeypatch.setattr(upload_lane, "IO_TIMEOUT", 0.2)
    with started_lane("127.0.0.1", server.port, credentials.certificate, SECRET) as lane:
        assert connected(lane)
        time.sleep(0.6)
        body = os.urandom(UPLOAD_FROM)
        ticket = asyncio.run(lane.upload(body))
        assert ticket is not None and uploads.take(ticket) == body


def test_a_peer_that_sends_its_handshake_slowly_is_hung_up_on(
    listener: tuple[UploadListener, Uploads], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A byte now and then does not hold one of the few handshake slots for long."""
    server, _ = listener
    monkeypatch.setattr(upload_lane, "HANDSHAKE_TIMEOUT", 0.5)
    outgoing = ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), outgoing)
    with contextlib.suppress(ssl.SSLWantReadError):
        hello.do_handshake()
    client_hello = outgoing.read()  # a valid TLS ClientHello, sent a byte every 0.2 s
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as stranger:
        started, sent = time.monotonic(), 0
        with contextlib.suppress(OSError):
            for byte in client_hello[:20]:
                stranger.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.2)
        assert sent < 20 and time.monotonic() - started < 3.0  # hung up on long before
