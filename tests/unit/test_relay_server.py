"""The head relay's message loop (``engine.relay_server``) in-process, over the fake
cluster: the client's ``RelayTransport`` and a ``RelayServer`` whose backend is the
``FakeTransport`` (``FakeProvider(relayed=True)``), so every message of the protocol runs
without Ray or SSH; and what a stranger on the relay's socket can and cannot do."""

from __future__ import annotations

import asyncio
import os
import pickle
import socket
import struct
import time
from pathlib import Path

import msgpack
import pytest
from fake_cluster import FakeProvider

import skyward as sky
from skyward.core import handshake
from skyward.core.codec import FRAME_HEADER, encode_message
from skyward.core.messages import PROTOCOL, Call, Close, Closed, Hello, Resume
from skyward.engine.relay_server import read_message, write_message
from skyward.engine.transport import NodeLost
from skyward.engine.transports.relay import RelayEndpoint, RelayRefused, RelayTransport


@sky.function
def square(x: int) -> int:
    print(f"squaring {x}")
    return x * x


@sky.function
def fail(message: str) -> None:
    raise ValueError(message)


@sky.function
def rank() -> int:
    return sky.instance_info().node


class _Exploit:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def relayed() -> tuple[sky.Pool, FakeProvider]:
    provider = FakeProvider(relayed=True)
    with sky.Compute(provider=provider, nodes=3) as pool:
        yield pool, provider


