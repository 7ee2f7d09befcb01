"""TCP lanes (the head relay's calls to the agents of other hosts): both ends prove the
pool's secret before a frame is read or sent; a restarted agent listens where it was."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from skyward.core import handshake
from skyward.core.instance import InstanceInfo
from skyward.engine.transports.lane import TCP, LaneBroken, LaneClient, LaneServer
from skyward.model.spec import Worker
from skyward.node.agent import AgentSetup, _open_lane

SECRET = b"s" * 32


class EchoLane:
    """A TCP lane that answers ``re:`` + each frame and keeps the frames it handled."""

    def __init__(self) -> None:
        self.handled: list[bytes] = []
        self.server = LaneServer(f"{TCP}127.0.0.1:0", self._handle, SECRET)

    def _handle(self, frame: bytes) -> bytes:
        self.handled.append(frame)
        return b"re:" + frame


@pytest.fixture
def echo() -> Iterator[EchoLane]:
    lane = EchoLane()
    yield lane
    lane.server.close()


@pytest.fixture
def caller(echo: EchoLane) -> Iterator[Callable[[bytes], LaneClient]]:
    """Clients of ``echo`` proving the secret given; each is closed after the test."""
    clients: list[LaneClient] = []

    def make(secret: bytes) -> LaneClient:
        clients.append(LaneClient(echo.server.address, secret))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def test_a_caller_with_the_secret_is_answered(echo: EchoLane, caller: Callable[[bytes], LaneClient]) -> None:
    client = caller(SECRET)
    assert [client.call(b"x%d" % n, 5) for n in range(3)] == [b"re:x0", b"re:x1", b"re:x2"]
    assert echo.handled == [b"x0", b"x1", b"x2"]


def test_a_caller_without_the_secret_sends_nothing_and_runs_nothing(
    echo: EchoLane, caller: Callable[[bytes], LaneClient]
) -> None:
    assert caller(b"t" * 32).call(b"payload", 5) is None  # not delivered: the caller uses Ray
    assert echo.handled == []


def test_a_stranger_s_bytes_are_never_read_as_a_frame(echo: EchoLane, caller: Callable[[bytes], LaneClient]) -> None:
    host, port = echo.server.address[len(TCP):].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as stranger:
        # a length header claiming 2**63 bytes, then junk: read as a nonce and a proof
        stranger.sendall(b"\x7f" + b"\xff" * 7 + b"junk" * 20)
        stranger.settimeout(10)
        received = b""
        try:
            while chunk := stranger.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass  # hung up with the junk unread
    assert len(received) <= 48  # at most the agent's nonce and proof
    assert echo.handled == []
    assert caller(SECRET).call(b"after", 5) == b"re:after"  # the lane still serves its pool


def test_a_process_on_the_agent_s_port_gets_no_task() -> None:
    """A dead agent's port taken by another process: the caller learns it in the
    handshake and sends nothing but its nonce."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def impostor() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(5)
            connection.sendall(b"\0" * 48)
            try:
                while chunk := connection.recv(4096):
                    got.append(chunk)
            except OSError:
                pass

    thread = threading.Thread(target=impostor, daemon=True)
    thread.start()
    client = LaneClient(f"{TCP}127.0.0.1:{listener.getsockname()[1]}", SECRET)
    try:
        assert client.call(b"secret task", 5) is None
        client.close()
        thread.join(10)
        assert len(b"".join(got)) == 16  # only the caller's nonce
    finally:
        listener.close()


def test_closing_the_lane_ends_a_call_waiting_on_it() -> None:
    """A node that left (its host may have vanished, so no reset ever comes): closing its
    lane ends the calls still waiting for a reply."""
    release = threading.Event()
    server = LaneServer(f"{TCP}127.0.0.1:0", lambda frame: release.wait(30) and b"late", SECRET)
    client = LaneClient(server.address, SECRET)
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            client.call(b"long", None)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    caller = threading.Thread(target=wait)
    caller.start()
    time.sleep(0.5)
    started = time.monotonic()
    client.close()
    caller.join(5)
    release.set()
    server.close()
    assert not caller.is_alive()
    assert time.monotonic() - started < 2
    assert len(outcome) == 1 and isinstance(outcome[0], LaneBroken)
    assert client.call(b"after", 5) is None  # a closed lane sends nothing: the caller uses Ray


def _setup(notes: Path) -> AgentSetup:
    info = InstanceInfo(
        node=1, worker=0, total_nodes=2, workers_per_node=1, accelerators=0, total_accelerators=0,
        head_addr="127.0.0.1", head_port=0, job_id="j",
    )
    return AgentSetup(info, Worker(), "/", (), lane=TCP, lane_secret=SECRET, notes=str(notes))


