"""``core.unix_listener.listening_at``: a socket at its path is private and listening
from the moment it is there, replaces a dead predecessor's, and a failure leaves nothing."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from skyward.core.unix_listener import listening_at, staging


def test_the_socket_is_0600_and_listening_once_at_its_path(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    umask = os.umask(0o022)  # what would leave a plain bind 0755
    try:
        server = listening_at(str(path))
    finally:
        os.umask(umask)
    with server:
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))  # listening: a refused connect would raise
            accepted, _ = server.accept()
            accepted.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sock"]  # no staging name left


def test_a_dead_predecessors_socket_at_the_path_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    with listening_at(str(path)), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.connect(str(path))


def test_a_socket_that_cannot_be_made_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    path.mkdir()  # a directory cannot be replaced by the socket
    (path / "kept").write_text("x")
    with pytest.raises(OSError):
        listening_at(str(path))
    assert not os.path.lexists(staging(str(path)))
    assert (path / "kept").read_text() == "x"
