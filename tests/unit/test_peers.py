"""``core.peers``: the uid at the other end of a Unix socket, and the refusal of a peer
that runs as another user, naming the socket and both uids."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator

import pytest

from skyward.core import peers


@pytest.fixture
def connected() -> Iterator[tuple[str, socket.socket, socket.socket]]:
    """(path, client end, server end) of a connection on a Unix socket of this process."""
    directory = tempfile.mkdtemp(prefix="skp")
    path = os.path.join(directory, "sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(path)
        accepted, _ = server.accept()
        with client, accepted:
            yield path, client, accepted
    os.unlink(path)
    os.rmdir(directory)


def test_a_peer_of_this_process_is_of_its_user(connected: tuple[str, socket.socket, socket.socket]) -> None:
    _, client, accepted = connected
    assert peers.peer_uid(client) == peers.peer_uid(accepted) == os.getuid()
    peers.require_same_user(client, "the server")
    peers.require_same_user(accepted, "the client")


@pytest.mark.parametrize("end", [1, 2])
def test_a_peer_of_another_user_is_refused_naming_the_socket_and_both_uids(
    connected: tuple[str, socket.socket, socket.socket], end: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, sock = connected[0], connected[end]
    monkeypatch.setattr(peers.os, "getuid", lambda: 4242)
    with pytest.raises(peers.ForeignPeer) as refused:
        peers.require_same_user(sock, "the engine")
    message = str(refused.value)
    assert isinstance(refused.value, ConnectionError)
    assert "the engine" in message and path in message
    assert f"uid {os.geteuid()}" in message and "uid 4242" in message


def test_an_unconnected_socket_has_no_peer_and_is_refused() -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lonely:
        assert peers.peer_uid(lonely) == -1
        with pytest.raises(peers.ForeignPeer):
            peers.require_same_user(lonely, "nobody")