def test_a_restarted_agent_listens_on_its_predecessor_s_port(tmp_path: Path) -> None:
    first = _open_lane(_setup(tmp_path), lambda frame: frame, lambda: "127.0.0.1")
    assert first is not None
    address = first.address
    first.close()
    second = _open_lane(_setup(tmp_path), lambda frame: frame, lambda: "127.0.0.1")
    assert second is not None and second.address == address
    # the port taken meanwhile: any other port, and the caller of the old one uses Ray
    third = _open_lane(_setup(tmp_path), lambda frame: frame, lambda: "127.0.0.1")
    assert third is not None and third.address != address
    second.close()
    third.close()


def test_a_setup_s_repr_leaves_its_lane_secret_out(tmp_path: Path) -> None:
    """Whoever knows the secret can run tasks on the agent's TCP lane: a setup printed
    in a log or an error must not carry it."""
    shown = repr(_setup(tmp_path))
    assert SECRET.hex() not in shown and repr(SECRET) not in shown and "lane_secret" not in shown


def test_large_frames_arrive_whole_both_ways(echo: EchoLane, caller: Callable[[bytes], LaneClient]) -> None:
    """A frame of megabytes is read straight into the ``bytes`` it arrives as, and a
    reply's body apart from its tag (engine/transports/lane.py): what arrives is what was
    sent, on the blocking and the asyncio client alike."""
    client = caller(SECRET)
    frames = [os.urandom(size) for size in (2 << 20, (5 << 20) + 3)]
    for frame in frames:
        assert client.call(frame, 10) == b"re:" + frame
        assert echo.handled[-1] == frame and type(echo.handled[-1]) is bytes

    async def on_a_loop() -> list[object]:  # the asyncio client keeps to one loop
        return [await client.call_async(frame, 10) for frame in frames]

    assert asyncio.run(on_a_loop()) == [b"re:" + frame for frame in frames]


def test_a_request_with_buffers_arrives_as_its_pickle_and_buffers() -> None:
    """The head relay sends a held broadcast as a frame of parts (RayTransport's
    ``share_by_lanes``): the agent is handed the pickle and each buffer as a ``bytes`` of
    its own, what was sent, large or small, writable or not; an empty list of buffers too."""
    got: list[object] = []

    def handle(payload: object) -> bytes:
        got.append(payload)
        return b"ok"

    server = LaneServer(f"{TCP}127.0.0.1:0", handle, SECRET)
    client = LaneClient(server.address, SECRET)
    try:
        large, small = os.urandom((3 << 20) + 5), bytearray(b"small")
        assert client.call((b"pickle", [large, small, memoryview(large)[:7]]), 10) == b"ok"
        assert client.call((b"alone", []), 10) == b"ok"
        assert client.call(bytearray(b"plain"), 10) == b"ok"
        header, buffers = got[0]  # type: ignore[misc]
        assert header == b"pickle" and buffers == [large, b"small", large[:7]]
        assert all(type(b) is bytes for b in buffers)
        assert got[1:] == [(b"alone", []), b"plain"]
    finally:
        client.close()
        server.close()


def test_a_request_claiming_too_many_parts_is_refused_and_runs_nothing() -> None:
    got: list[object] = []
    server = LaneServer(f"{TCP}127.0.0.1:0", lambda payload: got.append(payload) or b"", SECRET)
    host, port = server.address[len(TCP):].rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            assert handshake.prove_to_server(connection, SECRET)
            connection.sendall((1 << 63 | (1 << 20)).to_bytes(8, "big") + b"\0" * 64)
            try:  # the agent closed it, having read no part (a reset: it left the rest unread)
                assert connection.recv(16) == b""
            except ConnectionResetError:
                pass
        assert got == []
    finally:
        server.close()


def test_a_frame_arrives_whole_however_it_is_cut_and_a_second_one_unasked_ends_the_connection() -> None:
    """A frame is read with one ``recv`` when it came whole, and put together when it
    came in pieces (a length cut short, a body in several writes). A caller that sends a
    second frame before the reply to its first breaks the one-frame-at-a-time rule: the
    agent runs neither and closes the connection."""
    got: list[object] = []
    server = LaneServer(f"{TCP}127.0.0.1:0", lambda payload: got.append(payload) or b"ok", SECRET)
    host, port = server.address[len(TCP):].rsplit(":", 1)
    frame = (11).to_bytes(8, "big") + b"hello world"
    try:
        with socket.create_connection((host, int(port)), timeout=10) as connection:
            assert handshake.prove_to_server(connection, SECRET)
            for piece in (frame[:3], frame[3:10], frame[10:]):
                connection.sendall(piece)
                time.sleep(0.05)  # each piece its own read
            assert connection.recv(64) == (3).to_bytes(8, "big") + b"Bok"
            connection.sendall(frame + frame)
            try:
                assert connection.recv(64) == b""
            except ConnectionResetError:
                pass
        assert got == [b"hello world"]
    finally:
        server.close()
