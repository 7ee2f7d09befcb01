"""Who is at the other end of a Unix socket (Linux ``SO_PEERCRED``), and refusing a peer
that runs as another user than this process.

A socket file's mode and its directory's keep strangers from connecting; checking the
peer also covers what they do not: a file another user bound at the path we expected,
or a directory that turned out to be shared.
"""

from __future__ import annotations

import os
import socket
import struct

_CREDENTIALS = struct.Struct("3i")  # pid, uid, gid


class ForeignPeer(ConnectionError):
    """The process at the other end of a Unix socket runs as another user."""


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of the Unix socket ``sock`` (as it was
    when the connection was made); -1 when ``sock`` has no peer (not connected)."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return int(_CREDENTIALS.unpack(credentials)[1])


def peer_pid(sock: socket.socket) -> int:
    """The pid of the process at the other end of the Unix socket ``sock`` (as it was
    when the connection was made)."""
    credentials = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    return int(_CREDENTIALS.unpack(credentials)[0])


def require_same_user(sock: socket.socket, what: str) -> None:
    """Return when the peer of ``sock`` runs as this process's user; else raise
    ``ForeignPeer`` naming ``what`` (the peer, in words), the socket's path and both uids."""
    uid = peer_uid(sock)
    if uid != os.getuid():
        raise ForeignPeer(
            f"{what} on the Unix socket {_path(sock)} runs as uid {uid}, not as this user (uid {os.getuid()}); "
            "refused"
        )


def _path(sock: socket.socket) -> str:
    """The socket's path: the listening end's, seen from either end (an abstract name as
    its bytes)."""
    try:
        name = sock.getsockname() or sock.getpeername()
    except OSError:
        return "(unknown)"
    return name if isinstance(name, str) else repr(name)