def test_every_operator_runs_through_the_relay(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    pool, provider = relayed
    assert (square(7) >> pool) == 49
    assert sorted(rank() @ pool) == [0, 1, 2]
    assert ((square(3) & square(4)) >> pool) == (9, 16)
    assert (square(12) > pool).result() == 144
    assert pool.map(square, range(50)) == [x * x for x in range(50)]
    with pytest.raises(ValueError, match="on purpose"):
        fail("on purpose") >> pool
    assert len(provider.relays[0].backends) == 1


def test_a_large_argument_travels_with_its_buffers(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    np = pytest.importorskip("numpy")
    pool, _ = relayed
    data = np.arange(1 << 19, dtype=np.float64)  # 4 MiB: out-of-band
    total = sky.function(lambda a: float(a.sum()))(data) >> pool
    assert total == float(data.sum())


def test_a_node_failure_maps_to_the_users_error(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    pool, provider = relayed
    assert (square(1) >> pool) == 1  # served: the relay opened its backend
    backend = provider.relays[0].backends[0]
    backend.transport.fail_next(1, NodeLost(1, "the machine vanished"))
    assert sorted(rank() @ pool) == [0, 1, 2]  # a lost node's broadcast part runs again


def test_closing_the_pool_ends_the_backend(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    pool, provider = relayed
    relay = provider.relays[0]
    assert (square(2) >> pool) == 4
    pool.close()
    assert relay.backends[0].ended.is_set()
    assert relay.server.finished.is_set()


def _knock(address: str, data: bytes) -> bytes:
    """Send ``data`` to the relay as a stranger and return what it answered."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(handshake.TIMEOUT + 2)
        connection.connect(address)
        try:
            connection.sendall(data)
            connection.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        except OSError:
            return b""
        return answer


def _framings(marker: Path) -> list[bytes]:
    exploit = pickle.dumps(_Exploit(marker))
    message = encode_message(Call(0, 0, exploit, None))
    return [
        b"",  # a bare connect and close
        exploit,
        struct.pack("!Q", len(exploit)) + exploit,
        struct.pack("!I", len(exploit)) + exploit,
        FRAME_HEADER.pack(len(message)) + message,
        b"\x00" * 48 + FRAME_HEADER.pack(len(exploit)) + exploit,  # a handshake of zeros, then a frame
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ]


def test_a_stranger_gets_nothing_and_changes_nothing(relayed: tuple[sky.Pool, FakeProvider], tmp_path: Path) -> None:
    pool, provider = relayed
    relay = provider.relays[0]
    marker = tmp_path / "pwned"
    for data in _framings(marker):
        answer = _knock(relay.address, data)
        assert len(answer) <= handshake.NONCE + handshake.PROOF  # the relay's challenge, never a frame
    time.sleep(0.2)
    assert not marker.exists()
    assert not relay.server.finished.is_set()
    assert len(relay.backends) == 1  # no stranger got a backend
    assert (square(5) >> pool) == 25


def test_a_client_with_the_wrong_secret_is_refused(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    pool, provider = relayed
    relay = provider.relays[0]
    impostor = RelayTransport(RelayEndpoint.on_unix_socket(relay.address, handshake.new_secret()))
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RelayRefused, match="did not prove"):
            loop.run_until_complete(impostor._connect())
    finally:
        loop.close()
    assert (square(6) >> pool) == 36


def test_a_second_client_with_the_secret_is_not_served(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    pool, provider = relayed
    relay = provider.relays[0]

    async def second() -> object:
        reader, writer = await asyncio.open_unix_connection(relay.address)
        assert await handshake.prove_to_server_async(reader, writer, relay.secret)
        await write_message(writer, Hello(PROTOCOL))
        hello = await read_message(reader)
        await write_message(writer, Resume(b"another session", 0))
        refused = await asyncio.wait_for(read_message(reader), 5)
        try:
            await write_message(writer, Close())
        except ConnectionError:
            pass  # hung up on already
        ended = await asyncio.wait_for(read_message(reader), 5)
        writer.close()
        return hello, refused, ended

    hello, refused, ended = asyncio.run(second())
    assert hello == Hello(PROTOCOL) and refused == Closed() and ended is None  # refused, hung up on: its Close did nothing
    assert not relay.server.finished.is_set()
    assert (square(8) >> pool) == 64


def test_a_relay_of_another_protocol_is_named(relayed: tuple[sky.Pool, FakeProvider]) -> None:
    _, provider = relayed
    relay = provider.relays[0]

    async def old_client() -> object:
        reader, writer = await asyncio.open_unix_connection(relay.address)
        assert await handshake.prove_to_server_async(reader, writer, relay.secret)
        writer.write(FRAME_HEADER.pack(len(raw := msgpack.packb(["Hello", PROTOCOL + 1]))) + raw)
        await writer.drain()
        hello = await read_message(reader)
        writer.close()
        return hello

    assert asyncio.run(old_client()) == Hello(PROTOCOL)
    assert not relay.server.finished.is_set()


class _Ended:
    """A backend that only counts its clients' ends (the successive server's own logic
    is what is tested)."""

    def __init__(self, ends: list[int], client: int) -> None:
        self._ends, self._client = ends, client

    def end(self) -> None:
        self._ends.append(self._client)


def test_a_successive_server_serves_a_new_proven_client_after_ending_the_last_one(tmp_path: Path) -> None:
    """A kept pool's relay: the daemon that held it died and the end of its stream has
    not arrived; its successor, proving the secret, ends that session and is served."""
    from skyward.engine.relay_server import RelayServer

    secret = handshake.new_secret()
    ends: list[int] = []
    clients = iter(range(1, 10))
    path = str(tmp_path / "relay.sock")

    async def scenario() -> tuple[object, object, object]:
        server = RelayServer(secret, lambda sink: _Ended(ends, next(clients)), successive=True)  # type: ignore[arg-type, return-value]
        listener = await asyncio.start_unix_server(server.handle, path)

        async def client() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            reader, writer = await asyncio.open_unix_connection(path)
            assert await handshake.prove_to_server_async(reader, writer, secret)
            await write_message(writer, Hello(PROTOCOL))
            assert await read_message(reader) == Hello(PROTOCOL)
            session = os.urandom(16)
            await write_message(writer, Resume(session, 0))
            assert await read_message(reader) == Resume(session, 0)
            return reader, writer

        async with listener:
            first_reader, _ = await client()
            await asyncio.sleep(0.2)  # the first is being served
            second_reader, second_writer = await client()
            first_end = await asyncio.wait_for(read_message(first_reader), 5)  # its session was ended
            await write_message(second_writer, Close())
            second_end = await asyncio.wait_for(read_message(second_reader), 5)
            return first_end, second_end, server.finished.is_set()

    first_end, second_end, finished = asyncio.run(scenario())
    assert first_end is None and second_end == Closed()  # the first stream was ended, the second served
    assert ends == [1, 2] and finished is False


def test_a_successive_server_resumes_a_session_until_the_next_client_ends_it(tmp_path: Path) -> None:
    """A kept pool's relay keeps the session of the process holding the pool when its
    stream breaks, and that process resumes it on a new stream (the backend never ended);
    a successor's new session ends a session waiting to be resumed at once, not after
    ``resume_within``, and resuming that one is refused from then on."""
    from skyward.engine.relay_server import RelayServer

    secret = handshake.new_secret()
    ends: list[int] = []
    clients = iter(range(1, 10))
    path = str(tmp_path / "relay.sock")

    async def scenario() -> dict[str, object]:
        server = RelayServer(
            secret, lambda sink: _Ended(ends, next(clients)), successive=True, resume_within=30.0,  # type: ignore[arg-type, return-value]
        )
        listener = await asyncio.start_unix_server(server.handle, path)

        async def client(session: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, object]:
            reader, writer = await asyncio.open_unix_connection(path)
            assert await handshake.prove_to_server_async(reader, writer, secret)
            await write_message(writer, Hello(PROTOCOL))
            assert await read_message(reader) == Hello(PROTOCOL)
            await write_message(writer, Resume(session, 0))
            return reader, writer, await asyncio.wait_for(read_message(reader), 5)

        seen: dict[str, object] = {}
        async with listener:
            held = os.urandom(16)
            _, first, seen["opened"] = await client(held)
            first.transport.abort()  # the holder's connection broke
            await asyncio.sleep(0.3)
            _, again, seen["resumed"] = await client(held)
            seen["ends_after_resume"] = list(ends)
            again.transport.abort()  # broke again; the holder died this time
            await asyncio.sleep(0.3)
            began = time.monotonic()
            successor_reader, successor, seen["successor"] = await client(os.urandom(16))
            seen["ended_within"] = time.monotonic() - began
            seen["ends_after_successor"] = list(ends)
            _, late, seen["late_resume"] = await client(held)
            late.close()
            await write_message(successor, Close())
            seen["successor_end"] = await asyncio.wait_for(read_message(successor_reader), 5)
            seen["finished"] = server.finished.is_set()
        return seen

    seen = asyncio.run(scenario())
    held_resume = seen["opened"]
    assert isinstance(held_resume, Resume) and held_resume.received == 0
    assert seen["resumed"] == held_resume and seen["ends_after_resume"] == []  # the same session went on
    assert isinstance(seen["successor"], Resume) and seen["successor"] != held_resume
    assert seen["ended_within"] < 5 and seen["ends_after_successor"] == [1]  # ended at once, for the successor
    assert seen["late_resume"] == Closed()
    assert seen["successor_end"] == Closed() and ends == [1, 2] and seen["finished"] is False
